package ssh

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// TestBackupOnHost: a member's backup kept on its host (capability
// backup-on-host). The directory is made empty there; the backup
// command runs there (sshd's SSH_CONNECTION says so), its argv as
// given; the sums are of the files there, in sha256sum's format, the
// sums file left out, the same as ferry's own checksum.Dir of them; a
// symbolic link in a backup is refused; the newest directories are kept
// by their time and the others removed, each named; a command that
// fails is an error with its exit status and what it said.
func TestBackupOnHost(t *testing.T) {
	e := sshtest.New(t, 1)
	d := newDriver(t, e, nil)
	h := e.Hosts[0]
	root := filepath.Join(t.TempDir(), "backups", "kv-1")
	dir := filepath.Join(root, "upg-3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale"), []byte("half of a backup lost with ferry"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.BackupEmpty(ctxT(t, time.Minute), "h1", dir); err != nil {
		t.Fatal(err)
	}
	if es, err := os.ReadDir(dir); err != nil || len(es) != 0 {
		t.Fatalf("after BackupEmpty: %v %v, want an empty directory", es, err)
	}
	script := hostScript(t, `set -e
mkdir -p "$1/db"
printf 'key=%s\n' "$2" >"$1/db/data"
printf 'wal\n' >"$1/wal"
cd "$1" && sha256sum db/data wal >SHA256SUMS
echo "backed up on ${SSH_CONNECTION:-none}"
`)
	out, err := d.BackupRun(ctxT(t, time.Minute), "h1", []string{script, dir, `it's "$(x)"`}, time.Minute)
	if err != nil || !strings.Contains(out, h.IP+" 22") {
		t.Fatalf("BackupRun: %q %v, want it run on h1 (%s)", out, err, h.IP)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "db", "data")); string(b) != "key=it's \"$(x)\"\n" {
		t.Errorf("the command's argument arrived as %q", b)
	}
	text, err := d.BackupSums(ctxT(t, time.Minute), "h1", dir, []string{"SHA256SUMS"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := checksum.ParseSums(text, "the host's sums")
	if err != nil {
		t.Fatal(err)
	}
	want, err := checksum.Dir(ctxT(t, time.Minute), dir, "SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	if checksum.FormatSums(got) != checksum.FormatSums(want) || len(got) != 2 {
		t.Errorf("the host's sums:\n%s\nferry's:\n%s", checksum.FormatSums(got), checksum.FormatSums(want))
	}
	sums, err := d.BackupRead(ctxT(t, time.Minute), "h1", filepath.Join(dir, "SHA256SUMS"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if listed, err := checksum.ParseSums(string(sums), "SHA256SUMS"); err != nil || checksum.Compare(got, listed) != "" {
		t.Errorf("the sums file read from the host: %v %q", err, sums)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.BackupSums(ctxT(t, time.Minute), "h1", dir, nil); err == nil || !strings.Contains(err.Error(), "link in "+dir+" is neither a file nor a directory") {
		t.Errorf("a link in the backup: %v, want it refused by name", err)
	}
	// upg-1 oldest, upg-3 newest: keep 2.
	for i, n := range []string{"upg-1", "upg-2"} {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(time.Duration(i-3) * time.Hour)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := d.BackupPrune(ctxT(t, time.Minute), "h1", root, 2)
	if err != nil || strings.Join(removed, " ") != filepath.Join(root, "upg-1") {
		t.Errorf("pruned %v (%v), want %s alone", removed, err, filepath.Join(root, "upg-1"))
	}
	if _, err := os.Stat(filepath.Join(root, "upg-2")); err != nil {
		t.Errorf("upg-2, the second newest, was not kept: %v", err)
	}
	if gone, err := d.BackupPrune(ctxT(t, time.Minute), "h1", filepath.Join(root, "none"), 1); err != nil || len(gone) != 0 {
		t.Errorf("pruning a directory that does not exist: %v %v", gone, err)
	}
	fails := hostScript(t, "echo 'disk full' >&2; exit 4\n")
	if _, err := d.BackupRun(ctxT(t, time.Minute), "h1", []string{fails}, time.Minute); err == nil || !strings.Contains(err.Error(), "exit status 4: disk full") {
		t.Errorf("a failing backup command: %v", err)
	}
}
