package engine

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// TestDeposedEngineAppendsNoEvent: the events a run stores outside a
// save (a crash loop's output, after the save that recorded the loop)
// go under its fence too. While the run holds the store they are
// stored; once another engine claimed it, the append is refused, no
// event is stored, and the run is deposed (it starts nothing more),
// where it used to append them.
func TestDeposedEngineAppendsNoEvent(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := upgrade.Upgrade{ID: "upg-1", State: upgrade.Upgrading("kv"), Members: map[string]*upgrade.Member{
		"kv-1": {Name: "kv-1", Component: "kv", From: "1.0.0", Target: "2.0.0", Step: upgrade.StepStarting},
	}, Created: now, Updated: now}
	f, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.CreateAt(a, f)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{cfg: Config{Store: st, Clock: RealClock{}, Logger: slog.New(slog.DiscardHandler)}}
	l := &loop{e: e, u: a, fence: f, rev: rev}
	looped := func(exits int) upgrade.Upgrade {
		b := a
		b.Members = map[string]*upgrade.Member{"kv-1": {Name: "kv-1", Component: "kv", From: "1.0.0", Target: "2.0.0",
			Step: upgrade.StepFailed, CrashLoop: true, Exits: exits, ExitDetail: "exit status 2"}}
		return b
	}
	outputs := func() int {
		evs, err := st.Events("upg-1", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Kind == "output" {
				n++
			}
		}
		return n
	}

	l.crashLoopOutput(context.Background(), a, looped(3))
	if n := outputs(); n != 1 || l.deposed != nil {
		t.Fatalf("while the run holds the store: %d output events (want 1), deposed: %v", n, l.deposed)
	}
	other, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Fence(); err != nil { // another engine claims the store
		t.Fatal(err)
	}
	l.crashLoopOutput(context.Background(), a, looped(4))
	if n := outputs(); n != 1 {
		t.Fatalf("after another engine claimed the store: %d output events, want still 1", n)
	}
	if !errors.Is(l.deposed, ErrDeposed) || !errors.Is(l.deposed, store.ErrFenced) {
		t.Fatalf("the run after its append was refused: deposed = %v, want ErrDeposed by the fence", l.deposed)
	}
	t.Log(l.deposed)
}
