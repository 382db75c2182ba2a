package impact

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

// loadedMachine is a model of requests on a loaded 2-core machine with
// no upgrade running. Its parameters are those measured in recorded
// traffic on the sample cluster under a CPU burner at load 30–40 (see
// TestVerdictOnRecordedTraffic): the machine's slowness changes every
// 100 ms (the log of a 100 ms slot's median latency has a standard
// deviation of 0.5 and a lag-1 autocorrelation of 0.3), requests within
// a slot spread with a log standard deviation of 0.4, the clients get
// 180 requests/s through. The control, a cheap request on the same
// machine, feels the same slowness half as much.
type loadedMachine struct {
	Rate          float64 // requests a second
	SlotS         float64 // seconds the machine's slowness holds
	SlotSD, Rho   float64 // the slots' log-slowness: standard deviation, lag-1 correlation
	WithinSD      float64 // a request's log spread within a slot
	MedianMS      float64
	ControlRate   float64
	ControlWeight float64 // how much of the slowness the control feels
}

var recordedMachine = loadedMachine{Rate: 180, SlotS: 0.1, SlotSD: 0.5, Rho: 0.3, WithinSD: 0.4, MedianMS: 35, ControlRate: 50, ControlWeight: 0.5}

// run draws seconds of service and control traffic from t0; slow(at)
// multiplies a service request's latency (a real impact), 1 for none.
func (m loadedMachine) run(seed uint64, t0 time.Time, seconds float64, slow func(at float64) float64) (svc, ctl []traffic.Sample) {
	rng := rand.New(rand.NewPCG(seed, 5))
	slots := int(math.Ceil(seconds/m.SlotS)) + 1
	level := make([]float64, slots)
	level[0] = m.SlotSD * rng.NormFloat64()
	for i := 1; i < slots; i++ {
		level[i] = m.Rho*level[i-1] + math.Sqrt(1-m.Rho*m.Rho)*m.SlotSD*rng.NormFloat64()
	}
	draw := func(rate, medianMS, weight float64, slow func(float64) float64) []traffic.Sample {
		var out []traffic.Sample
		for at := rng.ExpFloat64() / rate; at < seconds; at += rng.ExpFloat64() / rate {
			ms := medianMS * math.Exp(weight*level[int(at/m.SlotS)]+m.WithinSD*rng.NormFloat64()) * slow(at)
			out = append(out, traffic.Sample{Start: t0.Add(time.Duration(at * float64(time.Second))), Latency: time.Duration(ms * float64(time.Millisecond)), OK: true})
		}
		return out
	}
	svc = draw(m.Rate, m.MedianMS, 1, slow)
	ctl = draw(m.ControlRate, 1, m.ControlWeight, func(float64) float64 { return 1 })
	return svc, ctl
}

// pointRule is the verdict this one replaced: a window impacted when the
// rank test says slower and the p99's or the median's ratio to the
// baseline's, as estimated, is past its threshold, or when the rate
// fell below its own, whatever the requests in flight.
func pointRule(v Verdict, w WindowVerdict) string {
	switch {
	case w.ZeroImpact == No:
		return No
	case w.ZeroImpact == Insufficient && w.P99RatioCI == nil:
		return Insufficient
	case w.RateRatio < w.RateThreshold:
		return No // the rate alone, whether the latencies explain its drop or not
	case w.PValue < v.Policy.Alpha && (w.P99Ratio > w.P99Threshold || w.P50Ratio > w.P50Threshold):
		return No
	}
	return Yes
}

// replay judges one window of w seconds after a 10 s baseline on the
// machine m, its requests slowed k times (1: no impact), with seed.
func (m loadedMachine) replay(seed uint64, w, k float64) (Verdict, WindowVerdict) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	svc, ctl := m.run(seed, t0, 10+w, func(at float64) float64 {
		if at >= 10 {
			return k
		}
		return 1
	})
	win := []timeline.Window{{Name: "batch", Kind: timeline.KindBatch, From: t0.Add(10 * time.Second), To: t0.Add(time.Duration((10 + w) * float64(time.Second)))}}
	v := JudgeWithControl(svc, ctl, t0, t0.Add(10*time.Second), win, Policy{})
	return v, v.Windows[0]
}

// TestVerdictOnALoadedMachine replays the situation the verdict got
// wrong: a loaded machine, no real impact, the control on the same
// machine not slower, a window of 2 or 4 s after a 10 s baseline,
// seeds 1 to 300 each. The rule it replaced (the p99's or median's
// ratio as estimated past its threshold) called some of those windows
// impacted; the confidence interval's lower end must be past it now,
// and none is. A real impact of every request three times slower
// (twice the p99's 1.5× floor) is still judged impacted in most
// windows, the rest "insufficient", never "yes".
func TestVerdictOnALoadedMachine(t *testing.T) {
	m := recordedMachine
	const seeds = 300
	t.Logf("%+v; seeds 1 to %d", m, seeds)
	for _, w := range []float64{2, 4} {
		var before, after, unconfirmed int
		for seed := uint64(1); seed <= seeds; seed++ {
			v, wv := m.replay(seed, w, 1)
			if pointRule(v, wv) == No {
				before++
			}
			switch wv.ZeroImpact {
			case No:
				after++
				t.Logf("seed %d: a false impacted: %s", seed, wv.Reason)
			case Insufficient:
				unconfirmed++
			}
		}
		t.Logf("no impact, windows of %gs: falsely impacted %d of %d before, %d now (%d insufficient)", w, before, seeds, after, unconfirmed)
		if after > 0 {
			t.Errorf("windows of %gs: %d of %d falsely judged impacted", w, after, seeds)
		}
		caught, missed := 0, 0
		const impactSeeds = 100
		for seed := uint64(1001); seed <= 1000+impactSeeds; seed++ {
			_, wv := m.replay(seed, w, 3)
			switch wv.ZeroImpact {
			case No:
				caught++
			case Yes:
				missed++
				t.Logf("seed %d: a real impact judged yes: %s", seed, wv.Reason)
			}
		}
		t.Logf("every request 3× slower, windows of %gs: impacted in %d of %d, yes in %d", w, caught, impactSeeds, missed)
		var was, is, unsure int // twice slower: at the thresholds' floor, the gray zone
		for seed := uint64(2001); seed <= 2000+impactSeeds; seed++ {
			v, wv := m.replay(seed, w, 2)
			if pointRule(v, wv) == No {
				was++
			}
			switch wv.ZeroImpact {
			case No:
				is++
			case Insufficient:
				unsure++
			}
		}
		t.Logf("every request 2× slower, windows of %gs: impacted in %d of %d before, %d now, %d insufficient", w, was, impactSeeds, is, unsure)
		if caught < 85 || missed > 5 {
			t.Errorf("windows of %gs, every request 3× slower: impacted in %d of %d, yes in %d; want at least 85 and at most 5", w, caught, impactSeeds, missed)
		}
	}
}

// TestVerdictOnlyNarrowsTheOldRule: whatever the machine and the
// impact, a window judged impacted now was judged impacted by the rule
// it replaced or has its p99's whole interval past the threshold (a
// tail the rank test did not see), and one that rule called impacted is
// now impacted or insufficient, never "yes", unless only its rate fell
// and as many requests were in flight: the interval asks for more
// evidence, it does not excuse.
func TestVerdictOnlyNarrowsTheOldRule(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	for i := range 100 {
		m := recordedMachine
		m.Rate = 40 + 400*rng.Float64()
		m.SlotSD = rng.Float64()
		m.Rho = 0.9 * rng.Float64()
		m.WithinSD = 0.1 + rng.Float64()
		w, k := 1+4*rng.Float64(), 1+2*rng.Float64()
		v, wv := m.replay(rng.Uint64(), w, k)
		old, now := pointRule(v, wv), wv.ZeroImpact
		tail := wv.P99RatioCI != nil && wv.P99RatioCI.Lo > wv.P99Threshold
		busy := wv.RateRatio < wv.RateThreshold && wv.InFlightRatio >= wv.RateThreshold
		if (now == No && old != No && !tail) || (old == No && now == Yes && !busy) {
			t.Fatalf("seed %d case %d (%+v, window %.1fs, %.2f× slower): the old rule %s, now %s: %s", seed, i, m, w, k, old, now, wv.Reason)
		}
		if ci := wv.P99RatioCI; ci != nil && !(ci.Lo <= ci.Est && ci.Est <= ci.Hi) {
			t.Fatalf("seed %d case %d: p99 ratio interval %+v does not hold its estimate", seed, i, *ci)
		}
	}
}

// TestJudgeAStallInAWindow rebuilds the false "impacted" a run of
// TestGlanceZeroImpactGate saw at load 14: ferry's first api batch,
// 1,162 requests in 3.9 s, its p99 1.69× the baseline's (p = 0.0056),
// the control 0.78×. Here every request of the window is 2 % slower and
// one stall of the machine slowed 15 of them to 165–185 ms: the p99
// rests on those 15, the 12th slowest request, and the interval's lower
// end (the 22nd slowest, against the baseline's upper one) is not past
// the threshold. The rule this one replaced judged it impacted; it is
// "insufficient" now. The same window with every request 3× slower is
// impacted.
func TestJudgeAStallInAWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	build := func(slower float64) ([]traffic.Sample, []traffic.Sample) {
		rng := rand.New(rand.NewPCG(1, 2))
		var svc, ctl []traffic.Sample
		at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
		ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
		for i := range 3000 { // the baseline: 10 s at 300/s
			svc = append(svc, traffic.Sample{Start: at(float64(i) / 300), Latency: ms(20 * math.Exp(0.7*rng.NormFloat64())), OK: true})
		}
		const n = 1162
		for i := range n {
			lat := slower * 20 * math.Exp(0.7*rng.NormFloat64())
			if i >= 500 && i < 515 {
				lat = max(lat, 165+20*rng.Float64())
			}
			svc = append(svc, traffic.Sample{Start: at(10 + 3.9*float64(i)/n), Latency: ms(lat), OK: true})
		}
		for i := range 695 { // the control: 50/s, 0.78× as slow in the window
			c := 1.0
			if i >= 500 {
				c = 0.78
			}
			ctl = append(ctl, traffic.Sample{Start: at(float64(i) / 50), Latency: ms(c * 2 * math.Exp(0.3*rng.NormFloat64())), OK: true})
		}
		return svc, ctl
	}
	w := []timeline.Window{{Name: "api batch 1 (api-1)", Kind: timeline.KindBatch, From: t0.Add(10 * time.Second), To: t0.Add(13900 * time.Millisecond)}}
	for _, c := range []struct {
		slower    float64
		old, want string
	}{{1.02, No, Insufficient}, {3, No, No}} {
		svc, ctl := build(c.slower)
		v := JudgeWithControl(svc, ctl, t0, t0.Add(10*time.Second), w, Policy{})
		wv := v.Windows[0]
		t.Logf("every request %.2f× slower, one stall: the old rule %s, now %s: %s", c.slower, pointRule(v, wv), wv.ZeroImpact, wv.Reason)
		if got := pointRule(v, wv); got != c.old || wv.ZeroImpact != c.want {
			t.Errorf("every request %.2f× slower: the old rule %s, now %s; want %s, %s", c.slower, got, wv.ZeroImpact, c.old, c.want)
		}
		if c.want == Insufficient && (v.Unconfirmed != 1 || !v.ZeroImpact || !strings.Contains(v.Reason, "1 of 1 windows past a threshold as estimated but not at the lower end of its interval")) {
			t.Errorf("the verdict: zero impact %v, %d unconfirmed: %s", v.ZeroImpact, v.Unconfirmed, v.Reason)
		}
	}
}
