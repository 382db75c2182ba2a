package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestKillNineResumes kills the ferry process with SIGKILL in storms
// (each ferry process lives 0.3 to 4s, seeded) during upgrades back
// and forth between 1.0.0 and 1.0.1 (an upgrade, then a patch
// downgrade), starting it again each time with 'ferry upgrade resume'
// until the upgrade ends. Every upgrade must complete with every
// member on its target (a resume goes on where the last process left
// off: no soak restarted, no deadline run out by ferry's own
// downtime); the observer must never see more members of a component
// down at once than its policy allows (which for kv also means a
// quorum always running); every acknowledged write must read back.
//
// FERRY_KILL_POINTS sets how many kills at least (default 20; 'make
// faults' runs more), FERRY_KILL_SEED the seed (default: the time,
// printed). FERRY_KILL_AWAY (default 0; 'make faults' sets 1) adds that
// many pairs of upgrades during which ferry is away longer than a
// member's deadline: SIGKILLed while a kv member starts and resumed
// after 40s, and SIGSTOPped while one soaks and continued after 40s.
func TestKillNineResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	points := envInt(t, "FERRY_KILL_POINTS", 20)
	aways := envCount(t, "FERRY_KILL_AWAY", 0)
	seed := killSeed(t)
	t.Logf("seed %d (FERRY_KILL_SEED=%d reproduces the kill points), %d kills at least, %d pairs of long absences", seed, seed, points, aways)
	rng := rand.New(rand.NewPCG(seed, 1))

	const deadline = 30 * time.Second
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: deadline, GateDeadline: 30 * time.Second}, "1.0.1")
	stopTraffic := clientTraffic(cl, seed)
	obs := watch(cl)

	target := "1.0.1"
	next := func() {
		if target == "1.0.1" {
			target = "1.0.0"
		} else {
			target = "1.0.1"
		}
	}
	kills := 0
	for kills < points {
		kills += killStorm(t, cl, target, func() time.Duration { return time.Duration(300+rng.IntN(3700)) * time.Millisecond })
		t.Logf("upgrade to %s completed after %d kills so far", target, kills)
		next()
	}
	for i := 0; i < aways; i++ {
		for _, stop := range []bool{false, true} {
			awayPastDeadline(t, cl, target, deadline+10*time.Second, stop)
			next()
		}
	}
	obs.check(t)
	checkWrites(t, cl, stopTraffic())
}

// killStorm runs the upgrade to target, SIGKILLing ferry after the
// delay next returns each time (TestKillNineResumes: 0.3 to 4 s) and
// resuming it, until the upgrade ends; a delay of 0 lets that run go to
// its end. The upgrade must have completed. It returns how many times
// ferry was killed.
func killStorm(t *testing.T, cl *demo.Cluster, target string, next func() time.Duration) int {
	t.Helper()
	const most = 80
	prev, _ := status(t, cl)
	start := []string{"upgrade", "start", "--to", target, "-q"}
	args, kills := start, 0
	for {
		if delay := next(); delay <= 0 {
			ferry(t, cl, args...)
		} else if runAndKill(t, cl, args, delay) {
			kills++
		}
		u, ok := status(t, cl)
		switch {
		case !ok || u.ID == prev.ID:
			args = start // killed before it recorded the upgrade
		case u.State.Terminal():
			if u.State != upgrade.StateCompleted || u.To != target {
				t.Fatalf("after %d kills the upgrade to %s ended %s: %s", kills, target, u.State, u.Reason)
			}
			expectAllOn(t, cl, target)
			return kills
		default:
			args = []string{"upgrade", "resume", "-q"}
		}
		if kills > most {
			t.Fatalf("the upgrade to %s did not end after %d kills: %s (%s)", target, kills, u.State, u.Waiting)
		}
	}
}

// awayPastDeadline runs the upgrade to target and takes ferry away for
// longer than a member's deadline: SIGKILL while a kv member starts,
// then a resume after away; or SIGSTOP while one soaks, SIGCONT after
// away. The upgrade must complete.
func awayPastDeadline(t *testing.T, cl *demo.Cluster, target string, away time.Duration, stop bool) {
	t.Helper()
	bg := startFerry(t, cl, "upgrade", "start", "--to", target, "-q")
	if stop {
		m := waitStep(t, cl, bg, "kv", upgrade.StepSoaking)
		_ = bg.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(away) // the fault itself: ferry stopped past the deadline
		_ = bg.cmd.Process.Signal(syscall.SIGCONT)
		code, out := bg.wait(t)
		t.Logf("ferry stopped for %s while %s soaked: exit %d", away, m, code)
		if code != 0 {
			t.Logf("%s", out)
		}
	} else {
		m := waitStep(t, cl, bg, "kv", upgrade.StepStarting)
		_ = bg.cmd.Process.Signal(syscall.SIGKILL)
		<-bg.exited
		time.Sleep(away) // the fault itself: ferry down past the deadline
		out, code := ferry(t, cl, "upgrade", "resume", "-q")
		t.Logf("ferry killed while %s started, down %s: resume exit %d", m, away, code)
		if code != 0 {
			t.Logf("%s", out)
		}
	}
	u, _ := status(t, cl)
	if u.State != upgrade.StateCompleted || u.To != target {
		t.Fatalf("the upgrade to %s with ferry away %s ended %s: %s", target, away, u.State, u.Reason)
	}
	expectAllOn(t, cl, target)
}

// runAndKill runs ferry with args and sends it SIGKILL after delay; it
// reports whether ferry was still running then (a kill point).
func runAndKill(t *testing.T, cl *demo.Cluster, args []string, delay time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.ferry, append([]string{"-f", cl.File, "--data-dir", cl.DataDir}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
		return false // it finished before its kill point
	case <-time.After(delay):
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	return true
}

// killSeed is FERRY_KILL_SEED, or the time when it is not set: the
// seed of the moments ferry is killed at.
func killSeed(t *testing.T) uint64 { t.Helper(); return envSeed(t, "FERRY_KILL_SEED") }

// envSeed is the seed the environment variable name gives, else the
// time.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := envCount(t, name, def)
	if v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, os.Getenv(name))
	}
	return v
}

// envCount is a count from the environment, 0 allowed.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: want a count", name, s)
	}
	return v
}
