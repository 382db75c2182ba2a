package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

func TestBackoffNext(t *testing.T) {
	b := backoff{min: 200 * time.Millisecond, max: 10 * time.Second, reset: 10 * time.Second}
	for _, c := range []struct {
		name      string
		last, ran time.Duration
		want      time.Duration
	}{
		{"first restart", 0, 0, 200 * time.Millisecond},
		{"first restart after a long run", 0, time.Hour, 200 * time.Millisecond},
		{"doubles", 200 * time.Millisecond, 0, 400 * time.Millisecond},
		{"doubles again", 400 * time.Millisecond, time.Second, 800 * time.Millisecond},
		{"capped", 6400 * time.Millisecond, 0, 10 * time.Second},
		{"stays capped", 10 * time.Second, 9 * time.Second, 10 * time.Second},
		{"reset after 10s of running", 10 * time.Second, 10 * time.Second, 200 * time.Millisecond},
		{"reset after longer", 800 * time.Millisecond, time.Minute, 200 * time.Millisecond},
	} {
		if got := b.next(c.last, c.ran); got != c.want {
			t.Errorf("%s: next(%v, %v) = %v, want %v", c.name, c.last, c.ran, got, c.want)
		}
	}
}

// starts reads the member program's -starts file: one start time per
// process, in order.
func starts(t *testing.T, file string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []time.Time
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var pid int
		var ns int64
		if _, err := fmt.Sscan(l, &pid, &ns); err == nil {
			out = append(out, time.Unix(0, ns))
		}
	}
	return out
}

// TestRestartOnFailure runs a member that exits at once: the agent
// restarts it with a growing delay, counts the restarts, and gives up
// the pending restart when told to stop.
func TestRestartOnFailure(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	const lo, hi = 100 * time.Millisecond, 800 * time.Millisecond
	a := startAgentConfig(t, Config{Dir: t.TempDir(), restartMin: lo, restartMax: hi, restartReset: time.Minute})
	startsFile := filepath.Join(t.TempDir(), "starts")

	sp := spec(p.V1, tag, "-exit-after=0s", "-exit-code=1", "-starts="+startsFile)
	sp.Restart = wire.RestartOnFailure
	first := a.put("loop", sp)
	if first.Restart != wire.RestartOnFailure || first.Instance != 1 || first.Restarts != 0 {
		t.Fatalf("first start: %+v", first)
	}
	st := a.waitStatus("loop", 20*time.Second, func(s wire.Status) bool { return s.Restarts >= 5 })
	if st.Instance != st.Restarts+1 {
		t.Errorf("instance %d after %d restarts, want %d", st.Instance, st.Restarts, st.Restarts+1)
	}
	// Each restart came at least its delay after the start before it:
	// 100, 200, 400, 800, 800 ms (the process itself runs a few ms).
	// The last process may not have written its start yet.
	var ts []time.Time
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		ts = starts(t, startsFile)
		return len(ts) >= 6, fmt.Sprintf("%d starts recorded, want 6 or more", len(ts))
	}); msg != "" {
		t.Fatal(msg)
	}
	want := lo
	for i := 1; i < 6; i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < want {
			t.Errorf("start %d came %v after start %d, want at least %v", i+1, gap, i, want)
		}
		want = min(want*2, hi)
	}

	// A stop gives up the pending restart, whenever it comes.
	stopped := a.stop("loop", 0)
	if stopped.NextRestart != nil || stopped.Running {
		t.Errorf("after stop: %+v", stopped)
	}
	n := len(starts(t, startsFile))
	after := a.get("loop")
	// Wait past the longest delay a pending restart could have had.
	time.Sleep(2 * hi)
	if got := len(starts(t, startsFile)); got != n {
		t.Errorf("%d starts after the stop", got-n)
	}
	if g := a.get("loop"); g.Running || g.Instance != after.Instance || g.Restarts != after.Restarts {
		t.Errorf("after the stop: %+v, then %+v", after, g)
	}
	if live := agenttest.Tagged(tag); len(live) != 0 {
		t.Errorf("live members after the stop: %v", live)
	}

	// A PUT starts it again, its restarts counted from 0.
	ok := spec(p.V1, tag)
	ok.Restart = wire.RestartOnFailure
	re := a.put("loop", ok)
	if !re.Running || re.Restarts != 0 || re.Instance != after.Instance+1 {
		t.Errorf("PUT after the stop: %+v", re)
	}
}

// TestRestartPolicies: a member that exits with status 0 on its own
// is restarted too (a server that exits is down); one killed by a
// signal is; policy no, and a stop, restart nothing; a PUT with the same
// artifact changes the policy without a restart.
func TestRestartPolicies(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgentConfig(t, Config{Dir: t.TempDir(), restartMin: 50 * time.Millisecond, restartMax: 200 * time.Millisecond})

	zero := spec(p.V1, tag, "-exit-after=200ms", "-exit-code=0")
	zero.Restart = wire.RestartOnFailure
	a.put("zero", zero)
	st := a.waitStatus("zero", 10*time.Second, func(s wire.Status) bool { return s.Restarts >= 1 })
	if st.Instance < 2 {
		t.Errorf("after a restart: %+v", st)
	}
	a.stop("zero", 0)

	// Policy no: the exit is recorded, nothing more.
	no := spec(p.V1, tag, "-exit-after=0s", "-exit-code=2")
	a.put("no", no)
	st = a.waitStatus("no", 10*time.Second, func(s wire.Status) bool { return !s.Running })
	if st.Restart != wire.RestartNo || st.Restarts != 0 || st.Instance != 1 || st.NextRestart != nil {
		t.Errorf("policy no, after the exit: %+v", st)
	}

	// SIGKILL from outside is a failure.
	killed := spec(p.V1, tag)
	a.put("killed", killed)
	killedOn := killed
	killedOn.Restart = wire.RestartOnFailure
	// The same artifact with another policy: no restart, the policy changes.
	st0 := a.put("killed", killedOn)
	if st0.Instance != 1 || st0.Restart != wire.RestartOnFailure {
		t.Fatalf("PUT changing the policy: %+v", st0)
	}
	syscall.Kill(st0.PID, syscall.SIGKILL)
	st = a.waitStatus("killed", 10*time.Second, func(s wire.Status) bool { return s.Running && s.Instance == 2 })
	if st.Restarts != 1 || st.PID == st0.PID {
		t.Errorf("after SIGKILL: %+v", st)
	}
	// A graceful stop is not a failure.
	stopped := a.stop("killed", 5000)
	if stopped.Running || stopped.NextRestart != nil {
		t.Errorf("after stop: %+v", stopped)
	}
	if g := a.get("killed"); g.Running || g.Instance != 2 {
		t.Errorf("a stopped member was restarted: %+v", g)
	}
}

// TestRestartSurvivesAgentRestart: the policy is in the state file. A
// re-adopted member that vanishes is restarted by the new agent, and
// so is one that died while no agent ran.
func TestRestartSurvivesAgentRestart(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()

	a1 := spawnAgent(t, p.Agent, dir)
	sp := spec(p.V1, tag)
	sp.Restart = wire.RestartOnFailure
	st := a1.status("PUT", "/v1/members/kv", sp)
	syscall.Kill(-a1.cmd.Process.Pid, syscall.SIGKILL)
	<-a1.exited

	a2 := spawnAgent(t, p.Agent, dir)
	if g := a2.status("GET", "/v1/members/kv", nil); !g.Running || g.PID != st.PID || g.Restart != wire.RestartOnFailure {
		t.Fatalf("re-adopted: %+v", g)
	}
	syscall.Kill(st.PID, syscall.SIGKILL) // not a child of a2: found gone by polling
	var g wire.Status
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		g = a2.status("GET", "/v1/members/kv", nil)
		return g.Running && g.Instance == 2, fmt.Sprintf("%+v", g)
	}); msg != "" {
		t.Fatalf("adopted member not restarted: %s", msg)
	}
	if g.Restarts != 1 || g.PID == st.PID {
		t.Errorf("after the restart: %+v", g)
	}

	// Dies while no agent runs: the next agent restarts it at once.
	syscall.Kill(-a2.cmd.Process.Pid, syscall.SIGKILL)
	<-a2.exited
	syscall.Kill(g.PID, syscall.SIGKILL)
	waitGone(t, g.PID)
	a3 := spawnAgent(t, p.Agent, dir)
	var g3 wire.Status
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		g3 = a3.status("GET", "/v1/members/kv", nil)
		return g3.Running && g3.Instance == 3, fmt.Sprintf("%+v", g3)
	}); msg != "" {
		t.Fatalf("member that died while no agent ran: %s", msg)
	}
	if g3.Restarts != 2 {
		t.Errorf("restarts %d, want 2", g3.Restarts)
	}
	if live := agenttest.Tagged(tag); len(live) != 1 || live[0] != g3.PID {
		t.Errorf("live members %v, want just %d", live, g3.PID)
	}
	a3.status("POST", "/v1/members/kv/stop", nil)
}

// TestPendingRestartSurvivesAgentRestart: an agent that died with a
// restart pending (its state file says so) is followed by one that
// makes it.
func TestPendingRestartSurvivesAgentRestart(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()
	a := startAgent(t, dir)
	sp := spec(p.V1, tag)
	sp.Restart = wire.RestartOnFailure
	st := a.put("db", sp)
	a.stop("db", 0)
	a.close()

	path := filepath.Join(dir, "state", "db.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	r.RestartPending, r.Detail = true, "exited with status 1"
	b, _ = json.Marshal(r)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	a2 := startAgent(t, dir)
	g := a2.waitStatus("db", 10*time.Second, func(s wire.Status) bool { return s.Running })
	if g.Instance != st.Instance+1 || g.Restarts != 1 || g.Version != "1.0.0" {
		t.Errorf("pending restart made by the next agent: %+v", g)
	}
}
