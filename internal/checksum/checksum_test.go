package checksum

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := File(p)
	// The SHA-256 of "abc" from FIPS 180-2, appendix B.1.
	if want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; err != nil || got != want {
		t.Fatalf("File = %q, %v; want %q", got, err, want)
	}
	if _, err := File(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("no error for a missing file")
	}
}
