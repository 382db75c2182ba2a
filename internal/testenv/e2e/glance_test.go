package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/cpuburn"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestGlanceZeroImpactGate is Glance's zero-downtime and zero-impact
// gate (glance-rolling-upgrades.txt) on the sample cluster, on a machine
// loaded on purpose: a CPU burner (2 goroutines spinning in seeded
// random bursts) runs from before the baseline to the end. ferry
// upgrades 1.0.0 to 2.0.0 in Glance's order under 400 requests/s,
// expand, the kv store (the database), the online data migration, the
// api members restarted one batch at a time each drained from the load
// balancer first, finalize, contract, and the verdict against a 10 s
// baseline (thresholds from its measured noise) is zero downtime and
// zero impact. Then, on the same cluster under the same traffic and
// burner, every member is restarted the naive way (killed and started,
// no drain, no wait) and the same verdict says downtime or impact.
func TestGlanceZeroImpactGate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	// A bound for a run that hangs, not a measure: with two more cores'
	// worth of busy loops at load 30-46, the upgrade alone took 107 s
	// and the whole run passed 150 s.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	burn := cpuburn.Config{Workers: 2, Seed: seed}
	t.Logf("traffic seed %d; burner seed %d", seed, seed)
	var mu sync.Mutex
	var events []store.Event
	var out strings.Builder
	began := time.Now()
	rep, err := demo.Run(ctx, demo.Options{Dir: t.TempDir(), Artifacts: filepath.Dir(bin.sample["1.0.0"]), Self: bin.ferry, Direct: true,
		Rate: 400, Concurrency: 8, Seed: seed, Out: &out, Migrations: true, Flow: demo.GlanceFlow, NaiveRestart: true, Burn: &burn,
		OnEvent: func(ev store.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, tail(out.String(), 40))
	}
	t.Logf("the whole run took %s; %s: %d bursts, %.1fs spun", time.Since(began).Round(time.Second), rep.Burn.Config, rep.Burn.Bursts, rep.Burn.BusyS)
	if err := rep.Completed(); err != nil {
		t.Fatalf("ferry's upgrade: %v\n%s", err, tail(out.String(), 40))
	}
	if rep.Burn == nil || rep.Burn.Bursts == 0 {
		t.Errorf("the burner did not burn: %+v", rep.Burn)
	}

	// The stages in Glance's order, from the events.
	mu.Lock()
	evs := slices.Clone(events)
	mu.Unlock()
	states := expectStates(t, evs, "expanding", "upgrading-kv", "upgraded-kv", "migrating", "upgrading-api", "upgraded-api", "finalizing", "contracting", "completed")
	t.Logf("states: %s", strings.Join(states, " → "))
	checkDrainedInTurn(t, evs, []string{"api-1", "api-2", "api-3", "api-4"})

	// ferry's verdict: judged (not waved through as too short), and clean.
	logVerdict(t, "ferry's upgrade", rep.Verdict)
	// A window past a threshold as estimated but not at its interval's
	// lower end (unconfirmed) was long and busy enough to judge.
	judged := len(rep.Verdict.Windows) - rep.Verdict.Insufficient + rep.Verdict.Unconfirmed
	if !rep.Verdict.Noise.Enough || judged < 6 {
		t.Errorf("ferry's upgrade: %d windows judged of %d (noise: %s); want every batch's (6) at least", judged, len(rep.Verdict.Windows), rep.Verdict.Noise.Reason)
	}
	if !rep.Verdict.ZeroDowntime || !rep.Verdict.ZeroImpact {
		t.Errorf("ferry's upgrade under the burner: zero downtime %v, zero impact %v: %s", rep.Verdict.ZeroDowntime, rep.Verdict.ZeroImpact, rep.Verdict.Reason)
	}

	// The naive restart, judged the same way in the same run.
	n := rep.NaiveRestart
	if n == nil {
		t.Fatal("no naive restart in the report")
	}
	logVerdict(t, "the naive restart", n.Verdict)
	t.Logf("the naive restart (%s): %d requests, %d failed, p99 %.1fms (baseline %.1fms), healthy again after %.1fs",
		strings.Join(n.Members, ", "), n.Requests.Total, n.Requests.Failed, n.Requests.P99MS, n.Baseline.P99MS, n.DurationS)
	if len(n.Members) != 7 {
		t.Errorf("the naive restart restarted %v, want the 7 members", n.Members)
	}
	if n.Verdict.ZeroDowntime && n.Verdict.ZeroImpact {
		t.Errorf("the naive restart judged zero downtime and zero impact: %s", n.Verdict.Reason)
	}
}

// checkDrainedInTurn checks from the events that each member was
// drained (its pre_stop hook, the load balancer's drain, done) before
// it was stopped.
func checkDrainedInTurn(t *testing.T, evs []store.Event, members []string) {
	t.Helper()
	for _, m := range members {
		drained, stopped := -1, -1
		for i, ev := range evs {
			switch {
			case drained < 0 && ev.Kind == "action" && strings.HasPrefix(ev.Message, "pre_stop hooks of "+m+": done") && strings.Contains(ev.Message, "/admin/backends/"+m+"/drain"):
				drained = i
			case stopped < 0 && ev.Kind == "action" && strings.HasPrefix(ev.Message, "stop "+m+": done"):
				stopped = i
			}
		}
		if drained < 0 || stopped < 0 || drained > stopped {
			t.Errorf("%s: drained at event %d, stopped at event %d: want drained, then stopped", m, drained, stopped)
		}
	}
}

func logVerdict(t *testing.T, what string, v impact.Verdict) {
	t.Helper()
	t.Logf("%s: zero downtime %v, zero impact %v: %s", what, v.ZeroDowntime, v.ZeroImpact, v.Reason)
	t.Logf("  noise: %s", v.Noise.Reason)
	fixed, point := 0, 0 // what the fixed 1.5× p99 rule alone, and the point estimates against the thresholds, would have called impacted
	for _, w := range v.Windows {
		ctl := "no control"
		if c := w.Control; c != nil {
			ctl = fmt.Sprintf("control p50 %.2f× p99 %.2f× rate %.2f×", c.P50Ratio, c.P99Ratio, c.RateRatio)
		}
		p99 := fmt.Sprintf("%.2f×", w.P99Ratio)
		if ci := w.P99RatioCI; ci != nil {
			p99 += " " + ci.Range()
		}
		t.Logf("  %-30s %5d requests %3d failed  p50 %6.1fms %.2f×  p99 %7.1fms %s (above %.2f×)  rate %.2f× (in flight %.2f×)  p %.2g  (%s)  %s",
			w.Name, w.Requests, w.Failed, w.P50MS, w.P50Ratio, w.P99MS, p99, w.P99Threshold, w.RateRatio, w.InFlightRatio, w.PValue, ctl, w.ZeroImpact)
		if w.ZeroImpact != impact.Insufficient && w.PValue < v.Policy.Alpha && w.P99Ratio > 1.5 {
			fixed++
		}
		if pointRule(v.Policy, w) == impact.No {
			point++
		}
	}
	t.Logf("  windows the fixed 1.5× p99 rule would have called impacted: %d; the thresholds without the interval and the rate without the requests in flight: %d; now: %d impacted, %d unconfirmed",
		fixed, point, countImpact(v, impact.No), v.Unconfirmed)
}

func countImpact(v impact.Verdict, what string) int {
	n := 0
	for _, w := range v.Windows {
		if w.ZeroImpact == what {
			n++
		}
	}
	return n
}
