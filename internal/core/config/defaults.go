package config

import (
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// The defaults and the ranges, all in one place. A field left out of
// the description takes its default; Parse applies them before
// Validate, and a Cluster built in Go gets them from ApplyDefaults
// (where a zero field counts as left out: it has no positions). A
// value written in the description is kept as written, zero included:
// a written "max_unavailable: 0" is refused with its range, never
// silently turned into the default. Validate checks every value
// against its range below: a value outside it is a mistake (a 1ns
// tick busy-loops the engine; a timeout of years never fires), and the
// message names the range and the default.
//
//	field                                  default            range
//	substrate                              the registered default (DefaultSubstrate)
//	                                                          a registered substrate (SubstrateNames)
//	hosts[].tls                            none: plain HTTP, allowed only to an agent on loopback
//	                                                          {fingerprint: "sha256:<64 hex>"} or {ca_file: PATH}
//	                                                          (required for an agent beyond loopback)
//	components[].strategy.type             one-at-a-time      a registered strategy
//	components[].strategy.max_unavailable  1                  1 .. the members
//	components[].strategy.max_batch        the strategy's (Strategy.Defaults): canary, by-domain: max_unavailable; one-at-a-time, active-standby: 1
//	                                                          1 .. max_unavailable
//	components[].strategy.quorum           0 (a majority, see Strategy.QuorumOf)
//	                                                          0 .. the members - 1
//	components[].strategy.max_unavailable_per_host    0 (no bound)   0 .. max_unavailable
//	components[].strategy.max_unavailable_per_domain  0 (no bound)   0 .. max_unavailable
//	components[].soak                      0s (no soak)       0s .. below deadline
//	components[].deadline                  60s                100ms .. 24h
//	components[].gate_deadline             60s                100ms .. 24h
//	components[].run.stop_timeout          10s                10ms .. 1h (the agent's bound)
//	components[].run.stop_signal           SIGTERM ("TERM", "sigterm" are read as SIGTERM)
//	components[].version: timeout          2s
//	components[].ok_to_stop: timeout       2s
//	components[].run.files[].mode          0600
//	checks (health.member, health.cluster):
//	  interval                             250ms              10ms .. 1h
//	  timeout                              2s                 10ms .. 1h
//	  success_threshold                    1                  1 .. 100
//	  failure_threshold                    1                  1 .. 100
//	components[].members[].domain          its host's domain
//	components[].crash_loop.exits          2                  1 .. 100
//	components[].crash_loop.window         30s                100ms .. 24h
//	components[].role.check: interval      1s, timeout 2s, thresholds 1 (ranges of checks)
//	hooks (pre_stop, post_start, pre_phase, post_phase, switchover, and the
//	  cluster's pre_upgrade, post_upgrade; their undos):
//	  timeout                              5s                 10ms .. 1h
//	method of an http check or hook        POST if it has a body, else GET
//	expect_status                          0, kept: any 2xx   100 .. 599
//	releases[].migrations.deadline         10m                1s .. 24h
//	releases[].migrations.interval         1s                 10ms .. 1h
//	releases[].migrations calls: timeout   5s                 10ms .. 1h
//	policy.on_failure                      rollback
//	policy.tick                            100ms              10ms .. 1m
//	policy.undo_deadline                   2m                 1s .. 24h
//	components[].workload.namespace        default (not for a NodePool)
//	components[].workload.drain_timeout    5m                 1s .. 24h
//	traffic.concurrency                    4                  1 .. 1024
//	traffic.rate                           100 requests/s     above 0 .. 100000
//	traffic.timeout                        2s                 10ms .. 1h
//	traffic.baseline                       5s                 1s .. 1h
//	traffic.after                          0s                 0s .. 1h
//	traffic.requests[].method              POST if it has a body, else GET
//	traffic.requests[].share               1                  above 0 .. 1000000
//	traffic.verdict.alpha                  0.01               above 0 .. below 0.5
//	traffic.verdict.p99_ratio              1.5                1 .. 100
//	traffic.verdict.min_requests           20                 2 .. 1000000
//	traffic.prometheus.step                1s                 100ms .. 1h
//	traffic.control.rate                   20 requests/s      above 0 .. 1000
//
// ApplyDefaults also normalises: a method is upper-cased, an http
// value written as "POST http://..." is split into method and URL (when
// no method is set), sha256 checksums are lower-cased, and a host's
// tls.fingerprint is written as "sha256:" and 64 lower-case hex digits
// (it may be given in upper case, or with openssl's colons).
const (
	DefaultStrategy        = StrategyType(strategy.Default)
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
	DefaultControlRate        = 20.0
	DefaultTrafficTimeout     = Duration(2 * time.Second)
	DefaultTrafficBaseline    = Duration(5 * time.Second)
	DefaultAlpha              = 0.01
	DefaultP99Ratio           = 1.5
	DefaultMinRequests        = 20
	defaultMethod             = "GET"
	defaultMethodWithABody    = "POST"
)

// ApplyDefaults fills every zero field that has a default (the table
// above). Parse calls it; it is idempotent.
func (c *Cluster) ApplyDefaults() {
	if c.Substrate == "" {
		c.Substrate = DefaultSubstrate()
	}
	hosts := c.hostIndex()
	for i := range c.Components {
		comp := &c.Components[i]
		comp.Strategy.applyDefaults()
		if comp.Deadline == 0 && !comp.pos.written("deadline") {
			comp.Deadline = DefaultDeadline
		}
		if comp.GateDeadline == 0 && !comp.pos.written("gate_deadline") {
			comp.GateDeadline = DefaultGateDeadline
		}
		if comp.Run.StopTimeout == 0 && !comp.Run.pos.written("stop_timeout") {
			comp.Run.StopTimeout = DefaultStopTimeout
		}
		comp.Run.StopSignal = NormalizeSignal(comp.Run.StopSignal)
		if comp.Run.StopSignal == "" {
			comp.Run.StopSignal = DefaultStopSignal
		}
		if comp.Version != nil {
			comp.Version.applyDefaults(DefaultCheckTimeout)
		}
		if comp.OKToStop != nil {
			comp.OKToStop.applyDefaults(DefaultCheckTimeout)
		}
		if comp.Backup != nil {
			comp.Backup.applyDefaults(comp.pos)
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
		if comp.CrashLoop.Exits == 0 && !comp.pos.written("crash_loop.exits") {
			comp.CrashLoop.Exits = DefaultCrashExits
		}
		if comp.CrashLoop.Window == 0 && !comp.pos.written("crash_loop.window") {
			comp.CrashLoop.Window = DefaultCrashWindow
		}
		if r := comp.Role; r != nil && r.Check != nil {
			if r.Check.Interval == 0 && !r.Check.pos.written("interval") {
				r.Check.Interval = DefaultRoleInterval
			}
			r.Check.applyDefaults()
		}
		for j := range comp.Members {
			m := &comp.Members[j]
			if h := hosts[m.Host]; m.Domain == "" && h != nil {
				m.Domain = h.Domain
			}
		}
	}
	applyHookDefaults(c.Hooks.PreUpgrade)
	applyHookDefaults(c.Hooks.PostUpgrade)
	for i := range c.Alarms {
		c.Alarms[i].applyDefaults(DefaultHookTimeout)
	}
	for i := range c.Applications {
		if a := c.Applications[i].Check; a != nil {
			a.applyDefaults(DefaultHookTimeout)
		}
	}
	c.applyHostsDefaults()
	if c.Policy.UndoDeadline == 0 && !c.pos.written("policy.undo_deadline") {
		c.Policy.UndoDeadline = DefaultUndoDeadline
	}
	for i := range c.Hosts {
		if t := c.Hosts[i].TLS; t != nil && t.Fingerprint != "" {
			if fp, err := tlspin.Parse(t.Fingerprint); err == nil {
				t.Fingerprint = fp // a malformed one is kept for Validate to name
			}
		}
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
		r := &c.Releases[i]
		m := &r.Migrations
		if m.Deadline == 0 && !r.pos.written("migrations.deadline") {
			m.Deadline = Duration(DefaultMigrateDeadline)
		}
		if m.Interval == 0 && !r.pos.written("migrations.interval") {
			m.Interval = Duration(DefaultMigrateInterval)
		}
		for _, calls := range [][]Call{m.Expand, m.Migrate, m.Finalize, m.Contract} {
			for j := range calls {
				calls[j].applyDefaults(DefaultHookTimeout)
			}
		}
		for j := range r.Flow {
			st := &r.Flow[j]
			k, ok := LookupStageKind(st.Stage) // a registered kind's stage: an action, …
			if !ok {
				continue
			}
			if st.Deadline == 0 && slices.Contains(k.Takes, "deadline") && !r.pos.written(index("flow", j)+".deadline") {
				st.Deadline = m.Deadline
			}
			for k := range st.Calls {
				st.Calls[k].applyDefaults(DefaultHookTimeout)
			}
			if st.Gate != nil {
				st.Gate.applyDefaults(DefaultHookTimeout)
			}
		}
	}
	if c.Policy.Tick == 0 && !c.pos.written("policy.tick") {
		c.Policy.Tick = DefaultTick
	}
	for i := range c.Components {
		if w := c.Components[i].Workload; w != nil {
			if w.Namespace == "" && w.Kind != KindNodePool {
				w.Namespace = "default"
			}
			if w.DrainTimeout == 0 && !c.Components[i].pos.written("workload.drain_timeout") {
				w.DrainTimeout = DefaultDrainTimeout
			}
		}
	}
	if t := c.Traffic; t != nil {
		t.applyDefaults(c.pos)
	}
}

// applyDefaults fills the traffic spec's defaults; p holds the
// positions of the description it is in (its keys under "traffic."),
// which tell a value written as zero from one left out.
func (t *Traffic) applyDefaults(p positions) {
	absent := func(rel string) bool { return !p.written("traffic." + rel) }
	if t.Concurrency == 0 && absent("concurrency") {
		t.Concurrency = DefaultTrafficConcurrency
	}
	if t.Rate == 0 && absent("rate") {
		t.Rate = DefaultTrafficRate
	}
	if t.Timeout == 0 && absent("timeout") {
		t.Timeout = DefaultTrafficTimeout
	}
	if t.Baseline == 0 && absent("baseline") {
		t.Baseline = DefaultTrafficBaseline
	}
	if c := t.Control; c != nil && c.Rate == 0 && absent("control.rate") {
		c.Rate = DefaultControlRate
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
		if r.Share == 0 && absent(index("requests", i)+".share") {
			r.Share = 1
		}
	}
	if t.Verdict.Alpha == 0 && absent("verdict.alpha") {
		t.Verdict.Alpha = DefaultAlpha
	}
	if t.Verdict.P99Ratio == 0 && absent("verdict.p99_ratio") {
		t.Verdict.P99Ratio = DefaultP99Ratio
	}
	if t.Verdict.MinRequests == 0 && absent("verdict.min_requests") {
		t.Verdict.MinRequests = DefaultMinRequests
	}
	if pr := t.Prometheus; pr != nil && pr.Step == 0 && absent("prometheus.step") {
		pr.Step = Duration(time.Second)
	}
}

func (s *Strategy) applyDefaults() {
	if s.Type == "" {
		s.Type = DefaultStrategy
	}
	if s.MaxUnavailable == 0 && !s.pos.written("max_unavailable") {
		s.MaxUnavailable = DefaultMaxUnavailable
	}
	if s.MaxBatch == 0 && !s.pos.written("max_batch") {
		// The strategy has its own (canary: max_unavailable); an
		// unknown type is refused by validation (and left at 0 here).
		s.MaxBatch = defaultBatch(s)
	}
}

func (ch *Check) applyDefaults() {
	ch.Call.applyDefaults(DefaultCheckTimeout)
	if ch.Interval == 0 && !ch.pos.written("interval") {
		ch.Interval = DefaultCheckInterval
	}
	if ch.SuccessThreshold == 0 && !ch.pos.written("success_threshold") {
		ch.SuccessThreshold = DefaultThreshold
	}
	if ch.FailureThreshold == 0 && !ch.pos.written("failure_threshold") {
		ch.FailureThreshold = DefaultThreshold
	}
}

func (c *Call) applyDefaults(timeout Duration) {
	if c.Timeout == 0 && !c.pos.written("timeout") {
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
	out := []hookList{{"pre_stop", h.PreStop, true}, {"post_start", h.PostStart, false},
		{"pre_phase", h.PrePhase, true}, {"post_phase", h.PostPhase, false}, {"switchover", h.Switchover, false}}
	for _, name := range sortedKeys(h.Steps) {
		out = append(out, hookList{StepHooks + name, h.Steps[name], false})
	}
	return out
}

// StepHooks begins the name of an extra step's own hook list
// (Hooks.Steps): steps.NAME.
const StepHooks = "steps."

// List returns the component's hook list named key (pre_stop,
// post_start, pre_phase, post_phase, switchover, steps.NAME), or nil.
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

// durRange is the range a duration of the description must be in (the
// table above), with what the value is, for the message that refuses
// it, and its default (0: none).
type durRange struct {
	min, max time.Duration
	def      time.Duration
	what     string
}

// countRange is durRange for a count.
type countRange struct {
	min, max, def int
	what          string
}

// The ranges of the table above. The lower bounds keep a value from
// making ferry busy-loop or give up at once (a 1ns tick, a 1ns
// timeout); the upper ones keep a typo (10000h) from making a step
// wait for ever. stop_timeout's bound is the agent's.
var (
	tickRange            = durRange{10 * time.Millisecond, time.Minute, DefaultTick.D(), "the engine's observation interval (a shorter one busy-loops the engine, a longer one reacts late)"}
	undoDeadlineRange    = durRange{time.Second, 24 * time.Hour, DefaultUndoDeadline.D(), "how long an undo is retried before the upgrade pauses on it"}
	deadlineRange        = durRange{100 * time.Millisecond, 24 * time.Hour, DefaultDeadline.D(), "how long a member has, from its drain, to become healthy and finish its soak"}
	gateDeadlineRange    = durRange{100 * time.Millisecond, 24 * time.Hour, DefaultGateDeadline.D(), "how long a cluster gate may stay red"}
	stopTimeoutRange     = durRange{10 * time.Millisecond, time.Hour, DefaultStopTimeout.D(), "how long a graceful stop may take before SIGKILL (the agent allows up to 1h)"}
	checkIntervalRange   = durRange{10 * time.Millisecond, time.Hour, DefaultCheckInterval.D(), "the time between two probes"}
	callTimeoutRange     = durRange{10 * time.Millisecond, time.Hour, 0, "how long one call may take"}
	crashWindowRange     = durRange{100 * time.Millisecond, 24 * time.Hour, DefaultCrashWindow.D(), "the time after a start within which exits make a crash loop"}
	migrateDeadlineRange = durRange{time.Second, 24 * time.Hour, DefaultMigrateDeadline, "how long one migration stage may take"}
	migrateIntervalRange = durRange{10 * time.Millisecond, time.Hour, DefaultMigrateInterval, "the pause between two calls of a stage not done yet"}
	trafficTimeoutRange  = durRange{10 * time.Millisecond, time.Hour, DefaultTrafficTimeout.D(), "how long one request may take"}
	baselineRange        = durRange{time.Second, time.Hour, DefaultTrafficBaseline.D(), "how long traffic runs before the first member is touched: the baseline the upgrade is judged against"}
	afterRange           = durRange{0, time.Hour, 0, "how long traffic goes on once the upgrade has ended"}
	promStepRange        = durRange{100 * time.Millisecond, time.Hour, time.Second, "the resolution of the Prometheus range queries"}

	successRange     = countRange{1, 100, DefaultThreshold, "the consecutive passes that make a check healthy"}
	failureRange     = countRange{1, 100, DefaultThreshold, "the consecutive failures that make a check unhealthy"}
	crashExitsRange  = countRange{1, 100, DefaultCrashExits, "the exits within the window that make a crash loop"}
	concurrencyRange = countRange{1, 1024, DefaultTrafficConcurrency, "the clients that drive the traffic"}
	minRequestsRange = countRange{2, 1_000_000, DefaultMinRequests, "the fewest requests a window needs to be judged"}
)

const (
	maxRate        = 100_000
	maxControlRate = 1000
	maxShare       = 1_000_000
	maxP99Ratio    = 100
)

// fmtDur writes a duration as it would be written in a description:
// 1m rather than 1m0s, 24h rather than 24h0m0s.
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
