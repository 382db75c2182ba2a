package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Config is one simulated upgrade.
type Config struct {
	// Cluster is the description (config.Load'ed). The sim runs a copy
	// of it whose calls it answers itself and whose artifacts need no
	// files; Cluster is not changed.
	Cluster *config.Cluster
	// From is the release every member runs at the start (default: the
	// first release of the catalog that may be upgraded to To).
	From string
	To   string
	Seed uint64
	// Timing defaults to DefaultTiming.
	Timing *Timing
	// Faults, if nil, are drawn from the seed (RandomFaults).
	Faults *Faults
	// MemberChecks keeps the description's member and role checks,
	// answered by the sim at their intervals. Without it the sim's
	// status says a member runs once it is healthy (no member check, as
	// the engine takes a member without one), which costs one call per
	// tick for the whole cluster rather than one per member per
	// interval: what lets a simulation of ten thousand members run in
	// seconds.
	MemberChecks bool
	// Tick is the engine's tick in the simulation (default: the
	// description's, at least a second: a longer look costs a simulated
	// upgrade a little reaction time, a short one costs the simulation
	// a pass of the machine per tick).
	Tick time.Duration
	// Limit bounds the virtual time (default 72h).
	Limit time.Duration
	// Requests, if set, are operator requests made at these virtual
	// times from the start (pause, resume, abort).
	Requests []Request
	// NoEvents keeps Result.Events empty: the events are made and the
	// timeline's kept, but the store does not keep them all (a
	// 10,000-member upgrade makes hundreds of megabytes of them, which
	// the simulation would carry, and collect, to its end).
	NoEvents bool
	// together: the clock fires every timer due at one instant at once
	// (Clock.together): an estimate's, not replayed exactly.
	together bool
}

// Request is an operator's request at a virtual time.
type Request struct {
	At   time.Duration
	Kind upgrade.IntentKind
}

// TakeOver, as a Request's kind, is no operator's: another engine
// claims the store at that time (its fence), as a successor does; the
// running engine must stop writing at once (Result.TakenOver).
const TakeOver upgrade.IntentKind = "take-over"

// Claim is the store as another engine's claim found it: the record's
// revision and the last event's sequence number.
type Claim struct {
	Revision store.Revision
	Seq      uint64
}

// Entry is one line of a simulated timeline.
type Entry struct {
	At      time.Duration `json:"at"`
	Kind    string        `json:"kind"`
	Message string        `json:"message"`
}

func (e Entry) String() string {
	return fmt.Sprintf("%10.3fs  %-6s %s", e.At.Seconds(), e.Kind, e.Message)
}

// Result is what a simulated upgrade did.
type Result struct {
	Seed    uint64        `json:"seed"`
	Members int           `json:"members"`
	Plan    plan.Plan     `json:"plan"`
	Faults  Faults        `json:"faults"`
	State   upgrade.State `json:"state"`
	Reason  string        `json:"reason,omitempty"`
	// Took is the virtual wall time of the upgrade, from its start to
	// its end.
	Took       time.Duration `json:"took"`
	Timeline   []Entry       `json:"timeline"`
	Invariants []Invariant   `json:"invariants"`
	// Roles are the member holding each component's role at the end
	// ("" while it moves), for the components that have one.
	Roles map[string]string `json:"roles,omitempty"`
	// Err is why the run could not finish (the engine refused, or the
	// virtual time ran out).
	Err string `json:"error,omitempty"`
	// Record is the upgrade's last record, Events every event stored
	// (none with Config.NoEvents).
	Record upgrade.Upgrade `json:"-"`
	Events []store.Event   `json:"-"`
	// Revision is the record's revision at the end; TakenOver the
	// store at each TakeOver request.
	Revision  store.Revision `json:"revision"`
	TakenOver []Claim        `json:"taken_over,omitempty"`
	// MostDown is the most members down at once, per component, host
	// and domain.
	MostDown MostDown `json:"most_down"`
}

// Broken lists every invariant breach.
func (r Result) Broken() []string {
	var out []string
	for _, inv := range r.Invariants {
		for _, b := range inv.Broken {
			out = append(out, inv.Name+": "+b)
		}
	}
	return out
}

// Run simulates an upgrade to cfg.To through the real engine.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Seed: cfg.Seed}
	if cfg.Cluster == nil || cfg.To == "" {
		return res, errors.New("sim: a description and a target release are required")
	}
	if cfg.Cluster.Release(cfg.To) == nil {
		return res, fmt.Errorf("sim: release %s is not in the catalog", cfg.To)
	}
	from := cfg.From
	if from == "" {
		if from = plan.FirstFrom(cfg.Cluster, cfg.To); from == "" {
			return res, fmt.Errorf("sim: no release of the catalog may be upgraded to %s", cfg.To)
		}
	}
	timing := DefaultTiming
	if cfg.Timing != nil {
		timing = *cfg.Timing
	}
	c := rewrite(cfg.Cluster, cfg.MemberChecks, cfg.Tick)
	faults := RandomFaults(c, cfg.Seed, cfg.To)
	if cfg.Faults != nil {
		faults = *cfg.Faults
	}
	res.Faults = faults
	limit := cfg.Limit
	if limit <= 0 {
		limit = 72 * time.Hour
	}
	clock := NewClock()
	clock.together = cfg.together
	w := newWorld(clock, c, cfg.Seed, timing, faults, from, !cfg.MemberChecks)
	w.hosts = newHosts(c, cfg.To)
	res.Members = len(w.order)
	st := NewStore()
	st.dropEvents = cfg.NoEvents
	var evMu sync.Mutex
	var timeline []Entry
	eng, err := engine.New(engine.Config{Cluster: c, Driver: w, Store: st, Clock: clock, Calls: w, Backups: backups{}, ExitOnPause: len(cfg.Requests) == 0,
		OnEvent: func(ev store.Event) {
			switch ev.Kind {
			case "state", "batch", "outage":
			default:
				return
			}
			msg := ev.Message
			if ev.Upgrade != "" { // its id is random: a replay would differ by it alone
				msg = strings.ReplaceAll(msg, "upgrade "+ev.Upgrade+" ", "upgrade ")
			}
			evMu.Lock()
			timeline = append(timeline, Entry{At: ev.Time.Sub(Epoch), Kind: ev.Kind, Message: msg})
			evMu.Unlock()
		}})
	if err != nil {
		return res, err
	}
	var claims []Claim
	for _, r := range cfg.Requests {
		if r.Kind == TakeOver {
			clock.afterFunc(r.At, kindSim, "take-over", func() { claims = append(claims, st.takeOver()) })
			continue
		}
		clock.afterFunc(r.At, kindSim, "request", func() { _ = st.Request(r.Kind, clock.Now()) })
	}
	var u upgrade.Upgrade
	err = clock.Drive(ctx, Epoch.Add(limit), func(ctx context.Context) error {
		p, _, err := eng.Plan(ctx, cfg.To)
		if err != nil {
			return err
		}
		res.Plan = p
		// A simulation touches nothing: the downtime an offline phase
		// would take is simulated, not refused (the plan shows it).
		if _, err := eng.BeginWith(ctx, cfg.To, engine.BeginOptions{AcceptDowntime: true}); err != nil {
			return err
		}
		u, err = eng.Run(ctx)
		return err
	})
	if err != nil {
		res.Err = err.Error()
	}
	if cur, rev, err := st.Read(""); err == nil {
		u, res.Revision = cur, rev
	}
	res.TakenOver = claims
	res.Record = u
	res.Events = st.Events()
	res.State, res.Reason = u.State, u.Reason
	if !u.Created.IsZero() {
		end := u.Ended
		if end.IsZero() {
			end = clock.Now()
		}
		res.Took = end.Sub(u.Created)
	}
	w.checkEnd(u)
	res.Invariants = w.inv.List()
	res.Roles = w.roles()
	w.mu.Lock()
	res.MostDown = w.most
	w.mu.Unlock()
	evMu.Lock()
	res.Timeline = timeline
	evMu.Unlock()
	return res, nil
}

// Drive runs f, advancing the clock whenever the process is idle, until
// f returns. Past limit, or when nothing is left to wait on, f's
// context is cancelled and Drive says why.
//
// The collector runs only here, between two steps, while everything else
// is blocked: a goroutine parked on a concurrent collection's assist is
// neither running nor runnable, so the idle test would take it for
// blocked on the clock and move time past it.
func (c *Clock) Drive(ctx context.Context, limit time.Time, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	collectAt := max(2*ms.HeapAlloc, 256<<20)
	heap := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/frees:bytes"}}
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	var why error
	stop := func(err error) {
		if why == nil {
			why = err
			cancel()
		}
	}
	// returned is f's error once f has returned (why, if Drive stopped
	// it), looked at once the process is idle.
	returned := func() (bool, error) {
		c.Settle()
		select {
		case err := <-done:
			if why != nil {
				return true, why
			}
			return true, err
		default:
			return false, nil
		}
	}
	for {
		if ok, err := returned(); ok {
			return err
		}
		if metrics.Read(heap); heap[0].Value.Uint64()-heap[1].Value.Uint64() > collectAt {
			runtime.GC()
			metrics.Read(heap)
			collectAt = max(2*(heap[0].Value.Uint64()-heap[1].Value.Uint64()), 256<<20)
			continue // settle again: the collection ran finalizers, maybe
		}
		if !c.Now().Before(limit) {
			stop(fmt.Errorf("sim: still running after %s of virtual time", limit.Sub(Epoch)))
		}
		if ctx.Err() != nil && why == nil {
			why = ctx.Err()
		}
		if !c.Advance() {
			if ok, err := returned(); ok {
				return err
			}
			if why != nil {
				if os.Getenv("FERRY_SIM_DEBUG") != "" {
					buf := make([]byte, 1<<22)
					_ = os.WriteFile(os.Getenv("FERRY_SIM_DEBUG"), buf[:runtime.Stack(buf, true)], 0o644)
				}
				return fmt.Errorf("%w (and the engine did not return once cancelled)", why)
			}
			stop(errors.New("sim: the engine waits on nothing: no timer is armed and nothing runs"))
		}
	}
}

// rewrite is the description the sim runs: its calls answered by the
// sim, its artifacts images the sim does not check.
func rewrite(orig *config.Cluster, memberChecks bool, tick time.Duration) *config.Cluster {
	c := *orig
	c.Substrate = "sim"
	var sim func(kind string, call config.Call) config.Call
	sim = func(kind string, call config.Call) config.Call {
		out := config.Call{HTTP: kind, Timeout: call.Timeout}
		if call.Undo != nil {
			u := sim(callHook+"#undo", *call.Undo)
			out.Undo = &u
		}
		return out
	}
	calls := func(kind string, cs []config.Call) []config.Call {
		out := make([]config.Call, len(cs))
		for i, cl := range cs {
			out[i] = sim(kind, cl)
		}
		return out
	}
	check := func(kind string, ch *config.Check) *config.Check {
		if ch == nil {
			return nil
		}
		n := *ch
		n.Call = sim(kind, ch.Call)
		return &n
	}
	c.Components = make([]config.Component, len(orig.Components))
	for i, comp := range orig.Components {
		comp.Health.Cluster = check(callGate, comp.Health.Cluster)
		if memberChecks {
			comp.Health.Member = check(callMember, comp.Health.Member)
		} else {
			comp.Health.Member = nil
		}
		if comp.Role != nil {
			r := *comp.Role
			r.Check = nil
			if memberChecks || needsRole(&comp) {
				r.Check = check(callRole, comp.Role.Check)
			}
			comp.Role = &r
		}
		h := comp.Hooks
		comp.Hooks = config.Hooks{PreStop: memberHooks(callDrain, h.PreStop, sim), PostStart: memberHooks(callRejoin, h.PostStart, sim),
			PrePhase: calls(callHook, h.PrePhase), PostPhase: calls(callHook, h.PostPhase), Switchover: calls(callSwitch, h.Switchover)}
		if comp.Version != nil {
			v := sim(callVer, *comp.Version)
			comp.Version = &v
		}
		comp.Adopt = nil
		comp.Workload = nil
		rewriteBackup(&comp, sim)
		c.Components[i] = comp
	}
	c.Hooks = config.UpgradeHooks{PreUpgrade: calls(callHook, orig.Hooks.PreUpgrade), PostUpgrade: calls(callHook, orig.Hooks.PostUpgrade)}
	// The health query's alarms are quiet in a simulated world.
	c.Alarms = make([]config.Alarm, len(orig.Alarms))
	for i, a := range orig.Alarms {
		c.Alarms[i] = config.Alarm{Name: a.Name, Call: sim(callHook, a.Call)}
	}
	rewriteHosts(&c, sim)
	c.Releases = make([]config.Release, len(orig.Releases))
	for i, r := range orig.Releases {
		arts := map[string]config.Artifact{}
		for _, comp := range orig.Components {
			arts[comp.Name] = config.Artifact{Image: "sim/" + comp.Name + ":" + r.Version}
		}
		r.Artifacts = arts
		m := r.Migrations
		r.Migrations.Expand, r.Migrations.Migrate = calls(callStage, m.Expand), calls(callStage, m.Migrate)
		r.Migrations.Finalize, r.Migrations.Contract = calls(callStage, m.Finalize), calls(callStage, m.Contract)
		c.Releases[i] = r
	}
	c.Traffic = nil
	if tick <= 0 {
		tick = max(orig.Policy.Tick.D(), time.Second)
	}
	c.Policy.Tick = config.Duration(tick)
	return &c
}

// memberHooks are a member's hook list in the sim: the first call
// timed as the list was measured (kind), the others answered at once.
func memberHooks(kind string, cs []config.Call, sim func(string, config.Call) config.Call) []config.Call {
	out := make([]config.Call, len(cs))
	for i, cl := range cs {
		k := callHook
		if i == 0 {
			k = kind
		}
		out[i] = sim(k, cl)
	}
	return out
}

// needsRole reports whether a step comp's strategy may add is about
// its role (a switchover): its role check is then kept, for the
// strategy must see who holds it.
func needsRole(comp *config.Component) bool {
	for _, n := range strategy.Adds(string(comp.Strategy.Type)) {
		if x, ok := step.ExtraOf(step.Name(n)); ok && x.NeedsRole {
			return true
		}
	}
	return false
}

// RandomFaults draws what goes wrong in a run from its seed: mostly
// nothing; now and then a member of the target release that never
// becomes healthy or crash-loops, and an outage of the substrate.
func RandomFaults(c *config.Cluster, seed uint64, to string) Faults {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var names []string
	for _, comp := range c.ComponentsInOrder() {
		for _, m := range comp.Members {
			names = append(names, m.Name)
		}
	}
	f := Faults{}
	if len(names) == 0 {
		return f
	}
	switch r.IntN(10) {
	case 0:
		f.NeverReady = map[string]string{names[r.IntN(len(names))]: to}
	case 1:
		f.CrashLoop = map[string]string{names[r.IntN(len(names))]: to}
	}
	if r.IntN(4) == 0 {
		f.Outages = []Outage{{At: time.Duration(5+r.IntN(600)) * time.Second, For: time.Duration(1+r.IntN(120)) * time.Second}}
	}
	return f
}

// String says what the faults are, in a line.
func (f Faults) String() string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(f.NeverReady)) {
		out = append(out, fmt.Sprintf("%s never healthy on %s", n, f.NeverReady[n]))
	}
	for _, n := range slices.Sorted(maps.Keys(f.CrashLoop)) {
		out = append(out, fmt.Sprintf("%s crash-loops on %s", n, f.CrashLoop[n]))
	}
	for _, n := range slices.Sorted(maps.Keys(f.HangStart)) {
		out = append(out, fmt.Sprintf("a start of %s on %s never returns", n, f.HangStart[n]))
	}
	for _, n := range slices.Sorted(maps.Keys(f.SlowProbe)) {
		out = append(out, fmt.Sprintf("%s's check answers after %s", n, f.SlowProbe[n]))
	}
	for _, o := range f.Outages {
		out = append(out, fmt.Sprintf("the substrate away from %s for %s", o.At, o.For))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
