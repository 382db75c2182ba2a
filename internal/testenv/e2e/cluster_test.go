package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
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
// defect 5; the case after a finalize is in
// TestClusterUpBelowTheFinalizedPin).
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

// TestClusterUpBelowTheFinalizedPin: once an upgrade to 2.0.0 was
// finalized (kv's data in format 2), a cluster brought down cannot be
// brought up at 1.0.0, which the catalog does not allow from 2.0.0:
// refused with the reason and nothing started, through the data
// directory and through a server (issue 22, defect 1); 2.0.0 comes up.
// An upgrade to 2.0.0 again has nothing to do (defect 5). A kv member
// put on 1.0.0 behind ferry's back answers that it cannot serve, and
// ferry health and members say so.
func TestClusterUpBelowTheFinalizedPin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	o := demo.ClusterOptions{Soak: 300 * time.Millisecond}
	o.Releases = []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"]},
		{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}, Migrations: demo.KVMigrations}}
	cl := startCluster(t, o)
	if out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q"); code != 0 {
		t.Fatalf("upgrade to 2.0.0: exit %d\n%s", code, out)
	}
	done, _ := status(t, cl)
	if done.Pin != "2.0.0" || done.Finalized.IsZero() {
		t.Fatalf("after the upgrade: pin %q, finalized %s", done.Pin, done.Finalized)
	}
	addr := startServer(t, cl)

	t.Run("2.0.0 again: nothing to do", func(t *testing.T) {
		for _, via := range [][]string{nil, {"--addr", addr}} {
			out, code := ferry(t, cl, append(via, "upgrade", "start", "--to", "2.0.0")...)
			if code != 0 || !strings.Contains(out, "nothing to do: every member runs 2.0.0 already") {
				t.Errorf("upgrade start --to 2.0.0 %v on 2.0.0: exit %d\n%s", via, code, out)
			}
		}
		if u, _ := status(t, cl); u.ID != done.ID || !u.Updated.Equal(done.Updated) {
			t.Errorf("the current upgrade is %s (updated %s), want %s untouched", u.ID, u.Updated, done.ID)
		}
	})

	if out, code := ferry(t, cl, "--addr", addr, "cluster", "down"); code != 0 {
		t.Fatalf("cluster down: exit %d\n%s", code, out)
	}
	for _, via := range [][]string{nil, {"--addr", addr}} {
		out, code := ferry(t, cl, append(via, "cluster", "up", "--version", "1.0.0")...)
		for _, want := range []string{"finalized 2.0.0", "the catalog does not allow 1.0.0 from 2.0.0", "nothing was started"} {
			if code != 1 || !strings.Contains(out, want) {
				t.Errorf("cluster up --version 1.0.0 %v after finalize: exit %d, want 1 and %q\n%s", via, code, want, out)
			}
		}
		if via != nil && !strings.Contains(out, "422") {
			t.Errorf("through the server: want 422\n%s", out)
		}
		for n, v := range versions(t, cl) {
			if !strings.HasSuffix(v, "(not running)") {
				t.Errorf("after the refused up %v, %s runs %s", via, n, v)
			}
		}
	}
	if out, code := ferry(t, cl, "cluster", "up", "--version", "2.0.0"); code != 0 {
		t.Fatalf("cluster up --version 2.0.0: exit %d\n%s", code, out)
	}

	// kv-3 on 1.0.0 behind ferry's back, as a script would.
	kv3 := cl.Members[2]
	startBehindFerry(t, cl, kv3, "kv", "1.0.0")
	const cannot = "cluster format 2 is newer than this release (1.0.0) understands"
	var m engine.MemberView
	waitFor(t, 30*time.Second, "kv-3 on 1.0.0 answering its check", func() bool {
		var members []engine.MemberView
		jsonOut(t, cl, &members, "members")
		for _, m = range members {
			if m.Name == "kv-3" {
				return m.Running == "1.0.0" && (m.Status == "healthy" || strings.Contains(m.Detail, cannot))
			}
		}
		return false
	})
	if m.Status == "healthy" || !strings.Contains(m.Detail, cannot) {
		t.Errorf("ferry members: kv-3 %s on %s: %s, want not healthy, saying why", m.Status, m.Running, m.Detail)
	}
	out, code := ferry(t, cl, "health")
	if code != 1 || !strings.Contains(out, cannot) {
		t.Errorf("ferry health with kv-3 on 1.0.0: exit %d, want 1 and why\n%s", code, out)
	}
}
