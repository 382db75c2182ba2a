package upgrade

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// world is a simulated cluster the machine is driven against in tests:
// members that stop, start, become healthy after a while, a raft-like
// leader that moves when its holder steps down or stops, a load
// balancer whose backends are drained and enabled by hooks with an
// undo, cluster gates that take time to check, an outage of the
// substrate, and faults of a bad release. Actions take a fixed time;
// the clock only moves when the machine waits. It is deterministic:
// the same script gives the same trace.
type world struct {
	c   *config.Cluster
	now time.Time
	t0  time.Time
	u   Upgrade
	// began is set once an upgrade exists; from is the version the
	// members ran before.
	began bool
	from  string

	members map[string]*wmember
	order   []string
	leader  string
	// leaderChanges counts the times leadership moved.
	leaderChanges int
	// drained are the load balancer's backends out of rotation; flags
	// the cluster-wide flags set (noout).
	drained map[string]bool
	flags   map[string]bool

	took     time.Duration // every action
	ready    time.Duration // from a start to healthy
	gateTook time.Duration // a gate check
	// recover is how long a component's gate stays red after one of its
	// members became healthy (Ceph's placement groups recovering after
	// an OSD restarted).
	recover   time.Duration
	gateEvery time.Duration // the gates' interval
	tick      time.Duration // the engine's fallback tick
	// statusEvery, when set, is how often the members are observed
	// (the engine's status poll): between two polls the machine sees
	// the last one, as a real engine does.
	statusEvery time.Duration
	lastObs     map[string]MemberHealth
	lastObsAt   time.Time
	outage      bool
	refused     string // the substrate refused, in its words
	// since is when the simulated engine's watch began (zero: not an
	// engine's watch, as most scripts need); stale, when set, is what
	// its first observation after ferry was away shows instead of the
	// world (its observer's last results, or nothing checked yet).
	since time.Time
	stale map[string]MemberHealth

	gates    map[string]*wgate
	inflight []*wact
	// unchecked turns off the checks of the machine's copies made at
	// every step (pure, report's, the summarized observation's): the
	// simulated worlds make them on some of their seeds only.
	unchecked bool
	// says is the system's own answer about each member (ok_to_stop):
	// "" is yes, anything else is its no in its words; asks are the
	// calls in flight, answers the last each gave.
	says    map[string]string
	asks    []wask
	answers map[string]Answer
	faults  map[string]string // member or hook → fault
	// backups are the backups taken, by directory: the data they hold;
	// pruned the components whose backups were pruned.
	backups map[string]string
	pruned  []string

	trace    strings.Builder
	lastWait string
	// judge, when set, judges each forward batch as it ends, as the
	// engine's traffic verdict does: "" for no impact, else why.
	judge func(b Batch) string
	// coarse: the substrate's times are whole seconds (Kubernetes'
	// conditions and start times), truncated as its API does.
	coarse bool
	// hosts is the world's side of hosts stages (world_hosts_test.go).
	hosts whosts
}

type wmember struct {
	name, comp, version string
	running, healthy    bool
	healthySince        time.Time
	started             time.Time
	pin                 string // the pin it was last started with
	readyAt             time.Time
	exitAt              time.Time // a crash-after fault
	restarts            int
	detail              string
	// data is what the member's data holds: the release that last wrote
	// it (a start on another release migrates it).
	data string
}

type wgate struct {
	checked, done time.Time
	healthy       bool
	detail        string
	pending       bool
	start         time.Time
}

type wact struct {
	a  Action
	at time.Time
}

// wask is one ok_to_stop call in flight: it answers gateTook after it
// began, with what the system says then.
type wask struct {
	member string
	start  time.Time
}

func newWorld(c *config.Cluster, version string) *world {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	w := &world{unchecked: raceDetector, c: c, now: t0, t0: t0, members: map[string]*wmember{}, drained: map[string]bool{}, flags: map[string]bool{},
		took: 10 * time.Millisecond, ready: 100 * time.Millisecond, gateTook: 10 * time.Millisecond, gateEvery: time.Second, tick: 100 * time.Millisecond,
		gates: map[string]*wgate{}, faults: map[string]string{}, says: map[string]string{}, answers: map[string]Answer{}, backups: map[string]string{}}
	for _, comp := range c.ComponentsInOrder() {
		for _, m := range comp.Members {
			w.members[m.Name] = &wmember{name: m.Name, comp: comp.Name, version: version, running: true, healthy: true, healthySince: t0, started: t0, data: "written by " + version}
			w.order = append(w.order, m.Name)
		}
		if comp.Health.Cluster != nil {
			w.gates[comp.Name] = &wgate{}
		}
		if comp.Role != nil && w.leader == "" && len(comp.Members) > 0 {
			w.leader = comp.Members[0].Name
		}
	}
	return w
}

func (w *world) at() string { return fmt.Sprintf("%7.3fs", w.now.Sub(w.t0).Seconds()) }

func (w *world) logf(format string, args ...any) {
	fmt.Fprintf(&w.trace, "%s %s\n", w.at(), fmt.Sprintf(format, args...))
}

// observe is what the engine would see now.
func (w *world) observe(acting map[int]bool) Observation {
	obs := Observation{Members: map[string]MemberHealth{}, Gates: map[string]Gate{}, Acting: acting, Since: w.since}
	if w.stale != nil {
		obs.Members, w.stale = w.stale, nil
	} else if w.statusEvery > 0 && w.lastObs != nil && w.now.Sub(w.lastObsAt) < w.statusEvery {
		obs.Members = w.lastObs
	} else {
		w.observeMembers(obs.Members)
		if w.statusEvery > 0 {
			w.lastObs, w.lastObsAt = obs.Members, w.now
		}
	}
	for c, g := range w.gates {
		obs.Gates[c] = Gate{Healthy: g.healthy, Detail: g.detail, Checked: g.checked, Took: g.done.Sub(g.checked)}
	}
	if len(w.answers) > 0 {
		obs.Answers = map[string]Answer{}
		for n, a := range w.answers {
			obs.Answers[n] = a
		}
	}
	obs.Capacity = w.hosts.observe()
	obs.Refused = w.refused
	return obs
}

// observeMembers fills obs with what each member is now.
func (w *world) observeMembers(obs map[string]MemberHealth) {
	for _, n := range w.order {
		m := w.members[n]
		if w.outage {
			obs[n] = MemberHealth{Unknown: true, Detail: "agent of host h1: connection refused"}
			continue
		}
		if w.hostAway(n) {
			obs[n] = MemberHealth{Unknown: true, Detail: "ssh host of " + n + " does not answer (reinstalling)"}
			continue
		}
		mh := MemberHealth{Running: m.running, Version: m.version, Healthy: m.running && m.healthy, Started: m.started,
			Restarts: m.restarts, Role: n == w.leader && m.running, Seen: w.now, Checked: w.now, Detail: m.detail}
		if mh.Healthy {
			mh.HealthySince = m.healthySince
		}
		if w.coarse {
			mh.Started, mh.HealthySince = mh.Started.Truncate(time.Second), mh.HealthySince.Truncate(time.Second)
		}
		obs[n] = mh
	}
}

// gateVerdict is what component c's gate says now: a majority of its
// members healthy.
func (w *world) gateVerdict(c string) (bool, string) {
	comp := w.c.Component(c)
	healthy := 0
	for _, m := range comp.Members {
		if wm := w.members[m.Name]; wm.running && wm.healthy {
			healthy++
		}
	}
	ok := healthy > len(comp.Members)/2
	if ok && w.recover > 0 {
		var last time.Time
		for _, m := range comp.Members {
			if wm := w.members[m.Name]; wm.running && wm.healthy && wm.healthySince.After(last) {
				last = wm.healthySince
			}
		}
		if w.now.Before(last.Add(w.recover)) {
			return false, fmt.Sprintf("recovering: red until %.3fs, %s after its last member's return", last.Add(w.recover).Sub(w.t0).Seconds(), w.recover)
		}
	}
	if ok {
		return true, fmt.Sprintf("quorum: %d of %d healthy", healthy, len(comp.Members))
	}
	return false, fmt.Sprintf("no quorum: %d of %d healthy", healthy, len(comp.Members))
}

// probe starts the checks of the gates asked for.
func (w *world) probe(cs []string) {
	// A check asked for now starts now, even while an older one runs
	// (whose verdict, from before, would not do).
	for _, c := range cs {
		if g := w.gates[c]; g != nil && (!g.pending || g.start.Before(w.u.Boundary)) {
			g.pending, g.start = true, w.now
		}
	}
}

// advance moves the clock to the next thing that happens (an action's
// end, a gate's check, a member becoming healthy or crashing, the time
// the machine asked for), at most by the tick.
func (w *world) advance(after time.Duration) {
	next := w.now.Add(w.tick)
	if after > 0 && w.now.Add(after).Before(next) {
		next = w.now.Add(after)
	}
	for _, a := range w.inflight {
		if a.at.Before(next) {
			next = a.at
		}
	}
	for _, g := range w.gates {
		if g.pending && g.start.Add(w.gateTook).Before(next) {
			next = g.start.Add(w.gateTook)
		}
	}
	for _, a := range append(w.asks, w.hosts.asks...) {
		if a.start.Add(w.gateTook).Before(next) {
			next = a.start.Add(w.gateTook)
		}
	}
	for _, m := range w.members {
		for _, t := range []time.Time{m.readyAt, m.exitAt} {
			if !t.IsZero() && t.After(w.now) && t.Before(next) {
				next = t
			}
		}
	}
	if !next.After(w.now) {
		next = w.now.Add(time.Millisecond)
	}
	w.now = next
	for _, m := range w.members {
		if !m.readyAt.IsZero() && !m.readyAt.After(w.now) && m.running {
			m.healthy, m.healthySince, m.readyAt, m.detail = true, m.readyAt, time.Time{}, "ready"
		}
		if !m.exitAt.IsZero() && !m.exitAt.After(w.now) && m.running {
			w.exit(m, "exited with status 2")
			m.exitAt = time.Time{}
		}
	}
	w.answer()
	w.answerCapacity()
	for c, g := range w.gates {
		// Gates are checked at their interval, or when asked.
		if !g.pending && !g.done.IsZero() && w.now.Sub(g.done) >= w.gateEvery {
			g.pending, g.start = true, g.done.Add(w.gateEvery)
		}
		if g.pending && !g.start.Add(w.gateTook).After(w.now) {
			g.pending = false
			g.checked, g.done = g.start, w.now
			g.healthy, g.detail = w.gateVerdict(c)
		}
	}
}

// ask starts the ok_to_stop calls asked for, one at a time per member.
func (w *world) ask(names []string) {
	for _, n := range names {
		if !slices.ContainsFunc(w.asks, func(a wask) bool { return a.member == n }) {
			w.asks = append(w.asks, wask{member: n, start: w.now})
		}
	}
}

// answer ends the ok_to_stop calls whose time has come with what the
// system says now (a member that does not run does not answer).
func (w *world) answer() {
	var left []wask
	for _, a := range w.asks {
		if a.start.Add(w.gateTook).After(w.now) {
			left = append(left, a)
			continue
		}
		ans := Answer{Yes: true, Words: "200 OK", Asked: a.start}
		switch m := w.members[a.member]; {
		case !m.running:
			ans = Answer{Words: "connection refused", Asked: a.start}
		case w.says[a.member] != "":
			ans = Answer{Words: fmt.Sprintf(`409 Conflict: {"ok_to_stop":false,"reason":%q}`, w.says[a.member]), Asked: a.start}
		}
		w.answers[a.member] = ans
		verdict := "yes"
		if !ans.Yes {
			verdict = "no (" + ans.Words + ")"
		}
		w.logf("(world) asked at %.3fs whether %s may stop: %s", a.start.Sub(w.t0).Seconds(), a.member, verdict)
	}
	w.asks = left
}

func (w *world) exit(m *wmember, why string) {
	m.running, m.healthy, m.detail = false, false, why
	if w.leader == m.name {
		w.elect("")
	}
}

// elect moves leadership to a healthy member of the leader's component
// other than not.
func (w *world) elect(not string) {
	old := w.leader
	comp := w.members[old].comp
	w.leader = ""
	for _, n := range w.order {
		m := w.members[n]
		if m.comp == comp && n != old && n != not && m.running && m.healthy {
			w.leader = n
			break
		}
	}
	if w.leader != old {
		w.leaderChanges++
		w.logf("(world) leader %s → %s", old, cmp.Or(w.leader, "-"))
	}
}

// complete applies the actions whose time has come, and returns them
// with their errors.
func (w *world) complete() []struct {
	a   Action
	err error
} {
	var out []struct {
		a   Action
		err error
	}
	var left []*wact
	for _, x := range w.inflight {
		if x.at.After(w.now) {
			left = append(left, x)
			continue
		}
		out = append(out, struct {
			a   Action
			err error
		}{x.a, w.apply(x.a)})
	}
	w.inflight = left
	return out
}

// apply makes action a happen in the world.
func (w *world) apply(a Action) error {
	if w.outage {
		return errors.New("agent of host h1: connection refused")
	}
	m := w.members[a.Member]
	switch a.Kind {
	case ActLock:
		return w.lock(a.Host)
	case ActReinstall:
		return w.reinstall(a.Host, a.Version)
	case ActMigrateHost:
		return w.migrate(a.Host, a.Version)
	case ActStop:
		m.running, m.healthy, m.detail = false, false, "stopped"
		if w.leader == m.name {
			w.elect("")
		}
	case ActStart:
		if f := w.faults[m.name]; f == "start-fails" && a.Version != w.from {
			return errors.New("start_failed: exec format error")
		}
		m.running, m.healthy, m.version, m.started, m.restarts = true, false, a.Version, w.now, 0
		m.pin = a.Pin
		if !strings.HasSuffix(m.data, " "+a.Version) {
			m.data += ", migrated to " + a.Version
		}
		m.detail = "starting"
		fault := w.faults[m.name]
		if a.Version == w.from {
			fault = "" // the bad release's faults; its predecessor is fine
		}
		switch fault {
		case "exit":
			w.exit(m, "exited with status 1")
		case "never-ready":
			m.detail = "not ready"
		case "crash-after":
			m.readyAt = w.now.Add(w.ready)
			m.exitAt = w.now.Add(w.ready + 500*time.Millisecond)
		default:
			m.readyAt = w.now.Add(w.ready)
		}
	case ActHooks:
		if a.To != "" {
			// A switchover: the role goes to a.To, when it runs healthy.
			return w.handOver(a.Component, a.To)
		}
		switch w.faults["hook:"+a.Hooks] {
		case "fail":
			if calls := w.c.Component(w.members[a.Member].comp).Hooks.List(a.Hooks); a.Member != "" && len(calls) > 0 {
				// As the engine says it: the call, then its error.
				return fmt.Errorf("%s hook 1: %s %s: connection refused", a.Hooks, calls[0].Method, calls[0].HTTP)
			}
			return errors.New(a.Hooks + " hook 1: 503 Service Unavailable")
		case "fail-once":
			key := "failed:" + a.Hooks + ":" + cmp.Or(a.Member, a.Component, "cluster")
			if w.faults[key] == "" {
				w.faults[key] = "yes"
				return errors.New(a.Hooks + " hook 1: 503 Service Unavailable (once)")
			}
		}
		switch a.Hooks {
		case "pre_stop":
			if w.leader == m.name {
				w.elect(m.name)
			}
			if w.hasUndo(a) {
				w.drained[m.name] = true
			}
		case "pre_phase", "pre_upgrade":
			w.flags[a.Hooks+":"+cmp.Or(a.Component, "cluster")] = true
		}
	case ActUndo:
		if f := w.faults["undo"]; f == "fail" {
			return errors.New("503 Service Unavailable")
		}
		i := w.u.Effects.ByID(a.Effect)
		if i < 0 {
			return nil
		}
		e := w.u.Effects[i]
		if h := e.Undo.Unlock; h != "" {
			w.unlock(h)
		}
		if h := e.Undo.Hook; h != nil {
			switch {
			case h.To != "":
				return w.handOver(h.Component, h.To)
			case h.List == "pre_stop":
				delete(w.drained, h.Member)
			default:
				delete(w.flags, h.List+":"+cmp.Or(h.Component, "cluster"))
			}
		}
	case ActStage:
	case ActBackup:
		if m.running {
			return errors.New("the member runs: its data is live")
		}
		switch w.faults["backup:"+m.name] {
		case "unverified":
			return fmt.Errorf("%w: restore check of %s: exit status 1", ErrRefused, a.Backup)
		case "fail-once":
			w.faults["backup:"+m.name] = ""
			return errors.New("backup command: exit status 2")
		}
		w.backups[a.Backup] = m.data
	case ActRestore:
		if m.running {
			return errors.New("the member runs: its data is live")
		}
		data, ok := w.backups[a.Backup]
		if !ok {
			return fmt.Errorf("%w: no backup in %s", ErrRefused, a.Backup)
		}
		m.data = data
	case ActPrune:
		w.pruned = append(w.pruned, a.Component)
	case ActFerry:
		// The agents re-execute on the newer ferry: no member stops.
		if w.faults["ferry"] == "fail" {
			return errors.New("host h1: the agent did not answer on release 9.0.0 within 1m0s (last: connection refused); its members keep running")
		}
		w.logf("(world) every agent on the ferry release %s asks for", a.Version)
	}
	return nil
}

// fold folds the outcome of action a into u, as the engine does.
func (w *world) fold(u Upgrade, a Action, err error) Upgrade {
	if a.Kind == ActBackup {
		sums := ""
		if err == nil {
			sums = fmt.Sprintf("%x  data\n", sha256.Sum256([]byte(w.backups[a.Backup])))
		}
		return BackedUp(u, a, sums, err, w.took, w.now)
	}
	return Finished(u, a, err, w.took, w.now)
}

// handOver gives the role of comp (held by the world's one leader) to
// member to, which must run healthy: a switchover, or its undo.
func (w *world) handOver(comp, to string) error {
	m := w.members[to]
	if m == nil || m.comp != comp || !m.running || !m.healthy {
		return fmt.Errorf("switchover to %s: 409 Conflict: not a healthy member of %s", to, comp)
	}
	if w.leader != to {
		w.leaderChanges++
		w.logf("(world) leader %s → %s (switched over)", cmp.Or(w.leader, "-"), to)
		w.leader = to
	}
	return nil
}

func (w *world) hasUndo(a Action) bool {
	comp := w.c.Component(w.members[a.Member].comp)
	for _, c := range comp.Hooks.List(a.Hooks) {
		if c.Undo != nil {
			return true
		}
	}
	return false
}

// step runs the machine once against the world, prints what changed,
// and starts its actions.
func (w *world) step() Decision {
	acting := map[int]bool{}
	for _, x := range w.inflight {
		acting[x.a.Seq] = true
	}
	obs := w.observe(acting)
	obs.Judging = w.judge != nil
	var d Decision
	defer w.verifyAdmission()()
	w.pure(w.u, func() { d = Step(w.c, w.u, obs, w.now) })
	// Every record the machine writes is one this build takes up again
	// (a step or state Understood does not know would stop a resume).
	if err := Understood(d.Upgrade); err != nil {
		panic(fmt.Sprintf("the machine wrote a record it does not understand: %v", err))
	}
	if !w.unchecked {
		// The decision on the observation summarized is the same.
		if sd := Step(w.c, w.u, obs.Summarize(), w.now); !sameDecision(d, sd) {
			panic(fmt.Sprintf("the machine decides otherwise on the observation summarized:\n%s\n%s", decisionJSON(d), decisionJSON(sd)))
		}
	}
	if w.judge != nil {
		for i, b := range d.Upgrade.Batches {
			if b.Rollback || b.Ended.IsZero() || i < len(w.u.Batches) && !w.u.Batches[i].Ended.IsZero() {
				continue
			}
			if why := w.judge(b); why != "" {
				var stop bool
				in := d.Upgrade
				w.pure(in, func() { d.Upgrade, stop = Impacted(w.c, in, i, why, w.now) })
				if stop {
					d.Actions = nil
				}
			}
		}
	}
	w.report(w.u, d.Upgrade)
	for _, seq := range d.Cancel {
		for i, x := range w.inflight {
			if x.a.Seq == seq {
				w.logf("cancel #%d %s", seq, Describe(x.a))
				w.inflight = slices.Delete(w.inflight, i, i+1)
				in := d.Upgrade
				w.pure(in, func() { d.Upgrade = Finished(in, x.a, context.Canceled, 0, w.now) })
				break
			}
		}
	}
	w.u = d.Upgrade
	for _, a := range d.Actions {
		w.logf("act #%d %s", a.Seq, Describe(a))
		took := w.took
		if a.Kind == ActHooks && w.faults["hook:"+a.Hooks] == "slow" {
			took = 50 * w.took // a slow call (a switchover that takes its time)
		}
		if a.Kind == ActHooks && a.Member != "" && w.faults["hook:"+a.Hooks] == "unready" {
			// The hook makes its member unready as it begins (a raft
			// leader stepping down answers 503 on /ready), and takes a
			// while: the machine sees the member unready meanwhile.
			m := w.members[a.Member]
			m.healthy, m.detail = false, "GET /ready: 503 Service Unavailable (stepping down)"
			took = 50 * w.took
		}
		if a.Kind == ActReinstall {
			took = 50 * w.took // a reinstall takes its time, the host away
			w.beginReinstall(a.Host)
		}
		w.inflight = append(w.inflight, &wact{a: a, at: w.now.Add(took)})
	}
	w.probe(d.Probe)
	w.ask(d.Ask)
	w.askCapacity(d.AskHosts)
	return d
}

// finish folds in the actions that completed.
func (w *world) finish() {
	for _, r := range w.complete() {
		before := w.u
		in := w.u
		w.pure(in, func() { w.u = w.fold(in, r.a, r.err) })
		if r.err != nil {
			w.logf("fail #%d %s: %v", r.a.Seq, Describe(r.a), r.err)
		}
		w.report(before, w.u)
	}
}

// pure runs f, which makes a new record from u, and panics if f
// changed u itself: the machine copies what it changes (stepper.edit,
// Upgrade.own) and shares the rest, so a change in place would change
// the record the engine saved before, unseen.
func (w *world) pure(u Upgrade, f func()) {
	if w.unchecked {
		f()
		return
	}
	before := u.Clone()
	f()
	if !Same(before, u) {
		panic(fmt.Sprintf("the machine changed the record it was given:\n%s\n%s", jsonOf(before), jsonOf(u)))
	}
}

// sameDecision reports whether two decisions are the same.
func sameDecision(a, b Decision) bool {
	return Same(a.Upgrade, b.Upgrade) && reflect.DeepEqual(a.Actions, b.Actions) && slices.Equal(a.Probe, b.Probe) &&
		slices.Equal(a.Ask, b.Ask) && slices.Equal(a.Cancel, b.Cancel) && a.After == b.After
}

func decisionJSON(d Decision) []byte {
	j, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	return j
}

// report prints how record b differs from a. It checks that Same
// says what the records' JSON says (the engine writes on it).
func (w *world) report(a, b Upgrade) {
	if !w.unchecked {
		if err := sameAsJSON(a, b); err != nil {
			panic(err)
		}
		if got, want := Touched(a, b), touchedByValue(a, b); !slices.Equal(got, want) {
			panic(fmt.Sprintf("Touched says %v, the members' values %v", got, want))
		}
	}
	if a.State != b.State {
		msg := fmt.Sprintf("state %s → %s", orState(a.State, State{Kind: "-"}), b.State)
		if b.Reason != "" && b.Reason != a.Reason {
			msg += ": " + b.Reason
		}
		w.logf("%s", msg)
	}
	for i, bb := range b.Batches {
		switch {
		case len(bb.Hosts) > 0 && (i >= len(a.Batches) || len(a.Batches[i].Hosts) < len(bb.Hosts)):
			why := ""
			if bb.Why != "" {
				why = ": " + bb.Why
			}
			w.logf("%s: hosts %s: %s (up to %d at once%s)", bb.Name(), strings.Join(bb.Hosts, ", "), strings.Join(bb.Members, ", "), bb.Size, why)
		case i >= len(a.Batches):
			w.logf("%s: %s (size %d: %s)", bb.Name(), strings.Join(bb.Members, ", "), bb.Size, bb.Why)
		}
		for j, x := range bb.Before {
			if x.Done && (i >= len(a.Batches) || j >= len(a.Batches[i].Before) || !a.Batches[i].Before[j].Done) {
				w.logf("%s: %s done: %s", bb.Name(), x.Name, x.Detail)
			}
		}
		if !bb.Ended.IsZero() && (i >= len(a.Batches) || a.Batches[i].Ended.IsZero()) && bb.Outcome.Size > 0 {
			how := "neither clean nor strained"
			switch {
			case bb.Outcome.Clean:
				how = "clean"
			case bb.Outcome.Strained:
				how = "strained: " + bb.Outcome.Why
			}
			w.logf("%s done (%s)", bb.Name(), how)
		}
	}
	for _, n := range w.order {
		ma, mb := a.Members[n], b.Members[n]
		if mb == nil || ma != nil && ma.Step == mb.Step {
			continue
		}
		from := MemberStep("-")
		if ma != nil {
			from = ma.Step
		}
		msg := fmt.Sprintf("%s %s → %s", n, from, mb.Step)
		if mb.Step == StepFailed || mb.Step == StepDone && mb.Detail != "" {
			msg += " (" + mb.Detail + ")"
		}
		w.logf("%s", msg)
	}
	for _, n := range sortedKeys(b.Hosts) {
		if ha := a.Hosts[n]; ha == nil || ha.Step != b.Hosts[n].Step {
			from := HostStep("-")
			if ha != nil {
				from = ha.Step
			}
			w.logf("host %s %s → %s", n, from, b.Hosts[n].Step)
		}
	}
	for _, e := range b.Effects {
		i := a.Effects.ByID(e.ID)
		switch {
		case i < 0:
			w.logf("effect %s opened (%s): %s", e.ID, e.Scope, e.What)
		case a.Effects[i].State != e.State:
			w.logf("effect %s %s", e.ID, e.State)
		}
	}
	for _, e := range a.Effects {
		if b.Effects.ByID(e.ID) < 0 {
			how := "undone"
			if handedOver(&e) && (b.Ending == StateCompleted || b.State == StateCompleted) {
				how = "kept: the upgrade completed"
			}
			w.logf("effect %s %s", e.ID, how)
		}
	}
	if b.Waiting != w.lastWait {
		w.lastWait = b.Waiting
		if b.Waiting != "" {
			w.logf("waiting: %s", b.Waiting)
		}
	}
}

// run steps the machine until the upgrade ends, until stop says so, or
// for at most limit of simulated time.
func (w *world) run(limit time.Duration, stop func() bool) {
	end := w.now.Add(limit)
	for w.now.Before(end) {
		d := w.step()
		if w.u.State.Terminal() || (stop != nil && stop()) {
			return
		}
		w.advance(d.After)
		w.finish()
		if stop != nil && stop() {
			return
		}
	}
	w.logf("(still %s after %s)", w.u.State, limit)
}

// away takes ferry away for d: killed (its actions in flight are made
// by the substrate but their outcomes are lost with it; the new
// process has checked nothing yet) or stopped (its actions' outcomes
// are folded in when it continues; its observer's last results are
// what it sees first). The world goes on meanwhile.
func (w *world) away(d time.Duration, kill bool) {
	last := w.observe(nil).Members
	end := w.now.Add(d)
	var done []struct {
		a   Action
		err error
	}
	for w.now.Before(end) {
		w.advance(end.Sub(w.now))
		done = append(done, w.complete()...)
	}
	w.since = w.now
	if kill {
		w.stale = map[string]MemberHealth{}
		w.observeMembers(w.stale)
		for n, o := range w.stale {
			if o.Running {
				o.Healthy, o.HealthySince, o.Checked, o.Detail = false, time.Time{}, time.Time{}, "started, not checked yet"
				w.stale[n] = o
			}
		}
		w.logf("(world) ferry killed %s ago, started again", d)
		return
	}
	w.stale = last
	w.logf("(world) ferry stopped for %s, continued", d)
	for _, r := range done {
		before := w.u
		in := w.u
		w.pure(in, func() { w.u = w.fold(in, r.a, r.err) })
		w.report(before, w.u)
	}
}

// begin plans and starts an upgrade to version to.
func (w *world) begin(to string) error {
	vs := map[string]string{}
	down := map[string]bool{}
	for n, m := range w.members {
		vs[n] = m.version
		if !m.running || !m.healthy {
			down[n] = true
		}
	}
	p, err := plan.ComputePath(w.c, plan.Observed{Version: vs, Down: down}, to)
	if err != nil {
		return err
	}
	w.u = New("upg-test", p, vs, nil, w.now)
	w.began, w.from = true, w.u.From
	return nil
}

// status prints where everything stands.
func (w *world) status() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state %s", w.u.State)
	if w.u.Reason != "" {
		fmt.Fprintf(&b, " (%s)", w.u.Reason)
	}
	b.WriteString("\n")
	for _, n := range w.order {
		m, r := w.members[n], w.u.Members[n]
		run := "down"
		if m.running {
			run = "up"
			if !m.healthy {
				run = "unhealthy"
			}
		}
		step, target := "-", "-"
		if r != nil {
			step, target = string(r.Step), r.Target
		}
		fmt.Fprintf(&b, "%s %s %s target %s step %s\n", n, m.version, run, target, step)
	}
	fmt.Fprintf(&b, "leader %s, moved %d times\n", cmp.Or(w.leader, "-"), w.leaderChanges)
	fmt.Fprintf(&b, "drained: %s\n", cmp.Or(strings.Join(sortedKeys(w.drained), ", "), "-"))
	fmt.Fprintf(&b, "flags: %s\n", cmp.Or(strings.Join(sortedKeys(w.flags), ", "), "-"))
	var owed []string
	for _, e := range w.u.Effects {
		owed = append(owed, fmt.Sprintf("%s %s (%s)", e.ID, e.State, e.What))
	}
	fmt.Fprintf(&b, "effects owed: %s\n", cmp.Or(strings.Join(owed, "; "), "-"))
	var sizes []string
	for _, bb := range w.u.Batches {
		sizes = append(sizes, fmt.Sprintf("%s=%d", bb.Name(), len(bb.Members)))
	}
	fmt.Fprintf(&b, "batches: %s\n", cmp.Or(strings.Join(sizes, ", "), "-"))
	for _, r := range w.u.Refusals {
		fmt.Fprintf(&b, "refused: %s\n", r)
	}
	if len(w.backups) > 0 {
		for _, dir := range sortedKeys(w.backups) {
			fmt.Fprintf(&b, "backup %s: %s\n", dir, w.backups[dir])
		}
		for _, n := range w.order {
			fmt.Fprintf(&b, "%s data: %s\n", n, w.members[n].data)
		}
		fmt.Fprintf(&b, "backups pruned: %s\n", cmp.Or(strings.Join(w.pruned, ", "), "-"))
	}
	b.WriteString(w.hosts.status(w.u))
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ = effect.Any
