package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// ironicFlow is release 2.0.0's flow in Ironic's order on the sample:
// the kv store's expand, the kv members (Ironic's conductors), the api
// members (its APIs), the unpin: a rollout restarting kv then api on
// 2.0.0 with the pin moved to 2.0.0 in their arguments, marked as the
// point of no return, then the online migrations, finalize, contract.
const ironicFlow = `[{stage: expand}, {stage: phase, component: kv}, {stage: phase, component: api},
      {stage: rollout, components: [kv, api], point_of_no_return: true}, {stage: migrate}, {stage: finalize}, {stage: contract}]`

// TestIronicFlow: Ironic's rolling upgrade as a release's flow, on real
// processes whose arguments carry the pin (--pin {{.Pin}}), which each
// reports on GET /version. An abort before the point of no return (in
// the api phase) returns every member to 1.0.0, each pinned to 1.0.0;
// an abort after it (the rollout began) is refused naming the stage,
// and the upgrade goes on: every member runs 2.0.0 and was restarted
// with pin 2.0.0, the kv members before the api members, and the
// events show the stages in the flow's order.
func TestIronicFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	o := demo.ClusterOptions{Soak: 500 * time.Millisecond, Deadline: 20 * time.Second, GateDeadline: 20 * time.Second, Pin: true}
	o.Releases = []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"]},
		{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}, Migrations: demo.KVMigrations, Flow: ironicFlow}}
	cl := startCluster(t, o)
	expectPins(t, cl, "1.0.0", "1.0.0") // cluster up at 1.0.0 pins it there

	out, code := ferry(t, cl, "plan", "--to", "2.0.0")
	want := "flow of 2.0.0: expanding → upgrading-kv → upgrading-api → rolling-out-kv (point of no return) → rolling-out-api → migrating → finalizing → contracting"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("ferry plan: exit %d, want the line %q\n%s", code, want, out)
	}

	t.Run("abort before the point of no return", func(t *testing.T) {
		fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		waitFor(t, 90*time.Second, "the api phase", func() bool {
			fg.alive(t)
			u, ok := status(t, cl)
			return ok && u.State == upgrade.Upgrading("api")
		})
		if out, code := ferry(t, cl, "upgrade", "abort"); code != 0 {
			t.Fatalf("abort in the api phase: exit %d\n%s", code, out)
		}
		if code, out := fg.wait(t); code != 4 {
			t.Errorf("the foreground upgrade exit %d, want 4\n%s", code, out)
		}
		if u, _ := status(t, cl); u.State != upgrade.StateRolledBack || u.Pin != "1.0.0" || !u.Finalized.IsZero() {
			t.Fatalf("after abort: %s (%s), pin %s, finalized %s", u.State, u.Reason, u.Pin, u.Finalized)
		}
		expectAllOn(t, cl, "1.0.0")
		expectPins(t, cl, "1.0.0", "1.0.0")
	})
	if t.Failed() {
		return
	}

	t.Run("abort after the point of no return is refused", func(t *testing.T) {
		fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		waitFor(t, 120*time.Second, "the api members' rollout", func() bool {
			fg.alive(t)
			u, ok := status(t, cl)
			return ok && u.State == upgrade.RollingOut("api")
		})
		out, code := ferry(t, cl, "upgrade", "abort")
		if code != 3 || !strings.Contains(out, "passed its point of no return, stage rolling-out-kv") {
			t.Errorf("abort in the rollout: exit %d, want 3 naming the stage rolling-out-kv\n%s", code, out)
		}
		if code, out := fg.wait(t); code != 0 {
			t.Fatalf("the foreground upgrade: exit %d\n%s", code, out)
		}
		u, _ := status(t, cl)
		if u.State != upgrade.StateCompleted || u.Pin != "2.0.0" || u.NoReturn != upgrade.RollingOut("kv") {
			t.Fatalf("after the upgrade: %s (%s), pin %s, point of no return %s", u.State, u.Reason, u.Pin, u.NoReturn)
		}
		expectAllOn(t, cl, "2.0.0")
		expectPins(t, cl, "2.0.0", "2.0.0")

		states := expectStates(t, eventsOf(t, cl, u.ID), "expanding", "upgrading-kv", "upgraded-kv", "upgrading-api", "upgraded-api",
			"rolling-out-kv", "rolled-out-kv", "rolling-out-api", "rolled-out-api", "migrating", "finalizing", "contracting", "completed")
		// The rollout restarted every member, kv before api, each once.
		var rolled []string
		for _, b := range u.Batches {
			if b.Rollout {
				rolled = append(rolled, b.Members...)
			}
		}
		if len(rolled) != 7 || !strings.HasPrefix(rolled[0], "kv-") || !strings.HasPrefix(rolled[3], "api-") || !strings.HasPrefix(rolled[2], "kv-") {
			t.Errorf("the rollout's members in order: %v, want the 3 kv members then the 4 api members", rolled)
		}
		t.Logf("states: %s; rolled out in order: %s", strings.Join(states, " → "), strings.Join(rolled, ", "))
	})
}

// expectPins checks the version and the pin every member of the
// description reports on GET /version: what its arguments said at its
// start.
func expectPins(t *testing.T, cl *demo.Cluster, version, pin string) {
	t.Helper()
	c := &http.Client{Timeout: 3 * time.Second}
	for _, comp := range cl.Config.ComponentsInOrder() {
		for _, m := range comp.Members {
			resp, err := c.Get("http://" + m.Address + "/version")
			if err != nil {
				t.Errorf("%s: GET /version: %v", m.Name, err)
				continue
			}
			var v map[string]string
			err = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if err != nil || v["version"] != version || v["pin"] != pin {
				t.Errorf("%s reports %v (%v), want version %s, pin %s", m.Name, v, err, version, pin)
			}
		}
	}
}

// statesIn is the states the upgrade went through, in order, from its
// state events ("A → B: why" gives B).
func statesIn(evs []store.Event) []string {
	var states []string
	for _, ev := range evs {
		if _, to, ok := strings.Cut(ev.Message, " → "); ok && ev.Kind == "state" {
			states = append(states, strings.SplitN(to, ":", 2)[0])
		}
	}
	return states
}

// expectStates checks that the states in the events, from the first
// of want on (what comes before it, preflight, varies), are want, and
// returns them all.
func expectStates(t *testing.T, evs []store.Event, want ...string) []string {
	t.Helper()
	states := statesIn(evs)
	if i := slices.Index(states, want[0]); i < 0 || !slices.Equal(states[i:], want) {
		t.Errorf("the states in the events: %v\nwant (from %s): %v", states, want[0], want)
	}
	return states
}
