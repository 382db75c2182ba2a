package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// damages are the ways a store file is found damaged: each turns the
// bytes of a good store into a damaged one.
var damages = []struct {
	name    string
	damage  func(good []byte, rng *rand.Rand) []byte
	problem string
}{
	{"empty", func([]byte, *rand.Rand) []byte { return nil }, "it is empty: 0 bytes"},
	{"truncated to half", func(g []byte, _ *rand.Rand) []byte { return g[:len(g)/2] }, "truncated: "},
	{"truncated within its meta pages", func(g []byte, _ *rand.Rand) []byte { return g[:100] }, "truncated: 100 bytes"},
	{"garbage", func(g []byte, rng *rand.Rand) []byte {
		b := make([]byte, len(g))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}, "not a ferry store: "},
	{"text", func([]byte, *rand.Rand) []byte { return []byte("upgrade: in progress\n") }, "not a ferry store: 21 bytes"},
}

// goodStore writes a store in dir with an upgrade in progress and
// returns its file's bytes.
func goodStore(t *testing.T, dir string) []byte {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u := rec("a", upgrade.Upgrading("api"))
	u.Members["kv-1"].Step = upgrade.StepDraining
	if err := s.Create(u); err != nil {
		t.Fatal(err)
	}
	for i := range 50 { // enough pages that half of them is not the meta pages alone
		if _, err := saveWithEvents(s, u, []Event{{Kind: "step", Message: strings.Repeat("x", 200) + string(rune('a'+i%26))}}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamagedStoreRefused: an empty, truncated or garbage store file is
// refused by every operation, read-only or not, with an error that
// names the file, what is wrong and 'ferry upgrade recover'; no byte of
// it changes (an empty file was taken for a new store and written over,
// a truncated one could fault).
func TestDamagedStoreRefused(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	good := goodStore(t, t.TempDir())
	for _, d := range damages {
		for _, backup := range []bool{false, true} {
			name := d.name
			if backup {
				name += " with backup"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "ferry.db")
				if backup {
					os.WriteFile(path+".bak", good, 0o600)
				}
				bad := d.damage(good, rng)
				if err := os.WriteFile(path, bad, 0o600); err != nil {
					t.Fatal(err)
				}
				ops := map[string]func() error{
					"Open":         func() error { _, err := Open(dir); return err },
					"OpenReadOnly": func() error { _, err := OpenReadOnly(dir); return err },
				}
				s := &Store{dir: dir, path: path, timeout: time.Second}
				ro := &Store{dir: dir, path: path, timeout: time.Second, readOnly: true}
				for _, st := range []*Store{s, ro} {
					kind := "rw "
					if st.readOnly {
						kind = "ro "
					}
					ops[kind+"Current"] = func() error { _, _, err := st.Current(); return err }
					ops[kind+"Last"] = func() error { _, _, err := st.Last(); return err }
					ops[kind+"Events"] = func() error { _, err := st.Events("", 0, 0); return err }
					ops[kind+"Get"] = func() error { _, err := st.Get("a"); return err }
				}
				ops["Create"] = func() error { return s.Create(rec("b", upgrade.StateStarted)) }
				ops["Save"] = func() error { return s.Save(rec("a", upgrade.StatePaused)) }
				ops["SaveWithEvents"] = func() error { _, err := saveWithEvents(s, rec("a", upgrade.StatePaused), nil); return err }
				ops["Append"] = func() error { _, err := s.Append(Fence{}, Event{Kind: "x"}); return err }
				ops["Request"] = func() error {
					_, err := s.Request("a", upgrade.IntentResume, time.Now(), nil)
					return err
				}
				ops["ClearCurrent"] = func() error { _, err := s.ClearCurrent(); return err }
				for op, f := range ops {
					err := f()
					if !errors.Is(err, ErrDamaged) {
						t.Errorf("%s: %v, want ErrDamaged", op, err)
						continue
					}
					msg := err.Error()
					for _, want := range []string{path + " is damaged (" + d.problem, "ferry upgrade recover", "--data-dir " + dir} {
						if !strings.Contains(msg, want) {
							t.Errorf("%s: %q does not say %q", op, msg, want)
						}
					}
					if backup != strings.Contains(msg, "restores the backup "+path+".bak") {
						t.Errorf("%s (backup %v): %q", op, backup, msg)
					}
				}
				if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
					t.Errorf("the damaged file was changed: %d bytes, was %d", len(got), len(bad))
				}
				if ents, _ := os.ReadDir(dir); len(ents) != map[bool]int{false: 1, true: 2}[backup] {
					t.Errorf("files left in the data directory: %v", ents)
				}
			})
		}
	}
}

// TestBackupFollowsRecords: every write of a record leaves a backup
// that reads as the store did right after it; a restore brings that
// record back over a damaged file, kept aside, byte for byte.
func TestBackupFollowsRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.BackupPath()); err == nil {
		t.Errorf("a backup before any record was written")
	}
	u := rec("a", upgrade.Upgrading("api"))
	if err := s.Create(u); err != nil {
		t.Fatal(err)
	}
	for _, step := range []upgrade.MemberStep{upgrade.StepDraining, upgrade.StepStopping} {
		u.Members["kv-1"].Step = step
		if _, err := saveWithEvents(s, u, []Event{{Kind: "step", Message: string(step)}}); err != nil {
			t.Fatal(err)
		}
		b, ok, err := Backup(dir)
		if err != nil || !ok || b.Members["kv-1"].Step != step {
			t.Fatalf("backup after the save of step %s: %v %v %v", step, ok, err, b.Members)
		}
	}
	if _, err := RestoreBackup(dir, time.Now()); err == nil {
		t.Errorf("a restore over a store that is not damaged was made")
	}
	if err := os.Truncate(s.Path(), 0); err != nil {
		t.Fatal(err)
	}
	if err := Diagnose(dir); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Diagnose of an empty store: %v", err)
	}
	if _, err := MoveAside(dir, time.Now()); err == nil {
		t.Errorf("MoveAside with a usable backup: want a refusal")
	}
	aside, err := RestoreBackup(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(aside); err != nil || fi.Size() != 0 {
		t.Errorf("the damaged file was not kept aside as %s: %v", aside, err)
	}
	cur, ok, err := s.Current()
	if err != nil || !ok || cur.Members["kv-1"].Step != upgrade.StepStopping {
		t.Fatalf("after the restore: %v %v %+v", ok, err, cur.Members["kv-1"])
	}
	// The backup holds the records, not the events (backup).
	if evs, err := s.Events("", 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("events after the restore: %d, %v", len(evs), err)
	}
}

// TestMissingStoreWithBackup: a store file gone while its backup is
// there is no new store: it is refused, and created by nothing.
func TestMissingStoreWithBackup(t *testing.T) {
	dir := t.TempDir()
	goodStore(t, dir)
	os.Remove(filepath.Join(dir, "ferry.db"))
	if _, err := Open(dir); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "missing, although its backup") {
		t.Fatalf("Open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ferry.db")); err == nil {
		t.Errorf("a new store was created")
	}
	if _, err := RestoreBackup(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := mustReadOnly(t, dir).Current(); !ok || err != nil {
		t.Errorf("after the restore: %v %v", ok, err)
	}
}

// TestDamagedBackupMovedAside: a damaged store whose backup is damaged
// too is moved aside with it; the next Open makes a new store.
func TestDamagedBackupMovedAside(t *testing.T) {
	dir := t.TempDir()
	goodStore(t, dir)
	path := filepath.Join(dir, "ferry.db")
	os.WriteFile(path, nil, 0o600)
	os.WriteFile(path+".bak", []byte("garbage"), 0o600)
	err := Diagnose(dir)
	if de := (*DamagedError)(nil); !errors.As(err, &de) || de.Backup != "" {
		t.Fatalf("Diagnose: %v, want damaged with no usable backup", err)
	}
	aside, err := MoveAside(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(aside + ".bak"); err != nil || string(b) != "garbage" {
		t.Errorf("the damaged backup was not kept aside: %q %v", b, err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Current(); ok || err != nil {
		t.Errorf("the new store: %v %v", ok, err)
	}
}

// BenchmarkSaveWithEventsBackedUp is BenchmarkSaveWithEvents on a store
// holding a few upgrades' worth of events (2,000). It saves the same
// record again and again, which rewrites no backup (put):
// BenchmarkSaveLongLived measures a save that does and one that does
// not, on a long-lived store.
func BenchmarkSaveWithEventsBackedUp(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	u := rec("a", upgrade.Upgrading("kv"))
	if err := s.Create(u); err != nil {
		b.Fatal(err)
	}
	evs := make([]Event, 2000)
	for i := range evs {
		evs[i] = Event{Kind: "step", Message: strings.Repeat("m", 120)}
	}
	if _, err := logged(s, evs...); err != nil {
		b.Fatal(err)
	}
	f, err := s.Fence()
	if err != nil {
		b.Fatal(err)
	}
	rev := Revision(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if rev, _, err = s.SaveAt(u, rev, f, []Event{{Kind: "step", Message: "x"}, {Kind: "action", Message: "y"}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if fi, err := os.Stat(s.BackupPath()); err == nil {
		b.ReportMetric(float64(fi.Size()), "backup-bytes")
	}
}
