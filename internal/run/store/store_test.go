package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

func rec(id string, st upgrade.State) upgrade.Upgrade {
	return upgrade.Upgrade{ID: id, From: "1.0.0", To: "2.0.0", State: st,
		Members: map[string]*upgrade.Member{"kv-1": {Name: "kv-1", Step: upgrade.StepPending}}}
}

func TestCreateRefusesWhileActive(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(rec("a", upgrade.StateStarted)); err != nil {
		t.Fatal(err)
	}
	err = s.Create(rec("b", upgrade.StateStarted))
	if !errors.Is(err, ErrActive) {
		t.Fatalf("second Create = %v, want ErrActive", err)
	}
	cur, ok, err := s.Current()
	if err != nil || !ok || cur.ID != "a" {
		t.Fatalf("current = %v %v %v, want a: the refused create changed nothing", cur.ID, ok, err)
	}
	if _, err := s.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused upgrade b was stored: %v", err)
	}
	done := rec("a", upgrade.StateCompleted)
	if err := s.Save(done); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(rec("b", upgrade.StateStarted)); err != nil {
		t.Fatalf("Create after the first ended: %v", err)
	}
}

func TestRecordSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u := rec("a", upgrade.Upgrading("kv"))
	u.Members["kv-1"].Step = upgrade.StepStopping
	if err := s.Create(u); err != nil {
		t.Fatal(err)
	}
	evs, err := saveWithEvents(s, u, []Event{{Kind: "step", Message: "kv-1: draining → stopping"}})
	if err != nil || len(evs) != 1 || evs[0].Seq != 1 {
		t.Fatalf("SaveWithEvents = %+v, %v", evs, err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s2.Current()
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got.State != upgrade.Upgrading("kv") || got.Members["kv-1"].Step != upgrade.StepStopping {
		t.Fatalf("reopened record = %s %s", got.State, got.Members["kv-1"].Step)
	}
	if st, err := os.Stat(filepath.Join(dir, "ferry.db")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("store file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
}

func TestEventsFilterAndOrder(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, up := range []string{"a", "b", "a", "a"} {
		if _, err := logged(s, Event{Time: now, Upgrade: up, Kind: "action", Message: string(rune('0' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.Events("a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Message != "0" || evs[2].Message != "3" {
		t.Fatalf("events of a = %+v", evs)
	}
	evs, _ = s.Events("", evs[1].Seq, 1)
	if len(evs) != 1 || evs[0].Message != "3" {
		t.Fatalf("after seq 3, limit 1 = %+v", evs)
	}
}

func TestEngineLockIsExclusive(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.LockEngine()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockEngine(); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock = %v, want ErrLocked", err)
	}
	unlock()
	unlock2, err := s.LockEngine()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}

// BenchmarkSaveWithEvents is the write-before-act cost of one engine
// step: one record and two events in one fsynced transaction.
func BenchmarkSaveWithEvents(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	u := rec("a", upgrade.Upgrading("kv"))
	for i := 0; i < 40; i++ {
		n := "m" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		u.Members[n] = &upgrade.Member{Name: n, Step: upgrade.StepPending}
	}
	if err := s.Create(u); err != nil {
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
}

// TestRequestSurvivesEngineSaves: the engine saves the copy of the
// record it had before the operator's request; the request stays.
func TestRequestSurvivesEngineSaves(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u := rec("u1", upgrade.Upgrading("kv"))
	if err := s.Create(u); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	if _, err := s.Request("u1", upgrade.IntentPause, now, nil); err != nil {
		t.Fatal(err)
	}
	u.Waiting = "engine's stale copy"
	if _, err := saveWithEvents(s, u, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("u1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Intent.Kind != upgrade.IntentPause || got.Intent.Seq != 1 || got.Waiting != "engine's stale copy" {
		t.Fatalf("after the engine's save: intent %+v, waiting %q", got.Intent, got.Waiting)
	}
	refused := errors.New("refused")
	if _, err := s.Request("u1", upgrade.IntentAbort, now, func(upgrade.Upgrade) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("refusal: err = %v", err)
	}
	if got, _ := s.Get("u1"); got.Intent.Kind != upgrade.IntentPause {
		t.Fatalf("a refused request changed the intent: %+v", got.Intent)
	}
	if _, err := s.Request("nope", upgrade.IntentAbort, now, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown upgrade: err = %v", err)
	}
	evs, _ := s.Events("u1", 0, 0)
	if len(evs) != 1 || evs[0].Kind != "intent" {
		t.Fatalf("events %+v, want one intent event", evs)
	}
}

// TestClearCurrent: only an ended upgrade is cleared, and its record
// and events stay.
func TestClearCurrent(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClearCurrent(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clear with none = %v, want ErrNotFound", err)
	}
	u := rec("a", upgrade.StateStarted)
	if err := s.Create(u); err != nil {
		t.Fatal(err)
	}
	if _, err := logged(s, Event{Upgrade: "a", Kind: "state", Message: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClearCurrent(); !errors.Is(err, ErrActive) {
		t.Fatalf("clear while running = %v, want ErrActive", err)
	}
	u.State = upgrade.StateCompleted
	if err := s.Save(u); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClearCurrent()
	if err != nil || got.ID != "a" {
		t.Fatalf("clear = %v, %v", got.ID, err)
	}
	if _, ok, err := s.Current(); ok || err != nil {
		t.Fatalf("current after clear: ok %v, err %v", ok, err)
	}
	if _, err := s.Get("a"); err != nil {
		t.Fatalf("the record is gone: %v", err)
	}
	if evs, _ := s.Events("a", 0, 0); len(evs) != 1 {
		t.Fatalf("events after clear: %d, want 1", len(evs))
	}
	if err := s.Create(rec("b", upgrade.StateStarted)); err != nil {
		t.Fatalf("create after clear: %v", err)
	}
}

// saveWithEvents saves u and evs as an engine does (SaveAt), under the
// store's fence (taken if none was) at the revision stored.
func saveWithEvents(s *Store, u upgrade.Upgrade, evs []Event) ([]Event, error) {
	f, err := fenceOf(s)
	if err != nil {
		return nil, err
	}
	_, rev, err := s.Read(u.ID)
	if err != nil {
		return nil, err
	}
	_, evs, err = s.SaveAt(u, rev, f, evs)
	return evs, err
}

// fenceOf is the store's fence, claimed if it has none.
func fenceOf(s *Store) (Fence, error) {
	var f Fence
	if err := s.view(func(tx *bolt.Tx) error { f = storedFence(tx); return nil }); err != nil {
		return f, err
	}
	if f.Term == 0 {
		return s.Fence()
	}
	return f, nil
}

// logged appends evs under the store's fence (fenceOf).
func logged(s *Store, evs ...Event) ([]Event, error) {
	f, err := fenceOf(s)
	if err != nil {
		return nil, err
	}
	return s.Append(f, evs...)
}
