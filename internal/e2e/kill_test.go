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

	"github.com/ferry-upgrade/ferry/internal/demo"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// TestKillNineResumes kills the ferry process with SIGKILL at random
// moments of upgrades back and forth between 1.0.0 and 1.0.1 (an
// upgrade, then a patch downgrade), and
// starts it again each time with 'ferry upgrade resume'. Every upgrade
// must complete with every member on its target; the observer must
// never see more members of a component down at once than its policy
// allows (which for kv also means a quorum always running); every
// acknowledged write must read back.
//
// FERRY_KILL_POINTS sets how many kills (default 20; 'make faults' runs
// more), FERRY_KILL_SEED the seed (default: the time, printed).
func TestKillNineResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	points := envInt(t, "FERRY_KILL_POINTS", 20)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FERRY_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FERRY_KILL_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (FERRY_KILL_SEED=%d reproduces the kill points), %d kills", seed, seed, points)
	rng := rand.New(rand.NewPCG(seed, 1))

	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "1.0.1")
	stopTraffic := clientTraffic(cl, seed)
	obs := watch(cl)

	const perUpgrade = 5
	kills, target := 0, "1.0.1"
	for kills < points {
		n := min(perUpgrade, points-kills)
		prev, _ := status(t, cl)
		start := []string{"upgrade", "start", "--to", target, "-q"}
		args := start
		for i := 0; i < n; i++ {
			// Random moments: each ferry process lives 50ms to 4s, so
			// that the kills fall from planning to the last member.
			delay := time.Duration(50+rng.IntN(3950)) * time.Millisecond
			if killed := runAndKill(t, cl, args, delay); killed {
				kills++
			}
			if u, ok := status(t, cl); ok && u.ID != prev.ID {
				args = []string{"upgrade", "resume", "-q"}
			} else {
				args = start // killed before it recorded the upgrade
			}
		}
		if args[1] == "start" {
			if out, code := ferry(t, cl, start...); code != 0 {
				t.Fatalf("upgrade start --to %s: exit %d\n%s", target, code, out)
			}
		}
		out, code := ferry(t, cl, "upgrade", "resume", "-q")
		u, ok := status(t, cl)
		if !ok || u.State != upgrade.StateCompleted || u.To != target {
			t.Fatalf("after %d kills the upgrade to %s did not complete (exit %d): %+v\n%s", kills, target, code, u.State, out)
		}
		expectAllOn(t, cl, target)
		t.Logf("upgrade %s → %s completed after %d kills so far", u.From, target, kills)
		if target == "1.0.1" {
			target = "1.0.0"
		} else {
			target = "1.0.1"
		}
	}
	obs.check(t)
	checkWrites(t, cl, stopTraffic())
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

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}
