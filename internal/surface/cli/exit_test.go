package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadDescriptionExits2: every command that loads the description
// exits 2 on one that is invalid, naming the file, the line and the
// field, as the README's exit codes say (only validate did; the others
// exited 1). The description here has an unknown strategy type on
// line 8.
func TestBadDescriptionExits2(t *testing.T) {
	dir := t.TempDir()
	good := offlineDescription(t, dir)
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, strings.Replace(readFile(t, good), "type: canary", "type: sideways", 1))
	data := filepath.Join(dir, "data")
	for _, args := range [][]string{
		{"validate"},
		{"plan", "--to", "2.0.0"},
		{"health"},
		{"health", "--to", "2.0.0"},
		{"members"},
		{"versions"},
		{"upgrade", "start", "--to", "2.0.0"},
		{"upgrade", "resume"},
		{"upgrade", "abort"},
		{"cluster", "up", "--version", "1.0.0"},
		{"cluster", "down"},
		{"traffic", "--duration", "1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, 10*time.Second, ferryCmd("", append([]string{"-f", bad, "--data-dir", data}, args...)...))
			if r.code != 2 || !strings.Contains(r.stderr, "bad.yaml:8") || !strings.Contains(r.stderr, "sideways") {
				t.Errorf("exit %d, stderr %q; want exit 2 naming bad.yaml:8 and the strategy", r.code, r.stderr)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
