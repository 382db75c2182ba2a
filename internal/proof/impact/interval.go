package impact

import (
	"encoding/json"
	"fmt"
	"math"
)

// Interval is a confidence interval [Lo, Hi] around an estimate Est.
// Lo is 0 and Hi +Inf where the data cannot bound that side (a p99 of
// 500 requests has no upper bound at 99.5 %: even their largest is
// below the true p99 more often than that).
type Interval struct {
	Est float64 `json:"est"`
	Lo  float64 `json:"lo"`
	Hi  float64 `json:"hi"`
}

// Range prints the interval of a ratio: [0.81×, 2.40×], or [0.81×, ∞)
// with no upper bound.
func (iv Interval) Range() string {
	if math.IsInf(iv.Hi, 1) {
		return fmt.Sprintf("[%.2f×, ∞)", iv.Lo)
	}
	return fmt.Sprintf("[%.2f×, %.2f×]", iv.Lo, iv.Hi)
}

// intervalJSON is an Interval in JSON, which has no infinity: an
// unbounded side is null.
type intervalJSON struct {
	Est float64  `json:"est"`
	Lo  float64  `json:"lo"`
	Hi  *float64 `json:"hi"`
}

// MarshalJSON writes an unbounded Hi as null.
func (iv Interval) MarshalJSON() ([]byte, error) {
	j := intervalJSON{Est: iv.Est, Lo: iv.Lo}
	if !math.IsInf(iv.Hi, 1) {
		j.Hi = &iv.Hi
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a null Hi as +Inf.
func (iv *Interval) UnmarshalJSON(b []byte) error {
	var j intervalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*iv = Interval{Est: j.Est, Lo: j.Lo, Hi: math.Inf(1)}
	if j.Hi != nil {
		iv.Hi = *j.Hi
	}
	return nil
}

// QuantileInterval is the q-quantile of sorted (nearest rank, as
// Quantile) and a distribution-free interval around it from two of its
// order statistics: the true quantile lies above Lo with probability at
// least 1 − beta, and below Hi with probability at least 1 − beta,
// whatever the distribution of independent values. Lo is the r-th
// smallest value for the largest r with P(Binomial(n, q) ≤ r−1) ≤
// beta, Hi the s-th for the smallest s with P(Binomial(n, q) ≥ s) ≤
// beta: the binomial counts the values below the true quantile.
func QuantileInterval(sorted []float64, q, beta float64) Interval {
	n := len(sorted)
	iv := Interval{Est: Quantile(sorted, q), Hi: math.Inf(1)}
	if n == 0 {
		return iv
	}
	r, s := QuantileRanks(n, q, beta)
	if r >= 1 {
		iv.Lo = sorted[r-1]
	}
	if s <= n {
		iv.Hi = sorted[s-1]
	}
	return iv
}

// QuantileRanks are the ranks (1-based, in n sorted values) of
// QuantileInterval's bounds: r is 0 when no lower bound exists, s is
// n+1 when no upper bound does (and neither does for a beta outside
// (0, 0.5), which makes no interval).
func QuantileRanks(n int, q, beta float64) (r, s int) {
	if n <= 0 {
		return 0, 1
	}
	return binomialRanks(n, q, beta)
}

// binomialRanks are, for n independent values, the largest r with
// P(B ≤ r−1) ≤ beta (0 if none) and the smallest s with P(B ≥ s) ≤
// beta (n+1 if none), B ~ Binomial(n, q): the count of values below
// the true q-quantile.
func binomialRanks(n int, q, beta float64) (r, s int) {
	if q <= 0 || q >= 1 || !(beta > 0 && beta < 0.5) {
		return 0, n + 1
	}
	// Terms farther than 40 standard deviations from the mean (and
	// beyond 60 values, for tiny variances) add less than 1e-300.
	mean, sd := float64(n)*q, math.Sqrt(float64(n)*q*(1-q))
	reach := 40*sd + 60
	from := max(0, int(mean-reach))
	to := min(n, int(math.Ceil(mean+reach)))
	logq, log1q := math.Log(q), math.Log1p(-q)
	lgn, _ := math.Lgamma(float64(n) + 1)
	pmf := func(k int) float64 {
		a, _ := math.Lgamma(float64(k) + 1)
		b, _ := math.Lgamma(float64(n-k) + 1)
		return math.Exp(lgn - a - b + float64(k)*logq + float64(n-k)*log1q)
	}
	// The lower tail from below: P(B ≤ k) for k = from, from+1, …
	cdf := 0.0
	r = from // every P(B ≤ k−1) for k ≤ from is below 1e-300
	for k := from; k < n; k++ {
		cdf += pmf(k)
		if cdf > beta {
			break
		}
		r = k + 1
	}
	// The upper tail from above: P(B ≥ k) for k = to, to−1, …
	tail := 0.0
	s = to + 1 // P(B ≥ to+1) is below 1e-300, or to is n
	for k := to; k >= 1; k-- {
		tail += pmf(k)
		if tail > beta {
			break
		}
		s = k
	}
	return r, s
}

// RatioInterval bounds the ratio of two independent quantities from
// their intervals: w/b lies in [w.Lo/b.Hi, w.Hi/b.Lo] whenever each
// lies in its own interval, so with each interval's sides at beta the
// ratio's lower (upper) bound fails with probability at most 2·beta.
// A side that cannot be bounded gives 0 or +Inf.
func RatioInterval(w, b Interval) Interval {
	iv := Interval{Lo: 0, Hi: math.Inf(1)}
	if b.Est > 0 {
		iv.Est = w.Est / b.Est
	}
	if b.Hi > 0 && !math.IsInf(b.Hi, 1) {
		iv.Lo = w.Lo / b.Hi
	}
	if b.Lo > 0 && !math.IsInf(w.Hi, 1) {
		iv.Hi = w.Hi / b.Lo
	}
	return iv
}
