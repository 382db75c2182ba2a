package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// record reads the current upgrade straight from the store (faster
// than a ferry process, to catch a short step).
func record(t *testing.T, cl *demo.Cluster) (upgrade.Upgrade, bool) {
	t.Helper()
	st, err := store.OpenReadOnly(cl.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, ok, err := st.Current()
	if err != nil {
		return upgrade.Upgrade{}, false // being written: asked again
	}
	return u, ok
}

// waitStep waits (polling the store every 20ms, at most a minute) for
// a member of comp to reach step, and names it.
func waitStep(t *testing.T, cl *demo.Cluster, bg *background, comp string, st upgrade.MemberStep) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		bg.alive(t)
		if u, ok := record(t, cl); ok {
			for n, m := range u.Members {
				if m.Component == comp && m.Step == st {
					return n
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s member %s within a minute", comp, st)
	return ""
}

// everyStopSeen fails the test unless each member upgraded by upgrade
// id has a stop action done and a time down in the events: a leader's
// graceful stop is never skipped (its pre_stop hook makes it step down
// and answer 503 on /ready, which is not its stop).
func everyStopSeen(t *testing.T, cl *demo.Cluster, u upgrade.Upgrade) {
	t.Helper()
	evs := eventsOf(t, cl, u.ID)
	stopped, down := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		switch {
		case ev.Kind == "action" && strings.HasPrefix(ev.Message, "stop "+ev.Member+": done"):
			stopped[ev.Member] = true
		case ev.Kind == "down":
			down[ev.Member] = true
		}
	}
	for n, m := range u.Members {
		if m.Component != "kv" && m.Component != "api" {
			continue
		}
		if !stopped[n] || !down[n] {
			t.Errorf("%s: stop action done %v, time down said %v; want both", n, stopped[n], down[n])
		}
	}
}

// TestFerryAwayLongerThanTheDeadline takes ferry itself away for longer
// than a member's deadline (8s), twice: SIGKILL while a kv member
// starts, 12s down, then 'ferry upgrade resume'; and SIGSTOP while a kv
// member soaks, 12s, then SIGCONT. ferry's own downtime is not the
// member's failure: every deadline moves by the time ferry could not
// check, each member in flight is checked again before any verdict,
// and both upgrades complete. The second upgrade, never killed, shows
// every member's stop and time down.
func TestFerryAwayLongerThanTheDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 8 * time.Second, GateDeadline: 30 * time.Second}, "1.0.1")
	const away = 12 * time.Second

	// SIGKILL while a kv member starts, 12s down, resume.
	bg := startFerry(t, cl, "upgrade", "start", "--to", "1.0.1", "-q")
	m := waitStep(t, cl, bg, "kv", upgrade.StepStarting)
	_ = bg.cmd.Process.Signal(syscall.SIGKILL)
	<-bg.exited
	t.Logf("ferry killed while %s started; down for %s", m, away)
	time.Sleep(away) // the scenario: ferry down for longer than the deadline
	if out, code := ferry(t, cl, "upgrade", "resume", "-q"); code != 0 {
		u, _ := status(t, cl)
		t.Fatalf("resume after ferry was down %s: exit %d (%s: %s)\n%s", away, code, u.State, u.Reason, out)
	}
	u, _ := status(t, cl)
	if u.State != upgrade.StateCompleted || u.Rollback != nil {
		t.Fatalf("after the kill: ended %s (%s)", u.State, u.Reason)
	}
	expectAllOn(t, cl, "1.0.1")
	if out, _ := ferry(t, cl, "events"); !strings.Contains(out, "ferry could not check for") {
		t.Errorf("the events do not say ferry could not check:\n%s", out)
	}

	// SIGSTOP while a kv member soaks, 12s, SIGCONT.
	bg = startFerry(t, cl, "upgrade", "start", "--to", "1.0.0", "-q")
	m = waitStep(t, cl, bg, "kv", upgrade.StepSoaking)
	_ = bg.cmd.Process.Signal(syscall.SIGSTOP)
	t.Logf("ferry stopped while %s soaked, for %s", m, away)
	time.Sleep(away) // the scenario: ferry stopped for longer than the deadline
	_ = bg.cmd.Process.Signal(syscall.SIGCONT)
	if code, out := bg.wait(t); code != 0 {
		u, _ := status(t, cl)
		t.Fatalf("the upgrade stopped for %s: exit %d (%s: %s)\n%s", away, code, u.State, u.Reason, out)
	}
	u, _ = status(t, cl)
	if u.State != upgrade.StateCompleted || u.Rollback != nil {
		t.Fatalf("after the stop: ended %s (%s)", u.State, u.Reason)
	}
	expectAllOn(t, cl, "1.0.0")
	everyStopSeen(t, cl, u)
}

// TestHookFailureNamed gives kv a pre_stop hook whose endpoint refuses
// the connection: the first kv member is never stopped, and the
// upgrade's reason names the hook list, its call and its error, not the
// health of a member that ran healthy all along.
func TestHookFailureNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 4 * time.Second, GateDeadline: 30 * time.Second}, "1.0.1")
	desc := readFile(t, cl.File)
	refused := strings.Replace(desc, `http://{{.Address}}/admin/step-down`, `http://127.0.0.1:9/admin/step-down`, 1)
	if refused == desc {
		t.Fatal("the description has no kv pre_stop hook to point elsewhere")
	}
	writeFile(t, cl.File, refused)
	out, code := ferry(t, cl, "upgrade", "start", "--to", "1.0.1", "-q")
	u, _ := status(t, cl)
	t.Logf("exit %d, %s: %s", code, u.State, u.Reason)
	if code == 0 || !u.RollingBack() {
		t.Fatalf("exit %d, ended %s, want a rollback\n%s", code, u.State, out)
	}
	for _, want := range []string{"pre_stop hooks of kv-", "did not succeed within healthy_deadline", "POST http://127.0.0.1:9/admin/step-down", "connection refused"} {
		if !strings.Contains(u.Reason, want) {
			t.Errorf("reason %q does not say %q", u.Reason, want)
		}
	}
	if strings.Contains(u.Reason, "not healthy") {
		t.Errorf("reason %q blames the member's health", u.Reason)
	}
	expectAllOn(t, cl, "1.0.0")
}
