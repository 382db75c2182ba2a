package checksum

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
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

// TestFileRefusesSpecialFiles: a FIFO and /dev/zero are refused at
// once instead of blocking or hashing forever.
func TestFileRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", t.TempDir()} {
		began := time.Now()
		_, err := File(p)
		if !errors.Is(err, safefile.ErrNotRegular) || time.Since(began) > time.Second {
			t.Errorf("File(%s): %v after %s; want a refusal at once", p, err, time.Since(began))
		}
	}
}

// TestReader: the context stops a hash of an endless stream, the limit
// refuses one byte too many and accepts exactly the limit, and the
// copy gets every byte hashed.
func TestReader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	began := time.Now()
	if _, _, err := Reader(ctx, zero, 0); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 2*time.Second {
		t.Errorf("Reader of /dev/zero: %v after %s; want the deadline", err, time.Since(began))
	}
	if _, n, err := Reader(context.Background(), strings.NewReader("abcd"), 3); !errors.Is(err, ErrTooLarge) || n != 4 {
		t.Errorf("4 bytes, limit 3: %d, %v; want ErrTooLarge", n, err)
	}
	var copied bytes.Buffer
	sum, n, err := Reader(context.Background(), strings.NewReader("abc"), 3, &copied)
	if want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; err != nil || sum != want || n != 3 || copied.String() != "abc" {
		t.Errorf("abc, limit 3: %q %d %v, copied %q", sum, n, err, copied.String())
	}
	big := bytes.Repeat([]byte("x"), 3*chunk+5)
	if _, n, err := Reader(context.Background(), bytes.NewReader(big), int64(len(big))); err != nil || n != int64(len(big)) {
		t.Errorf("%d bytes over several chunks: %d, %v", len(big), n, err)
	}
}
