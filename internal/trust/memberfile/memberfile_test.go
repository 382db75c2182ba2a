package memberfile

import (
	"io/fs"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want fs.FileMode
		err  string
	}{
		{"", 0o600, ""},
		{"0600", 0o600, ""},
		{"600", 0o600, ""},
		{"0640", 0o640, ""},
		{"0755", 0o755, ""},
		{"0o644", 0o644, ""},
		{"0400", 0o400, ""},
		{"0000", 0, ""},
		{"0664", 0o664, ""},
		{"0666", 0, "world-writable"},
		{"0777", 0, "world-writable"},
		{"0602", 0, "world-writable"},
		{"4755", 0, "setuid"},
		{"2755", 0, "setgid"},
		{"1755", 0, "sticky"},
		{"0800", 0, "octal"},
		{"rw-r--r--", 0, "octal digits"},
		{"60", 0, "3 or 4"},
		{"00600", 0, "3 or 4"},
		{"-600", 0, "octal"},
	} {
		got, err := ParseMode(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseMode(%q) = %o, %v; want %o", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseMode(%q) = %o, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, c := range []struct {
		path string
		err  string // "" means accepted
	}{
		{"app.conf", ""},
		{"conf/app.conf", ""},
		{"a/b/c/d.txt", ""},
		{".env", ""},
		{"..data", ""},
		{"a..b/c", ""},
		{"", "empty"},
		{"/etc/passwd", "absolute"},
		{"/", "absolute"},
		{"..", "'..'"},
		{"../x", "'..'"},
		{"a/../../b", "'..'"},
		{"a/..", "'..'"},
		{".", "directory"},
		{"./a", "not clean"},
		{"a//b", "not clean"},
		{"a/", "not clean"},
		{"a/./b", "not clean"},
		{"a\x00b", "NUL"},
		{strings.Repeat("a", 4097), "longer"},
		// A name the agent cannot write (255 bytes, less its temporary
		// suffix), in the file's name or a directory's.
		{"conf/" + strings.Repeat("n", MaxElemLen), ""},
		{"conf/" + strings.Repeat("n", MaxElemLen+1), "element of 238 bytes"},
		{strings.Repeat("d", 300) + "/app.conf", "element of 300 bytes"},
	} {
		err := CheckPath(c.path)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("CheckPath(%q): %v", c.path, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("CheckPath(%q) = %v, want an error with %q", c.path, err, c.err)
		}
	}
}

func TestCheckMode(t *testing.T) {
	for _, c := range []struct {
		m  fs.FileMode
		ok bool
	}{
		{0o600, true}, {0o644, true}, {0o755, true}, {0o000, true},
		{0o666, false}, {0o602, false},
		{fs.ModeSetuid | 0o755, false}, {fs.ModeSetgid | 0o755, false}, {fs.ModeSticky | 0o755, false},
		{fs.ModeDir | 0o755, false},
	} {
		if err := CheckMode(c.m); (err == nil) != c.ok {
			t.Errorf("CheckMode(%v) = %v, want ok %v", c.m, err, c.ok)
		}
	}
	if got := FormatMode(0o640); got != "0640" {
		t.Errorf("FormatMode(0640) = %q", got)
	}
	if m, err := ParseMode(FormatMode(0o751)); err != nil || m != 0o751 {
		t.Errorf("ParseMode(FormatMode(0751)) = %o, %v", m, err)
	}
}
