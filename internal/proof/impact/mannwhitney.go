// Package impact judges whether an upgrade was noticed by its clients:
// zero downtime when no request failed; zero impact when, in every
// window of the upgrade, latencies are not significantly worse than the
// baseline measured before it (a one-sided Mann-Whitney U test, as
// Netflix's Kayenta judges canaries) by more than a practical margin
// (the ratio of p99s). It is pure: samples in, verdicts out.
package impact

import (
	"math"
	"sort"
)

// MWResult is a one-sided Mann-Whitney U test of "sample is
// stochastically greater (slower) than baseline".
type MWResult struct {
	// U counts the pairs (b, s) with s > b, ties counting one half.
	U float64 `json:"u"`
	// P is the probability of a U at least this large if both came from
	// one distribution. 1 when either side is empty or all values tie.
	P float64 `json:"p"`
	// Exact says P comes from the exact distribution of U (both sides at
	// most exactMax values and no ties) rather than the normal
	// approximation with tie and continuity corrections.
	Exact bool `json:"exact"`
}

// exactMax bounds the sides for which the exact distribution is used:
// below it the normal approximation is poor, above it the exact one is
// costly and no longer needed.
const exactMax = 20

// MannWhitney runs the test. NaN values are left out (a request without
// a latency says nothing about latency).
func MannWhitney(baseline, sample []float64) MWResult {
	b, s := clean(baseline), clean(sample)
	n1, n2 := len(b), len(s)
	if n1 == 0 || n2 == 0 {
		return MWResult{P: 1}
	}
	type obs struct {
		v      float64
		sample bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	for _, v := range s {
		all = append(all, obs{v, true})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	// Average ranks over ties; tieSum is Σ(t³−t) over tie groups.
	var r2, tieSum float64
	n := len(all)
	ties := false
	for i := 0; i < n; {
		j := i
		for j < n && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // ranks i+1..j, averaged
		for k := i; k < j; k++ {
			if all[k].sample {
				r2 += rank
			}
		}
		if t := float64(j - i); t > 1 {
			ties = true
			tieSum += t*t*t - t
		}
		i = j
	}
	u := r2 - float64(n2*(n2+1))/2
	res := MWResult{U: u}
	if !ties && n1 <= exactMax && n2 <= exactMax {
		res.P, res.Exact = exactUpper(n1, n2, int(math.Round(u))), true
		return res
	}
	fn1, fn2, fn := float64(n1), float64(n2), float64(n)
	mean := fn1 * fn2 / 2
	variance := fn1 * fn2 / 12 * ((fn + 1) - tieSum/(fn*(fn-1)))
	if variance <= 0 {
		res.P = 1 // every value ties: no evidence either way
		return res
	}
	z := (u - mean - 0.5) / math.Sqrt(variance)
	res.P = 0.5 * math.Erfc(z/math.Sqrt2)
	return res
}

// exactUpper is P(U >= u) for sides of n1 and n2 distinct values, from
// the number of arrangements with each U: N(m, k, u) = N(m, k−1, u−m) +
// N(m−1, k, u), by where the largest value falls.
func exactUpper(n1, n2, u int) float64 {
	maxU := n1 * n2
	// prev[m][x] holds N(m, k-1, x); build k from 0 to n2.
	cur := make([][]float64, n1+1)
	for m := range cur {
		cur[m] = make([]float64, maxU+1)
		cur[m][0] = 1 // k = 0: one arrangement, U = 0
	}
	for k := 1; k <= n2; k++ {
		next := make([][]float64, n1+1)
		for m := 0; m <= n1; m++ {
			next[m] = make([]float64, maxU+1)
			for x := 0; x <= maxU; x++ {
				var c float64
				if x-m >= 0 {
					c += cur[m][x-m] // the largest is a sample value above all m
				}
				if m > 0 {
					c += next[m-1][x] // the largest is a baseline value
				}
				next[m][x] = c
			}
		}
		cur = next
	}
	var total, upper float64
	for x := 0; x <= maxU; x++ {
		total += cur[n1][x]
		if x >= u {
			upper += cur[n1][x]
		}
	}
	return upper / total
}

func clean(v []float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

// Quantile is the q-quantile by the nearest-rank method on sorted
// values (the value below which a fraction q of them fall); 0 for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
