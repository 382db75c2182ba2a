package sim

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// switchovers counts the switchovers a run's timeline shows begun.
func switchovers(r Result) int {
	n := 0
	for _, e := range r.Timeline {
		if strings.Contains(e.Message, ": switching-over from ") {
			n++
		}
	}
	return n
}

// TestActiveStandbySeeds runs testdata/standby.yaml (an active/standby
// pair of controllers, a kv tier, workers) through the real engine for
// 10 seeds, each with the faults it draws: every invariant holds (one
// switchover at a time among them); a run that completed switched the
// controllers over exactly once and ends with the role on an upgraded
// member; one that rolled back ends with it where it began.
func TestActiveStandbySeeds(t *testing.T) {
	c, err := config.Load("testdata/standby.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, runs := uint64(time.Now().UnixNano()), 10
	if v, err := strconv.ParseUint(os.Getenv("FERRY_SIM_SEED"), 10, 64); err == nil {
		base, runs = v, 1
	}
	t.Logf("seeds %d..%d (FERRY_SIM_SEED=N replays one)", base, base+uint64(runs)-1)
	ended := map[string]int{}
	for i := range runs {
		seed := base + uint64(i)
		res, err := Run(context.Background(), Config{Cluster: c, To: "2.0.0", Seed: seed})
		if err != nil || res.Err != "" {
			t.Fatalf("seed %d (FERRY_SIM_SEED=%d replays it): %v %s", seed, seed, err, res.Err)
		}
		ended[res.State.String()]++
		if b := res.Broken(); len(b) > 0 {
			t.Fatalf("seed %d (FERRY_SIM_SEED=%d replays it; faults %s): broken: %v", seed, seed, res.Faults, b)
		}
		holder := res.Roles["controller"]
		switch res.State {
		case upgrade.StateCompleted:
			if n := switchovers(res); n != 1 {
				t.Errorf("seed %d: completed with %d switchovers, want 1", seed, n)
			}
			if holder == "" || res.Record.Members[holder].Target != "2.0.0" {
				t.Errorf("seed %d: completed, the role on %q", seed, holder)
			}
		case upgrade.StateRolledBack:
			if holder != "controller-1" {
				t.Errorf("seed %d: rolled back (%s), the role on %q, want controller-1, which held it", seed, res.Reason, holder)
			}
		}
		if len(res.Record.Effects) > 0 && res.State.Terminal() {
			t.Errorf("seed %d: ended %s owing %v", seed, res.State, res.Record.Effects)
		}
	}
	t.Logf("ended: %v", ended)
}

// TestActiveStandbyAbortDuringSwitchover: a run whose role takes 6 s to
// move is replayed with an abort 1 s after its switchover began (the
// seed replays it exactly up to there): it rolls back, the switchover's
// undo hands the role back to controller-1, every member ends on 1.0.0
// and nothing is owed.
func TestActiveStandbyAbortDuringSwitchover(t *testing.T) {
	c, err := config.Load("testdata/standby.yaml")
	if err != nil {
		t.Fatal(err)
	}
	timing := DefaultTiming
	timing.Elect = Span{6 * time.Second, 6 * time.Second}
	cfg := Config{Cluster: c, To: "2.0.0", Seed: 3, Timing: &timing, Faults: &Faults{}}
	first, err := Run(context.Background(), cfg)
	if err != nil || first.State != upgrade.StateCompleted {
		t.Fatalf("%v: %s (%s)", err, first.State, first.Reason)
	}
	var at time.Duration
	for _, e := range first.Timeline {
		if strings.Contains(e.Message, ": switching-over from ") {
			at = e.At
		}
	}
	if at == 0 {
		t.Fatalf("no switchover in the timeline:\n%v", lines(first))
	}
	cfg.Requests = []Request{{At: at + time.Second, Kind: upgrade.IntentAbort}}
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Err != "" {
		t.Fatalf("%v %s", err, res.Err)
	}
	t.Logf("switchover began at %s; aborted at %s:\n%s", at, at+time.Second, strings.Join(lines(res), "\n"))
	if res.State != upgrade.StateRolledBack {
		t.Fatalf("ended %s (%s), want rolled-back", res.State, res.Reason)
	}
	if b := res.Broken(); len(b) > 0 {
		t.Errorf("broken: %v", b)
	}
	if h := res.Roles["controller"]; h != "controller-1" {
		t.Errorf("the role on %q, want controller-1, the former active", h)
	}
	if len(res.Record.Effects) > 0 {
		t.Errorf("owed at the end: %v", res.Record.Effects)
	}
	undone := false
	for _, ev := range res.Events {
		undone = undone || ev.Kind == "effect" && strings.Contains(ev.Message, "undone: controller: the role active switched over from controller-1 to controller-0")
	}
	if !undone {
		t.Errorf("no event of the switchover undone")
	}
}
