package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/demo"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// TestTroubleFerryDidNotCause: api-4 goes down by itself while ferry
// upgrades kv. When the api phase comes, max_unavailable (2) counts
// api-4: ferry takes down one member fewer, says why it waits, never
// has more than two api members down, and goes on once api-4 is back.
func TestTroubleFerryDidNotCause(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 60 * time.Second}, "2.0.0")
	obs := watch(cl)
	fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	waitFor(t, 60*time.Second, "the kv phase", func() bool {
		fg.alive(t)
		u, ok := status(t, cl)
		return ok && u.State == upgrade.Upgrading("kv")
	})
	api4 := cl.Members[6]
	if api4.Name != "api-4" {
		t.Fatalf("member order changed: %s", api4.Name)
	}
	if err := cl.Driver.Stop(t.Context(), api4); err != nil {
		t.Fatal(err)
	}
	var waiting string
	waitFor(t, 90*time.Second, "ferry waiting on api-4", func() bool {
		fg.alive(t)
		u, _ := status(t, cl)
		waiting = u.Waiting
		return strings.Contains(u.Waiting, "max_unavailable 2 reached") && strings.Contains(u.Waiting, "api-4 down")
	})
	t.Logf("ferry says: %s", waiting)
	if u, _ := status(t, cl); u.Members["api-3"].Step != upgrade.StepPending {
		t.Errorf("api-3 is %s beside api-2 while api-4 is down", u.Members["api-3"].Step)
	}
	art, err := engineArtifact(cl, "api", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Driver.Start(t.Context(), api4, art); err != nil {
		t.Fatal(err)
	}
	if code, out := fg.wait(t); code != 0 {
		t.Fatalf("the upgrade: exit %d\n%s", code, out)
	}
	expectAllOn(t, cl, "2.0.0")
	obs.check(t)
}
