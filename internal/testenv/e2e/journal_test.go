package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// lbState is what the sample load balancer keeps that ferry changes:
// backends drained, flags set.
func lbState(t *testing.T, cl *demo.Cluster) (drained, flags []string) {
	t.Helper()
	var bs []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	getJSON(t, cl.LBAdmin+"/admin/backends", &bs)
	for _, b := range bs {
		if b.State != "enabled" {
			drained = append(drained, b.Name)
		}
	}
	var fs struct {
		Flags []string `json:"flags"`
	}
	getJSON(t, cl.LBAdmin+"/admin/flags", &fs)
	return drained, fs.Flags
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// expectRestored fails the test unless the load balancer has no
// backend drained and no flag set, and upgrade u owes no undo.
func expectRestored(t *testing.T, cl *demo.Cluster, u upgrade.Upgrade) {
	t.Helper()
	drained, flags := lbState(t, cl)
	if len(drained) > 0 || len(flags) > 0 {
		t.Errorf("after %s: backends drained %v, flags set %v", u.State, drained, flags)
	}
	if len(u.Effects) > 0 {
		t.Errorf("after %s: the record still owes undos: %+v", u.State, u.Effects)
	}
}

// TestAbortAtEachStep aborts an upgrade while its first api member is in
// each step of its move (each step made to last seconds), and checks
// that the rollback leaves no backend drained and no flag set: what the
// member's drain and the phase's flag changed was journaled with its
// undo, and every exit of the move undoes it. One upgrade per step, on
// one cluster.
func TestAbortAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 3 * time.Second, KVSoak: 500 * time.Millisecond, Deadline: 30 * time.Second,
		GateDeadline: 30 * time.Second, SlowSteps: 2 * time.Second}, "2.0.0")
	for _, tc := range []struct {
		step upgrade.MemberStep
		to   string
	}{
		{upgrade.StepDraining, "2.0.0"},
		{upgrade.StepStopping, "2.0.0"},
		{upgrade.StepStarting, "2.0.0"}, // warming up for SlowSteps
		{upgrade.StepSoaking, "2.0.0"},
		{upgrade.StepRejoining, "2.0.0"},
	} {
		t.Run(string(tc.step), func(t *testing.T) {
			var events []store.Event
			e, st, err := cl.Engine(nil, func(ev store.Event) { events = append(events, ev) })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			u, err := e.Begin(ctx, tc.to)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			ran := make(chan upgrade.Upgrade, 1)
			go func() {
				u, err := e.Run(ctx)
				if err != nil {
					t.Errorf("run: %v", err)
				}
				ran <- u
			}()
			first := ""
			waitFor(t, 2*time.Minute, "an api member "+string(tc.step), func() bool {
				cur, err := st.Get(u.ID)
				if err != nil {
					return false
				}
				for _, b := range cur.Batches {
					if b.Component == "api" {
						first = b.Members[0]
						return cur.Members[first].Step == tc.step
					}
				}
				return false
			})
			drained, flags := lbState(t, cl)
			t.Logf("%s is %s; the load balancer has %v drained, flags %v", first, tc.step, drained, flags)
			if _, err := st.Request(u.ID, upgrade.IntentAbort, time.Now(), nil); err != nil {
				t.Fatal(err)
			}
			var end upgrade.Upgrade
			select {
			case end = <-ran:
			case <-ctx.Done():
				t.Fatal("the rollback did not end")
			}
			if end.State != upgrade.StateRolledBack || end.Reason != "aborted by the operator" {
				t.Fatalf("ended %s (%s), want rolled-back by the abort", end.State, end.Reason)
			}
			// The member was where the test meant it to be when the
			// rollback began.
			last := ""
			for _, ev := range events {
				if ev.Kind == "step" && ev.Member == first && !strings.Contains(ev.Message, "→ pending") {
					last = ev.Message
				}
				if ev.Kind == "state" && strings.Contains(ev.Message, "→ rolling-back") {
					break
				}
			}
			if !strings.HasSuffix(last, "→ "+string(tc.step)) {
				t.Errorf("when the rollback began, %s's last step was %q, want %s", first, last, tc.step)
			}
			expectAllOn(t, cl, "1.0.0")
			expectRestored(t, cl, end)
			if t.Failed() {
				for _, ev := range events {
					t.Logf("%s %-7s %s", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Message)
				}
			}
		})
		if t.Failed() {
			break // the cluster is not where the next case needs it
		}
	}
}

// TestKillAfterEachEffect kills ferry with SIGKILL right after each kind
// of change it journals (the upgrade's flag, the api phase's flag, an
// api member's drain) has been recorded, each time followed by 'ferry
// upgrade resume': the upgrade completes and nothing is left drained or
// set. The kill lands between the record and the change, or after it:
// the journal knows of the change either way.
func TestKillAfterEachEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "2.0.0")
	obs := watch(cl)
	st, err := store.OpenReadOnly(cl.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	opened := func(scope string) func() bool {
		return func() bool {
			evs, err := st.Events("", 0, 0)
			if err != nil {
				return false
			}
			for _, ev := range evs {
				if ev.Kind == "effect" && strings.Contains(ev.Message, "opened ("+scope) {
					return true
				}
			}
			return false
		}
	}
	args := []string{"upgrade", "start", "--to", "2.0.0", "-q"}
	for _, scope := range []string{"upgrade", "phase api", "member api-"} {
		t.Run(scope, func(t *testing.T) {
			runAndKillWhen(t, cl, args, opened(scope))
			u, _ := status(t, cl)
			t.Logf("killed after a %s effect was recorded: %s, owing %d undo(s)", scope, u.State, len(u.Effects))
		})
		args = []string{"upgrade", "resume", "-q"}
	}
	if out, code := ferry(t, cl, "upgrade", "resume", "-q"); code != 0 {
		t.Fatalf("the last resume: exit %d\n%s", code, out)
	}
	u, _ := status(t, cl)
	if u.State != upgrade.StateCompleted {
		t.Fatalf("ended %s: %s", u.State, u.Reason)
	}
	expectAllOn(t, cl, "2.0.0")
	expectRestored(t, cl, u)
	obs.check(t)
}

// downtimes reads each member's time down (its stop to its first
// healthy check) from the events of upgrade id.
func downtimes(t *testing.T, cl *demo.Cluster, id string) map[string]time.Duration {
	t.Helper()
	evs := eventsOf(t, cl, id)
	out := map[string]time.Duration{}
	for _, ev := range evs {
		if ev.Kind == "down" {
			out[ev.Member] = time.Duration(ev.DurationMS * float64(time.Millisecond))
		}
	}
	return out
}

// TestSlowGateDoesNotLengthenDowntime upgrades the same cluster twice,
// with a cluster gate that answers at once and with one whose check
// takes 5s: the gate delays the next batch, never a member's restart.
// The events give each member's time down in both upgrades.
func TestSlowGateDoesNotLengthenDowntime(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 60 * time.Second}, "1.0.1", "2.0.0")
	if out, code := ferry(t, cl, "upgrade", "start", "--to", "1.0.1", "-q"); code != 0 {
		t.Fatalf("the upgrade with a quick gate: exit %d\n%s", code, out)
	}
	quick, _ := status(t, cl)
	// The same description, its kv gate now 5s slow (the sample kv's
	// /cluster?delay=).
	slowDesc := strings.Replace(readFile(t, cl.File), "/cluster\"", "/cluster?delay=5s\"", 1)
	slowDesc = strings.Replace(slowDesc, "interval: 100ms, timeout: 1s}\n    # The raft leader", "interval: 100ms, timeout: 8s}\n    # The raft leader", 1)
	writeFile(t, cl.File, slowDesc)
	if out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q"); code != 0 {
		t.Fatalf("the upgrade with a slow gate: exit %d\n%s", code, out)
	}
	slow, _ := status(t, cl)
	dq, ds := downtimes(t, cl, quick.ID), downtimes(t, cl, slow.ID)
	var worstQuick time.Duration
	for _, d := range dq {
		worstQuick = max(worstQuick, d)
	}
	t.Logf("time down with a quick gate: %v; with a 5s gate: %v; the gates' first passing checks: %s and %s",
		dq, ds, quick.Bound.Gates.Round(time.Millisecond), slow.Bound.Gates.Round(time.Millisecond))
	if len(ds) != 7 || len(dq) != 7 {
		out, _ := ferry(t, cl, "events")
		t.Fatalf("downtimes of %d and %d members, want 7; events:\n%s", len(dq), len(ds), out)
	}
	everyStopSeen(t, cl, quick)
	everyStopSeen(t, cl, slow)
	for m, d := range ds {
		if d > worstQuick+time.Second {
			t.Errorf("%s was down %s with the slow gate, against at most %s with the quick one", m, d, worstQuick)
		}
	}
	if slow.Bound.Gates < 5*time.Second {
		t.Errorf("the slow gate's checks took %s in all: it was not slow", slow.Bound.Gates)
	}
	if t.Failed() {
		out, _ := ferry(t, cl, "events")
		t.Logf("events:\n%s", out)
	}
}

// TestAgentAwayLongerThanTheDeadline kills the agent while a member
// soaks and starts it again after longer than the member's deadline:
// an outage of the substrate is not the member's failure. ferry says
// what it waits for, moves the deadlines by the outage, and completes.
func TestAgentAwayLongerThanTheDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 3 * time.Second, Deadline: 8 * time.Second, GateDeadline: 30 * time.Second}, "2.0.0")
	bg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	var soaking string
	waitFor(t, time.Minute, "a member soaking", func() bool {
		bg.alive(t)
		u, _ := status(t, cl)
		for n, m := range u.Members {
			if m.Step == upgrade.StepSoaking {
				soaking = n
				return true
			}
		}
		return false
	})
	if err := cl.KillAgent(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 20*time.Second, "ferry saying the substrate does not answer", func() bool {
		u, _ := status(t, cl)
		return u.Outage != nil
	})
	// Longer than the deadline (8s) from the kill.
	time.Sleep(12 * time.Second)
	if err := cl.RestartAgent(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent away %s while %s soaked", time.Since(killed).Round(time.Millisecond), soaking)
	if code, out := bg.wait(t); code != 0 {
		t.Fatalf("the upgrade: exit %d\n%s", code, out)
	}
	u, _ := status(t, cl)
	if u.State != upgrade.StateCompleted || u.Rollback != nil {
		t.Fatalf("ended %s (%s)", u.State, u.Reason)
	}
	out, _ := ferry(t, cl, "events")
	if !strings.Contains(out, "the substrate does not answer") || !strings.Contains(out, "the substrate answers again after") {
		t.Errorf("the events do not say what ferry waited for:\n%s", out)
	}
	expectAllOn(t, cl, "2.0.0")
}

// clusterState reads kv's /cluster of one member: its leader and term.
func clusterState(t *testing.T, addr string) (leader string, term uint64) {
	t.Helper()
	var st struct {
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
	}
	resp, err := http.Get("http://" + addr + "/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Leader, st.Term
}

// TestLeaderMovesOnce: with the raft leader on the first member at the
// start, the kv phase moves leadership once (the leader is a role, and
// goes last): the events show one change of leader, and raft's own
// term grows by one.
func TestLeaderMovesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "2.0.0")
	kv1 := cl.Addresses["kv-1"]
	// Hand leadership around until kv-1 holds it.
	for i := 0; ; i++ {
		leader, _ := clusterState(t, kv1)
		if leader == "kv-1" {
			break
		}
		if i == 20 {
			t.Fatalf("kv-1 did not become the leader in 20 hand-overs (leader %s)", leader)
		}
		resp, err := http.Post("http://"+cl.Addresses[leader]+"/admin/step-down", "", nil)
		if err == nil {
			resp.Body.Close()
		}
		waitFor(t, 10*time.Second, "a leader", func() bool { l, _ := clusterState(t, kv1); return l != "" && l != leader })
	}
	_, before := clusterState(t, kv1)
	if out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q"); code != 0 {
		t.Fatalf("the upgrade: exit %d\n%s", code, out)
	}
	leader, after := clusterState(t, kv1)
	u, _ := status(t, cl)
	evs := eventsOf(t, cl, u.ID)
	var holders []string
	var order []string
	for _, ev := range evs {
		if ev.Kind == "role" && strings.HasSuffix(ev.Message, "holds the role leader") && !strings.Contains(ev.Message, "no longer") {
			holders = append(holders, ev.Member)
		}
		if ev.Kind == "batch" && strings.HasPrefix(ev.Message, "kv batch") && !strings.Contains(ev.Message, " done ") {
			order = append(order, ev.Message)
		}
	}
	t.Logf("kv batches: %s; leaders seen: %v; raft term %d → %d; leader now %s", strings.Join(order, " | "), holders, before, after, leader)
	if len(order) != 3 || !strings.Contains(order[2], "kv-1") {
		t.Errorf("the leader kv-1 did not go last: %v", order)
	}
	if len(holders) != 2 || holders[0] != "kv-1" {
		t.Errorf("leadership moved %d times (leaders seen %v), want once", len(holders)-1, holders)
	}
	if after-before != 1 {
		t.Errorf("raft's term went from %d to %d: %d elections, want 1", before, after, after-before)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
