package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

func TestValidName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"0", true},
		{"db-1", true},
		{"db_1.primary", true},
		{"a..b", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"-a", false},
		{".a", false},
		{"_a", false},
		{"..", false},
		{".", false},
		{"A", false},
		{"db/1", false},
		{"../etc", false},
		{"a b", false},
		{"a\x00", false},
		{"a\n", false},
		{"é", false},
	} {
		if got := wire.ValidName(c.name); got != c.ok {
			t.Errorf("ValidName(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}

const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestDecodeMemberSpec(t *testing.T) {
	for _, c := range []struct {
		name, body string
		err        string // substring; "" means valid
	}{
		{"minimal", `{"version":"1.0.0","sha256":"` + sum + `"}`, ""},
		{"full", `{"version":"1.0.0","sha256":"` + sum + `","args":["-a","b c"],"env":{"K":"v=w"},"stop_timeout_ms":1500}`, ""},
		{"upper-case sha", `{"version":"1","sha256":"` + strings.ToUpper(sum) + `"}`, ""},
		{"unknown fields ignored", `{"version":"1","sha256":"` + sum + `","future":true}`, ""},
		{"empty", ``, "malformed JSON"},
		{"not an object", `[1]`, "malformed JSON"},
		{"null", `null`, "version is required"},
		{"trailing", `{"version":"1","sha256":"` + sum + `"} x`, "after the JSON value"},
		{"two values", `{} {}`, "after the JSON value"},
		{"no version", `{"sha256":"` + sum + `"}`, "version is required"},
		{"control in version", `{"version":"1\n","sha256":"` + sum + `"}`, "control characters"},
		{"long version", `{"version":"` + strings.Repeat("1", 129) + `","sha256":"` + sum + `"}`, "longer than"},
		{"short sha", `{"version":"1","sha256":"abc"}`, "64 hex digits"},
		{"non-hex sha", `{"version":"1","sha256":"` + strings.Repeat("g", 64) + `"}`, "64 hex digits"},
		{"NUL arg", `{"version":"1","sha256":"` + sum + `","args":["\u0000"]}`, "NUL"},
		{"env with =", `{"version":"1","sha256":"` + sum + `","env":{"A=B":"c"}}`, "env name"},
		{"empty env name", `{"version":"1","sha256":"` + sum + `","env":{"":"c"}}`, "env name"},
		{"NUL env", `{"version":"1","sha256":"` + sum + `","env":{"A":"\u0000"}}`, "NUL"},
		{"negative timeout", `{"version":"1","sha256":"` + sum + `","stop_timeout_ms":-1}`, "negative"},
		{"huge timeout", `{"version":"1","sha256":"` + sum + `","stop_timeout_ms":99999999999}`, "at most"},
		{"float timeout", `{"version":"1","sha256":"` + sum + `","stop_timeout_ms":1.5}`, "malformed JSON"},
		{"wrong type", `{"version":1}`, "malformed JSON"},
		// An older client's path of the agent's host: refused, not ignored.
		{"path", `{"version":"1","path":"/opt/x","sha256":"` + sum + `"}`, "runs no path of its host"},
		{"empty path", `{"version":"1","path":"","sha256":"` + sum + `"}`, "upload the artifact (PUT /v1/artifacts/{sha256})"},
		{"null path", `{"version":"1","path":null,"sha256":"` + sum + `"}`, ""},
		{"restart on-failure", `{"version":"1","sha256":"` + sum + `","restart":"on-failure"}`, ""},
		{"restart no", `{"version":"1","sha256":"` + sum + `","restart":"no"}`, ""},
		{"restart always", `{"version":"1","sha256":"` + sum + `","restart":"always"}`, `restart "always"`},
		{"files", `{"version":"1","sha256":"` + sum + `","files":[{"path":"conf/a","mode":"0640","content":"x"}]}`, ""},
		{"absolute file", `{"version":"1","sha256":"` + sum + `","files":[{"path":"/etc/a","content":"x"}]}`, "files[0]: path \"/etc/a\" is absolute"},
		{"setuid file", `{"version":"1","sha256":"` + sum + `","files":[{"path":"a","mode":"4755"}]}`, "setuid"},
		{"mode as a number", `{"version":"1","sha256":"` + sum + `","files":[{"path":"a","mode":420}]}`, "malformed JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := DecodeMemberSpec([]byte(c.body))
			if c.err == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if s.SHA256 != sum {
					t.Errorf("sha256 %q not normalized", s.SHA256)
				}
				if s.Restart != wire.RestartNo && s.Restart != wire.RestartOnFailure {
					t.Errorf("restart policy %q not normalized", s.Restart)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want one with %q", err, c.err)
			}
			if !isBadRequest(err) {
				t.Errorf("error %v is not a bad request", err)
			}
		})
	}
}

func TestDecodeStopRequest(t *testing.T) {
	for _, c := range []struct {
		body string
		ms   int64
		ok   bool
	}{
		{"", 0, true},
		{"  \n", 0, true},
		{"{}", 0, true},
		{`{"timeout_ms":250}`, 250, true},
		{`{"timeout_ms":-1}`, 0, false},
		{`{"timeout_ms":"1s"}`, 0, false},
		{`{`, 0, false},
		{`{} []`, 0, false},
	} {
		r, err := DecodeStopRequest([]byte(c.body))
		if (err == nil) != c.ok || r.TimeoutMS != c.ms {
			t.Errorf("DecodeStopRequest(%q) = %+v, %v", c.body, r, err)
		}
		if err != nil && !isBadRequest(err) {
			t.Errorf("DecodeStopRequest(%q): %v is not a bad request", c.body, err)
		}
	}
}

func TestParseStat(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21\n"
	for _, c := range []struct {
		name, in string
		state    byte
		start    uint64
		ok       bool
	}{
		{"plain", "123 (member)" + tail, 'S', 424242, true},
		{"spaces and parens in comm", "123 (a) b (c d)" + tail, 'S', 424242, true},
		{"zombie", "123 (m) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 7 20", 'Z', 7, true},
		{"no paren", "123 member S 1", 0, 0, false},
		{"short", "123 (m) S 1 2 3", 0, 0, false},
		{"bad number", "123 (m) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20", 0, 0, false},
		{"empty", "", 0, 0, false},
	} {
		state, start, err := parseStat([]byte(c.in))
		if (err == nil) != c.ok || state != c.state || start != c.start {
			t.Errorf("%s: parseStat = %q %d %v", c.name, state, start, err)
		}
	}
}

// FuzzMemberSpec checks that no PUT body makes decoding panic, and
// that whatever is accepted is safe to act on.
func FuzzMemberSpec(f *testing.F) {
	f.Add([]byte(`{"version":"1.0.0","path":"/opt/x","sha256":"` + sum + `","args":["a"],"env":{"K":"v"},"stop_timeout_ms":10}`))
	f.Add([]byte(`{"version":"1","path":"/a/../b","sha256":"` + strings.ToUpper(sum) + `"}`))
	f.Add([]byte(`{"version":"\u0000","path":"x"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"stop_timeout_ms":-9223372036854775808}`))
	f.Add([]byte(`{"env":{"=":"="},"args":null}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := DecodeMemberSpec(body)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if !validSHA256(s.SHA256) {
			t.Fatalf("accepted sha256 %q", s.SHA256)
		}
		if s.Version == "" || !utf8.ValidString(s.Version) || s.StopTimeoutMS < 0 {
			t.Fatalf("accepted %+v", s)
		}
		for _, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				t.Fatalf("accepted arg %q", a)
			}
		}
		for k, v := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				t.Fatalf("accepted env %q=%q", k, v)
			}
		}
		// What is accepted survives a round trip through the client.
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeMemberSpec(b); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
	})
}

// FuzzStopRequest checks that no stop body makes decoding panic, that
// every refusal is a bad request, and that an accepted timeout is
// within the agent's bound.
func FuzzStopRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"timeout_ms":1500}`, `{"timeout_ms":-1}`, `{"timeout_ms":3600001}`,
		`{"timeout_ms":1e3}`, `{"timeout_ms":"5"}`, `null`, `[]`, `{"timeout_ms":1}{}`, " \n", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeStopRequest(body)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if r.TimeoutMS < 0 || r.TimeoutMS > maxStopTimeout.Milliseconds() {
			t.Fatalf("accepted timeout_ms %d", r.TimeoutMS)
		}
	})
}
