package config

import (
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/memberfile"
)

// The defaults, all in one place. A field left out of the description,
// or written as zero, takes its default; Parse applies them before
// Validate, and a Cluster built in Go gets them from ApplyDefaults.
//
//	field                                  default
//	substrate                              process
//	components[].strategy.type             one-at-a-time
//	components[].strategy.max_unavailable  1
//	components[].strategy.max_batch        canary: max_unavailable; one-at-a-time: 1
//	components[].strategy.quorum           0, kept: a majority (see Strategy.QuorumOf)
//	components[].soak                      0s (no soak)
//	components[].deadline                  60s
//	components[].gate_deadline             60s
//	components[].run.stop_timeout          10s
//	components[].run.stop_signal           SIGTERM ("TERM", "sigterm" are read as SIGTERM)
//	components[].version: timeout          2s
//	components[].run.files[].mode          0600
//	checks (health.member, health.cluster):
//	  interval                             250ms
//	  timeout                              2s
//	  success_threshold                    1
//	  failure_threshold                    1
//	components[].strategy.max_unavailable_per_host    0 (no bound)
//	components[].strategy.max_unavailable_per_domain  0 (no bound)
//	components[].members[].domain          its host's domain
//	components[].crash_loop.exits          2
//	components[].crash_loop.window         30s
//	components[].role.check: interval      1s, timeout 2s, thresholds 1
//	hooks (pre_stop, post_start, pre_phase, post_phase, and the
//	  cluster's pre_upgrade, post_upgrade; their undos):
//	  timeout                              5s
//	method of an http check or hook        POST if it has a body, else GET
//	expect_status                          0, kept: any 2xx
//	policy.on_failure                      rollback
//	policy.tick                            100ms
//	policy.undo_deadline                   2m
//	components[].workload.namespace        default (not for a NodePool)
//	components[].workload.drain_timeout    5m
//	traffic.concurrency                    4
//	traffic.rate                           100 requests/s
//	traffic.timeout                        2s
//	traffic.baseline                       5s
//	traffic.requests[].method              POST if it has a body, else GET
//	traffic.requests[].share               1
//	traffic.verdict: alpha 0.01, p99_ratio 1.5, min_requests 20
//	traffic.prometheus.step                1s
//
// ApplyDefaults also normalises: a method is upper-cased, an http
// value written as "POST http://..." is split into method and URL (when
// no method is set), and sha256 checksums are lower-cased.
const (
	DefaultSubstrate       = "process"
	DefaultStrategy        = OneAtATime
	DefaultMaxUnavailable  = 1
	DefaultDeadline        = Duration(60 * time.Second)
	DefaultGateDeadline    = Duration(60 * time.Second)
	DefaultStopTimeout     = Duration(10 * time.Second)
	DefaultStopSignal      = "SIGTERM"
	DefaultFileMode        = FileMode(memberfile.DefaultMode)
	DefaultCheckInterval   = Duration(250 * time.Millisecond)
	DefaultCheckTimeout    = Duration(2 * time.Second)
	DefaultHookTimeout     = Duration(5 * time.Second)
	DefaultThreshold       = 1
	DefaultOnFailure       = "rollback"
	DefaultFinalize        = "auto"
	DefaultMigrateDeadline = 10 * time.Minute
	DefaultMigrateInterval = time.Second
	DefaultTick            = Duration(100 * time.Millisecond)
	DefaultDrainTimeout    = Duration(5 * time.Minute)
	DefaultCrashExits      = 2
	DefaultCrashWindow     = Duration(30 * time.Second)
	DefaultRoleInterval    = Duration(time.Second)
	DefaultUndoDeadline    = Duration(2 * time.Minute)
	// The traffic spec's defaults (and the impact verdict's).
	DefaultTrafficConcurrency = 4
	DefaultTrafficRate        = 100.0
	DefaultTrafficTimeout     = Duration(2 * time.Second)
	DefaultTrafficBaseline    = Duration(5 * time.Second)
	DefaultAlpha              = 0.01
	DefaultP99Ratio           = 1.5
	DefaultMinRequests        = 20
	defaultMethod             = "GET"
	defaultMethodWithABody    = "POST"
	defaultOneAtATimeBatch    = 1
)

// ApplyDefaults fills every zero field that has a default (the table
// above). Parse calls it; it is idempotent.
func (c *Cluster) ApplyDefaults() {
	if c.Substrate == "" {
		c.Substrate = DefaultSubstrate
	}
	for i := range c.Components {
		comp := &c.Components[i]
		comp.Strategy.applyDefaults()
		if comp.Deadline == 0 {
			comp.Deadline = DefaultDeadline
		}
		if comp.GateDeadline == 0 {
			comp.GateDeadline = DefaultGateDeadline
		}
		if comp.Run.StopTimeout == 0 {
			comp.Run.StopTimeout = DefaultStopTimeout
		}
		comp.Run.StopSignal = NormalizeSignal(comp.Run.StopSignal)
		if comp.Run.StopSignal == "" {
			comp.Run.StopSignal = DefaultStopSignal
		}
		if comp.Version != nil {
			comp.Version.applyDefaults(DefaultCheckTimeout)
		}
		for j := range comp.Run.Files {
			if comp.Run.Files[j].Mode == 0 {
				comp.Run.Files[j].Mode = DefaultFileMode // 0000 cannot be asked for: nobody could read it
			}
		}
		for _, ch := range []*Check{comp.Health.Member, comp.Health.Cluster} {
			if ch != nil {
				ch.applyDefaults()
			}
		}
		for _, hooks := range comp.Hooks.lists() {
			applyHookDefaults(hooks.calls)
		}
		if comp.CrashLoop.Exits == 0 {
			comp.CrashLoop.Exits = DefaultCrashExits
		}
		if comp.CrashLoop.Window == 0 {
			comp.CrashLoop.Window = DefaultCrashWindow
		}
		if r := comp.Role; r != nil && r.Check != nil {
			if r.Check.Interval == 0 {
				r.Check.Interval = DefaultRoleInterval
			}
			r.Check.applyDefaults()
		}
		for j := range comp.Members {
			m := &comp.Members[j]
			if h := c.Host(m.Host); m.Domain == "" && h != nil {
				m.Domain = h.Domain
			}
		}
	}
	applyHookDefaults(c.Hooks.PreUpgrade)
	applyHookDefaults(c.Hooks.PostUpgrade)
	if c.Policy.UndoDeadline == 0 {
		c.Policy.UndoDeadline = DefaultUndoDeadline
	}
	for i := range c.Releases {
		for name, a := range c.Releases[i].Artifacts {
			if low := strings.ToLower(a.SHA256); low != a.SHA256 {
				a.SHA256 = low
				c.Releases[i].Artifacts[name] = a
			}
		}
	}
	if c.Policy.OnFailure == "" {
		c.Policy.OnFailure = DefaultOnFailure
	}
	if c.Policy.OnImpact == "" {
		c.Policy.OnImpact = "continue"
	}
	if c.Policy.Finalize == "" {
		c.Policy.Finalize = DefaultFinalize
	}
	for i := range c.Releases {
		m := &c.Releases[i].Migrations
		if m.Deadline == 0 {
			m.Deadline = Duration(DefaultMigrateDeadline)
		}
		if m.Interval == 0 {
			m.Interval = Duration(DefaultMigrateInterval)
		}
		for _, calls := range [][]Call{m.Expand, m.Migrate, m.Finalize, m.Contract} {
			for j := range calls {
				calls[j].applyDefaults(DefaultHookTimeout)
			}
		}
	}
	if c.Policy.Tick == 0 {
		c.Policy.Tick = DefaultTick
	}
	for i := range c.Components {
		if w := c.Components[i].Workload; w != nil {
			if w.Namespace == "" && w.Kind != KindNodePool {
				w.Namespace = "default"
			}
			if w.DrainTimeout == 0 {
				w.DrainTimeout = DefaultDrainTimeout
			}
		}
	}
	if t := c.Traffic; t != nil {
		t.applyDefaults()
	}
}

func (t *Traffic) applyDefaults() {
	if t.Concurrency == 0 {
		t.Concurrency = DefaultTrafficConcurrency
	}
	if t.Rate == 0 {
		t.Rate = DefaultTrafficRate
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultTrafficTimeout
	}
	if t.Baseline == 0 {
		t.Baseline = DefaultTrafficBaseline
	}
	for i := range t.Requests {
		r := &t.Requests[i]
		r.Method = strings.ToUpper(r.Method)
		if r.Method == "" {
			r.Method = defaultMethod
			if r.Body != "" {
				r.Method = defaultMethodWithABody
			}
		}
		if r.Share == 0 {
			r.Share = 1
		}
	}
	if t.Verdict.Alpha == 0 {
		t.Verdict.Alpha = DefaultAlpha
	}
	if t.Verdict.P99Ratio == 0 {
		t.Verdict.P99Ratio = DefaultP99Ratio
	}
	if t.Verdict.MinRequests == 0 {
		t.Verdict.MinRequests = DefaultMinRequests
	}
	if p := t.Prometheus; p != nil && p.Step == 0 {
		p.Step = Duration(time.Second)
	}
}

func (s *Strategy) applyDefaults() {
	if s.Type == "" {
		s.Type = DefaultStrategy
	}
	if s.MaxUnavailable == 0 {
		s.MaxUnavailable = DefaultMaxUnavailable
	}
	if s.MaxBatch == 0 {
		switch s.Type {
		case Canary:
			s.MaxBatch = s.MaxUnavailable
		case OneAtATime:
			s.MaxBatch = defaultOneAtATimeBatch
		}
	}
}

func (ch *Check) applyDefaults() {
	ch.Call.applyDefaults(DefaultCheckTimeout)
	if ch.Interval == 0 {
		ch.Interval = DefaultCheckInterval
	}
	if ch.SuccessThreshold == 0 {
		ch.SuccessThreshold = DefaultThreshold
	}
	if ch.FailureThreshold == 0 {
		ch.FailureThreshold = DefaultThreshold
	}
}

func (c *Call) applyDefaults(timeout Duration) {
	if c.Timeout == 0 {
		c.Timeout = timeout
	}
	if c.HTTP == "" {
		return
	}
	if c.Method == "" {
		if m, url, ok := strings.Cut(strings.TrimSpace(c.HTTP), " "); ok && httpMethods[strings.ToUpper(m)] {
			c.Method, c.HTTP = m, strings.TrimSpace(url)
		}
	}
	c.Method = strings.ToUpper(c.Method)
	if c.Method == "" {
		c.Method = defaultMethod
		if c.Body != "" {
			c.Method = defaultMethodWithABody
		}
	}
}

// NormalizeSignal writes a signal name as the agent takes it: upper
// case, with its SIG prefix ("term" is SIGTERM).
func NormalizeSignal(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	if s != "" && !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return s
}

// StopSignals are the signals run.stop_signal may name: those servers
// take as a request to stop (never SIGKILL or SIGSTOP, which no process
// can handle).
var StopSignals = []string{"SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2"}

// httpMethods are the methods a call may use.
var httpMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// applyHookDefaults gives hook calls, and their undos, the hook timeout.
func applyHookDefaults(calls []Call) {
	for j := range calls {
		calls[j].applyDefaults(DefaultHookTimeout)
		if u := calls[j].Undo; u != nil {
			u.applyDefaults(DefaultHookTimeout)
		}
	}
}

// hookList is one named list of a component's hooks.
type hookList struct {
	key   string
	calls []Call
	// undo: its calls may have an undo (they open an effect).
	undo bool
}

func (h *Hooks) lists() []hookList {
	return []hookList{{"pre_stop", h.PreStop, true}, {"post_start", h.PostStart, false},
		{"pre_phase", h.PrePhase, true}, {"post_phase", h.PostPhase, false}}
}

// List returns the component's hook list named key (pre_stop,
// post_start, pre_phase, post_phase), or nil.
func (h *Hooks) List(key string) []Call {
	for _, l := range h.lists() {
		if l.key == key {
			return l.calls
		}
	}
	return nil
}

// List returns the upgrade's hook list named key (pre_upgrade,
// post_upgrade), or nil.
func (h *UpgradeHooks) List(key string) []Call {
	switch key {
	case "pre_upgrade":
		return h.PreUpgrade
	case "post_upgrade":
		return h.PostUpgrade
	}
	return nil
}
