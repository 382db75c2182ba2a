package store

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// longLived is a store with a history: 20 past upgrades and 20,000
// events (about 5 MiB), and a current upgrade of 40 members.
func longLived(tb testing.TB) (*Store, upgrade.Upgrade) {
	tb.Helper()
	s, err := Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	msg := strings.Repeat("m", 200)
	for p := range 20 {
		past := rec(fmt.Sprintf("past-%02d", p), upgrade.StateCompleted)
		if err := s.Create(past); err != nil {
			tb.Fatal(err)
		}
		evs := make([]Event, 1000)
		for i := range evs {
			evs[i] = Event{Upgrade: past.ID, Kind: "step", Member: "kv-1", Message: msg}
		}
		if _, err := logged(s, evs...); err != nil {
			tb.Fatal(err)
		}
	}
	u := rec("now", upgrade.Upgrading("kv"))
	for i := range 40 {
		n := fmt.Sprintf("kv-%d", i+2)
		u.Members[n] = &upgrade.Member{Name: n, Step: upgrade.StepPending}
	}
	if err := s.Create(u); err != nil {
		tb.Fatal(err)
	}
	return s, u
}

// BenchmarkSaveLongLived is the cost of a save on a long-lived store
// (longLived): "step" changes a member's step (the backup is
// rewritten), "heartbeat" only the record's times (it is not).
func BenchmarkSaveLongLived(b *testing.B) {
	for _, kind := range []string{"step", "heartbeat"} {
		b.Run(kind, func(b *testing.B) {
			s, u := longLived(b)
			steps := []upgrade.MemberStep{upgrade.StepDraining, upgrade.StepStopping}
			now := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u.Alive = now.Add(time.Duration(i) * time.Second)
				u.Updated = u.Alive
				if kind == "step" {
					u.Members["kv-1"].Step = steps[i%2]
				}
				if _, err := saveWithEvents(s, u, []Event{{Kind: "step", Message: "x"}, {Kind: "action", Message: "y"}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if fi, err := os.Stat(s.Path()); err == nil {
				b.ReportMetric(float64(fi.Size()), "store-bytes")
			}
			if fi, err := os.Stat(s.BackupPath()); err == nil {
				b.ReportMetric(float64(fi.Size()), "backup-bytes")
			}
		})
	}
}

// backupAt is the backup's generation (keyBackupGen: moved by each
// write it gets) and its modification time.
func backupAt(t *testing.T, s *Store) (uint64, time.Time) {
	t.Helper()
	fi, err := os.Stat(s.BackupPath())
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(s.BackupPath(), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var gen uint64
	if err := db.View(func(tx *bolt.Tx) error { gen = token(tx.Bucket(bucketMeta).Get(keyBackupGen)); return nil }); err != nil {
		t.Fatal(err)
	}
	return gen, fi.ModTime()
}

// TestBackupSkipsHeartbeats: a save that only moves the record's times
// (the engine's heartbeat, also while paused) leaves the backup as it
// is (its generation, and the file untouched); a save that adds an
// effect to the journal gives the backup its writes before it returns,
// and so do a change of state and of the current upgrade. The backup
// holds the records, not the events, so its size does not follow the
// store's.
func TestBackupSkipsHeartbeats(t *testing.T) {
	s, u := longLived(t)
	gen, mtime := backupAt(t, s)
	for i := range 3 {
		u.Alive, u.Updated = time.Now(), time.Now()
		if _, err := saveWithEvents(s, u, []Event{{Kind: "health", Message: "ok"}}); err != nil {
			t.Fatal(err)
		}
		if g2, m2 := backupAt(t, s); g2 != gen || !m2.Equal(mtime) {
			t.Fatalf("heartbeat %d wrote the backup (generation %d → %d, mtime %v → %v)", i, gen, g2, mtime, m2)
		}
	}
	u.Effects.Open(effect.Effect{Key: "lb/kv-1", What: "kv-1 out of the load balancer"}, &u.EffectSeq, time.Now())
	u.Alive = time.Now()
	if err := s.Save(u); err != nil {
		t.Fatal(err)
	}
	if g2, _ := backupAt(t, s); g2 != gen+1 {
		t.Fatalf("the save of a new effect did not write the backup: generation %d → %d", gen, g2)
	}
	b, ok, err := Backup(s.dir)
	if err != nil || !ok || b.ID != "now" || b.Effects.Find("lb/kv-1") < 0 {
		t.Fatalf("the backup after the save of an effect: %v %v %s %+v", ok, err, b.ID, b.Effects)
	}
	for _, change := range []struct {
		name string
		do   func() error
	}{
		{"the state", func() error { u.State = upgrade.StateCompleted; return s.Save(u) }},
		{"the current upgrade", func() error { _, err := s.ClearCurrent(); return err }},
	} {
		gen, _ = backupAt(t, s)
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		if g2, _ := backupAt(t, s); g2 != gen+1 {
			t.Errorf("a change of %s did not write the backup: generation %d → %d", change.name, gen, g2)
		}
	}
	if last, ok, err := s.LastFinalized(); err != nil || ok {
		t.Fatalf("LastFinalized: %v %v", last.ID, err)
	}
	st, _ := os.Stat(s.Path())
	bk, _ := os.Stat(s.BackupPath())
	if bk.Size()*20 > st.Size() {
		t.Errorf("the backup is %d bytes for a store of %d: it holds the events", bk.Size(), st.Size())
	}
	// The backup, restored, is a whole store: every record, the events'
	// sequence carried on.
	if err := os.WriteFile(s.Path(), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreBackup(s.dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Current(); ok || err != nil {
		t.Errorf("after the restore, an upgrade is current, though it was cleared: %v %v", ok, err)
	}
	if _, err := s.Get("past-07"); err != nil {
		t.Errorf("a past record after the restore: %v", err)
	}
	if got, err := s.Get("now"); err != nil || got.State != upgrade.StateCompleted || got.Effects.Find("lb/kv-1") < 0 {
		t.Errorf("the record after the restore: %v %s %+v", err, got.State, got.Effects)
	}
	evs, err := logged(s, Event{Kind: "recover", Message: "restored"})
	if err != nil || evs[0].Seq <= 20000 {
		t.Errorf("the first event after the restore: %+v %v, want a sequence past the lost ones", evs, err)
	}
}

// TestBackupRewrittenWhenMissing: a heartbeat with no usable backup
// (removed after a failed write, or damaged) writes one.
func TestBackupRewrittenWhenMissing(t *testing.T) {
	s, u := longLived(t)
	for _, spoil := range []func() error{
		func() error { return os.Remove(s.BackupPath()) },
		func() error { return os.WriteFile(s.BackupPath(), []byte("garbage"), 0o600) },
	} {
		if err := spoil(); err != nil {
			t.Fatal(err)
		}
		u.Alive = time.Now()
		if err := s.Save(u); err != nil {
			t.Fatal(err)
		}
		if b, ok, err := Backup(s.dir); err != nil || !ok || b.ID != "now" {
			t.Fatalf("the backup after a heartbeat with none usable: %v %v", ok, err)
		}
	}
	if err := Diagnose(s.dir); err != nil {
		t.Errorf("Diagnose: %v", err)
	}
}

// TestBackupBehindIsWrittenAnew: a backup that missed a write of the
// store (here, put back as it was before one; a write whose backup
// failed, or whose store's commit did, leaves the two apart likewise)
// is not given the next write alone, which would leave the missed one
// out (a member written then and not since): its generation says it is
// behind, and it is written anew, with both.
func TestBackupBehindIsWrittenAnew(t *testing.T) {
	s, u := longLived(t)
	before, err := os.ReadFile(s.BackupPath())
	if err != nil {
		t.Fatal(err)
	}
	u.Members["kv-2"].Step = upgrade.StepStopping
	if err := s.Save(u); err != nil {
		t.Fatal(err)
	}
	gen, _ := backupAt(t, s)
	if err := os.WriteFile(s.BackupPath(), before, 0o600); err != nil {
		t.Fatal(err)
	}
	u.Members["kv-3"].Step = upgrade.StepDraining
	if err := s.Save(u); err != nil {
		t.Fatal(err)
	}
	if g, _ := backupAt(t, s); g != gen+1 {
		t.Fatalf("the backup's generation after the write: %d, want %d", g, gen+1)
	}
	b, ok, err := Backup(s.dir)
	if err != nil || !ok || b.Members["kv-2"].Step != upgrade.StepStopping || b.Members["kv-3"].Step != upgrade.StepDraining {
		t.Fatalf("the backup after a write while it was behind: %v %v, kv-2 %s, kv-3 %s: want both writes", ok, err,
			b.Members["kv-2"].Step, b.Members["kv-3"].Step)
	}
}
