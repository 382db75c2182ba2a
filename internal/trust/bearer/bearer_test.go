package bearer

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	c := NewChecker("0123456789abcdef")
	for _, tc := range []struct {
		header string
		want   error
	}{
		{"Bearer 0123456789abcdef", nil},
		{"bearer 0123456789abcdef", nil},
		{"Bearer  0123456789abcdef ", nil},
		{"", ErrMissing},
		{"Basic 0123456789abcdef", ErrScheme},
		{"0123456789abcdef", ErrScheme},
		{"Bearer 0123456789abcdeF", ErrInvalid},
		{"Bearer 0123456789abcdef0", ErrInvalid},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if err := c.Check(r); !errors.Is(err, tc.want) {
			t.Errorf("%q: %v, want %v", tc.header, err, tc.want)
		}
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "token")
	tok, created, err := LoadOrCreate(path)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("first: %q %v %v", tok, created, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %o", fi.Mode().Perm())
	}
	again, created, err := LoadOrCreate(path)
	if err != nil || created || again != tok {
		t.Fatalf("second: %q %v %v", again, created, err)
	}
	os.Chmod(path, 0o640)
	if _, _, err := LoadOrCreate(path); err == nil {
		t.Error("a token file group may read was accepted")
	}
}

// TestRead: a token file is refused at once, naming it and what is
// wrong, when it is a FIFO, a device, a directory, too large, readable
// by others, empty or two words; LoadOrCreate of a FIFO too (it used
// to block in open).
func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string
	}{
		{"a FIFO", fifo, "a named pipe (FIFO)"},
		{"/dev/zero", "/dev/zero", "a character device"},
		{"a directory", dir, "a directory"},
		{"too large", write("large", strings.Repeat("x", 5000), 0o600), "larger than 4096 bytes"},
		{"readable by others", write("open", "0123456789abcdef\n", 0o644), "chmod 600"},
		{"empty", write("empty", "\n", 0o600), "is empty"},
		{"two words", write("two", "abc def\n", 0o600), "more than one word"},
	}
	for _, c := range cases {
		began := time.Now()
		_, err := Read(c.path)
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %s and %q", c.name, err, c.path, c.want)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("%s: took %s", c.name, d)
		}
	}
	if tok, err := Read(write("ok", "short-token\n", 0o600)); err != nil || tok != "short-token" {
		t.Errorf("a good token file: %q, %v", tok, err)
	}
	began := time.Now()
	if _, _, err := LoadOrCreate(fifo); err == nil || !strings.Contains(err.Error(), "FIFO") || time.Since(began) > time.Second {
		t.Errorf("LoadOrCreate of a FIFO: %v after %s", err, time.Since(began))
	}
}
