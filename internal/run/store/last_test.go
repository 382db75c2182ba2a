package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestLast: the current upgrade, or once it is cleared the one created
// last; nothing on a store that never had one, read-only or missing.
func TestLast(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := mustReadOnly(t, filepath.Join(dir, "missing")).Last(); ok || err != nil {
		t.Fatalf("a missing store: ok %v, err %v", ok, err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// u1 was created last by its clock, u3 is current.
	t0 := time.Now()
	for i, id := range []string{"u1", "u2", "u3"} {
		u := rec(id, upgrade.StateCompleted)
		u.Created = t0.Add(time.Duration((i+2)%3) * time.Minute)
		if err := s.Create(u); err != nil {
			t.Fatal(err)
		}
	}
	ro := mustReadOnly(t, dir)
	if u, ok, err := ro.Last(); err != nil || !ok || u.ID != "u3" {
		t.Fatalf("last with u3 current: %s %v %v", u.ID, ok, err)
	}
	if _, err := s.ClearCurrent(); err != nil {
		t.Fatal(err)
	}
	if u, ok, err := ro.Last(); err != nil || !ok || u.ID != "u1" {
		t.Fatalf("last once cleared: %s %v %v, want u1", u.ID, ok, err)
	}
}

func mustReadOnly(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLastFinalized: the upgrade finalized last by its finalize time,
// not the one created last; an upgrade never finalized does not count.
func TestLastFinalized(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LastFinalized(); ok || err != nil {
		t.Fatalf("an empty store: ok %v, err %v", ok, err)
	}
	t0 := time.Now()
	for i, f := range []time.Duration{2 * time.Minute, 0, time.Minute} {
		u := rec([]string{"u1", "u2", "u3"}[i], upgrade.StateCompleted)
		u.Created = t0.Add(time.Duration(i) * time.Minute)
		if f != 0 {
			u.Finalized = t0.Add(f)
		}
		if err := s.Create(u); err != nil {
			t.Fatal(err)
		}
	}
	if u, ok, err := s.LastFinalized(); err != nil || !ok || u.ID != "u1" {
		t.Fatalf("last finalized: %s %v %v, want u1", u.ID, ok, err)
	}
}
