package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/demo"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// TestTroubleFerryDidNotCause: api-1, upgraded already, goes down by
// itself while ferry upgrades the api tier. max_unavailable (2) counts
// it: ferry takes down one member fewer, says which predicate refuses
// and why, never has more than two api members down, and goes on once
// api-1 is back.
func TestTroubleFerryDidNotCause(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 2 * time.Second, Deadline: 30 * time.Second, GateDeadline: 60 * time.Second}, "2.0.0")
	obs := watch(cl)
	fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	waitFor(t, 90*time.Second, "api-1 done", func() bool {
		fg.alive(t)
		u, ok := status(t, cl)
		return ok && u.Members["api-1"] != nil && u.Members["api-1"].Step == upgrade.StepDone
	})
	api1 := cl.Members[3]
	if api1.Name != "api-1" {
		t.Fatalf("member order changed: %s", api1.Name)
	}
	if err := cl.Driver.Stop(t.Context(), api1); err != nil {
		t.Fatal(err)
	}
	var waiting string
	waitFor(t, 90*time.Second, "ferry waiting on api-1", func() bool {
		fg.alive(t)
		u, _ := status(t, cl)
		waiting = u.Waiting
		return strings.Contains(u.Waiting, "max_unavailable refused") && strings.Contains(u.Waiting, "api-1 down")
	})
	t.Logf("ferry says: %s", waiting)
	u, _ := status(t, cl)
	if len(u.Refusals) == 0 || u.Refusals[0].Predicate != "max_unavailable" {
		t.Errorf("refusals %+v, want max_unavailable's", u.Refusals)
	}
	inFlight := 0
	for _, n := range []string{"api-2", "api-3", "api-4"} {
		if u.Members[n].Step.InFlight() {
			inFlight++
		}
	}
	if inFlight > 1 {
		t.Errorf("%d api members in flight while api-1 is down (max_unavailable 2)", inFlight)
	}
	art, err := engineArtifact(cl, "api", "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Driver.Start(t.Context(), api1, art); err != nil {
		t.Fatal(err)
	}
	if code, out := fg.wait(t); code != 0 {
		t.Fatalf("the upgrade: exit %d\n%s", code, out)
	}
	expectAllOn(t, cl, "2.0.0")
	obs.check(t)
}
