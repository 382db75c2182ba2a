package timeline

import (
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

func TestWindows(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	u := upgrade.Upgrade{Plan: plan.Plan{Phases: []plan.Phase{
		{Component: "kv", Batches: []plan.Batch{{Members: []string{"kv-1"}}, {Members: []string{"kv-2"}}}},
		{Component: "api", Batches: []plan.Batch{{Members: []string{"api-1", "api-2"}}, {Members: []string{"api-3"}}}},
	}}, Batches: []upgrade.Batch{
		{Phase: 0, Component: "kv", Number: 1, Members: []string{"kv-1"}, Began: at(1), Ended: at(3)},
		{Phase: 0, Component: "kv", Number: 2, Members: []string{"kv-2"}, Began: at(3), Ended: at(5)},
		{Phase: 1, Component: "api", Number: 1, Members: []string{"api-1", "api-2"}, Began: at(5), Ended: at(8)},
	}}
	evs := []store.Event{
		{Time: at(0), Kind: "state", Message: "upgrade u1 created: 1.0.0 → 2.0.0"},
		{Time: at(0), Kind: "state", Message: "state upgrade-started → expanding"},
		{Time: at(1), Kind: "state", Message: "state expanding → upgrading-kv"},
		{Time: at(1), Kind: "step", Member: "kv-1", Message: "kv-1: pending → draining"},
		{Time: at(3), Kind: "step", Member: "kv-1", Message: "kv-1: rejoining → done"},
		{Time: at(3), Kind: "step", Member: "kv-2", Message: "kv-2: pending → draining"},
		{Time: at(5), Kind: "step", Member: "kv-2", Message: "kv-2: rejoining → done"},
		{Time: at(5), Kind: "state", Message: "state upgrading-kv → upgraded-kv"},
		{Time: at(5), Kind: "state", Message: "state upgraded-kv → upgrading-api"},
		{Time: at(5), Kind: "step", Member: "api-1", Message: "api-1: pending → draining"},
		{Time: at(6), Kind: "step", Member: "api-2", Message: "api-2: pending → draining"},
		{Time: at(8), Kind: "step", Member: "api-2", Message: "api-2: starting → failed (not healthy)"},
		{Time: at(8), Kind: "state", Message: "state upgrading-api → rolling-back: member api-2: not healthy"},
		{Time: at(12), Kind: "state", Message: "state rolling-back → rolled-back"},
	}
	got := Windows(u, evs, at(20))
	want := []Window{
		{"expanding", KindState, at(0), at(1)},
		{"upgrading-kv", KindState, at(1), at(5)},
		{"upgraded-kv", KindState, at(5), at(5)},
		{"upgrading-api", KindState, at(5), at(8)},
		{"rolling-back", KindState, at(8), at(12)},
		{"kv batch 1 (kv-1)", KindBatch, at(1), at(3)},
		{"kv batch 2 (kv-2)", KindBatch, at(3), at(5)},
		{"api batch 1 (api-1, api-2)", KindBatch, at(5), at(8)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d windows, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("window %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWindowStillOpen(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	evs := []store.Event{{Time: t0, Kind: "state", Message: "state preflight → upgrading-kv"}}
	got := Windows(upgrade.Upgrade{}, evs, t0.Add(time.Minute))
	if len(got) != 1 || got[0].To != t0.Add(time.Minute) {
		t.Fatalf("an open window: %+v", got)
	}
}
