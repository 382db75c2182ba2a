package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestOfflineBackupSimulated: a simplex description (strategy offline,
// a backup) simulates without --accept-downtime (nothing is touched)
// and without touching the backup directory it names: completed, then
// rolled back through a restore when 2.0.0 never becomes healthy; the
// directory is never made.
func TestOfflineBackupSimulated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	c, err := config.Parse([]byte(fmt.Sprintf(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: kv
    strategy: {type: offline}
    members: [{name: kv-1, host: h1, address: 127.0.0.1:8101}]
    health: {member: {http: "http://{{.Address}}/ready"}}
    backup:
      dir: %s
      data: "/var/lib/kv/{{.Name}}"
      command: {exec: [kv-backup, "{{.Backup}}"]}
      sums: SHA256SUMS
      check: {exec: [kv-backup, --check, "{{.Backup}}"]}
      restore: {exec: [kv-restore, "{{.Backup}}"]}
    soak: 1s
    deadline: 30s
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
`, dir)), "simplex.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		faults Faults
		want   upgrade.State
		step   string
	}{
		{Faults{}, upgrade.StateCompleted, ""},
		{Faults{NeverReady: map[string]string{"kv-1": "2.0.0"}}, upgrade.StateRolledBack, "restoring"},
	} {
		res, err := Run(context.Background(), Config{Cluster: c, To: "2.0.0", Seed: 1, Faults: &tc.faults})
		if err != nil || res.Err != "" {
			t.Fatalf("%v %s", err, res.Err)
		}
		m := res.Record.Members["kv-1"]
		t.Logf("%s: %s; kv-1's backup %+v", res.State, res.Record.Reason, m.Backup)
		if res.State != tc.want {
			t.Errorf("ended %s, want %s", res.State, tc.want)
		}
		if m.Backup.Verified.IsZero() || (tc.step == "restoring") == m.Backup.Restored.IsZero() {
			t.Errorf("kv-1's backup %+v: verified, restored only going back", m.Backup)
		}
		if b := res.Broken(); len(b) > 0 {
			t.Errorf("broken: %v", b)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the simulation touched %s: %v", dir, err)
	}
}
