package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestChain: 2.0.0 upgrades only from 1.0.1, so from 1.0.0 ferry plans
// the path 1.0.0 → 1.0.1 → 2.0.0, shows it, and runs it as two
// complete upgrades, the second planned from what the first left.
func TestChain(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	o := demo.ClusterOptions{Soak: 500 * time.Millisecond, Deadline: 20 * time.Second, GateDeadline: 20 * time.Second}
	o.Releases = []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"]},
		{Version: "1.0.1", Path: bin.sample["1.0.1"], UpgradeFrom: []string{"1.0.x"}},
		{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.1"}}}
	cl := startCluster(t, o)

	out, code := ferry(t, cl, "plan", "--to", "2.0.0")
	if code != 0 || !strings.Contains(out, "path: 1.0.0 → 1.0.1 → 2.0.0: 2 consecutive upgrades") {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	var rv []engine.ReleaseView
	jsonOut(t, cl, &rv, "releases", "list")
	if r := rv[2]; r.Version != "2.0.0" || r.State != "available" || strings.Join(r.Path, ",") != "1.0.1,2.0.0" {
		t.Errorf("releases list: %+v", rv)
	}
	out, code = ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	if code != 0 {
		t.Fatalf("upgrade start: exit %d\n%s", code, out)
	}
	expectAllOn(t, cl, "2.0.0")
	u, _ := status(t, cl)
	if u.State != upgrade.StateCompleted || u.From != "1.0.1" || u.To != "2.0.0" {
		t.Errorf("the last upgrade: %s %s → %s", u.State, u.From, u.To)
	}
	out, _ = ferry(t, cl, "events", "--all")
	if !strings.Contains(out, "1.0.0 → 1.0.1 (step 1 of the path 1.0.0 → 1.0.1 → 2.0.0)") || !strings.Contains(out, "created: 1.0.1 → 2.0.0") {
		t.Errorf("events do not show both steps:\n%s", out)
	}
}
