package bearer

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	annTok = "ann-0123456789abcdef"
	bobTok = "bob-0123456789abcdef"
)

// TestParseNamed: a tokens file's lines, and each refusal naming the
// file and line and never the token.
func TestParseNamed(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // names, in order
		err      string
	}{
		{"two tokens", "ann " + annTok + "\nbob " + bobTok + "\n", []string{"ann", "bob"}, ""},
		{"comments, blank lines, spaces", "# operators\n\n  ann\t" + annTok + "  \r\n#bob x\n", []string{"ann"}, ""},
		{"names as users are written", "ann@ops.example " + annTok + "\nci-bot_2 " + bobTok, []string{"ann@ops.example", "ci-bot_2"}, ""},
		{"empty", "\n# nothing\n", nil, "f:0"},
		{"no token", "ann\n", nil, "f:1: ann has no token"},
		{"three words", "ann " + annTok + " extra\n", nil, "f:1: ann: more than a name and a token"},
		{"short token", "\nann shorttoken\n", nil, "f:2: ann's token is shorter than 16"},
		{"a name twice", "ann " + annTok + "\nann " + bobTok + "\n", nil, "f:2: ann is named already on line 1"},
		{"a token twice", "ann " + annTok + "\nbob " + annTok + "\n", nil, "f:2: bob's token is the token of line 1"},
		{"a bad name", "-ann " + annTok + "\n", nil, "f:1: a token's name"},
		{"a name with a quote", "an\"n " + annTok + "\n", nil, "f:1: a token's name"},
		{"a token with a control character", "ann " + annTok + "\x7f\n", nil, "f:1: ann's token holds a character"},
	}
	for _, c := range cases {
		got, err := ParseNamed([]byte(c.in), "f")
		if c.err != "" {
			if c.err == "f:0" {
				c.err = "f: no token in it"
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
			if err != nil && (strings.Contains(err.Error(), annTok) || strings.Contains(err.Error(), bobTok)) {
				t.Errorf("%s: the error says a token: %v", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		if fmt.Sprint(names) != fmt.Sprint(c.want) {
			t.Errorf("%s: names %v, want %v", c.name, names, c.want)
		}
	}
}

// TestReadNamed: a tokens file group or others may read is refused with
// the chmod to run; a 0600 one is read.
func TestReadNamed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("ann "+annTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadNamed(p); err != nil || len(got) != 1 || got[0].Name != "ann" || got[0].Token != annTok {
		t.Fatalf("a 0600 tokens file: %v, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadNamed(p); err == nil || !strings.Contains(err.Error(), "chmod 600 "+p) {
			t.Errorf("mode %#o: %v, want refused with the chmod to run", mode, err)
		}
	}
	if _, err := ReadNamed(filepath.Dir(p)); err == nil || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestIdentify: each token is its name; a wrong, missing or
// malformed one is refused as by Checker.
func TestIdentify(t *testing.T) {
	id, err := NewIdentities([]Named{{"ann", annTok}, {"bob", bobTok}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		header, name string
		err          error
	}{
		{"Bearer " + annTok, "ann", nil},
		{"bearer  " + bobTok + " ", "bob", nil},
		{"", "", ErrMissing},
		{"Basic " + annTok, "", ErrScheme},
		{"Bearer " + annTok + "x", "", ErrInvalid},
		{"Bearer " + strings.ToUpper(annTok), "", ErrInvalid},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		name, err := id.Identify(r)
		if name != c.name || !errors.Is(err, c.err) {
			t.Errorf("%q: %q, %v; want %q, %v", c.header, name, err, c.name, c.err)
		}
	}
	for _, bad := range [][]Named{nil, {{"ann", annTok}, {"bob", annTok}}, {{"ann", annTok}, {"ann", bobTok}}, {{"ann", "short"}}, {{"a b", annTok}}} {
		if _, err := NewIdentities(bad); err == nil {
			t.Errorf("NewIdentities(%v): accepted", bad)
		} else if strings.Contains(err.Error(), annTok) || strings.Contains(err.Error(), bobTok) {
			t.Errorf("NewIdentities(%v): the error says a token: %v", bad, err)
		}
	}
	if s := fmt.Sprintf("%v %+v %#v %s", Named{"ann", annTok}, Named{"ann", annTok}, Named{"ann", annTok}, []Named{{"ann", annTok}}); strings.Contains(s, annTok) {
		t.Errorf("a Named printed says its token: %s", s)
	}
}

// FuzzParseNamed: no input panics the parser, whatever it accepts has
// names and tokens by its rules, and a refusal never says a token: a
// line's second word of 16 characters or more (what is meant as a
// token) appears in it only where it is part of a name the refusal
// names.
func FuzzParseNamed(f *testing.F) {
	f.Add([]byte("ann " + annTok + "\nbob " + bobTok + "\n"))
	f.Add([]byte("# c\n\nann\n"))
	f.Add([]byte("ann " + annTok + "\nann " + annTok + "\n"))
	f.Add([]byte("ann " + annTok + "\nbob " + annTok + "\n"))
	f.Add([]byte("x y z\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseNamed(b, "f")
		if err != nil {
			var names []string
			lines := strings.Split(string(b), "\n")
			for _, line := range lines {
				if w := strings.Fields(line); len(w) > 0 {
					names = append(names, w[0])
				}
			}
			for _, line := range lines {
				w := strings.Fields(line)
				if len(w) < 2 || len(w[1]) < MinLength || !strings.Contains(err.Error(), w[1]) {
					continue
				}
				if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, w[1]) }) {
					t.Fatalf("the refusal %q says the token %q", err, w[1])
				}
			}
			return
		}
		for _, n := range got {
			if !ValidName(n.Name) || len(n.Token) < MinLength || strings.ContainsAny(n.Token, " \t\r\n") {
				t.Fatalf("accepted %q with a token of %d characters", n.Name, len(n.Token))
			}
		}
		if _, err := NewIdentities(got); err != nil {
			t.Fatalf("parsed, but NewIdentities refuses: %v", err)
		}
	})
}
