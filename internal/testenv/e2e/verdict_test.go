package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/cpuburn"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestVerdictOnRecordedTraffic is the zero-impact verdict's A/A test on
// real traffic: the sample cluster under the Glance gate's load (400
// requests/s asked, 8 clients, the control at 50/s), its CPU burner and
// other work beside it (two more goroutines spinning 1–3 s at a time
// with 0.5–1.5 s pauses, as the other jobs on this machine do when the
// gate saw a false impacted at load 14), and no upgrade at all, for
// FERRY_VERDICT_AA seconds (it runs only when that is set: 120 takes
// about 3 minutes). Every stretch of the
// recording, one second apart, is judged as a 10 s baseline and a
// window of 2 or 4 s after it: any "impacted" is false. It counts them
// for the rule this verdict replaced (a ratio as estimated past its
// threshold) and for the verdict (the interval's lower end past it),
// then multiplies the window's latencies by 3 (a real impact) and
// counts what each catches.
func TestVerdictOnRecordedTraffic(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("FERRY_VERDICT_AA"))
	if secs <= 0 {
		t.Skip("set FERRY_VERDICT_AA to the seconds of traffic to record (e.g. 120)")
	}
	cl := startCluster(t, demo.ClusterOptions{})
	seed := uint64(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	burn := cpuburn.Start(ctx, cpuburn.Config{Workers: 2, Seed: seed})
	other := cpuburn.Start(ctx, cpuburn.Config{Workers: 2, Seed: seed + 1, Burst: 2 * time.Second, Pause: time.Second})
	t.Logf("traffic seed %d; %s; other work: %s", seed, burn.Config(), other.Config())
	rec, done := traffic.Start(ctx, traffic.Config{BaseURL: cl.LB, Concurrency: 8, Rate: 400, WriteShare: 0.5, Seed: seed})
	ctl, ctlDone := traffic.Start(ctx, traffic.Control(cl.LBAdmin, "/admin/backends", seed))
	began := time.Now()
	timer := time.NewTimer(time.Duration(secs) * time.Second)
	<-timer.C
	cancel()
	<-done
	<-ctlDone
	st, ot := burn.Stop(), other.Stop()
	load, _ := os.ReadFile("/proc/loadavg")
	svc, control := rec.Samples(), ctl.Samples()
	t.Logf("recorded %s: %d requests (%.0f/s), %d control requests; burner: %d bursts, %.1fs spun; other work: %.1fs spun; load average %s",
		time.Since(began).Round(time.Second), len(svc), float64(len(svc))/float64(secs), len(control), st.Bursts, st.Busy.Seconds(), ot.Busy.Seconds(), load)

	type count struct{ windows, before, now, unconfirmed int }
	for _, w := range []time.Duration{2 * time.Second, 4 * time.Second} {
		for _, k := range []float64{1, 3} {
			var c count
			for from := began.Add(2 * time.Second); !from.Add(10*time.Second + w).After(began.Add(time.Duration(secs) * time.Second)); from = from.Add(time.Second) {
				baseTo := from.Add(10 * time.Second)
				win := timeline.Window{Name: "window", Kind: timeline.KindBatch, From: baseTo, To: baseTo.Add(w)}
				v := impact.JudgeWithControl(slowed(svc, win, k), control, from, baseTo, []timeline.Window{win}, impact.Policy{})
				wv := v.Windows[0]
				c.windows++
				if pointRule(v.Policy, wv) == impact.No {
					c.before++
				}
				switch wv.ZeroImpact {
				case impact.No:
					c.now++
				case impact.Insufficient:
					if wv.P99RatioCI != nil {
						c.unconfirmed++
					}
				}
				if k == 1 && wv.ZeroImpact == impact.No {
					t.Logf("a false impacted at +%s: %s", from.Sub(began).Round(time.Second), wv.Reason)
				}
			}
			what := "no impact: falsely impacted"
			if k != 1 {
				what = "every request 3× slower: impacted"
			}
			t.Logf("windows of %s, %s in %d of %d before, %d now (%d insufficient: past a threshold, not at the interval's lower end)",
				w, what, c.before, c.windows, c.now, c.unconfirmed)
			switch {
			case c.windows < 20:
				t.Errorf("only %d windows of %s: record longer", c.windows, w)
			case k == 1 && c.now*50 > c.windows:
				t.Errorf("windows of %s with no impact: %d of %d falsely judged impacted, more than 2 %%", w, c.now, c.windows)
			case k != 1 && c.now*2 < c.before:
				t.Errorf("windows of %s, 3× slower: impacted in %d, under half the %d the old rule caught", w, c.now, c.before)
			}
		}
	}
}

// slowed is samples with the latencies of the requests in window w
// multiplied by k (a copy when k is not 1).
func slowed(samples []traffic.Sample, w timeline.Window, k float64) []traffic.Sample {
	if k == 1 {
		return samples
	}
	out := append([]traffic.Sample(nil), samples...)
	for i, s := range out {
		if !s.Start.Before(w.From) && s.Start.Before(w.To) {
			out[i].Latency = time.Duration(float64(s.Latency) * k)
		}
	}
	return out
}

// pointRule is the verdict the interval replaced: impacted when the
// rank test says slower and the p99's or the median's ratio, as
// estimated, is past its threshold, or when the rate fell below its
// own, whatever the requests in flight.
func pointRule(p impact.Policy, w impact.WindowVerdict) string {
	switch {
	case w.ZeroImpact == impact.No:
		return impact.No
	case w.ZeroImpact == impact.Insufficient && w.P99RatioCI == nil:
		return impact.Insufficient
	case w.RateRatio < w.RateThreshold:
		return impact.No // the rate alone, whether the latencies explain its drop or not
	case w.PValue < p.Alpha && (w.P99Ratio > w.P99Threshold || w.P50Ratio > w.P50Threshold):
		return impact.No
	}
	return impact.Yes
}
