package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// TestSelfUpgradeCommand: 'ferry version -o json' is what a self-upgrade
// asks a binary; 'ferry self-upgrade' refuses, before it reaches any
// agent, a missing flag, --servers without --addr, a sum that does not
// match (exit 5) and a binary of its own release (exit 5: this test
// binary is the ferry CLI too, and answers as such).
func TestSelfUpgradeCommand(t *testing.T) {
	dir := t.TempDir()
	file := offlineDescription(t, dir)
	data := filepath.Join(dir, "data")
	r := run(t, 30*time.Second, ferryCmd("", "version", "-o", "json"))
	var self buildinfo.Self
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &self) != nil || self.Release != buildinfo.Release() {
		t.Fatalf("version -o json: exit %d, %q (%s)", r.code, r.stdout, r.stderr)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sum, err := checksum.File(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no binary", []string{"--sha256", sum}, 1, "--binary and --sha256 are required"},
		{"servers, no addr", []string{"--binary", bin, "--sha256", sum, "--servers"}, 1, "--servers needs --addr"},
		{"wrong sum", []string{"--binary", bin, "--sha256", strings.Repeat("1", 64)}, 5, "has sha256 " + sum},
		{"same release", []string{"--binary", bin, "--sha256", sum}, 5, "release " + buildinfo.Release() + ", the release this ferry is already"},
	} {
		args := append([]string{"-f", file, "--data-dir", data, "self-upgrade"}, c.args...)
		r := run(t, time.Minute, ferryCmd("", args...))
		if r.code != c.code || !strings.Contains(r.stderr, c.says) {
			t.Errorf("%s: exit %d, stderr %q; want %d saying %q", c.name, r.code, r.stderr, c.code, c.says)
		}
	}
}
