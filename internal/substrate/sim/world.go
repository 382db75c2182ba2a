package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Span is a range of durations; a draw is uniform in [Min, Max].
type Span struct{ Min, Max time.Duration }

// Timing is how long the simulated members take: each duration is
// drawn per member and per attempt from the seed, so that a draw does
// not depend on the order in which goroutines asked for it.
type Timing struct {
	Stop, Start, Ready Span
	// Call is how long the substrate and the members take to answer a
	// call (an observation, a check, a hook).
	Call Span
	// Elect is how long a component's role (its leader) takes to move
	// once its holder went down: a switchover.
	Elect Span
	// Moves, when set for a component, are its members' measured
	// durations (an estimate's: Measure), in place of the spans above.
	Moves map[string]Moves
}

// Moves are how long one component's members took in an upgrade,
// step by step (the median over its members): their pre_stop hooks
// (Drain), stop, start, from the start's return to healthy (Ready),
// and their post_start hooks (Rejoin).
type Moves struct {
	Drain  time.Duration `json:"drain"`
	Stop   time.Duration `json:"stop"`
	Start  time.Duration `json:"start"`
	Ready  time.Duration `json:"ready"`
	Rejoin time.Duration `json:"rejoin"`
	// Gate is how long a cluster gate's check took, on average, to pass
	// at a batch's end (the record's Bound.Gates over its batches).
	Gate time.Duration `json:"gate,omitempty"`
	// Members is how many members' moves were measured.
	Members int `json:"members"`
}

// span is comp's measured duration of a step (pick) where there is
// one, else the span given.
func (t Timing) span(comp string, pick func(Moves) time.Duration, or Span) Span {
	if mv, ok := t.Moves[comp]; ok {
		d := pick(mv)
		return Span{d, d}
	}
	return or
}

func stopOf(m Moves) time.Duration  { return m.Stop }
func startOf(m Moves) time.Duration { return m.Start }
func readyOf(m Moves) time.Duration { return m.Ready }

// DefaultTiming is a cluster of small services on a fast network.
var DefaultTiming = Timing{
	Stop:  Span{200 * time.Millisecond, 2 * time.Second},
	Start: Span{500 * time.Millisecond, 3 * time.Second},
	Ready: Span{500 * time.Millisecond, 5 * time.Second},
	Call:  Span{time.Millisecond, 20 * time.Millisecond},
	Elect: Span{200 * time.Millisecond, 2 * time.Second},
}

// Outage is a window, from the run's start, in which the substrate
// answers nothing (every member Unknown, every action unreachable).
type Outage struct{ At, For time.Duration }

// Faults is what goes wrong. Members are named; versions are the
// releases they misbehave on.
type Faults struct {
	// NeverReady: the member started on the version never becomes
	// healthy (a release that does not work on it).
	NeverReady map[string]string `json:"never_ready,omitempty"`
	// CrashLoop: the member started on the version exits again and
	// again, restarted by its substrate each time.
	CrashLoop map[string]string `json:"crash_loop,omitempty"`
	// SlowProbe: the member's check takes this long to answer (the
	// engine cuts it off at its timeout).
	SlowProbe map[string]time.Duration `json:"slow_probe,omitempty"`
	// HangStart: a start of the member on the version never returns
	// (the engine's deadline for the action must end it).
	HangStart map[string]string `json:"hang_start,omitempty"`
	Outages   []Outage          `json:"outages,omitempty"`
}

// member is one simulated member as the world sees it.
type member struct {
	name, comp, host, domain string
	version                  string
	up                       bool // its process runs
	ready                    bool // healthy: answers, serves
	since                    time.Time
	readySince               time.Time
	restarts                 int
	starts                   int // its starts, to seed each attempt's durations
	detail                   string
	// ferryDown: taken down by ferry (a stop, a swap) and not healthy
	// since: it is in its component's phase.
	ferryDown bool
	gen       int // bumped at every start and stop: a pending ready or crash of an older one is stale
}

// World is the sim substrate: a driver (engine.Config.Driver) and the
// call executor (engine.Config.Calls) over simulated members on a
// virtual clock. It checks the invariants as it goes.
type World struct {
	clock  *Clock
	c      *config.Cluster
	seed   uint64
	timing Timing
	faults Faults
	// statusIsHealth: the description's member checks were replaced by
	// the sim's status (Running means healthy), see Config.MemberChecks.
	statusIsHealth bool

	mu      sync.Mutex
	members map[string]*member
	order   []string
	list    []*member // members, in order
	// span is where each component's members are in list (from, to),
	// onHost each host's members: a member taken down is counted
	// against its own component and host, not all ten thousand.
	span   map[string][2]int
	onHost map[string][]*member
	leader map[string]string // component → member holding its role ("" while it moves)
	moving map[string]bool   // components whose role is moving (a switchover)
	inv    *Invariants
	hosts  hosts // hosts.go
	// most is the most members down at once, as ferry took each down.
	most MostDown
}

// MostDown is the most members down at once while the upgrade ran (as
// ferry took each down, counting those down for any reason): per
// component, per host (of every component) and per failure domain (of
// one component: "api/zone-a").
type MostDown struct {
	Component map[string]int `json:"component"`
	Host      map[string]int `json:"host,omitempty"`
	Domain    map[string]int `json:"domain,omitempty"`
}

// note keeps n as the most for key if it is.
func note(m *map[string]int, key string, n int) {
	if key == "" {
		return
	}
	if *m == nil {
		*m = map[string]int{}
	}
	if n > (*m)[key] {
		(*m)[key] = n
	}
}

func newWorld(clock *Clock, c *config.Cluster, seed uint64, timing Timing, faults Faults, from string, statusIsHealth bool) *World {
	w := &World{clock: clock, c: c, seed: seed, timing: timing, faults: faults, statusIsHealth: statusIsHealth,
		members: map[string]*member{}, leader: map[string]string{}, moving: map[string]bool{}, inv: newInvariants(),
		span: map[string][2]int{}, onHost: map[string][]*member{}}
	for _, comp := range c.ComponentsInOrder() {
		first := len(w.list)
		for _, m := range comp.Members {
			wm := &member{name: m.Name, comp: comp.Name, host: m.Host, domain: m.Domain, version: from,
				up: true, ready: true, since: Epoch, readySince: Epoch}
			w.members[m.Name] = wm
			w.order = append(w.order, m.Name)
			w.list = append(w.list, wm)
			w.onHost[m.Host] = append(w.onHost[m.Host], wm)
		}
		w.span[comp.Name] = [2]int{first, len(w.list)}
		if comp.Role != nil && len(comp.Members) > 0 {
			w.leader[comp.Name] = comp.Members[len(comp.Members)/2].Name
		}
	}
	return w
}

// draw is a duration from span for what (a member's step and attempt),
// the same for the same seed whatever else happened.
func (w *World) draw(span Span, what string) time.Duration {
	if span.Max <= span.Min {
		return span.Min
	}
	h := fnv.New64a()
	h.Write([]byte(what))
	r := rand.New(rand.NewPCG(w.seed, h.Sum64()))
	return span.Min + time.Duration(r.Int64N(int64(span.Max-span.Min)+1))
}

func (w *World) outage(now time.Time) (bool, time.Time) {
	for _, o := range w.faults.Outages {
		from := Epoch.Add(o.At)
		if !now.Before(from) && now.Before(from.Add(o.For)) {
			return true, from.Add(o.For)
		}
	}
	return false, time.Time{}
}

var errOutage = fmt.Errorf("%w: sim: the substrate does not answer (an outage)", driver.ErrUnreachable)

// Observe reports each member as the world has it, after the call's
// latency; in an outage every member is Unknown.
func (w *World) Observe(ctx context.Context, ms []driver.Member) ([]driver.Status, error) {
	if !w.clock.sleep(ctx, w.draw(w.timing.Call, "observe@"+w.clock.Now().String()), "observe") {
		return nil, ctx.Err()
	}
	now := w.clock.Now()
	out := make([]driver.Status, len(ms))
	down, _ := w.outage(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, dm := range ms {
		st := driver.Status{Name: dm.Name}
		m := w.members[dm.Name]
		switch {
		case m == nil:
			st.Unknown, st.Detail = true, "sim: no such member"
		case down:
			st.Unknown, st.Detail = true, errOutage.Error()
		default:
			st.Version, st.Restarts, st.Detail = m.version, m.restarts, m.detail
			st.Running, st.Since = m.up, m.since
			if w.statusIsHealth {
				st.Running, st.Since = m.up && m.ready, m.readySince
				if m.up && !m.ready {
					st.Detail = "sim: started, not healthy yet" + suffix(m.detail)
				}
			}
			if st.Running {
				st.PID = 1000 + m.starts
			}
		}
		out[i] = st
	}
	return out, nil
}

// Start starts member m on a's version: a running member on another
// version is stopped first (the swap).
func (w *World) Start(ctx context.Context, dm driver.Member, a driver.Artifact) error {
	if err := w.reach(ctx, "start:"+dm.Name); err != nil {
		return err
	}
	w.mu.Lock()
	m := w.members[dm.Name]
	if m == nil {
		w.mu.Unlock()
		return fmt.Errorf("sim: no member %s", dm.Name)
	}
	if m.up && m.version == a.Version {
		w.mu.Unlock()
		return nil
	}
	if v, ok := w.faults.HangStart[m.name]; ok && v == a.Version {
		w.mu.Unlock()
		<-ctx.Done() // the substrate never answers this start
		return ctx.Err()
	}
	attempt := fmt.Sprintf("%s#%d", m.name, m.starts+1)
	wasUp := m.up
	if wasUp {
		w.takeDown(m, "swap to "+a.Version)
	}
	w.mu.Unlock()
	if wasUp && !w.clock.sleep(ctx, w.draw(w.timing.span(m.comp, stopOf, w.timing.Stop), "stop:"+attempt), "stop:"+m.name) {
		return ctx.Err()
	}
	w.mu.Lock()
	if wasUp {
		m.up, m.detail = false, "stopped for "+a.Version
	}
	w.mu.Unlock()
	if !w.clock.sleep(ctx, w.draw(w.timing.span(m.comp, startOf, w.timing.Start), "start:"+attempt), "start:"+m.name) {
		return ctx.Err()
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	m.gen++
	m.starts++
	m.up, m.ready, m.version, m.since, m.restarts, m.detail = true, false, a.Version, now, 0, ""
	m.ferryDown = true
	gen := m.gen
	switch {
	case w.faults.CrashLoop[m.name] == a.Version:
		w.crash(m, gen)
	case w.faults.NeverReady[m.name] == a.Version:
		m.detail = "sim: " + a.Version + " never becomes healthy here"
	default:
		w.clock.afterFunc(w.draw(w.timing.span(m.comp, readyOf, w.timing.Ready), "ready:"+attempt), kindSim, "ready:"+m.name, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if m.gen == gen && m.up {
				m.ready, m.readySince, m.ferryDown = true, w.clock.Now(), false
				w.elect(m.comp)
			}
		})
	}
	return nil
}

// crash makes member m exit every few seconds after its start, each
// time restarted by its substrate: a crash loop.
func (w *World) crash(m *member, gen int) {
	w.clock.afterFunc(w.draw(Span{time.Second, 3 * time.Second}, fmt.Sprintf("crash:%s#%d.%d", m.name, m.starts, m.restarts)), kindSim, "crash:"+m.name, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if m.gen != gen || !m.up {
			return
		}
		m.restarts++
		m.since = w.clock.Now()
		m.detail = fmt.Sprintf("sim: exited 1 (crash %d), restarted", m.restarts)
		w.crash(m, gen)
	})
}

// Stop stops member m gracefully.
func (w *World) Stop(ctx context.Context, dm driver.Member) error {
	if err := w.reach(ctx, "stop:"+dm.Name); err != nil {
		return err
	}
	w.mu.Lock()
	m := w.members[dm.Name]
	if m == nil || !m.up {
		w.mu.Unlock()
		return nil
	}
	attempt := fmt.Sprintf("%s#%d", m.name, m.starts)
	w.takeDown(m, "stop")
	w.mu.Unlock()
	if !w.clock.sleep(ctx, w.draw(w.timing.span(m.comp, stopOf, w.timing.Stop), "stop:"+attempt), "stop:"+m.name) {
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	m.gen++
	m.up, m.ready, m.detail = false, false, "stopped"
	return nil
}

// reach is the latency of a driver call, and its failure in an outage.
func (w *World) reach(ctx context.Context, what string) error {
	if !w.clock.sleep(ctx, w.draw(w.timing.Call, what+"@"+w.clock.Now().String()), what) {
		return ctx.Err()
	}
	if down, _ := w.outage(w.clock.Now()); down {
		return errOutage
	}
	return nil
}

// takeDown records that ferry takes member m down now, and checks the
// invariants at this instant. w.mu is held.
func (w *World) takeDown(m *member, why string) {
	if m.ready {
		w.checkDown(m, why)
	}
	m.ready = false
	m.ferryDown = true
	if w.leader[m.comp] == m.name {
		w.leader[m.comp] = ""
		w.moving[m.comp] = true
		w.checkSwitchovers(m)
		comp := m.comp
		w.clock.afterFunc(w.draw(w.timing.Elect, fmt.Sprintf("elect:%s#%d", comp, m.starts)), kindSim, "elect:"+comp, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.elect(comp)
		})
	}
}

// switchOver hands component comp's role to member to (a switchover
// call, or its undo): the role moves (for the time an election takes)
// and lands on to if it is healthy then. Checked: no role moves
// meanwhile, of this component or another. w.mu is held.
func (w *World) switchOver(comp, to string) health.Result {
	m := w.members[to]
	switch {
	case m == nil || m.comp != comp:
		return health.Result{Detail: fmt.Sprintf("sim: %s is not a member of %s", to, comp)}
	case !m.ready:
		return health.Result{Detail: fmt.Sprintf("sim: %s is not healthy: it cannot take the role", to)}
	case w.leader[comp] == to:
		return health.Result{OK: true, Detail: "sim: " + to + " holds the role already"}
	}
	moving := w.movingRoles("")
	w.inv.check(InvOneSwitchover, len(moving) == 0, w.clock.Now(), "the role of %s switched over to %s while the role of %v moves", comp, to, moving)
	w.leader[comp], w.moving[comp] = "", true
	w.clock.afterFunc(w.draw(w.timing.Elect, fmt.Sprintf("switch:%s>%s#%d", comp, to, m.starts)), kindSim, "switch:"+comp, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.moving[comp] && m.ready {
			w.leader[comp], w.moving[comp] = to, false
			return
		}
		w.elect(comp)
	})
	return health.Result{OK: true, Detail: "sim: the role of " + comp + " moves to " + to}
}

// elect gives component comp's role, while it is moving, to its first
// healthy member. w.mu is held.
func (w *World) elect(comp string) {
	if !w.moving[comp] {
		return
	}
	for _, m := range w.list {
		if m.comp == comp && m.ready {
			w.leader[comp], w.moving[comp] = m.name, false
			return
		}
	}
}

// roles are the member holding each component's role now.
func (w *World) roles() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.leader)
}

// Logs is what a simulated member wrote last (driver.Logger).
func (w *World) Logs(_ context.Context, dm driver.Member, _ bool, _ int) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.members[dm.Name]; m != nil {
		return m.detail, nil
	}
	return "", nil
}

// The calls of a simulated description (Config.rewrite): the sim
// answers them itself, from the world.
const (
	callMember = "sim:member"
	callGate   = "sim:gate"
	callRole   = "sim:role"
	callHook   = "sim:hook"
	// callDrain and callRejoin are a member's pre_stop and post_start
	// hooks: hooks, timed as measured (Timing.Moves), all of a
	// component's list taking the time measured for it (the first call).
	callDrain  = "sim:drain"
	callRejoin = "sim:rejoin"
	callSwitch = "sim:switchover"
	callStage  = "sim:stage"
	callVer    = "sim:version"
)

// Do answers a call of the simulated description after its latency
// (engine.Caller): a member's check (healthy), a component's gate (a
// majority of it healthy), a role check (holds its component's role),
// hooks, undos and migrations (they succeed).
func (w *World) Do(ctx context.Context, call config.Call, d config.TemplateData) health.Result {
	kind, _, _ := strings.Cut(call.HTTP, "#")
	who := d.Name
	switch kind {
	case callGate:
		who = d.Component
	case callSwitch:
		who = d.To
	}
	if isHostCall(kind) {
		who = d.Host
	}
	wait := w.draw(w.timing.Call, kind+":"+who+"@"+w.clock.Now().String())
	if mv, ok := w.timing.Moves[d.Component]; ok {
		switch {
		case kind == callDrain:
			wait = mv.Drain
		case kind == callRejoin:
			wait = mv.Rejoin
		case kind == callGate && mv.Gate > 0:
			wait = mv.Gate
		}
	}
	if kind == callMember {
		if slow, ok := w.faults.SlowProbe[who]; ok {
			wait = slow
		}
	}
	if !w.clock.sleep(ctx, wait, "call:"+kind+":"+who) {
		return health.Result{} // cut off: the engine says why
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch kind {
	case callMember:
		m := w.members[who]
		if m != nil && m.up && m.ready {
			return health.Result{OK: true, Detail: "sim: " + who + " healthy on " + m.version}
		}
		return health.Result{Detail: "sim: " + who + " not healthy"}
	case callGate:
		n, ok := 0, 0
		for _, m := range w.list {
			if m.comp == who {
				n++
				if m.ready {
					ok++
				}
			}
		}
		if ok*2 > n {
			return health.Result{OK: true, Detail: fmt.Sprintf("sim: %d of %d of %s healthy", ok, n, who)}
		}
		return health.Result{Detail: fmt.Sprintf("sim: %d of %d of %s healthy, no majority", ok, n, who)}
	case callSwitch:
		return w.switchOver(d.Component, who)
	case callRole:
		if m := w.members[who]; m != nil && w.leader[m.comp] == who {
			return health.Result{OK: true, Detail: "sim: " + who + " holds the role"}
		}
		return health.Result{Detail: "sim: " + who + " does not hold the role"}
	case callLock, callUnlock, callCapacity:
		return w.hostCall(kind, who)
	}
	return health.Result{OK: true, Detail: "sim: " + strings.TrimPrefix(call.HTTP, "sim:") + " done"}
}

// Version answers a version call: what the member runs.
func (w *World) Version(ctx context.Context, call config.Call, d config.TemplateData) (string, health.Result) {
	r := w.Do(ctx, call, d)
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.members[d.Name]; m != nil && r.OK {
		return m.version, r
	}
	return "", r
}

var (
	_ driver.Driver = (*World)(nil)
	_ driver.Logger = (*World)(nil)
	_ engine.Caller = (*World)(nil)
)

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
