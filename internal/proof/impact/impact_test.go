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

// The expected values were computed separately: the exact ones by
// enumerating every arrangement (Python, itertools.combinations), the
// approximate ones by the textbook formula with tie and continuity
// corrections written again in Python (scipy cannot be installed here).
func TestMannWhitney(t *testing.T) {
	cases := []struct {
		name     string
		base, s  []float64
		u, p     float64
		exact    bool
		tolerate float64
	}{
		{"fully separated, small (1/252)", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 25, 0.003968253968253968, true, 1e-12},
		{"interleaved, small", []float64{1.0, 2.5, 3.0, 5.0, 6.0}, []float64{1.1, 2.2, 3.3, 4.4}, 8, 0.7222222222222222, true, 1e-12},
		{"sample faster", []float64{10, 20, 30, 40, 50, 60, 70}, []float64{15, 25, 35}, 6, 0.8666666666666667, true, 1e-12},
		{"ties: normal approximation", []float64{3, 4, 2, 6, 2, 5, 7, 8}, []float64{9, 7, 5, 10, 6, 8, 3, 4, 12, 11}, 62, 0.02760227791754913, false, 1e-9},
		{"many ties", []float64{5, 5, 5, 6, 6, 7}, []float64{5, 6, 6, 7, 7, 7, 8}, 32, 0.058684033788876766, false, 1e-9},
		{"one value each", []float64{1}, []float64{2}, 1, 0.5, true, 1e-12},
		{"empty sample", []float64{1, 2}, nil, 0, 1, false, 0},
		{"all tie", []float64{3, 3, 3}, []float64{3, 3, 3}, 4.5, 1, false, 0},
		{"NaN left out", []float64{1, 2, 3, 4, 5, math.NaN()}, []float64{6, 7, 8, 9, 10}, 25, 0.003968253968253968, true, 1e-12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := MannWhitney(tc.base, tc.s)
			if r.U != tc.u || math.Abs(r.P-tc.p) > tc.tolerate || r.Exact != tc.exact {
				t.Errorf("U %v p %.15g exact %v; want U %v p %.15g exact %v", r.U, r.P, r.Exact, tc.u, tc.p, tc.exact)
			}
		})
	}
}

// TestMannWhitneyProperties: p is a probability, identical
// distributions give no evidence, and moving the sample up never makes
// the evidence weaker, where both p come from the same method: a shift
// that removes the ties moves a small case from the normal
// approximation to the exact distribution, and the approximation's own
// error can go either way (seed 1795933471138695819: 15 values against
// 1, the approximation 0.116 with ties, the exact 0.125 without).
func TestMannWhitneyProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := 0; i < 200; i++ {
		n1, n2 := 1+rng.IntN(60), 1+rng.IntN(60)
		b, s := make([]float64, n1), make([]float64, n2)
		for j := range b {
			b[j] = math.Round(rng.ExpFloat64()*50) / 10 // rounded: ties happen
		}
		for j := range s {
			s[j] = math.Round(rng.ExpFloat64()*50) / 10
		}
		r := MannWhitney(b, s)
		if r.P < 0 || r.P > 1 || math.IsNaN(r.P) {
			t.Fatalf("seed %d run %d: p = %v", seed, i, r.P)
		}
		shifted := make([]float64, n2)
		for j := range s {
			shifted[j] = s[j] + 1
		}
		if r2 := MannWhitney(b, shifted); r2.Exact == r.Exact && r2.P > r.P+1e-12 {
			t.Fatalf("seed %d run %d: shifting the sample up raised p from %v to %v", seed, i, r.P, r2.P)
		}
	}
	same := make([]float64, 500)
	for j := range same {
		same[j] = float64(j)
	}
	if r := MannWhitney(same, same); math.Abs(r.P-0.5) > 0.02 {
		t.Errorf("identical samples: p = %v, want about 0.5", r.P)
	}
}

func FuzzMannWhitney(f *testing.F) {
	f.Add([]byte{1, 2, 3}, []byte{4, 5, 6})
	f.Add([]byte{}, []byte{1})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fa, fb := make([]float64, len(a)), make([]float64, len(b))
		for i, x := range a {
			fa[i] = float64(x)
		}
		for i, x := range b {
			fb[i] = float64(x)
		}
		if r := MannWhitney(fa, fb); r.P < 0 || r.P > 1 || math.IsNaN(r.P) {
			t.Fatalf("p = %v", r.P)
		}
	})
}

// load is synthetic traffic: rate requests a second over [from, to)
// seconds after t0, each with the latency lat(i, at) gives (ms), the
// failed ones not OK.
type load struct {
	from, to float64
	rate     int
	lat      func(rng *rand.Rand, at float64) float64
	failed   int
}

// steady is latency like the sample's on a quiet machine: 5 to 7 ms.
func steady(scale float64) func(*rand.Rand, float64) float64 {
	return func(rng *rand.Rand, _ float64) float64 { return scale * (5 + 2*rng.Float64()) }
}

// spiky is steady with a few requests stalled to 20–25 ms in the
// seconds listed (a loaded machine's scheduler stalls: too few to move
// the whole baseline's p99, enough to make one second's).
func spiky(scale float64, every int, at ...int) func(*rand.Rand, float64) float64 {
	in := map[int]bool{}
	for _, s := range at {
		in[s] = true
	}
	n := 0
	return func(rng *rand.Rand, t float64) float64 {
		n++
		if in[int(t)] && n%every == 0 {
			return 20 + 5*rng.Float64()
		}
		return scale * (5 + 2*rng.Float64())
	}
}

// stuck is steady(1) with every n-th request scale times slower.
func stuck(n int, scale float64) func(*rand.Rand, float64) float64 {
	i := 0
	return func(rng *rand.Rand, _ float64) float64 {
		i++
		if i%n == 0 {
			return scale * (5 + 2*rng.Float64())
		}
		return 5 + 2*rng.Float64()
	}
}

func makeSamples(t0 time.Time, seed uint64, loads ...load) []traffic.Sample {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []traffic.Sample
	for _, l := range loads {
		n := int((l.to - l.from) * float64(l.rate))
		for i := 0; i < n; i++ {
			at := l.from + float64(i)/float64(l.rate)
			ms := l.lat(rng, at)
			out = append(out, traffic.Sample{Start: t0.Add(time.Duration(at * float64(time.Second))), Latency: time.Duration(ms * float64(time.Millisecond)), OK: i >= l.failed})
		}
	}
	return out
}

// TestJudge: each case is a baseline and the upgrade's windows in
// synthetic traffic, and the verdict wanted per window. The loaded
// machine cases are those a fixed threshold got wrong: a window that
// catches the same scheduler stalls as some baseline seconds had is
// not impact (the fixed 1.5× p99 rule called it impacted); a window
// whose every request is three times slower still is, though the
// stalls raised the p99 threshold past 3×.
func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	win := func(name string, from, to float64) timeline.Window {
		return timeline.Window{Name: name, Kind: timeline.KindState, From: t0.Add(time.Duration(from * float64(time.Second))), To: t0.Add(time.Duration(to * float64(time.Second)))}
	}
	type want struct {
		impact   string
		downtime bool
		reason   string // a part of the window's reason
	}
	cases := []struct {
		name     string
		baseline float64 // seconds from t0
		loads    []load
		windows  []timeline.Window
		want     []want
		overall  string // a part of the verdict's reason
	}{
		{
			name: "quiet machine", baseline: 10,
			loads: []load{{0, 10, 200, steady(1), 0}, {10, 12, 200, steady(1), 0}, {12, 14, 200, steady(3), 0},
				{14, 14.5, 200, steady(1), 0}, {14.5, 16.5, 5, steady(1), 0}, {16.5, 18.5, 200, steady(1), 1}},
			windows: []timeline.Window{win("upgrading-kv", 10, 12), win("upgrading-api", 12, 14), win("migrating", 14, 14.5),
				win("a stall", 14.5, 16.5), win("contracting", 16.5, 18.5)},
			want: []want{{Yes, true, "p99 1."}, {No, true, "is 3.00× the baseline"}, {Insufficient, true, "shorter than 1s"},
				{No, true, "0.03× the baseline's 200/s (< 0.50×"}, {Yes, false, "1 request(s) failed"}},
			overall: "requests failed, and upgrading-api: slower than the baseline",
		},
		{
			name: "loaded machine: stalls the baseline had too", baseline: 10,
			loads:   []load{{0, 10, 200, spiky(1, 50, 3, 7), 0}, {10, 12, 200, spiky(1.05, 50, 10, 11), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 12)},
			want:    []want{{Yes, true, "impact above"}},
			overall: "no request failed",
		},
		{
			name: "loaded machine: every request three times slower", baseline: 10,
			loads:   []load{{0, 10, 200, spiky(1, 50, 3, 7), 0}, {10, 12, 200, steady(3), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 12)},
			want:    []want{{No, true, "the median"}},
			overall: "upgrading-api: slower than the baseline",
		},
		{
			name: "loaded machine: the clients' rate wandered in the baseline too", baseline: 10,
			loads:   []load{{0, 3, 200, steady(1), 0}, {3, 4, 80, steady(1), 0}, {4, 10, 200, steady(1), 0}, {10, 12, 90, steady(1), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 12)},
			want:    []want{{Yes, true, "rate 0.48×"}},
			overall: "no request failed",
		},
		{
			name: "light traffic: too few requests to judge latencies", baseline: 10,
			loads:   []load{{0, 10, 25, steady(1), 0}, {10, 11, 15, steady(3), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 11)},
			want:    []want{{Insufficient, true, "15 requests in the window: fewer than 20"}},
			overall: "no request failed",
		},
		{
			name: "baseline too short to measure its noise", baseline: 3,
			loads:   []load{{0, 3, 200, steady(1), 0}, {3, 5, 200, steady(3), 0}},
			windows: []timeline.Window{win("upgrading-api", 3, 5)},
			want:    []want{{Insufficient, true, "fewer than the 4 needed"}},
			overall: "impact not judged",
		},
		{
			name: "sparse samples (a metrics signal's, one a step): chunks of 2s hold 20", baseline: 10,
			loads:   []load{{0, 10, 10, steady(1), 0}, {10, 11, 10, steady(3), 0}, {11, 15, 10, steady(3), 0}},
			windows: []timeline.Window{win("upgrading-kv", 10, 11), win("upgrading-api", 11, 15)},
			want:    []want{{Insufficient, true, "shorter than 2s"}, {No, true, "the median is 3.06× the baseline's"}},
			overall: "upgrading-api: slower than the baseline",
		},
		{
			// Clients each always waiting on a request: 2.5× the latency
			// is 0.4× the rate, as many in flight. Two seconds of the
			// baseline were 2.4× slower (its clients not yet saturated):
			// the latencies are within its noise, and the rate's drop is
			// theirs, not a stall's.
			name: "loaded machine: the machine got busier, the clients busy with slower requests", baseline: 10,
			loads: []load{{0, 3, 200, steady(1), 0}, {3, 4, 200, steady(2.4), 0}, {4, 7, 200, steady(1), 0}, {7, 8, 200, steady(2.4), 0},
				{8, 10, 200, steady(1), 0}, {10, 13, 80, steady(2.5), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 13)},
			want:    []want{{Yes, true, "the rate fell to 0.4"}},
			overall: "no request failed",
		},
		{
			name: "a stall the window's own requests show: 24 requests of about a second", baseline: 10,
			loads:   []load{{0, 10, 200, steady(1), 0}, {10, 13, 8, steady(180), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 13)},
			want:    []want{{No, true, "slower than the baseline"}},
			overall: "upgrading-api: slower than the baseline",
		},
		{
			// 3 % of the requests stuck for about a second, the rest as
			// before: the rank test, weighing all, says p ≈ 0.1; the p99's
			// interval sits on the stuck ones.
			name: "a tail of stuck requests, the rest as fast as before", baseline: 10,
			loads:   []load{{0, 10, 200, steady(1), 0}, {10, 13, 200, stuck(33, 180), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 13)},
			want:    []want{{No, true, "past it at the interval's lower end (p = 0.0"}},
			overall: "upgrading-api: slower than the baseline",
		},
		{
			name: "a stall with too few requests to judge their latencies", baseline: 10,
			loads:   []load{{0, 10, 200, steady(1), 0}, {10, 12, 5, steady(180), 0}},
			windows: []timeline.Window{win("upgrading-api", 10, 12)},
			want:    []want{{No, true, "they waited on the service"}},
			overall: "upgrading-api: the clients got",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			samples := makeSamples(t0, 1, tc.loads...)
			v := Judge(samples, t0, t0.Add(time.Duration(tc.baseline*float64(time.Second))), tc.windows, Policy{})
			t.Logf("noise: %s", v.Noise.Reason)
			for i, w := range tc.want {
				got := v.Windows[i]
				t.Logf("%s: %s: %s", got.Name, got.ZeroImpact, got.Reason)
				if got.ZeroImpact != w.impact || got.ZeroDowntime != w.downtime || !strings.Contains(got.Reason, w.reason) {
					t.Errorf("%s: zero impact %s, zero downtime %v (%s); want %s, %v, with %q", got.Name, got.ZeroImpact, got.ZeroDowntime, got.Reason, w.impact, w.downtime, w.reason)
				}
			}
			if !strings.Contains(v.Reason, tc.overall) {
				t.Errorf("overall: %s; want it to say %q", v.Reason, tc.overall)
			}
		})
	}
}

// TestJudgeFixedThresholdWouldCry is the loaded-machine case against
// the rule this verdict replaced: the window is significantly slower
// (p < 0.01) and its p99 above 1.5× the baseline's, so a fixed 1.5×
// threshold called it impacted; the baseline's own seconds with stalls
// show that is the machine.
func TestJudgeFixedThresholdWouldCry(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	samples := makeSamples(t0, 1, load{0, 10, 200, spiky(1, 50, 3, 7), 0}, load{10, 12, 200, spiky(1.05, 50, 10, 11), 0})
	w := []timeline.Window{{Name: "upgrading-api", From: t0.Add(10 * time.Second), To: t0.Add(12 * time.Second)}}
	v := Judge(samples, t0, t0.Add(10*time.Second), w, Policy{})
	got := v.Windows[0]
	t.Logf("window: p = %.2g, p99 %.2f×, median %.2f×; noise: %s", got.PValue, got.P99Ratio, got.P50Ratio, v.Noise.Reason)
	if fixed := got.PValue < 0.01 && got.P99Ratio > 1.5; !fixed {
		t.Fatalf("the case does not show the fixed rule's false alarm: p = %.2g, p99 %.2f×", got.PValue, got.P99Ratio)
	}
	if got.ZeroImpact != Yes || !v.ZeroImpact {
		t.Errorf("judged %s (%s), want yes: the baseline had the same stalls", got.ZeroImpact, got.Reason)
	}
}

// TestJudgeWithControl: a control (requests to something on the same
// machine that the upgrade does not touch) tells a machine that got
// busier after the baseline from an upgrade that hurt the clients.
func TestJudgeWithControl(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	base := load{0, 10, 200, steady(1), 0}
	ctlBase := load{0, 10, 50, steady(0.2), 0}
	cases := []struct {
		name    string
		window  load // the service in [10, 13)
		control []load
		want    string
		reason  string
	}{
		{"the machine got busier: service and control both 2.5× slower, at 0.45× the rate", load{10, 13, 90, steady(2.5), 0},
			[]load{ctlBase, {10, 13, 22, steady(0.5), 0}}, Yes, "the control on the same machine: p99 2.49×"},
		{"the same without a control: the latencies judge it", load{10, 13, 90, steady(2.5), 0}, nil, No, "the rate fell to 0.45× but 1.12× as many requests were in flight"},
		{"the upgrade hurt: the service 2.5× slower, the control as before", load{10, 13, 200, steady(2.5), 0},
			[]load{ctlBase, {10, 13, 50, steady(0.2), 0}}, No, "against 1.50×, what its noise allows, past it at the interval's lower end (p = 3e-303); the control on the same machine: p99 1.00×"},
		{"a control too sparse in the window is no evidence", load{10, 13, 200, steady(2.5), 0},
			[]load{ctlBase, {10, 13, 5, steady(0.5), 0}}, No, "against 1.50×, what its noise allows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			samples := makeSamples(t0, 3, base, tc.window)
			var control []traffic.Sample
			if tc.control != nil {
				control = makeSamples(t0, 4, tc.control...)
			}
			w := []timeline.Window{{Name: "upgrading-api", Kind: timeline.KindState, From: t0.Add(10 * time.Second), To: t0.Add(13 * time.Second)}}
			v := JudgeWithControl(samples, control, t0, t0.Add(10*time.Second), w, Policy{})
			got := v.Windows[0]
			t.Logf("%s: %s", got.ZeroImpact, got.Reason)
			if got.ZeroImpact != tc.want || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("judged %s (%s); want %s with %q", got.ZeroImpact, got.Reason, tc.want, tc.reason)
			}
		})
	}
}

// TestMeasureNoise: a steady baseline's chunks sit near 1× (the floors
// hold the thresholds at 1.5× and 2×); chunks with stalls raise the p99's
// threshold to 1.25× the worst, not the median's; a partial last chunk
// is left out.
func TestMeasureNoise(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name           string
		lat            func(*rand.Rand, float64) float64
		chunks         int
		p99Min, p99Max float64 // the p99 threshold's bounds
		p50Min, p50Max float64
	}{
		{"steady", steady(1), 10, 1.5, 1.5, 2, 2},
		{"stalls in seconds 3 and 7", spiky(1, 50, 3, 7), 10, 3.5, 5, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			samples := makeSamples(t0, 2, load{0, 10.5, 200, tc.lat, 0})
			n := MeasureNoise(samples, t0, t0.Add(10500*time.Millisecond), Policy{})
			t.Logf("%s", n.Reason)
			if !n.Enough || len(n.Chunks) != tc.chunks {
				t.Fatalf("enough %v with %d chunks; want %d", n.Enough, len(n.Chunks), tc.chunks)
			}
			if n.P99Threshold < tc.p99Min || n.P99Threshold > tc.p99Max || n.P50Threshold < tc.p50Min || n.P50Threshold > tc.p50Max {
				t.Errorf("thresholds p99 %.2f, p50 %.2f; want p99 in [%g, %g], p50 in [%g, %g]", n.P99Threshold, n.P50Threshold, tc.p99Min, tc.p99Max, tc.p50Min, tc.p50Max)
			}
			if got := n.P99Threshold; n.WorstP99Ratio*1.25 > 1.5 && math.Abs(got-1.25*n.WorstP99Ratio) > 1e-9 {
				t.Errorf("p99 threshold %.3f, want 1.25 × the worst chunk's %.3f", got, n.WorstP99Ratio)
			}
		})
	}
}

func BenchmarkJudge(b *testing.B) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	samples := make([]traffic.Sample, 100_000)
	for i := range samples {
		samples[i] = traffic.Sample{Start: t0.Add(time.Duration(i) * time.Millisecond), Latency: time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond)), OK: true}
	}
	var ws []timeline.Window
	for s := 10; s < 100; s += 10 {
		ws = append(ws, timeline.Window{Name: "w", From: t0.Add(time.Duration(s) * time.Second), To: t0.Add(time.Duration(s+10) * time.Second)})
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Judge(samples, t0, t0.Add(10*time.Second), ws, Policy{})
	}
}
