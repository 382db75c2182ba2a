package impact

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestQuantileRanks: the ranks of the interval's bounds against values
// computed separately, with rational arithmetic (Python's
// fractions.Fraction and math.comb: every binomial probability exact,
// no floating point) by the same definition: r the largest rank with
// P(B ≤ r−1) ≤ beta, s the smallest with P(B ≥ s) ≤ beta, B ~
// Binomial(n, q). The textbook
// cases: the 95 % interval of a median of 10 is (x₂, x₉), the 99 % one
// of 100 is (x₃₇, x₆₄).
func TestQuantileRanks(t *testing.T) {
	cases := []struct {
		n       int
		q, beta float64
		r, s    int
	}{
		{1, 0.5, 0.025, 0, 2},
		{10, 0.5, 0.025, 2, 9},
		{100, 0.5, 0.005, 37, 64},
		{100, 0.99, 0.005, 96, 101}, // a p99 of 100: no upper bound
		{527, 0.99, 0.005, 515, 528},
		{528, 0.99, 0.005, 516, 528}, // the fewest with one: 0.99^528 ≤ 0.005
		{1200, 0.99, 0.005, 1178, 1197},
		{1200, 0.5, 0.005, 555, 646},
		{4000, 0.99, 0.005, 3943, 3976},
		{4000, 0.99, 0.025, 3947, 3973},
		{20, 0.99, 0.005, 18, 21},
		{3, 0.5, 0.005, 0, 4},
		{0, 0.5, 0.005, 0, 1},
	}
	for _, c := range cases {
		if r, s := QuantileRanks(c.n, c.q, c.beta); r != c.r || s != c.s {
			t.Errorf("QuantileRanks(%d, %g, %g) = %d, %d; want %d, %d", c.n, c.q, c.beta, r, s, c.r, c.s)
		}
	}
}

// TestQuantileIntervalCovers: for independent values the interval's
// each side misses the true quantile at most beta of the time, whatever
// the distribution (exponential, log-normal, a mixture with stalls),
// counted over many seeded draws; and Lo ≤ Est ≤ Hi always.
func TestQuantileIntervalCovers(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	dists := []struct {
		name string
		draw func() float64
		p50  float64 // the true quantiles
		p99  float64
	}{
		{"exponential", func() float64 { return rng.ExpFloat64() }, math.Ln2, math.Log(100)},
		{"log-normal", func() float64 { return math.Exp(rng.NormFloat64()) }, 1, math.Exp(2.3263478740408408)},
	}
	const runs, beta = 2000, 0.025
	for _, d := range dists {
		for _, n := range []int{200, 1200} {
			for _, q := range []float64{0.5, 0.99} {
				truth := d.p50
				if q == 0.99 {
					truth = d.p99
				}
				below, above := 0, 0
				x := make([]float64, n)
				for range runs {
					for i := range x {
						x[i] = d.draw()
					}
					slices.Sort(x)
					iv := QuantileInterval(x, q, beta)
					if !(iv.Lo <= iv.Est && iv.Est <= iv.Hi) {
						t.Fatalf("seed %d: %s n %d q %g: %+v not ordered", seed, d.name, n, q, iv)
					}
					if truth < iv.Lo {
						below++
					}
					if truth > iv.Hi {
						above++
					}
				}
				// At most beta each, with room for the count's own noise
				// (4 standard deviations of a binomial count at beta).
				limit := runs*beta + 4*math.Sqrt(runs*beta*(1-beta))
				t.Logf("%s, n %d, q %g: the truth below the interval %d, above %d of %d (each at most %.0f)", d.name, n, q, below, above, runs, limit)
				if float64(below) > limit || float64(above) > limit {
					t.Errorf("seed %d: %s n %d q %g: missed below %d, above %d times of %d; want at most %.0f each", seed, d.name, n, q, below, above, runs, limit)
				}
			}
		}
	}
}

func TestRatioInterval(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name string
		w, b Interval
		want Interval
	}{
		{"both bounded", Interval{3, 2, 4}, Interval{2, 1, 2.5}, Interval{1.5, 0.8, 4}},
		{"the baseline unbounded above: no lower bound", Interval{3, 2, 4}, Interval{2, 1, inf}, Interval{1.5, 0, 4}},
		{"the window unbounded above", Interval{3, 2, inf}, Interval{2, 1, 2.5}, Interval{1.5, 0.8, inf}},
		{"a baseline of zeros", Interval{3, 2, 4}, Interval{0, 0, 0}, Interval{0, 0, inf}},
	}
	for _, c := range cases {
		if got := RatioInterval(c.w, c.b); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestIntervalJSON: JSON has no infinity; an unbounded side is null and
// reads back as +Inf.
func TestIntervalJSON(t *testing.T) {
	for _, iv := range []Interval{{1.5, 0.8, 4}, {1.5, 0, math.Inf(1)}} {
		b, err := json.Marshal(iv)
		if err != nil {
			t.Fatal(err)
		}
		var back Interval
		if err := json.Unmarshal(b, &back); err != nil || back != iv {
			t.Errorf("%+v → %s → %+v (%v)", iv, b, back, err)
		}
	}
	if b, _ := json.Marshal(Interval{1, 0, math.Inf(1)}); string(b) != `{"est":1,"lo":0,"hi":null}` {
		t.Errorf("got %s", b)
	}
	if got := (Interval{1.7, 1.1, math.Inf(1)}).Range(); got != "[1.10×, ∞)" {
		t.Errorf("Range = %q", got)
	}
	if got := (Interval{1.7, 1.111, 2.006}).Range(); got != "[1.11×, 2.01×]" {
		t.Errorf("Range = %q", got)
	}
}

// FuzzQuantileRanks: whatever n, q and beta, the ranks are in range
// and ordered, and a smaller beta (more confidence) never narrows them.
func FuzzQuantileRanks(f *testing.F) {
	f.Add(1200, 0.99, 0.005)
	f.Add(3, 0.5, 0.5)
	f.Add(528, 0.99, 0.005)
	f.Fuzz(func(t *testing.T, n int, q, beta float64) {
		if n < 0 || n > 20000 || math.IsNaN(q) || math.IsNaN(beta) {
			return
		}
		r, s := QuantileRanks(n, q, beta)
		if r < 0 || r > n || s < 1 || s > n+1 || (r > 0 && s <= n && r > s) {
			t.Fatalf("QuantileRanks(%d, %g, %g) = %d, %d", n, q, beta, r, s)
		}
		if beta > 0 && beta < 0.5 && q > 0 && q < 1 {
			if r2, s2 := QuantileRanks(n, q, beta/2); r2 > r || s2 < s {
				t.Fatalf("beta/2 narrowed (%d, %d) to (%d, %d): n %d q %g beta %g", r, s, r2, s2, n, q, beta)
			}
		}
	})
}
