package impact

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

// Policy is how strict the verdict is. Impact is declared in a window
// only when its latencies are both significantly (p < Alpha) and
// practically worse: its p99, or its median, above a threshold of the
// baseline's that is MaxP99Ratio (MaxP50Ratio) or, on a machine whose
// latencies wander (a shared, loaded one), what the baseline's own
// noise says, whichever is higher; and above it not only as estimated
// but at the lower end of the ratio's confidence interval (1 − Alpha):
// a window's p99 is one estimate from its dozen slowest requests. (The
// p99's interval is its own significance test: a tail of stuck
// requests is impacted even when the rank test, which weighs them
// against the many as fast as before, does not say slower.) A
// tiny but consistent shift is no impact a user notices, a large p99
// on a handful of requests is no evidence, and a slow second that the
// baseline also had is the machine, not the upgrade. The thresholds
// carry the machine's wander (a stall slows many requests at once, and
// each second of the baseline is judged whole), the interval the
// window's own sampling error; a window past a threshold as estimated
// but not at its interval's lower end is "insufficient", not impacted.
// The median is judged too because a spiky baseline raises the p99's
// threshold so far that only the median still shows every request
// being slower. And the rate: clients that wait on a stalled service
// send fewer requests, so a stall shows as a window with few (and not
// especially slow) requests; a window whose request rate fell below
// MinRateRatio of the baseline's (or below what its noise allows) is
// impacted whatever its latencies, unless it has enough requests to
// judge their latencies and those explain the drop: as many requests
// in flight as in the baseline (clients busy with slower requests, as
// on a machine that got busier, not idle) leaves it to the latencies,
// their thresholds and intervals.
type Policy struct {
	Alpha       float64 `json:"alpha"`         // default 0.01
	MaxP99Ratio float64 `json:"max_p99_ratio"` // default 1.5: the p99 threshold's floor
	MaxP50Ratio float64 `json:"max_p50_ratio"` // default 2: the median's
	// MinRateRatio is the request rate, relative to the baseline's,
	// below which a window is impacted (default 0.5): the highest
	// threshold, lowered by the baseline's noise.
	MinRateRatio float64 `json:"min_rate_ratio"`
	// MinSamples is the fewest requests a window (and each of the
	// baseline's chunks) needs to be judged (default 20); fewer leave
	// its zero-impact verdict "insufficient".
	MinSamples int `json:"min_samples"`
	// MinWindowS is the shortest window judged, in seconds (default 1),
	// and the length of the chunks the baseline is cut into to measure
	// its noise, lengthened for sparse samples (a metrics signal's one a
	// step) until a chunk holds MinSamples at the baseline's rate: every
	// window judged is at least as long as a chunk, so the chunks' spread
	// bounds a window's from above.
	MinWindowS float64 `json:"min_window_s"`
	// MinChunks is the fewest chunks of MinWindowS, each with
	// MinSamples requests, the baseline must hold for its noise to be
	// measured (default 4); with fewer, no window is judged.
	MinChunks int `json:"min_chunks"`
	// NoiseMargin multiplies the worst chunk's p99 ratio to the
	// baseline's (the A/A ratio: no upgrade ran) into the threshold
	// (default 1.25), as OpenShift's disruption tests allow what their
	// history shows plus a margin.
	NoiseMargin float64 `json:"noise_margin"`
}

func (p Policy) withDefaults() Policy {
	if p.Alpha <= 0 {
		p.Alpha = 0.01
	}
	if p.MaxP99Ratio <= 0 {
		p.MaxP99Ratio = 1.5
	}
	if p.MaxP50Ratio <= 0 {
		p.MaxP50Ratio = 2
	}
	if p.MinRateRatio <= 0 {
		p.MinRateRatio = 0.5
	}
	if p.MinSamples <= 0 {
		p.MinSamples = 20
	}
	if p.MinWindowS <= 0 {
		p.MinWindowS = 1
	}
	if p.MinChunks <= 0 {
		p.MinChunks = 4
	}
	if p.NoiseMargin <= 0 {
		p.NoiseMargin = 1.25
	}
	return p
}

// MinBaseline is the shortest baseline whose noise the policy can
// measure (MinChunks chunks of MinWindowS), a lower bound: each chunk
// also needs MinSamples requests.
func (p Policy) MinBaseline() time.Duration {
	p = p.withDefaults()
	return time.Duration(float64(p.MinChunks) * p.MinWindowS * float64(time.Second))
}

// Verdict values of zero impact.
const (
	Yes          = "yes"
	No           = "no"
	Insufficient = "insufficient" // too few requests to judge
)

// WindowVerdict is one window's judgment.
type WindowVerdict struct {
	Name      string  `json:"name"`
	Kind      string  `json:"kind"`
	Requests  int     `json:"requests"`
	Failed    int     `json:"failed"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	P50Ratio  float64 `json:"p50_ratio"`  // to the baseline's median
	RateRatio float64 `json:"rate_ratio"` // requests a second, to the baseline's
	// InFlightRatio is the requests in flight (Little's law: the rate
	// times the mean latency of the requests started in the window,
	// failed ones too) to the baseline's: clients that send fewer
	// requests because each takes longer keep as many in flight.
	InFlightRatio float64 `json:"inflight_ratio"`
	P99Ratio      float64 `json:"p99_ratio"` // to the baseline's p99
	// P99RatioCI and P50RatioCI are the ratios' confidence intervals:
	// each bound holds with probability 1 − Alpha (RatioInterval of the
	// window's and the baseline's QuantileInterval, each side at
	// Alpha/2). Absent in windows not judged by their latencies.
	P99RatioCI *Interval `json:"p99_ratio_ci,omitempty"`
	P50RatioCI *Interval `json:"p50_ratio_ci,omitempty"`
	// P99Threshold, P50Threshold and RateThreshold are the thresholds
	// the window was judged against: the noise's, raised by the
	// control's ratios in the window when there is one.
	P99Threshold  float64 `json:"p99_threshold"`
	P50Threshold  float64 `json:"p50_threshold"`
	RateThreshold float64 `json:"rate_threshold"`
	U             float64 `json:"u"`
	PValue        float64 `json:"p_value"`
	ZeroDowntime  bool    `json:"zero_downtime"`
	ZeroImpact    string  `json:"zero_impact"` // yes, no, insufficient
	Reason        string  `json:"reason"`
	// Control is the control's ratios in the window, when one was
	// given and ran enough requests in it.
	Control *Control `json:"control,omitempty"`
}

// Noise is how much the baseline's latencies wandered with no upgrade
// running: its p50 and p99 chunk by chunk against the whole baseline's
// (A/A windows), and the thresholds that makes of them.
type Noise struct {
	ChunkS float64 `json:"chunk_s"`
	// Chunks are the chunks' ratios to the baseline, in time order;
	// chunks with fewer than MinSamples requests are left out.
	Chunks        []ChunkRatio `json:"chunks"`
	WorstP50Ratio float64      `json:"worst_p50_ratio"`
	WorstP99Ratio float64      `json:"worst_p99_ratio"`
	// WorstRateRatio is the lowest chunk's request rate to the
	// baseline's.
	WorstRateRatio float64 `json:"worst_rate_ratio"`
	// P99Threshold and P50Threshold are the ratios above which a window
	// is impacted: max(MaxP99Ratio, NoiseMargin × WorstP99Ratio), and
	// the same of the median.
	P99Threshold float64 `json:"p99_threshold"`
	P50Threshold float64 `json:"p50_threshold"`
	// RateThreshold is the rate ratio below which a window is
	// impacted: min(MinRateRatio, WorstRateRatio / NoiseMargin).
	RateThreshold float64 `json:"rate_threshold"`
	// BaseRate is the baseline's requests a second, BaseInFlight its
	// requests in flight (the rate times the mean latency).
	BaseRate     float64 `json:"base_rate"`
	BaseInFlight float64 `json:"base_inflight"`
	// Enough says the baseline held MinChunks usable chunks; without,
	// Reason says what it lacked and no window is judged.
	Enough bool   `json:"enough"`
	Reason string `json:"reason"`
}

// ChunkRatio is one chunk of the baseline against the whole of it.
type ChunkRatio struct {
	FromS     float64 `json:"from_s"` // from the baseline's start
	Requests  int     `json:"requests"`
	P50Ratio  float64 `json:"p50_ratio"`
	P99Ratio  float64 `json:"p99_ratio"`
	RateRatio float64 `json:"rate_ratio"`
}

// MeasureNoise cuts the baseline [from, to) into chunks of MinWindowS
// (longer if its samples are sparse) and compares each chunk's p50, p99
// and rate with the whole baseline's.
func MeasureNoise(samples []traffic.Sample, from, to time.Time, p Policy) Noise {
	p = p.withDefaults()
	n := Noise{ChunkS: p.MinWindowS, P99Threshold: p.MaxP99Ratio, P50Threshold: p.MaxP50Ratio, RateThreshold: p.MinRateRatio,
		BaseRate: rate(samples, from, to), BaseInFlight: inFlight(samples, from, to), WorstRateRatio: math.Inf(1)}
	if n.BaseRate > 0 {
		n.ChunkS = max(n.ChunkS, float64(p.MinSamples)/n.BaseRate)
	}
	chunk := time.Duration(n.ChunkS * float64(time.Second))
	base := latencies(samples, from, to, nil)
	sort.Float64s(base)
	baseP50, baseP99 := Quantile(base, 0.5), Quantile(base, 0.99)
	short := 0 // chunks with too few requests
	for c := from; !c.Add(chunk).After(to); c = c.Add(chunk) {
		lat := latencies(samples, c, c.Add(chunk), nil)
		if len(lat) < p.MinSamples || baseP50 <= 0 {
			short++
			continue
		}
		sort.Float64s(lat)
		r := ChunkRatio{FromS: c.Sub(from).Seconds(), Requests: len(lat), P50Ratio: Quantile(lat, 0.5) / baseP50, P99Ratio: Quantile(lat, 0.99) / baseP99,
			RateRatio: rate(samples, c, c.Add(chunk)) / n.BaseRate}
		n.Chunks = append(n.Chunks, r)
		n.WorstP50Ratio = max(n.WorstP50Ratio, r.P50Ratio)
		n.WorstP99Ratio = max(n.WorstP99Ratio, r.P99Ratio)
		n.WorstRateRatio = min(n.WorstRateRatio, r.RateRatio)
	}
	if len(n.Chunks) == 0 {
		n.WorstRateRatio = 0
	}
	if len(n.Chunks) < p.MinChunks {
		n.Reason = fmt.Sprintf("a baseline of %.1fs holds %d chunks of %.3gs with at least %d requests (%d with fewer), fewer than the %d needed to measure its noise",
			to.Sub(from).Seconds(), len(n.Chunks), n.ChunkS, p.MinSamples, short, p.MinChunks)
		return n
	}
	n.Enough = true
	n.P99Threshold = max(p.MaxP99Ratio, p.NoiseMargin*n.WorstP99Ratio)
	n.P50Threshold = max(p.MaxP50Ratio, p.NoiseMargin*n.WorstP50Ratio)
	n.RateThreshold = min(p.MinRateRatio, n.WorstRateRatio/p.NoiseMargin)
	n.Reason = fmt.Sprintf("the worst of %d chunks of %.3gs in the baseline had a p99 %.2f×, a median %.2f× and a request rate %.2f× the baseline's: impact above %.2f×, %.2f×, below %.2f× (%g× those, at least %g×, %g×, at most %g×)",
		len(n.Chunks), n.ChunkS, n.WorstP99Ratio, n.WorstP50Ratio, n.WorstRateRatio, n.P99Threshold, n.P50Threshold, n.RateThreshold,
		p.NoiseMargin, p.MaxP99Ratio, p.MaxP50Ratio, p.MinRateRatio)
	return n
}

// Verdict is the whole upgrade's judgment.
type Verdict struct {
	Policy       Policy          `json:"policy"`
	Baseline     traffic.Stats   `json:"baseline"`
	Noise        Noise           `json:"noise"`
	ZeroDowntime bool            `json:"zero_downtime"`
	ZeroImpact   bool            `json:"zero_impact"`
	Windows      []WindowVerdict `json:"windows"`
	// Insufficient counts the windows not judged: too short or too
	// sparse, or Unconfirmed.
	Insufficient int `json:"insufficient"`
	// Unconfirmed counts the windows whose p99 or median was past its
	// threshold as estimated but not at the lower end of its interval.
	Unconfirmed int    `json:"unconfirmed"`
	Reason      string `json:"reason"`
}

// Judge compares the requests started in each window with those of the
// baseline [baseFrom, baseTo). The whole upgrade is zero-downtime when
// no window saw a failure, zero-impact when no window was judged "no".
// A window is "insufficient", not judged, when it is shorter than
// MinWindowS, holds fewer than MinSamples requests, or the baseline's
// noise could not be measured.
func Judge(samples []traffic.Sample, baseFrom, baseTo time.Time, windows []timeline.Window, p Policy) Verdict {
	return JudgeWithControl(samples, nil, baseFrom, baseTo, windows, p)
}

// Control is how a control fared in one window against its own
// baseline: requests to something on the same machine that the upgrade
// does not touch, so that a machine that got busier after the baseline
// (other work started) is told from an upgrade that hurt the clients.
type Control struct {
	Requests  int     `json:"requests"`
	P50Ratio  float64 `json:"p50_ratio"`
	P99Ratio  float64 `json:"p99_ratio"`
	RateRatio float64 `json:"rate_ratio"`
}

// JudgeWithControl judges like Judge, and in each window where the
// control has MinSamples requests scales the thresholds by how much
// slower (p50, p99) and sparser (rate) the control was than in its own
// baseline: a window is impacted only by what the machine's state at
// that time does not explain. A control never tightens a threshold.
func JudgeWithControl(samples, control []traffic.Sample, baseFrom, baseTo time.Time, windows []timeline.Window, p Policy) Verdict {
	p = p.withDefaults()
	cBase := latencies(control, baseFrom, baseTo, nil)
	sort.Float64s(cBase)
	cRate := rate(control, baseFrom, baseTo)
	base := latencies(samples, baseFrom, baseTo, nil)
	sort.Float64s(base)
	noise := MeasureNoise(samples, baseFrom, baseTo, p)
	v := Verdict{Policy: p, Baseline: traffic.Summarize(samples, baseFrom, baseTo), Noise: noise, ZeroDowntime: true, ZeroImpact: true}
	baseP50, baseP99 := Quantile(base, 0.5), Quantile(base, 0.99)
	// Each ratio's lower bound fails only if the window's quantile lies
	// below its interval or the baseline's above its own: Alpha/2 each.
	beta := p.Alpha / 2
	base99 := QuantileInterval(base, 0.99, beta)
	base50 := QuantileInterval(base, 0.5, beta)
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
		if baseP50 > 0 {
			wv.P50Ratio = wv.P50MS / baseP50
		}
		d := w.To.Sub(w.From).Seconds()
		if noise.BaseRate > 0 && d > 0 {
			wv.RateRatio = float64(wv.Requests) / d / noise.BaseRate
		}
		if noise.BaseInFlight > 0 {
			wv.InFlightRatio = inFlight(samples, w.From, w.To) / noise.BaseInFlight
		}
		mw := MannWhitney(base, lat)
		wv.U, wv.PValue = mw.U, mw.P
		p99T, p50T, rateT := noise.P99Threshold, noise.P50Threshold, noise.RateThreshold
		machine := ""
		if c := controlIn(control, cBase, cRate, w, p.MinSamples); c != nil {
			wv.Control = c
			p99T, p50T, rateT = p99T*max(1, c.P99Ratio), p50T*max(1, c.P50Ratio), rateT*min(1, c.RateRatio)
			machine = fmt.Sprintf("; the control on the same machine: p99 %.2f×, median %.2f×, rate %.2f× its baseline's", c.P99Ratio, c.P50Ratio, c.RateRatio)
		}
		wv.P99Threshold, wv.P50Threshold, wv.RateThreshold = p99T, p50T, rateT
		switch {
		case d < noise.ChunkS:
			wv.ZeroImpact = Insufficient
			wv.Reason = fmt.Sprintf("a window of %.2fs: shorter than %.3gs", d, noise.ChunkS)
		case !noise.Enough:
			wv.ZeroImpact = Insufficient
			wv.Reason = noise.Reason
		case wv.RateRatio < rateT && (len(lat) < p.MinSamples || wv.InFlightRatio < rateT):
			// Judged even with few requests: the baseline's rate says
			// how many there would have been. With enough to judge their
			// latencies, only a drop they do not explain: clients whose
			// requests merely took longer kept as many in flight.
			wv.ZeroImpact = No
			wv.Reason = fmt.Sprintf("the clients got %.0f requests/s through, %.2f× the baseline's %.0f/s (< %.2f×, what its noise allows), with %.2f× as many in flight: they waited on the service",
				float64(wv.Requests)/d, wv.RateRatio, noise.BaseRate, rateT, wv.InFlightRatio) + machine
		case len(lat) < p.MinSamples:
			wv.ZeroImpact = Insufficient
			wv.Reason = fmt.Sprintf("%d requests in the window: fewer than %d", len(lat), p.MinSamples)
		default:
			r99 := RatioInterval(QuantileInterval(lat, 0.99, beta), base99)
			r50 := RatioInterval(QuantileInterval(lat, 0.5, beta), base50)
			wv.P99RatioCI, wv.P50RatioCI = &r99, &r50
			wv.ZeroImpact, wv.Reason = judgeLatency(mw, p.Alpha, r99, r50, p99T, p50T)
			if wv.ZeroImpact == Insufficient {
				v.Unconfirmed++
			}
			if wv.ZeroImpact == Yes {
				wv.Reason = fmt.Sprintf("%s and rate %.2f× the baseline's (impact above %.2f×, %.2f×, below %.2f×)", wv.Reason, wv.RateRatio, p99T, p50T, rateT)
			}
			if wv.RateRatio < rateT {
				wv.Reason += fmt.Sprintf("; the rate fell to %.2f× but %.2f× as many requests were in flight: the clients waited on slower requests, judged by their latencies", wv.RateRatio, wv.InFlightRatio)
			}
			wv.Reason += machine
		}
		if wv.ZeroImpact == Insufficient {
			v.Insufficient++
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
	case !noise.Enough && len(windows) > 0:
		v.Reason = "no request failed; impact not judged: " + noise.Reason
	default:
		v.Reason = fmt.Sprintf("no request failed; no window significantly slower than the baseline by more than its noise allows (p99 %.2f×, median %.2f×)",
			noise.P99Threshold, noise.P50Threshold)
	}
	if short := v.Insufficient - v.Unconfirmed; short > 0 && noise.Enough {
		v.Reason += fmt.Sprintf(" (%d of %d windows too short or sparse to judge)", short, len(windows))
	}
	if v.Unconfirmed > 0 {
		v.Reason += fmt.Sprintf(" (%d of %d windows past a threshold as estimated but not at the lower end of its interval: insufficient)", v.Unconfirmed, len(windows))
	}
	return v
}

// judgeLatency judges a window's latencies: impacted when the p99's
// ratio to the baseline's is past its threshold at the lower end of its
// confidence interval, or the median's is and the rank test says they
// are slower (p < alpha); insufficient when the test says slower and
// an estimate is past its threshold but its interval reaches below it
// (too few requests to tell a slow moment of the machine from an
// impact); otherwise not impacted. The p99's interval is its own test
// at alpha; the rank test, which weighs every request, would hide a
// tail of stuck requests behind the many that were as fast as before:
// the outliers Glance's gate asks about.
func judgeLatency(mw MWResult, alpha float64, r99, r50 Interval, p99T, p50T float64) (string, string) {
	slower := mw.P < alpha
	ci := func(what string, r Interval, t float64) string {
		return fmt.Sprintf("%s %.2f× the baseline's (%.0f%% interval %s) against %.2f×, what its noise allows", what, r.Est, 100*(1-alpha), r.Range(), t)
	}
	switch {
	case r99.Lo > p99T:
		return No, fmt.Sprintf("slower than the baseline: the p99 %s, past it at the interval's lower end (p = %.2g)", ci("is", r99, p99T), mw.P)
	case slower && r50.Lo > p50T:
		return No, fmt.Sprintf("slower than the baseline: p = %.2g < %g and the median %s", mw.P, alpha, ci("is", r50, p50T))
	case slower && r99.Est > p99T:
		return Insufficient, fmt.Sprintf("p = %.2g < %g and the p99 %s: past it as estimated, not at the interval's lower end: too few requests to tell", mw.P, alpha, ci("is", r99, p99T))
	case slower && r50.Est > p50T:
		return Insufficient, fmt.Sprintf("p = %.2g < %g and the median %s: past it as estimated, not at the interval's lower end: too few requests to tell", mw.P, alpha, ci("is", r50, p50T))
	}
	return Yes, fmt.Sprintf("p = %.2g, p99 %.2f× %s, median %.2f× %s", mw.P, r99.Est, r99.Range(), r50.Est, r50.Range())
}

// controlIn is the control's ratios in window w against its baseline
// (sorted latencies and rate), or nil without enough of it.
func controlIn(control []traffic.Sample, base []float64, baseRate float64, w timeline.Window, minSamples int) *Control {
	lat := latencies(control, w.From, w.To, nil)
	if len(lat) < minSamples || len(base) < minSamples || baseRate <= 0 || Quantile(base, 0.5) <= 0 {
		return nil
	}
	sort.Float64s(lat)
	return &Control{Requests: len(lat), P50Ratio: Quantile(lat, 0.5) / Quantile(base, 0.5), P99Ratio: Quantile(lat, 0.99) / Quantile(base, 0.99),
		RateRatio: rate(control, w.From, w.To) / baseRate}
}

// rate is the requests (failed ones too) started in [from, to) a second.
func rate(samples []traffic.Sample, from, to time.Time) float64 {
	d := to.Sub(from).Seconds()
	if d <= 0 {
		return 0
	}
	n := 0
	for _, s := range samples {
		if !s.Start.Before(from) && s.Start.Before(to) {
			n++
		}
	}
	return float64(n) / d
}

// inFlight is the mean number of requests in flight that started in
// [from, to): their summed latency (failed ones too) over its length,
// their rate times their mean latency by Little's law.
func inFlight(samples []traffic.Sample, from, to time.Time) float64 {
	d := to.Sub(from).Seconds()
	if d <= 0 {
		return 0
	}
	var busy time.Duration
	for _, s := range samples {
		if !s.Start.Before(from) && s.Start.Before(to) {
			busy += s.Latency
		}
	}
	return busy.Seconds() / d
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
