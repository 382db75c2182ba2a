package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// TestBackupRestorePrune: the backup actions on real files and real
// commands (sh, cp): a backup is made in a directory emptied first,
// summed, its sums compared with the command's own, the restore check
// made; a restore is refused, nothing run, once a file of the backup
// changed since it was verified, and refused for a directory that is
// not the member's; a prune keeps the newest backup.keep.
func TestBackupRestorePrune(t *testing.T) {
	dir := t.TempDir()
	data, backups := filepath.Join(dir, "data", "kv-1"), filepath.Join(dir, "backups")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "db"), []byte("release N's data"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte(fmt.Sprintf(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: kv
    strategy: {type: offline}
    members: [{name: kv-1, host: h1, address: 127.0.0.1:8101}]
    backup:
      dir: %[1]s
      data: "%[2]s"
      command: {exec: [sh, -c, 'cp "$2/db" "$1/db" && cd "$1" && sha256sum db > SUMS', backup, "{{.Backup}}", "%[2]s"]}
      sums: SUMS
      check: {exec: [test, -s, "{{.Backup}}/db"]}
      restore: {exec: [cp, "{{.Backup}}/db", "%[2]s/db"]}
      keep: 2
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`, backups, data)), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Cluster: c, Driver: process.New(nil), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := c.Components[0].Backup
	var sums string
	for _, id := range []string{"upg-1", "upg-2", "upg-3"} {
		a := upgrade.Action{Kind: upgrade.ActBackup, Member: "kv-1", Version: "1.0.0", Backup: b.BackupPath("kv-1", id)}
		// A half backup left by a try lost with ferry's process.
		if err := os.MkdirAll(a.Backup, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a.Backup, "half"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		detail, s, err := e.backup(ctx, a)
		if err != nil {
			t.Fatalf("backup %s: %v", id, err)
		}
		t.Logf("%s: %s", id, detail)
		if sums = s; strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "  db\n") {
			t.Fatalf("sums %q, want db's alone (SUMS left out, the half backup gone)", s)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "db"), []byte("release N+1's data"), 0o644); err != nil {
		t.Fatal(err)
	}
	last := upgrade.Action{Kind: upgrade.ActRestore, Member: "kv-1", Version: "1.0.0", Backup: b.BackupPath("kv-1", "upg-3"), Sums: sums}
	if _, err := e.restore(ctx, last); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(data, "db")); string(got) != "release N's data" {
		t.Fatalf("restored data %q", got)
	}

	// A backup changed since it was verified is not restored.
	if err := os.WriteFile(filepath.Join(last.Backup, "db"), []byte("bit rot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "db"), []byte("release N+1's data"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = e.restore(ctx, last)
	t.Logf("a changed backup: %v", err)
	if !errors.Is(err, upgrade.ErrRefused) || !strings.Contains(err.Error(), "changed since it was verified: db has SHA-256") {
		t.Errorf("restore of a changed backup: %v, want a refusal naming db", err)
	}
	if got, _ := os.ReadFile(filepath.Join(data, "db")); string(got) != "release N+1's data" {
		t.Errorf("a refused restore changed the data: %q", got)
	}
	// Nor one in a directory that is not the member's.
	other := last
	other.Backup = filepath.Join(dir, "elsewhere", "upg-3")
	if _, err := e.restore(ctx, other); !errors.Is(err, upgrade.ErrRefused) {
		t.Errorf("restore from %s: %v, want a refusal", other.Backup, err)
	}

	detail, err := e.pruneBackups(ctx, upgrade.Action{Kind: upgrade.ActPrune, Component: "kv"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prune: %s", detail)
	ents, _ := os.ReadDir(filepath.Join(backups, "kv-1"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "upg-2 upg-3" {
		t.Errorf("kept %v, want the newest 2: upg-2 upg-3", names)
	}
}
