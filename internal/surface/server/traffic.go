package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/proof/prom"
	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// An upgrade started with "traffic": true runs inside a proof session:
// the description's traffic from a baseline before the first member is
// touched to after the last, each batch judged as it ends (policy
// on_impact), the report kept for GET /v1/upgrade/report and the
// per-second series for the dashboard's chart (GET /v1/traffic).

// trafficMetrics count the traffic driver's requests.
type trafficMetrics struct {
	requests *prometheus.CounterVec
	failures *prometheus.CounterVec
	latency  prometheus.Histogram
}

func newTrafficMetrics(reg *prometheus.Registry) *trafficMetrics {
	m := &trafficMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_traffic_requests_total",
			Help: "Requests of the traffic ferry drives during an upgrade, per request of the mix."}, []string{"request"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_traffic_failures_total",
			Help: "Failed requests of the traffic ferry drives, per request of the mix."}, []string{"request"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ferry_traffic_latency_seconds",
			Help:    "Latency of the requests of the traffic ferry drives.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
	}
	reg.MustRegister(m.requests, m.failures, m.latency)
	return m
}

func (m *trafficMetrics) observe(s traffic.Sample) {
	m.requests.WithLabelValues(s.Op).Inc()
	if !s.OK {
		m.failures.WithLabelValues(s.Op).Inc()
	}
	m.latency.Observe(s.Latency.Seconds())
}

// startTraffic begins the proof session of the next upgrade and waits
// for its baseline. The caller has reserved the server.
func (s *Server) startTraffic(ctx context.Context) (*proof.Session, error) {
	rec := traffic.NewRecorder()
	rec.OnSample = s.trafficM.observe
	opts := proof.Options{Recorder: rec}
	sig, err := prom.ForCluster(s.cfg.Cluster, s.cfg.Cluster.Traffic)
	if err != nil {
		return nil, errf(http.StatusUnprocessableEntity, CodeNoTrafficSpec, "%v", err)
	}
	if sig != nil {
		opts.Signal = sig
	}
	sess := proof.Start(s.ctx, s.cfg.Cluster.Traffic, opts)
	s.trafficMu.Lock()
	s.session, s.sessionUp, s.sessionLive, s.report = sess, "", true, nil
	s.trafficMu.Unlock()
	if err := sess.WaitBaseline(ctx); err != nil {
		s.stopTraffic(nil)
		return nil, err
	}
	return sess, nil
}

// trafficBegun ties the live session to upgrade id, which has begun.
func (s *Server) trafficBegun(id string) {
	s.trafficMu.Lock()
	defer s.trafficMu.Unlock()
	if s.sessionLive {
		s.sessionUp = id
	}
}

// judge is the drive engine's Judge: the live session's, if any.
func (s *Server) judge(from, to time.Time) (string, bool) {
	s.trafficMu.Lock()
	sess, live := s.session, s.sessionLive
	s.trafficMu.Unlock()
	if sess == nil || !live {
		return "", false
	}
	return sess.Judge(from, to), true
}

// stopTraffic ends the live session once upgrade u has ended (nil: it
// never began, or the server stops) and keeps its report. The session
// stays for GET /v1/traffic until the next one starts.
func (s *Server) stopTraffic(u *upgrade.Upgrade) {
	s.trafficMu.Lock()
	sess := s.session
	s.trafficMu.Unlock()
	s.stopSession(sess, u)
}

// stopSession is stopTraffic for session sess, if it is still the
// live one.
func (s *Server) stopSession(sess *proof.Session, u *upgrade.Upgrade) {
	s.trafficMu.Lock()
	live := sess != nil && sess == s.session && s.sessionLive
	if live {
		s.sessionLive, s.reporting = false, u != nil
	}
	s.trafficMu.Unlock()
	if !live {
		return
	}
	end := time.Now()
	sess.Stop(s.ctx)
	if u == nil {
		return
	}
	defer func() {
		s.trafficMu.Lock()
		s.reporting = false
		s.trafficMu.Unlock()
	}()
	evs, err := s.cfg.Store.Events(u.ID, 0, 0)
	if err != nil {
		s.log.Error("server: the upgrade's events, for its report", "err", err)
		evs = []store.Event{}
	}
	r := sess.Report(s.ctx, *u, evs, end, true)
	s.trafficMu.Lock()
	s.report = &r
	s.trafficMu.Unlock()
	s.log.Info("server: traffic report", "upgrade", u.ID, "zero_downtime", r.ZeroDowntime, "zero_impact", r.ZeroImpact)
}

// reapTraffic ends a live session whose upgrade this server no longer
// drives and which has ended (driven to its end by another process) or
// is no longer current (cur: the current record, nil if none). The
// watcher calls it; the session stops in the background (the spec's
// after may run long).
func (s *Server) reapTraffic(cur *upgrade.Upgrade) {
	s.mu.Lock()
	busy := s.busy
	s.mu.Unlock()
	s.trafficMu.Lock()
	sess, live, id := s.session, s.sessionLive, s.sessionUp
	if busy && live && id != "" && cur != nil && cur.ID != id && !cur.State.Terminal() {
		// The next step of a chain, begun by this server's engine: the
		// traffic goes on around it.
		s.sessionUp = cur.ID
	}
	s.trafficMu.Unlock()
	if busy || !live || id == "" {
		return
	}
	var ended *upgrade.Upgrade
	switch {
	case cur != nil && cur.ID == id && !cur.State.Terminal():
		return // it goes on: whoever drives it, its batches are judged here
	case cur != nil && cur.ID == id:
		u := *cur
		ended = &u
	default:
		if u, err := s.cfg.Store.Get(id); err == nil && u.State.Terminal() {
			ended = &u
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.stopSession(sess, ended)
	}()
}

func (s *Server) getReport(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	s.trafficMu.Lock()
	rep, live := s.report, s.sessionLive || s.reporting
	s.trafficMu.Unlock()
	if rep == nil {
		msg := "no report: start an upgrade with \"traffic\": true"
		if live {
			msg = "the upgrade with traffic has not ended yet: its report comes at its end (GET /v1/traffic meanwhile)"
		}
		return errf(http.StatusNotFound, CodeNoReport, "%s", msg)
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// TrafficSeries is the traffic of the current (or last) upgrade run
// with traffic, second by second (GET /v1/traffic).
type TrafficSeries struct {
	// Upgrade is the upgrade the traffic runs around; empty while the
	// baseline runs.
	Upgrade string `json:"upgrade,omitempty"`
	// Live: the traffic still runs.
	Live  bool      `json:"live"`
	Began time.Time `json:"began"`
	// Started is when the upgrade began (the baseline's end); absent
	// while the baseline runs.
	Started *time.Time     `json:"started,omitempty"`
	Points  []TrafficPoint `json:"points"`
	// Batches are the upgrade's batches so far, in seconds since Began;
	// the one in progress has Current set.
	Batches []TrafficBatch `json:"batches"`
}

// TrafficPoint is one second: requests begun in it, how many failed,
// and the p50 and p99 of the others.
type TrafficPoint struct {
	Second   int     `json:"second"`
	Requests int     `json:"requests"`
	Failed   int     `json:"failed"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
}

// TrafficBatch is the span of one batch: from its first member leaving
// pending to its last done (or now, for the batch in progress).
type TrafficBatch struct {
	Name    string  `json:"name"`
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	Current bool    `json:"current,omitempty"`
}

func (s *Server) getTraffic(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "since")
	if err != nil {
		return err
	}
	since := 0
	if v, ok := q["since"]; ok {
		if since, err = strconv.Atoi(v); err != nil || since < 0 {
			return badRequest("query parameter since=%q: want a number of seconds since the traffic began (0 or more)", v)
		}
	}
	s.trafficMu.Lock()
	sess, id, live := s.session, s.sessionUp, s.sessionLive
	s.trafficMu.Unlock()
	if sess == nil {
		return errf(http.StatusNotFound, CodeNoReport, "no traffic: start an upgrade with \"traffic\": true")
	}
	began := sess.Began()
	out := TrafficSeries{Upgrade: id, Live: live, Began: began.UTC(), Points: []TrafficPoint{}, Batches: []TrafficBatch{}}
	if sess.BaselineDone() {
		end := sess.BaselineEnd().UTC()
		out.Started = &end
	}
	for _, p := range impact.Series(sess.Recorder().Samples(), began) {
		if p.Second >= since {
			out.Points = append(out.Points, TrafficPoint{Second: p.Second, Requests: p.N, Failed: p.Errors, P50MS: p.P50MS, P99MS: p.P99MS})
		}
	}
	if id != "" {
		bs, err := s.trafficBatches(id, began)
		if err != nil {
			return err
		}
		out.Batches = bs
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// trafficBatches are the batch windows of upgrade id so far.
func (s *Server) trafficBatches(id string, began time.Time) ([]TrafficBatch, error) {
	u, err := s.cfg.Store.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return []TrafficBatch{}, nil
	} else if err != nil {
		return nil, err
	}
	evs, err := s.cfg.Store.Events(id, 0, 0)
	if err != nil {
		return nil, err
	}
	// The batch in progress, named as timeline names it.
	cur := ""
	if b := u.Current(); b != nil && !u.State.Terminal() {
		cur = fmt.Sprintf("%s (%s)", b.Name(), strings.Join(b.Members, ", "))
	}
	now := time.Now()
	out := []TrafficBatch{}
	for _, w := range timeline.Windows(u, evs, now) {
		if w.Kind != timeline.KindBatch {
			continue
		}
		b := TrafficBatch{Name: w.Name, FromS: w.From.Sub(began).Seconds(), ToS: w.To.Sub(began).Seconds(), Current: w.Name == cur}
		if b.Current {
			b.ToS = now.Sub(began).Seconds()
		}
		out = append(out, b)
	}
	return out, nil
}
