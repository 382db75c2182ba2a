// Package proof is what ferry shows for its promise of an upgrade that
// clients do not notice: it drives the description's traffic (or reads
// a signal of the service's own traffic) from a baseline before the
// first member is touched until after the last, judges each batch as it
// ends (so that policy on_impact can act), and turns what the clients
// saw into the report, window by window.
package proof

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Signal is a source of samples of the service's own traffic (one per
// step of a metrics query), judged like the requests ferry drives.
type Signal interface {
	Samples(ctx context.Context, from, to time.Time) ([]traffic.Sample, error)
}

// Session is the traffic of one upgrade.
type Session struct {
	spec *config.Traffic
	cfg  traffic.Config
	rec  *traffic.Recorder
	// ctl is the control's recorder (spec.Control), nil without one.
	ctl    *traffic.Recorder
	signal Signal
	policy impact.Policy

	began time.Time // traffic started: the baseline's start
	// baseTo is the upgrade's start, the baseline's end: set by
	// WaitBaseline in the request that starts the upgrade while other
	// requests and the engine's judge read it, so under mu.
	mu     sync.Mutex
	baseTo time.Time
	cancel context.CancelFunc
	done   <-chan struct{}
	ctlEnd <-chan struct{}
}

// Options are a session's optional parts.
type Options struct {
	// Recorder receives the samples (its OnSample may feed metrics or a
	// live chart); a new one if nil.
	Recorder *traffic.Recorder
	// Signal, if set, is judged besides (or, with no targets, instead
	// of) the driven traffic.
	Signal Signal
	// Control, if set, records requests to something on the same
	// machine that the upgrade does not touch, driven by the caller
	// (ferry rehearse serves and drives its own): the verdicts are
	// judged with it as with the spec's control (impact.JudgeWithControl),
	// which it stands in for.
	Control *traffic.Recorder
}

// Start starts the spec's clients now (none when the spec has no
// targets) and returns at once.
func Start(ctx context.Context, spec *config.Traffic, o Options) *Session {
	s := &Session{spec: spec, cfg: traffic.FromSpec(spec), rec: o.Recorder, signal: o.Signal, began: time.Now(),
		policy: impact.Policy{Alpha: spec.Verdict.Alpha, MaxP99Ratio: spec.Verdict.P99Ratio, MinSamples: spec.Verdict.MinRequests}}
	if s.rec == nil {
		s.rec = traffic.NewRecorder()
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	closed := make(chan struct{})
	close(closed)
	s.done, s.ctlEnd = closed, closed
	if len(spec.Targets) > 0 {
		s.done = traffic.StartWith(tctx, s.cfg, s.rec)
	}
	if o.Control != nil {
		s.ctl = o.Control
	} else if c := controlConfig(spec); c != nil {
		s.ctl = traffic.NewRecorder()
		s.ctlEnd = traffic.StartWith(tctx, *c, s.ctl)
	}
	return s
}

// controlConfig is the control's traffic (spec.Control): one client
// sending its GET at its rate; nil without a control.
func controlConfig(spec *config.Traffic) *traffic.Config {
	c := spec.Control
	if c == nil {
		return nil
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil // the description's check refused it
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	cfg := traffic.Control(u.Scheme+"://"+u.Host, path, spec.Seed)
	cfg.Rate, cfg.Timeout = c.Rate, spec.Timeout.D()
	return &cfg
}

// controlSamples is the control's samples, nil without one.
func (s *Session) controlSamples() []traffic.Sample {
	if s.ctl == nil {
		return nil
	}
	return s.ctl.Samples()
}

// Recorder is the driven traffic's recorder.
func (s *Session) Recorder() *traffic.Recorder { return s.rec }

// Began is when the traffic (and the baseline) began.
func (s *Session) Began() time.Time { return s.began }

// WaitBaseline waits until the baseline has run for the spec's
// Baseline, then marks its end: the upgrade may begin.
func (s *Session) WaitBaseline(ctx context.Context) error {
	t := time.NewTimer(time.Until(s.began.Add(s.spec.Baseline.D())))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	s.mu.Lock()
	s.baseTo = time.Now()
	s.mu.Unlock()
	return nil
}

// BaselineDone reports whether the baseline has ended.
func (s *Session) BaselineDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.baseTo.IsZero()
}

// BaselineEnd is when the baseline ended (the upgrade's start).
func (s *Session) BaselineEnd() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.baseTo.IsZero() {
		return time.Now()
	}
	return s.baseTo
}

// Judge judges the window [from, to) against the baseline: it returns
// how clients were hurt (requests failed, or latencies significantly
// and practically worse), or "" if they were not or too few requests
// ran to say. It fits engine.Config.Judge.
func (s *Session) Judge(from, to time.Time) string {
	w := []timeline.Window{{Name: "batch", Kind: timeline.KindBatch, From: from, To: to}}
	for _, src := range s.sources(context.Background(), to) {
		v := impact.JudgeWithControl(src.samples, src.control, s.began, s.BaselineEnd(), w, s.policy).Windows[0]
		switch {
		case !v.ZeroDowntime:
			return fmt.Sprintf("%s: %d of %d requests failed", src.name, v.Failed, v.Requests)
		case v.ZeroImpact == impact.No:
			return src.name + ": " + v.Reason
		}
	}
	return ""
}

type source struct {
	name    string
	samples []traffic.Sample
	// control is the control's samples, for the driven traffic (the
	// signal is the service's own and has none).
	control []traffic.Sample
	err     error
}

// sources are the driven traffic's samples and the signal's, up to to.
func (s *Session) sources(ctx context.Context, to time.Time) []source {
	var out []source
	if len(s.spec.Targets) > 0 {
		out = append(out, source{name: "traffic", samples: s.rec.Samples(), control: s.controlSamples()})
	}
	if s.signal != nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		smp, err := s.signal.Samples(ctx, s.began, to)
		out = append(out, source{name: "prometheus", samples: smp, err: err})
	}
	return out
}

// Stop lets the traffic run for the spec's After, then stops the
// clients and waits for them.
func (s *Session) Stop(ctx context.Context) {
	if d := s.spec.After.D(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	s.cancel()
	<-s.done
	<-s.ctlEnd
}

// Report is the proof of one upgrade, in stable JSON (docs/report.md
// lists its fields).
type Report struct {
	UpgradeID string `json:"upgrade_id"`
	From      string `json:"from"`
	To        string `json:"to"`
	State     string `json:"state"`
	Reason    string `json:"reason,omitempty"`
	// Began is when the traffic (and its baseline) began; Started and
	// Ended bound the upgrade. Windows' offsets are from Started.
	Began     time.Time `json:"began"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	DurationS float64   `json:"duration_s"`
	// Traffic is what ferry drove; nil when it drove none.
	Traffic *TrafficReport `json:"traffic,omitempty"`
	// Prometheus is the signal's verdict; nil without one.
	Prometheus *SignalReport `json:"prometheus,omitempty"`
	// ZeroDowntime and ZeroImpact are the whole upgrade's verdict: every
	// source's, together.
	ZeroDowntime bool `json:"zero_downtime"`
	ZeroImpact   bool `json:"zero_impact"`
	// Pace compares the upgrade's wall time with the lower bound of its
	// plan under its policy: what ferry itself added.
	Pace upgrade.Pace `json:"pace"`
}

// TrafficReport is the driven traffic's part of a report.
type TrafficReport struct {
	Targets     []string      `json:"targets"`
	Rate        float64       `json:"rate"`
	Concurrency int           `json:"concurrency"`
	Seed        uint64        `json:"seed"`
	Baseline    traffic.Stats `json:"baseline"`
	Requests    traffic.Stats `json:"requests"` // during the upgrade
	// Achieved is the rate sent during the upgrade, and whether it fell
	// short of Rate.
	traffic.Achieved
	Windows []Window       `json:"windows"`
	Verdict impact.Verdict `json:"verdict"`
	Writes  *Writes        `json:"writes,omitempty"`
	// Control is what the control saw (spec.control), when there is
	// one: each window's verdict has its ratios.
	Control *ControlReport `json:"control,omitempty"`
}

// ControlReport is the control's part of a traffic report: its request
// and what it saw before and during the upgrade.
type ControlReport struct {
	URL      string        `json:"url"`
	Baseline traffic.Stats `json:"baseline"`
	Requests traffic.Stats `json:"requests"`
}

// SignalReport is a metrics signal's part of a report.
type SignalReport struct {
	Samples int            `json:"samples"`
	Verdict impact.Verdict `json:"verdict"`
	Error   string         `json:"error,omitempty"`
}

// Window is what clients saw in one state or batch of the upgrade.
type Window struct {
	Name     string        `json:"name"`
	Kind     string        `json:"kind"` // state or batch
	FromS    float64       `json:"from_s"`
	ToS      float64       `json:"to_s"`
	Requests traffic.Stats `json:"requests"`
}

// Writes is the read-back of every write the service acknowledged.
type Writes struct {
	Acknowledged int      `json:"acknowledged"`
	Verified     int      `json:"verified"`
	Lost         int      `json:"lost"`
	LostKeys     []string `json:"lost_keys,omitempty"`
}

// Report judges the whole upgrade u, whose events are evs and which
// ended at end, window by window. With verify, every acknowledged
// write is read back first.
func (s *Session) Report(ctx context.Context, u upgrade.Upgrade, evs []store.Event, end time.Time, verify bool) Report {
	start := s.BaselineEnd()
	r := Report{UpgradeID: u.ID, From: u.From, To: u.To, State: u.State.String(), Reason: u.Reason, Pace: u.Pace(end),
		Began: s.began, Started: start, Ended: end, DurationS: end.Sub(start).Seconds(), ZeroDowntime: true, ZeroImpact: true}
	windows := timeline.Windows(u, evs, end)
	for _, src := range s.sources(ctx, end) {
		v := impact.JudgeWithControl(src.samples, src.control, s.began, start, windows, s.policy)
		r.ZeroDowntime = r.ZeroDowntime && v.ZeroDowntime && src.err == nil
		r.ZeroImpact = r.ZeroImpact && v.ZeroImpact && src.err == nil
		if src.name == "prometheus" {
			sr := &SignalReport{Samples: len(src.samples), Verdict: v}
			if src.err != nil {
				sr.Error = src.err.Error()
			}
			r.Prometheus = sr
			continue
		}
		tr := &TrafficReport{Targets: s.spec.Targets, Rate: s.spec.Rate, Concurrency: s.spec.Concurrency, Seed: s.spec.Seed,
			Baseline: traffic.Summarize(src.samples, s.began, start), Requests: traffic.Summarize(src.samples, start, end), Verdict: v}
		tr.Achieved = traffic.AchievedRate(tr.Requests.Total, end.Sub(start), s.spec.Rate)
		if src.control != nil {
			url := "(the caller's control)"
			if s.spec.Control != nil {
				url = s.spec.Control.URL
			}
			tr.Control = &ControlReport{URL: url, Baseline: traffic.Summarize(src.control, s.began, start),
				Requests: traffic.Summarize(src.control, start, end)}
		}
		tr.Windows = WindowsOf(src.samples, windows, start)
		if verify {
			acked := s.rec.Acked()
			if n, lost, ok := traffic.VerifyWrites(ctx, s.cfg, acked); ok {
				tr.Writes = &Writes{Acknowledged: len(acked), Verified: n, Lost: len(lost), LostKeys: first(lost, 20)}
			}
		}
		r.Traffic = tr
	}
	return r
}

// WindowsOf is what clients saw in each window, its times in seconds
// from start.
func WindowsOf(samples []traffic.Sample, windows []timeline.Window, start time.Time) []Window {
	out := make([]Window, 0, len(windows))
	for _, w := range windows {
		out = append(out, Window{Name: w.Name, Kind: string(w.Kind), FromS: w.From.Sub(start).Seconds(),
			ToS: w.To.Sub(start).Seconds(), Requests: traffic.Summarize(samples, w.From, w.To)})
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Page is the report's HTML page (impact.WriteHTML's input).
func (s *Session) Page(title string, r Report, u upgrade.Upgrade, evs []store.Event) impact.Page {
	p := impact.Page{Title: title, From: r.From, To: r.To, State: r.State, Start: s.began,
		Samples: s.rec.Samples(), Windows: timeline.Windows(u, evs, r.Ended)}
	if r.Traffic != nil {
		p.Verdict = r.Traffic.Verdict
	} else if r.Prometheus != nil {
		p.Verdict = r.Prometheus.Verdict
		if smp, err := s.signal.Samples(context.Background(), s.began, r.Ended); err == nil {
			p.Samples = smp
		}
	}
	return p
}

// WriteSamples writes every request the session drove as CSV, one row
// per request: when it began, its latency, which request of the mix,
// its outcome, and the state and batch of the upgrade that were
// running (empty in the baseline and after the end).
func (s *Session) WriteSamples(w io.Writer, u upgrade.Upgrade, evs []store.Event, end time.Time) error {
	windows := timeline.Windows(u, evs, end)
	in := func(kind timeline.Kind, t time.Time) string {
		for _, win := range windows {
			if win.Kind == kind && !t.Before(win.From) && t.Before(win.To) {
				return win.Name
			}
		}
		return ""
	}
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"start", "latency_ms", "request", "ok", "error", "state", "batch"}); err != nil {
		return err
	}
	for _, smp := range s.rec.Samples() {
		row := []string{smp.Start.UTC().Format(time.RFC3339Nano), strconv.FormatFloat(float64(smp.Latency.Microseconds())/1000, 'f', 3, 64),
			smp.Op, strconv.FormatBool(smp.OK), smp.Err, in(timeline.KindState, smp.Start), in(timeline.KindBatch, smp.Start)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
