package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// metrics are the server's Prometheus metrics, in a registry of its
// own (two servers in one test binary do not collide).
type metrics struct {
	reg    *prometheus.Registry
	states []upgrade.State

	mu sync.Mutex
	// scrape serializes scrapes: each resets and refills the observed
	// gauges before the registry is gathered.
	scrape sync.Mutex

	state         *prometheus.GaugeVec // ferry_upgrade_state{state}
	steps         *prometheus.GaugeVec // ferry_upgrade_members{step}
	members       *prometheus.GaugeVec // ferry_members{component,version}
	memberHealthy *prometheus.GaugeVec // ferry_member_healthy{component,member}
	gateHealthy   *prometheus.GaugeVec // ferry_gate_healthy{component}
	observeUp     prometheus.Gauge
	preflightOK   prometheus.Gauge
	preflight     *prometheus.GaugeVec     // ferry_preflight_check_ok{check}
	stepDuration  *prometheus.HistogramVec // ferry_step_duration_seconds{component,action,outcome}
	overhead      prometheus.Histogram
	events        *prometheus.CounterVec // ferry_events_total{kind}
	requests      *prometheus.CounterVec // ferry_api_requests_total{route,code}
}

func newMetrics(c *config.Cluster) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.states = []upgrade.State{upgrade.StateStarted, upgrade.StatePreflight, upgrade.StateExpanding}
	for _, comp := range c.ComponentsInOrder() {
		m.states = append(m.states, upgrade.Upgrading(comp.Name), upgrade.Upgraded(comp.Name))
	}
	// The states of the releases' own flows: their rollouts and actions.
	seen := map[upgrade.State]bool{}
	for _, r := range c.Releases {
		for _, st := range r.Flow {
			var add []upgrade.State
			switch _, registered := config.LookupStageKind(st.Stage); {
			case st.Stage == config.StageRollout:
				for _, comp := range st.Components {
					add = append(add, upgrade.RollingOut(comp), upgrade.RolledOut(comp))
				}
			case registered:
				add = append(add, upgrade.StageState(plan.Stage{Kind: st.Stage, Name: st.Name}))
			case st.Stage == config.StagePhase && st.Name != "":
				// A part of its component: its states are named after it.
				add = append(add, upgrade.Upgrading(st.Name), upgrade.Upgraded(st.Name))
			}
			for _, a := range add {
				if !seen[a] {
					seen[a] = true
					m.states = append(m.states, a)
				}
			}
		}
	}
	m.states = append(m.states, upgrade.StateMigrating, upgrade.StateAwaitingFinalize, upgrade.StateFinalizing,
		upgrade.StateContracting, upgrade.StateCompleted, upgrade.StatePaused, upgrade.StateRollingBack,
		upgrade.StateRolledBack, upgrade.StateFailed)
	m.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_upgrade_state",
		Help: "1 for the current upgrade's state, 0 for every other state; all 0 when there is no current upgrade."}, []string{"state"})
	m.steps = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_upgrade_members",
		Help: "Members of the current upgrade per step (pending, draining, ..., done, failed)."}, []string{"step"})
	m.members = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_members",
		Help: "Members per component per running version, as observed at scrape time (version down: not running)."}, []string{"component", "version"})
	m.memberHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_member_healthy",
		Help: "1 if the member's health check passes (thresholds applied), else 0."}, []string{"component", "member"})
	m.gateHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_gate_healthy",
		Help: "1 if the component's cluster gate is green, else 0."}, []string{"component"})
	m.observeUp = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ferry_observe_up",
		Help: "1 if the cluster could be observed at scrape time, else 0."})
	m.preflightOK = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ferry_preflight_ok",
		Help: "1 if the last preflight run through the API passed every check, else 0."})
	m.preflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_preflight_check_ok",
		Help: "Each check of the last preflight run through the API: 1 passed, 0 failed."}, []string{"check"})
	m.stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ferry_step_duration_seconds",
		Help:    "Duration of the engine's actions (pre-stop hooks, stop, start, post-start hooks, migration stages), from the events.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"component", "action", "outcome"})
	m.overhead = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ferry_engine_overhead_seconds",
		Help:    "The engine's own delay from a member passing its health gate to the next action.",
		Buckets: []float64{.001, .002, .005, .01, .025, .05, .1, .25, .5, 1}})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_events_total",
		Help: "Events stored since the server started, per kind (state, step, action, health, wait, error, ...)."}, []string{"kind"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_api_requests_total",
		Help: "API requests per route and status code."}, []string{"route", "code"})
	m.reg.MustRegister(m.state, m.steps, m.members, m.memberHealthy, m.gateHealthy, m.observeUp, m.preflightOK,
		m.preflight, m.stepDuration, m.overhead, m.events, m.requests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.setUpgrade(nil)
	return m
}

func (m *metrics) setUpgrade(u *upgrade.Upgrade) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := upgrade.State{}
	if u != nil {
		cur = u.State
	}
	known := false
	for _, st := range m.states {
		v := 0.0
		if st == cur {
			v, known = 1, true
		}
		m.state.WithLabelValues(st.String()).Set(v)
	}
	if !cur.IsZero() && !known {
		m.state.WithLabelValues(cur.String()).Set(1)
	}
	m.steps.Reset()
	if u == nil {
		return
	}
	for _, st := range []upgrade.MemberStep{upgrade.StepPending, upgrade.StepDraining, upgrade.StepStopping, upgrade.StepStarting,
		upgrade.StepSoaking, upgrade.StepRejoining, upgrade.StepDone, upgrade.StepFailed} {
		m.steps.WithLabelValues(string(st)).Set(0)
	}
	for _, mb := range u.Members {
		m.steps.WithLabelValues(string(mb.Step)).Inc()
	}
}

// event folds one stored event into the metrics: the counts per kind,
// and the durations of actions and of the engine's overhead.
func (m *metrics) event(ev store.Event) {
	m.events.WithLabelValues(ev.Kind).Inc()
	switch {
	case ev.Kind == "overhead":
		m.overhead.Observe(ev.DurationMS / 1000)
	case ev.DurationMS > 0 && (ev.Kind == "action" || ev.Kind == "error" || ev.Kind == "stage"):
		outcome := "ok"
		switch ev.Kind {
		case "error":
			outcome = "failed"
		case "stage":
			outcome = "not-done"
		}
		m.stepDuration.WithLabelValues(ev.Component, actionOf(ev.Message), outcome).Observe(ev.DurationMS / 1000)
	}
}

// actionOf names the action an engine event's message is about (the
// messages of engine.describe).
func actionOf(msg string) string {
	switch {
	case strings.HasPrefix(msg, "pre_stop hooks of "):
		return "pre-stop"
	case strings.HasPrefix(msg, "post_start hooks of "):
		return "post-start"
	case strings.HasPrefix(msg, "undo "):
		return string(upgrade.ActUndo)
	case strings.HasPrefix(msg, "stop "):
		return string(upgrade.ActStop)
	case strings.HasPrefix(msg, "start "):
		return string(upgrade.ActStart)
	}
	for _, st := range []string{"expand", "migrate", "finalize", "contract"} {
		if strings.HasPrefix(msg, st+" of release ") {
			return "stage-" + st
		}
	}
	return "other"
}

// observed sets the metrics that come from an observation.
func (m *metrics) observed(s *Server, snap engine.Snapshot, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members.Reset()
	m.memberHealthy.Reset()
	m.gateHealthy.Reset()
	if err != nil {
		m.observeUp.Set(0)
		return
	}
	m.observeUp.Set(1)
	for _, cv := range s.view.VersionsView(snap) {
		for v, n := range cv.Versions {
			m.members.WithLabelValues(cv.Component, v).Set(float64(n))
		}
	}
	for _, mv := range s.view.MembersView(snap, nil) {
		m.memberHealthy.WithLabelValues(mv.Component, mv.Name).Set(b2f(mv.Status == "healthy"))
	}
	for c, g := range snap.Obs.Gates {
		m.gateHealthy.WithLabelValues(c).Set(b2f(g.Healthy))
	}
}

func (m *metrics) setPreflight(pf engine.Preflight) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.preflightOK.Set(b2f(pf.OK()))
	m.preflight.Reset()
	for _, c := range pf.Checks {
		m.preflight.WithLabelValues(c.Name).Set(b2f(c.OK))
	}
}

func (m *metrics) request(route string, code int) {
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// getMetrics observes the cluster (or takes the shared observation,
// if fresh) and serves the registry in Prometheus's text format.
func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	s.metrics.scrape.Lock()
	defer s.metrics.scrape.Unlock()
	snap, err := s.observe(ctx)
	s.metrics.observed(s, snap, err)
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
	return nil
}
