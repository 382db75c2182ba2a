package bearer

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
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
