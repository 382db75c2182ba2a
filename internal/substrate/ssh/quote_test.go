package ssh

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// shells are the POSIX shells a login shell may be, those on this
// machine: the quoting must hold in each.
func shells(t testing.TB) []string {
	var out []string
	for _, s := range []string{"sh", "dash", "bash"} {
		if p, err := exec.LookPath(s); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("no POSIX shell on this machine")
	}
	return out
}

// roundTrip runs argv's Line through shell, as sshd does with a
// session's command (shell -c LINE), with printf printing each word
// the shell made, NUL-terminated.
func roundTrip(t testing.TB, shell string, argv []string) []string {
	line, err := Line(append([]string{"printf", `%s\0`}, argv...))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(shell, "-c", line).Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v", shell, line, err)
	}
	if len(out) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// TestQuoteRoundTrip: arguments that mean something to a shell
// (quotes, $, backquotes, globs, ~, =, newlines, a leading -, an
// empty one) reach the command as they were, in sh, dash and bash.
func TestQuoteRoundTrip(t *testing.T) {
	argv := []string{"", "plain", "two words", "it's", `"double"`, "$HOME", "$(id)", "`id`", "*", "?", "[a]", "~", "~root",
		"a=b", "-n", "--", "new\nline", "tab\there", `back\slash`, `'`, `''`, `'\''`, ";", "&&", "|", ">x", "<x", "#c", "!", "{a,b}", "é ü", "\x01\x7f"}
	for _, sh := range shells(t) {
		got := roundTrip(t, sh, argv)
		if strings.Join(got, "\x00") != strings.Join(argv, "\x00") || len(got) != len(argv) {
			t.Errorf("%s: %q\nwant %q", sh, got, argv)
		}
	}
}

func TestQuotePlain(t *testing.T) {
	for s, want := range map[string]string{"kv-1": "kv-1", "10.0.0.1:22": "10.0.0.1:22", "a b": "'a b'", "": "''", "a=b": "'a=b'", "it's": `'it'\''s'`, "~": "'~'"} {
		if got := Quote(s); got != want {
			t.Errorf("Quote(%q) = %s, want %s", s, got, want)
		}
	}
	if _, err := Line([]string{"echo", "a\x00b"}); !errors.Is(err, errNUL) {
		t.Errorf("Line with a NUL: %v, want errNUL", err)
	}
}

// FuzzQuote: whatever the argument (but a NUL, refused), the shell
// passes it on unchanged: it is one word, and nothing in it runs.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a", "it's", "$(touch /tmp/ferry-pwned)", "`x`", "a\nb", "'\\''", "\"$@\"", "\\", "~", "*"} {
		f.Add(s)
	}
	shs := shells(f)
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			if _, err := Line([]string{s}); err == nil {
				t.Fatalf("Line(%q) accepted a NUL", s)
			}
			return
		}
		if !utf8.ValidString(s) && len(s) > 64 {
			s = s[:64]
		}
		for _, sh := range shs {
			line, _ := Line([]string{"printf", `%s`, s})
			out, err := exec.Command(sh, "-c", line).Output()
			if err != nil {
				t.Fatalf("%s -c %q: %v", sh, line, err)
			}
			if !bytes.Equal(out, []byte(s)) {
				t.Fatalf("%s: %q came back as %q (line %q)", sh, s, out, line)
			}
		}
	})
}
