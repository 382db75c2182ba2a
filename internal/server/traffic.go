package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferry-upgrade/ferry/internal/impact"
	"github.com/ferry-upgrade/ferry/internal/prom"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/store"
	"github.com/ferry-upgrade/ferry/internal/traffic"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
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
// for its baseline.
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
	s.session, s.report = sess, nil
	s.trafficMu.Unlock()
	if err := sess.WaitBaseline(ctx); err != nil {
		s.stopTraffic(nil)
		return nil, err
	}
	return sess, nil
}

// judge is the drive engine's Judge: the session's, while one runs.
func (s *Server) judge(from, to time.Time) string {
	s.trafficMu.Lock()
	sess := s.session
	s.trafficMu.Unlock()
	if sess == nil {
		return ""
	}
	return sess.Judge(from, to)
}

// stopTraffic ends the session once upgrade u has ended (nil: it never
// began) and keeps its report.
func (s *Server) stopTraffic(u *upgrade.Upgrade) {
	s.trafficMu.Lock()
	sess := s.session
	s.trafficMu.Unlock()
	if sess == nil {
		return
	}
	end := time.Now()
	sess.Stop(s.ctx)
	if u == nil {
		return
	}
	evs, err := s.cfg.Store.Events(u.ID, 0, 0)
	if err != nil {
		s.log.Error("server: the upgrade's events, for its report", "err", err)
		evs = []store.Event{}
	}
	r := sess.Report(s.ctx, *u, evs, end, true)
	s.trafficMu.Lock()
	s.report = &r
	s.trafficMu.Unlock()
}

func (s *Server) getReport(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	s.trafficMu.Lock()
	rep, running := s.report, s.session != nil
	s.trafficMu.Unlock()
	if rep == nil {
		msg := "no report: start an upgrade with \"traffic\": true"
		if running {
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
	Began time.Time `json:"began"`
	// Started is when the upgrade began (the baseline's end); zero
	// while the baseline runs.
	Started *time.Time     `json:"started,omitempty"`
	Points  []TrafficPoint `json:"points"`
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

func (s *Server) getTraffic(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "since")
	if err != nil {
		return err
	}
	since := 0
	if v := q["since"]; v != "" {
		if since, err = strconv.Atoi(v); err != nil || since < 0 {
			return badRequest("since: %q is not a number of seconds (0 or more)", v)
		}
	}
	s.trafficMu.Lock()
	sess := s.session
	s.trafficMu.Unlock()
	if sess == nil {
		return errf(http.StatusNotFound, CodeNoReport, "no traffic: start an upgrade with \"traffic\": true")
	}
	out := TrafficSeries{Began: sess.Began().UTC(), Points: []TrafficPoint{}}
	if sess.BaselineDone() {
		end := sess.BaselineEnd().UTC()
		out.Started = &end
	}
	for _, p := range impact.Series(sess.Recorder().Samples(), sess.Began()) {
		if p.Second >= since {
			out.Points = append(out.Points, TrafficPoint{Second: p.Second, Requests: p.N, Failed: p.Errors, P50MS: p.P50MS, P99MS: p.P99MS})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
