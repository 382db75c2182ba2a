package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// coordActive asks each coordinator (each member of component coord)
// which role it holds (its GET
// /role) and returns the one that says active ("" if none does, or
// more than one).
func coordActive(t *testing.T, cl *demo.Cluster) string {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	active := ""
	for _, m := range cl.Members {
		if m.Component != "coord" {
			continue
		}
		n := m.Name
		resp, err := c.Get("http://" + cl.Addresses[n] + "/role")
		if err != nil {
			continue
		}
		var st struct{ Role string }
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.Role == "active" {
			if active != "" {
				return ""
			}
			active = n
		}
	}
	return active
}

func otherCoord(n string) string {
	if n == "coord-1" {
		return "coord-2"
	}
	return "coord-1"
}

// switchovers are the events of the coordinators' switchover: begun
// (a batch event), its call done, the step done.
func switchovers(evs []store.Event) (begun, called, done []string) {
	for _, ev := range evs {
		switch {
		case ev.Kind == "batch" && strings.Contains(ev.Message, ": switching-over from "):
			begun = append(begun, ev.Message)
		case ev.Kind == "action" && strings.HasPrefix(ev.Message, "switchover hooks of coord") && strings.Contains(ev.Message, ": done in "):
			called = append(called, ev.Message)
		case ev.Kind == "batch" && strings.Contains(ev.Message, ": switching-over done "):
			done = append(done, ev.Message)
		}
	}
	return begun, called, done
}

// TestActiveStandbySwitchover: the sample cluster with its coordinator
// pair (every write the api members take is stamped by the active
// coordinator first; strategy active-standby) is upgraded under
// traffic. The standby goes first, then the role is switched over to
// it (the sample's POST /admin/handover through hooks.switchover), then
// the former active: 0 failed requests, every acknowledged write read
// back, every member on 2.0.0, the role on the former standby, the
// switchover in the events exactly once, between the two batches, and
// nothing owed (the switchover kept).
func TestActiveStandbySwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Coordinator: true, Soak: 500 * time.Millisecond, Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "2.0.0")
	active := coordActive(t, cl)
	if active == "" {
		t.Fatal("no coordinator says it is active")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("the active coordinator: %s; traffic seed %d", active, seed)
	stop := clientTraffic(cl, seed)
	out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	rec := stop()
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	failed := 0
	for _, s := range rec.Samples() {
		if !s.OK {
			if failed < 5 {
				t.Errorf("a request failed: %+v", s)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed, want 0", failed, len(rec.Samples()))
	}
	checkWrites(t, cl, rec)
	expectAllOn(t, cl, "2.0.0")
	if now := coordActive(t, cl); now != otherCoord(active) {
		t.Errorf("the active coordinator is %q after the upgrade, want %s (the former standby, upgraded)", now, otherCoord(active))
	}
	u, _ := status(t, cl)
	if u.State != upgrade.StateCompleted || len(u.Effects) > 0 {
		t.Errorf("the upgrade: %s, owing %v", u.State, u.Effects)
	}
	evs := eventsOf(t, cl, u.ID)
	begun, called, done := switchovers(evs)
	t.Logf("switchover: %v; %v; %v", begun, called, done)
	if len(begun) != 1 || len(called) != 1 || len(done) != 1 ||
		!strings.Contains(begun[0], "from "+active+" to "+otherCoord(active)) || !strings.Contains(called[0], "(to "+otherCoord(active)+")") {
		t.Errorf("the switchover in the events: begun %d, called %d, done %d times; want once each, from %s to %s", len(begun), len(called), len(done), active, otherCoord(active))
	}
	// The order: the standby's batch done, the switchover, the former
	// active's move.
	var order []string
	for _, ev := range evs {
		switch {
		case ev.Kind == "batch" && strings.HasPrefix(ev.Message, "coord batch 1") && strings.Contains(ev.Message, " done in "):
			order = append(order, "standby done")
		case ev.Kind == "batch" && strings.Contains(ev.Message, ": switching-over done "):
			order = append(order, "switched over")
		case ev.Kind == "step" && ev.Member == active && strings.HasSuffix(ev.Message, "pending → stopping"):
			order = append(order, "former active stopping")
		}
	}
	if strings.Join(order, ", ") != "standby done, switched over, former active stopping" {
		t.Errorf("the order in the events: %v", order)
	}
	kept := false
	for _, ev := range evs {
		kept = kept || ev.Kind == "effect" && strings.Contains(ev.Message, " kept (the upgrade completed") && strings.Contains(ev.Message, "coord: the role active switched over")
	}
	if !kept {
		t.Errorf("no event says the switchover was kept")
	}
}

// TestActiveStandbyAbortDuringSwitchover: the coordinators are slow to
// hand over (5 s); the upgrade is aborted while the switchover's call
// is in flight. The call is cancelled, the rollback hands the role back
// (the switchover's undo, journaled before the call: a handover to the
// active cancels the one under way) before the upgraded standby is
// returned: the former active holds the role, every member runs 1.0.0,
// nothing is owed.
func TestActiveStandbyAbortDuringSwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Coordinator: true, SlowHandover: 5 * time.Second, Soak: 500 * time.Millisecond,
		Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "2.0.0")
	active := coordActive(t, cl)
	if active == "" {
		t.Fatal("no coordinator says it is active")
	}
	fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	waitFor(t, 90*time.Second, "the switchover's call in flight", func() bool {
		fg.alive(t)
		u, ok := record(t, cl) // the engine's own record: the API does not show a batch step's call in flight
		if !ok {
			return false
		}
		for _, b := range u.Batches {
			for _, x := range b.Before {
				if x.Acting != 0 {
					return true
				}
			}
		}
		return false
	})
	if out, code := ferry(t, cl, "upgrade", "abort"); code != 0 {
		t.Fatalf("abort during the switchover: exit %d\n%s", code, out)
	}
	if code, out := fg.wait(t); code != 4 {
		t.Errorf("the foreground upgrade: exit %d, want 4 (rolled back)\n%s", code, out)
	}
	u, _ := status(t, cl)
	if u.State != upgrade.StateRolledBack || len(u.Effects) > 0 {
		t.Fatalf("after the abort: %s (%s), owing %v", u.State, u.Reason, u.Effects)
	}
	expectAllOn(t, cl, "1.0.0")
	if now := coordActive(t, cl); now != active {
		t.Errorf("the active coordinator is %q after the rollback, want %s, the former active", now, active)
	}
	evs := eventsOf(t, cl, u.ID)
	var undo []string
	for _, ev := range evs {
		if ev.Kind == "effect" && strings.Contains(ev.Message, " undone: coord: the role active switched over from "+active) ||
			ev.Kind == "action" && strings.HasPrefix(ev.Message, "undo ") && strings.Contains(ev.Message, "done in") && strings.Contains(ev.Message, "/admin/handover?to="+active) {
			undo = append(undo, ev.Message)
		}
	}
	t.Logf("the undo: %v", undo)
	if len(undo) != 2 {
		t.Errorf("the switchover's undo in the events: %v, want its action and the effect undone", undo)
	}
}
