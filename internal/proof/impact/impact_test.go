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
// the evidence weaker.
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
		if r2 := MannWhitney(b, shifted); r2.P > r.P+1e-12 {
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

func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	var samples []traffic.Sample
	add := func(from, n int, ms float64, ok bool) {
		for i := 0; i < n; i++ {
			lat := time.Duration((ms + rng.Float64()*2) * float64(time.Millisecond))
			samples = append(samples, traffic.Sample{Start: t0.Add(time.Duration(from)*time.Second + time.Duration(i)*time.Millisecond), Latency: lat, OK: ok})
		}
	}
	add(0, 300, 5, true)  // baseline [0s, 1s)
	add(1, 300, 5, true)  // kv: like the baseline
	add(2, 300, 15, true) // api: three times slower
	add(3, 5, 5, true)    // migrating: too few
	add(4, 300, 5, true)  // contracting: one failure
	add(4, 1, 5, false)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ws := []timeline.Window{{Name: "upgrading-kv", Kind: timeline.KindState, From: at(1), To: at(2)},
		{Name: "upgrading-api", Kind: timeline.KindState, From: at(2), To: at(3)},
		{Name: "migrating", Kind: timeline.KindState, From: at(3), To: at(4)},
		{Name: "contracting", Kind: timeline.KindState, From: at(4), To: at(5)}}
	v := Judge(samples, at(0), at(1), ws, Policy{})
	want := []struct {
		impact   string
		downtime bool
	}{{Yes, true}, {No, true}, {Insufficient, true}, {Yes, false}}
	for i, w := range want {
		got := v.Windows[i]
		if got.ZeroImpact != w.impact || got.ZeroDowntime != w.downtime {
			t.Errorf("%s: zero impact %s, zero downtime %v; want %s, %v (%s)", got.Name, got.ZeroImpact, got.ZeroDowntime, w.impact, w.downtime, got.Reason)
		}
	}
	if v.ZeroDowntime || v.ZeroImpact || !strings.Contains(v.Reason, "upgrading-api: slower than the baseline") {
		t.Errorf("overall: downtime %v impact %v: %s", v.ZeroDowntime, v.ZeroImpact, v.Reason)
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
