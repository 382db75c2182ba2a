package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestTroubleFerryDidNotCause: api-1 and api-2, upgraded already, go
// down by themselves while the upgrade is paused before the api tier's
// last batch. max_unavailable (2) counts them: ferry admits no more api
// member, says which predicate refuses and why, never has more than two
// api members down, and goes on once one of them is back.
func TestTroubleFerryDidNotCause(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 3 * time.Second, Deadline: 30 * time.Second, GateDeadline: 60 * time.Second}, "2.0.0")
	obs := watch(cl)
	fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	// The api batches are 1, 2, 1: pause while the second soaks.
	waitFor(t, 90*time.Second, "the api tier's second batch soaking", func() bool {
		fg.alive(t)
		u, ok := status(t, cl)
		return ok && u.Members["api-2"] != nil && u.Members["api-2"].Step == upgrade.StepSoaking
	})
	if out, code := ferry(t, cl, "upgrade", "pause"); code != 0 {
		t.Fatalf("pause: exit %d\n%s", code, out)
	}
	waitFor(t, 60*time.Second, "paused", func() bool { u, _ := status(t, cl); return u.State == upgrade.StatePaused })
	byName := map[string]driver.Member{}
	for _, m := range cl.Members {
		byName[m.Name] = m
	}
	for _, n := range []string{"api-1", "api-2"} {
		if err := cl.Driver.Stop(t.Context(), byName[n]); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := ferry(t, cl, "upgrade", "resume", "-q"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	var waiting string
	waitFor(t, 90*time.Second, "ferry waiting on api-1 and api-2", func() bool {
		u, _ := status(t, cl)
		waiting = u.Waiting
		return strings.Contains(u.Waiting, "max_unavailable refused api-4") && strings.Contains(u.Waiting, "api-1 down")
	})
	t.Logf("ferry says: %s", waiting)
	u, _ := status(t, cl)
	if len(u.Refusals) == 0 || u.Refusals[0].Predicate != "max_unavailable" || u.Refusals[0].Member != "api-4" {
		t.Errorf("refusals %+v, want max_unavailable's of api-4", u.Refusals)
	}
	if u.Members["api-4"].Step != upgrade.StepPending {
		t.Errorf("api-4 is %s while api-1 and api-2 are down", u.Members["api-4"].Step)
	}
	out, _ := ferry(t, cl, "upgrade", "status")
	if !strings.Contains(out, "refused:  max_unavailable refused api-4") {
		t.Errorf("status does not name the refusing predicate:\n%s", out)
	}
	art, err := engineArtifact(cl, "api", "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Driver.Start(t.Context(), byName["api-1"], art); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the upgrade completed", func() bool { u, _ := status(t, cl); return u.State == upgrade.StateCompleted })
	if code, out := fg.wait(t); code != 0 {
		t.Fatalf("the upgrade: exit %d\n%s", code, out)
	}
	if err := cl.Driver.Start(t.Context(), byName["api-2"], art); err != nil {
		t.Fatal(err)
	}
	expectAllOn(t, cl, "2.0.0")
	obs.check(t)
}
