package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadRefusesSpecialFiles: Load of a FIFO, a directory, /dev/zero
// or a file over MaxFileSize fails at once with a message naming the
// file and what is wrong (a FIFO used to block Load forever, /dev/zero
// to read until the limit); LoadTraffic the same.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "cluster.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if f, err := os.Create(big); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "a named pipe (FIFO), not a regular file"},
		{dir, "a directory, not a regular file"},
		{"/dev/zero", "a character device"},
		{big, "is 8388609 bytes, more than the 8 MiB allowed"},
	} {
		for _, load := range []struct {
			name string
			fn   func(string) error
			what string
		}{
			{"Load", func(p string) error { _, err := Load(p); return err }, "the cluster description"},
			{"LoadTraffic", func(p string) error { _, err := LoadTraffic(p); return err }, "the traffic spec"},
		} {
			began := time.Now()
			err := load.fn(c.path)
			if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), load.what) {
				t.Errorf("%s(%s): %v; want an error naming %s, the path and %q", load.name, c.path, err, load.what, c.want)
			}
			if d := time.Since(began); d > time.Second {
				t.Errorf("%s(%s) took %s: not at once", load.name, c.path, d)
			}
		}
	}
}
