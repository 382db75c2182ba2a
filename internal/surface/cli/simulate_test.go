package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSimulateReplays: `ferry simulate --seed N` prints the seed and how
// to replay it, the invariants with their checks and the upgrade's
// virtual wall time, exits 0 when none broke, and prints the same run
// again for the same seed (all but the real time it took).
func TestSimulateReplays(t *testing.T) {
	args := []string{"simulate", "-f", "../../substrate/sim/testdata/cluster.yaml", "--to", "2.0.0", "--seed", "5"}
	took := regexp.MustCompile(`\(simulated in [^)]*\)`)
	var outs []string
	for range 2 {
		r := run(t, 2*time.Minute, ferryCmd("", args...))
		if r.code != 0 {
			t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"simulation: seed 5 (--seed 5 replays it), 15 members", "INVARIANT", "quorum (the strategy's)", "ended completed: the upgrade would take "} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("the output lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "BROKEN") {
			t.Fatalf("an invariant broke, yet exit 0:\n%s", r.stdout)
		}
		outs = append(outs, took.ReplaceAllString(r.stdout, ""))
	}
	if outs[0] != outs[1] {
		t.Errorf("seed 5 ran twice differently:\n%s\n---\n%s", outs[0], outs[1])
	}
}

// TestSimulateSwitchover: 'ferry simulate' on a description with an
// active/standby pair shows the standby's batch, the switchover begun
// and done, then the former active's batch, and the invariant "one
// switchover at a time" checked and held.
func TestSimulateSwitchover(t *testing.T) {
	r := run(t, 2*time.Minute, ferryCmd("", "simulate", "-f", "../../substrate/sim/testdata/standby.yaml", "--to", "2.0.0", "--seed", "1"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	order := regexp.MustCompile(`(?s)controller batch 1: controller-0 .*controller batch 2: switching-over from controller-1 to controller-0.*controller batch 2: switching-over done in .*controller batch 2 done in `)
	held := regexp.MustCompile(`one switchover at a time +[1-9][0-9]* +held`)
	if !order.MatchString(r.stdout) || !held.MatchString(r.stdout) || !strings.Contains(r.stdout, "ended completed") {
		t.Fatalf("the simulation does not show the switchover between the controllers' batches, or the invariant held:\n%s", r.stdout)
	}
}
