package checksum

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDirSums: every regular file under a directory, in path order, the
// skipped one left out; the sums round-trip through sha256sum's format
// and Compare names the file that differs, is missing or is extra.
func TestDirSums(t *testing.T) {
	dir := t.TempDir()
	for p, body := range map[string]string{"b.tar": "bee", "a/x.db": "ex", "SHA256SUMS": "ignored"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := Dir(context.Background(), dir, "SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || sums[0].Path != "a/x.db" || sums[1].Path != "b.tar" {
		t.Fatalf("sums %+v, want a/x.db and b.tar (SHA256SUMS skipped)", sums)
	}
	text := FormatSums(sums)
	back, err := ParseSums(text, "t")
	if err != nil || Compare(sums, back) != "" {
		t.Fatalf("round trip: %v %q", err, Compare(sums, back))
	}
	bad := append([]Sum{}, back...)
	bad[1].SHA256 = strings.Repeat("0", 64)
	if d := Compare(sums, bad); !strings.Contains(d, "b.tar has SHA-256") {
		t.Errorf("changed file: %q", d)
	}
	if d := Compare(sums, back[:1]); d != "b.tar is not listed" {
		t.Errorf("extra file: %q", d)
	}
	if d := Compare(sums[:1], back); d != "b.tar is listed but missing" {
		t.Errorf("missing file: %q", d)
	}
	if _, err := ParseSums("abc  x\n", "SUMS"); err == nil || !strings.Contains(err.Error(), "SUMS:1:") {
		t.Errorf("bad line: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO in the backup: %v", err)
	}
}
