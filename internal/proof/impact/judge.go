package impact

import (
	"fmt"
	"sort"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

// Policy is how strict the verdict is. Impact is declared in a window
// only when its latencies are both significantly (p < Alpha) and
// practically (p99 above MaxP99Ratio times the baseline's) worse: a
// tiny but consistent shift is no impact a user notices, and a large
// p99 on a handful of requests is no evidence.
type Policy struct {
	Alpha       float64 `json:"alpha"`         // default 0.01
	MaxP99Ratio float64 `json:"max_p99_ratio"` // default 1.5
	// MinSamples is the fewest requests a window needs to be judged
	// (default 20); fewer leave its zero-impact verdict "insufficient".
	MinSamples int `json:"min_samples"`
}

func (p Policy) withDefaults() Policy {
	if p.Alpha <= 0 {
		p.Alpha = 0.01
	}
	if p.MaxP99Ratio <= 0 {
		p.MaxP99Ratio = 1.5
	}
	if p.MinSamples <= 0 {
		p.MinSamples = 20
	}
	return p
}

// Verdict values of zero impact.
const (
	Yes          = "yes"
	No           = "no"
	Insufficient = "insufficient" // too few requests to judge
)

// WindowVerdict is one window's judgment.
type WindowVerdict struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Requests     int     `json:"requests"`
	Failed       int     `json:"failed"`
	P50MS        float64 `json:"p50_ms"`
	P99MS        float64 `json:"p99_ms"`
	P99Ratio     float64 `json:"p99_ratio"` // to the baseline's p99
	U            float64 `json:"u"`
	PValue       float64 `json:"p_value"`
	ZeroDowntime bool    `json:"zero_downtime"`
	ZeroImpact   string  `json:"zero_impact"` // yes, no, insufficient
	Reason       string  `json:"reason"`
}

// Verdict is the whole upgrade's judgment.
type Verdict struct {
	Policy       Policy          `json:"policy"`
	Baseline     traffic.Stats   `json:"baseline"`
	ZeroDowntime bool            `json:"zero_downtime"`
	ZeroImpact   bool            `json:"zero_impact"`
	Windows      []WindowVerdict `json:"windows"`
	Reason       string          `json:"reason"`
}

// Judge compares the requests started in each window with those of the
// baseline [baseFrom, baseTo). The whole upgrade is zero-downtime when
// no window saw a failure, zero-impact when no window was judged "no".
func Judge(samples []traffic.Sample, baseFrom, baseTo time.Time, windows []timeline.Window, p Policy) Verdict {
	p = p.withDefaults()
	base := latencies(samples, baseFrom, baseTo, nil)
	sort.Float64s(base)
	v := Verdict{Policy: p, Baseline: traffic.Summarize(samples, baseFrom, baseTo), ZeroDowntime: true, ZeroImpact: true}
	baseP99 := Quantile(base, 0.99)
	var worst string
	for _, w := range windows {
		failed := 0
		lat := latencies(samples, w.From, w.To, &failed)
		sort.Float64s(lat)
		wv := WindowVerdict{Name: w.Name, Kind: string(w.Kind), Requests: len(lat) + failed, Failed: failed,
			P50MS: Quantile(lat, 0.5), P99MS: Quantile(lat, 0.99), ZeroDowntime: failed == 0}
		if baseP99 > 0 {
			wv.P99Ratio = wv.P99MS / baseP99
		}
		mw := MannWhitney(base, lat)
		wv.U, wv.PValue = mw.U, mw.P
		switch {
		case len(lat) < p.MinSamples || len(base) < p.MinSamples:
			wv.ZeroImpact = Insufficient
			wv.Reason = fmt.Sprintf("%d requests in the window, %d in the baseline: fewer than %d", len(lat), len(base), p.MinSamples)
		case mw.P < p.Alpha && wv.P99Ratio > p.MaxP99Ratio:
			wv.ZeroImpact = No
			wv.Reason = fmt.Sprintf("slower than the baseline: p = %.2g < %g and p99 %.1fms is %.2f× the baseline's %.1fms (> %g×)", mw.P, p.Alpha, wv.P99MS, wv.P99Ratio, baseP99, p.MaxP99Ratio)
		default:
			wv.ZeroImpact = Yes
			wv.Reason = fmt.Sprintf("p = %.2g, p99 %.2f× the baseline's", mw.P, wv.P99Ratio)
		}
		if failed > 0 {
			wv.Reason = fmt.Sprintf("%d request(s) failed; ", failed) + wv.Reason
			v.ZeroDowntime = false
		}
		if wv.ZeroImpact == No {
			v.ZeroImpact = false
			if worst == "" {
				worst = w.Name + ": " + wv.Reason
			}
		}
		v.Windows = append(v.Windows, wv)
	}
	switch {
	case !v.ZeroDowntime && !v.ZeroImpact:
		v.Reason = "requests failed, and " + worst
	case !v.ZeroDowntime:
		v.Reason = "requests failed during the upgrade"
	case !v.ZeroImpact:
		v.Reason = worst
	default:
		v.Reason = "no request failed; no window significantly slower than the baseline"
	}
	return v
}

// latencies are the latencies (ms) of the successful requests started
// in [from, to); failed, if given, counts the failed ones.
func latencies(samples []traffic.Sample, from, to time.Time, failed *int) []float64 {
	var out []float64
	for _, s := range samples {
		if s.Start.Before(from) || !s.Start.Before(to) {
			continue
		}
		if !s.OK {
			if failed != nil {
				*failed++
			}
			continue
		}
		out = append(out, float64(s.Latency.Microseconds())/1000)
	}
	return out
}
