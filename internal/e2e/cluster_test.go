package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/demo"
	"github.com/ferry-upgrade/ferry/internal/engine"
)

// TestClusterUpDown drives 'ferry cluster up' and 'down' on the sample
// cluster (which the tests start with engine.Up, as cluster up does):
// up on a running cluster leaves every member alone, up at another
// release is refused having started nothing, both are refused (exit 3)
// while an upgrade has not ended, down stops every member, up starts
// them again, healthy, in the plan's order.
func TestClusterUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 300 * time.Millisecond}, "2.0.0")

	out, code := ferry(t, cl, "cluster", "up", "--version", "1.0.0")
	if code != 0 || !strings.Contains(out, "kv: kv-1, kv-2, kv-3 run 1.0.0 already: left alone") {
		t.Fatalf("up on a running cluster: exit %d\n%s", code, out)
	}
	out, code = ferry(t, cl, "cluster", "up", "--version", "2.0.0")
	if code != 1 || !strings.Contains(out, "members run another release: kv-1 runs 1.0.0") || !strings.Contains(out, "nothing was started") {
		t.Fatalf("up at another release: exit %d\n%s", code, out)
	}
	expectAllOn(t, cl, "1.0.0")

	// An upgrade that has not ended (recorded, driven by nobody yet).
	e, _, err := cl.Engine(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.Begin(ctx, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	for _, op := range [][]string{{"cluster", "down"}, {"cluster", "up", "--version", "1.0.0"}} {
		out, code := ferry(t, cl, op...)
		if code != 3 || !strings.Contains(out, "refused: upgrade upg-") {
			t.Errorf("%v during an upgrade: exit %d, want 3\n%s", op, code, out)
		}
	}
	if out, code := ferry(t, cl, "upgrade", "abort", "-q"); code != 0 {
		t.Fatalf("abort: exit %d\n%s", code, out)
	}

	out, code = ferry(t, cl, "cluster", "down")
	if code != 0 || !strings.Contains(out, "api: stopping api-1, api-2, api-3, api-4") || strings.Index(out, "api: stopping") > strings.Index(out, "kv: stopping") {
		t.Fatalf("down: exit %d (api must stop before kv)\n%s", code, out)
	}
	for n, v := range versions(t, cl) {
		if !strings.HasSuffix(v, "(not running)") {
			t.Errorf("after down, %s runs %s", n, v)
		}
	}

	out, code = ferry(t, cl, "cluster", "up", "--version", "1.0.0", "-o", "json")
	if code != 0 {
		t.Fatalf("up after down: exit %d\n%s", code, out)
	}
	var rep engine.ClusterReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("up -o json: %v\n%s", err, out)
	}
	var order []string
	for _, m := range rep.Members {
		order = append(order, m.Name)
		if m.Action != "started" || m.Version != "1.0.0" {
			t.Errorf("up after down: %+v", m)
		}
	}
	if got := strings.Join(order, " "); got != "kv-1 kv-2 kv-3 api-1 api-2 api-3 api-4" {
		t.Errorf("members in the report: %s, want the plan's order", got)
	}
	expectAllOn(t, cl, "1.0.0")
	if pf := e.RunPreflight(ctx, ""); !pf.OK() {
		t.Errorf("not healthy after up: %+v", pf.Failed())
	}
	t.Logf("cluster up after down: %.1fs", rep.DurationS)
}

// TestUpgradeToWhatRuns: an upgrade to the release every member runs
// has nothing to do: it is said (exit 0), through the data directory
// and through a server (POST /v1/upgrade), and no upgrade is recorded,
// so no hook or migration ran and no finalize is on record (issue 22,
// defect 5).
func TestUpgradeToWhatRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{}, "2.0.0")
	addr := startServer(t, cl)
	for _, via := range [][]string{nil, {"--addr", addr}} {
		out, code := ferry(t, cl, append(via, "upgrade", "start", "--to", "1.0.0")...)
		if code != 0 || !strings.Contains(out, "nothing to do: every member runs 1.0.0 already") {
			t.Errorf("upgrade start --to 1.0.0 %v on 1.0.0: exit %d, want 0 and nothing to do\n%s", via, code, out)
		}
		var res engine.NothingToDo
		jsonOut(t, cl, &res, append(via, "upgrade", "start", "--to", "1.0.0")...)
		if !res.NothingToDo || res.To != "1.0.0" {
			t.Errorf("upgrade start -o json %v: %+v", via, res)
		}
	}
	if out, code := ferry(t, cl, "upgrade", "status"); code == 0 || !strings.Contains(out, "no upgrade yet") {
		t.Errorf("after upgrades to what runs, status: exit %d, want none recorded\n%s", code, out)
	}
}
