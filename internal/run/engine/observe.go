package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// observer keeps watching the cluster while an upgrade runs: the
// substrate's statuses at every tick, each member's check, each
// component's cluster gate and each member's role on their own
// intervals. Every probe runs in its own goroutine bounded by its own
// timeout, so that a slow gate delays nothing but itself, and nothing
// waits for an action. It wakes the engine when a verdict changes.
type observer struct {
	e    *Engine
	tick time.Duration
	// specs are the members the substrate is asked about at each poll.
	specs []driver.Member

	mu sync.Mutex
	// seen is what was observed of each member, by its position in the
	// engine's order (memberInfo.pos): a poll of ten thousand members
	// writes a slice, not maps.
	seen    []memberSeen
	comps   []*config.Component // each member's component, by position
	gates   map[string]upgrade.Gate
	anyFrom map[string]int // where each gate starts looking for a member to ask
	// first is the position of each component's first member (its
	// members follow it, in the description's order).
	first map[string]int
	// statusGen counts the changes of a member's status, snapStatuses
	// the count the snapshot's Statuses were made at: the same count,
	// the same map (it is never changed); restated are the positions
	// of the members whose status changed since.
	statusGen, snapStatuses uint64
	restated                []int
	// verdicts are the members' verdicts as the snapshot made last
	// said them, by position, which the next compares with.
	verdicts []upgrade.MemberHealth
	// movingSet: setMoving was told of a record (every member then).
	movingSet bool
	// since is when this watch began without a gap (the observer's
	// start, or the engine's return from a stall): what was checked
	// before it says nothing of now (upgrade.Observation.Since).
	since time.Time
	// gen counts the changes to what the snapshot is made of, and
	// memberGen those to what it says of the members (statuses,
	// checks, roles, the watch's start); snap is the one made at gen
	// snapGen, handed out again (its maps are never changed) until gen
	// moves: the engine looks at every pass, the cluster changes far
	// less often. A change of a gate or an answer alone keeps the
	// members' part (and its summary).
	gen, memberGen uint64
	// refused says why the substrate is refused (a host's key not the
	// one ferry trusts), from the last observation or action that met
	// it: the upgrade stops on it (Observation.Refused).
	refused     string
	snap        Snapshot
	snapGen     uint64
	snapMembers uint64

	changed chan struct{}
	kicks   map[string]chan struct{} // a prober to run now, by key

	// answers are the system's latest answers to whether a member may
	// stop (its component's ok_to_stop call), asking the members being
	// asked about now; asks counts the calls in flight, made in ctx
	// (the observation's, set by start).
	answers map[string]upgrade.Answer
	asking  map[string]bool
	asks    sync.WaitGroup
	ctx     context.Context
	// capacity is the hosts' capacity calls' (hosts.go), asked like
	// ok_to_stop.
	capacity capacity
}

// memberSeen is what the observer saw of one member.
type memberSeen struct {
	status driver.Status
	asked  bool      // status is the substrate's (it was asked)
	at     time.Time // when status was read
	// probed is when its last probe began, health that probe's verdict
	// with its thresholds (checked: one was made).
	probed  time.Time
	health  health.State
	checked bool
	role    bool
	roleAt  time.Time // when the role probe began
	// moving: the upgrade has it in flight, so a gate is not asked
	// through it (it is being drained, or stopped).
	moving bool
}

func (e *Engine) newObserver() *observer {
	tick := e.c.Policy.Tick.D()
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	o := &observer{e: e, tick: tick, seen: make([]memberSeen, len(e.order)), first: map[string]int{},
		gates: map[string]upgrade.Gate{}, anyFrom: map[string]int{}, since: e.now(),
		changed: make(chan struct{}, 1), kicks: map[string]chan struct{}{}, answers: map[string]upgrade.Answer{}, asking: map[string]bool{},
		specs: e.Members()}
	for _, n := range e.order {
		o.kicks["member:"+n] = make(chan struct{}, 1)
		o.kicks["role:"+n] = make(chan struct{}, 1)
		o.comps = append(o.comps, e.members[n].comp)
	}
	for _, comp := range e.c.ComponentsInOrder() {
		o.kicks["gate:"+comp.Name] = make(chan struct{}, 1)
		if len(comp.Members) > 0 {
			o.first[comp.Name] = e.members[comp.Members[0].Name].pos
		}
	}
	o.kicks["status"] = make(chan struct{}, 1)
	return o
}

// start runs the probers until ctx ends; done is closed once they have
// all returned.
func (o *observer) start(ctx context.Context) (done chan struct{}) {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { o.loop(ctx, "status", func() time.Duration { return o.tick }, o.pollStatuses) })
	if w, ok := o.e.cfg.Driver.(driver.Watcher); ok {
		run(func() { o.follow(ctx, w.Changed()) })
	}
	for _, n := range o.e.order {
		info := o.e.members[n]
		if chk := info.comp.Health.Member; chk != nil {
			run(func() { o.loop(ctx, "member:"+n, chk.Interval.D, func(ctx context.Context) { o.probeMember(ctx, n) }) })
		}
		if r := info.comp.Role; r != nil && r.Check != nil {
			run(func() { o.loop(ctx, "role:"+n, r.Check.Interval.D, func(ctx context.Context) { o.probeRole(ctx, n) }) })
		}
	}
	for _, comp := range o.e.c.ComponentsInOrder() {
		if chk := comp.Health.Cluster; chk != nil {
			run(func() {
				o.loop(ctx, "gate:"+comp.Name, chk.Interval.D, func(ctx context.Context) { o.probeGate(ctx, comp) })
			})
		}
	}
	done = make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// loop runs probe now and then at every interval, or at once when
// kicked, until ctx ends.
func (o *observer) loop(ctx context.Context, key string, interval func() time.Duration, probe func(context.Context)) {
	kick := o.kicks[key]
	for ctx.Err() == nil {
		probe(ctx)
		t := o.e.cfg.Clock.NewTimer(max(interval(), time.Millisecond))
		select {
		case <-ctx.Done():
		case <-kick:
		case <-t.C():
		}
		t.Stop()
	}
}

// follow asks the substrate again when its driver says its view
// changed (driver.Watcher), at most once half a tick (and a second): a
// batch's last member is seen ready when the watch brings it, not up to
// a tick later, and a storm of changes costs two polls a tick, not one
// each (a poll of a thousand pods is milliseconds of CPU; at eight a
// tick ferry took three times the CPU in make bench-kube).
func (o *observer) follow(ctx context.Context, changed <-chan struct{}) {
	gap := min(max(o.tick/2, time.Millisecond), time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		o.kick("status")
		t := o.e.cfg.Clock.NewTimer(gap)
		select {
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
	}
}

// kick makes the prober of key run now.
func (o *observer) kick(key string) {
	if c, ok := o.kicks[key]; ok {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (o *observer) notify() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// pollStatuses asks the substrate what runs. A member whose process
// changed (a new start, an exit) has its check made at once.
func (o *observer) pollStatuses(ctx context.Context) {
	now := o.e.now()
	octx, cancel := o.e.cfg.Clock.WithTimeout(ctx, max(o.tick*50, 10*time.Second))
	sts, err := o.e.cfg.Driver.Observe(octx, o.specs)
	cancel()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	o.refuse(err)
	if err != nil {
		// The request itself failed: nothing is known of anyone.
		sts = make([]driver.Status, len(o.e.order))
		for i, n := range o.e.order {
			sts[i] = driver.Status{Name: n, Unknown: true, Detail: err.Error()}
		}
	} else {
		o.e.learnVersions(ctx, sts)
	}
	var restarted []string
	o.mu.Lock()
	for k, st := range sts {
		i, ok := o.position(k, st.Name)
		if !ok {
			continue // not a member: nothing asks about it
		}
		ms := &o.seen[i]
		prev, had := ms.status, ms.asked
		if st.Unknown && had && !prev.Unknown {
			// Keep what was last known; say it is not known now.
			keep := prev
			keep.Unknown, keep.Detail = true, st.Detail
			st = keep
		}
		if !had || prev.Running != st.Running || prev.Version != st.Version || !prev.Since.Equal(st.Since) ||
			prev.Unknown != st.Unknown || prev.Restarts != st.Restarts || prev.Detail != st.Detail {
			if st.Running && (!prev.Running || !prev.Since.Equal(st.Since)) {
				restarted = append(restarted, st.Name)
			}
		}
		if !had || prev != st {
			o.statusGen++
			if len(o.restated) <= len(o.e.order) { // past it, the snapshot makes the map anew
				o.restated = append(o.restated, i)
			}
		}
		ms.status, ms.asked, ms.at = st, true, now
	}
	o.gen++
	o.memberGen++
	o.mu.Unlock()
	for _, n := range restarted {
		o.kick("member:" + n)
		o.kick("role:" + n)
	}
	// Every observation is news to the machine: a start it waits on
	// may now be seen (Seen moved).
	o.notify()
}

// position is the position of member n, the k-th status of a poll (the
// driver answers in the order asked, mostly).
func (o *observer) position(k int, n string) (int, bool) {
	if k < len(o.e.order) && o.e.order[k] == n {
		return k, true
	}
	info, ok := o.e.members[n]
	return info.pos, ok
}

// refuse notes what err says of the substrate's trust: a refusal
// (driver.ErrNotTrusted: a host's key changed) stands until an
// observation succeeds; an observation that did not reach the
// substrate changes nothing.
func (o *observer) refuse(err error) {
	why := ""
	switch {
	case errors.Is(err, driver.ErrNotTrusted):
		why = err.Error()
	case err != nil:
		return
	}
	o.mu.Lock()
	changed := o.refused != why
	if changed {
		o.refused = why
		o.gen++
	}
	o.mu.Unlock()
	if changed {
		o.notify()
	}
}

func (o *observer) status(n string) (driver.Status, bool) {
	info, ok := o.e.members[n]
	if !ok {
		return driver.Status{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	ms := &o.seen[info.pos]
	return ms.status, ms.asked
}

// probeMember makes member n's check (when it runs) and applies its
// thresholds.
func (o *observer) probeMember(ctx context.Context, n string) {
	info := o.e.members[n]
	chk := info.comp.Health.Member
	st, ok := o.status(n)
	if !ok || !st.Running || st.Unknown {
		return // the snapshot says not running; nothing to ask
	}
	start := o.e.now()
	data := info.data
	data.Version = st.Version
	data.PID = st.PID
	res := o.e.prober.Do(ctx, chk.Call, data)
	if ctx.Err() != nil {
		return
	}
	now := o.e.now()
	hs := o.e.tracker.Observe(n, res, now, chk.SuccessThreshold, chk.FailureThreshold)
	o.mu.Lock()
	ms := &o.seen[info.pos]
	prev, had := ms.health, ms.checked
	ms.health, ms.checked, ms.probed = hs, true, start
	o.gen++
	o.memberGen++
	o.mu.Unlock()
	if !had || prev.Healthy != hs.Healthy || !prev.Since.Equal(hs.Since) {
		o.notify()
	}
}

// probeRole asks whether member n holds its component's role.
func (o *observer) probeRole(ctx context.Context, n string) {
	info := o.e.members[n]
	st, ok := o.status(n)
	if !ok || !st.Running || st.Unknown {
		return
	}
	data := info.data
	data.Version, data.PID = st.Version, st.PID
	start := o.e.now()
	res := o.e.prober.Do(ctx, info.comp.Role.Check.Call, data)
	if ctx.Err() != nil {
		return
	}
	o.mu.Lock()
	ms := &o.seen[info.pos]
	prev := ms.role
	if start.Before(ms.roleAt) {
		o.mu.Unlock()
		return // a later probe answered first
	}
	ms.role, ms.roleAt = res.OK, start
	o.gen++
	o.memberGen++
	o.mu.Unlock()
	if prev != res.OK {
		o.notify()
	}
}

// probeGate makes component comp's cluster check once, through one
// member: one last seen healthy, a different one after a failure.
func (o *observer) probeGate(ctx context.Context, comp *config.Component) {
	chk := comp.Health.Cluster
	start := o.e.now()
	o.mu.Lock()
	from := o.anyFrom[comp.Name]
	var pick *config.Member
	first := o.first[comp.Name]
	score := func(j int) int {
		ms, s := &o.seen[first+j], 0
		if ms.health.Healthy {
			s += 2
		}
		if !ms.moving {
			s += 3
		}
		return s
	}
	best := 0
	for k := range comp.Members {
		j := (from + k) % len(comp.Members)
		st := o.seen[first+j].status
		if st.Running && !st.Unknown && (pick == nil || score(j) > best) {
			pick, best = &comp.Members[j], score(j)
		}
	}
	o.mu.Unlock()
	res := health.Result{Detail: "no member of " + comp.Name + " is running"}
	if pick != nil {
		data := o.e.members[pick.Name].data
		data.Any = pick.Address
		res = o.e.prober.Do(ctx, chk.Call, data)
	}
	if ctx.Err() != nil {
		return
	}
	now := o.e.now()
	hs := o.e.tracker.Observe("cluster:"+comp.Name, res, now, chk.SuccessThreshold, chk.FailureThreshold)
	o.mu.Lock()
	if !res.OK {
		o.anyFrom[comp.Name] = from + 1
	}
	o.gates[comp.Name] = upgrade.Gate{Healthy: hs.Healthy, Detail: hs.Last.Detail, Checked: start, Took: now.Sub(start)}
	o.gen++
	o.mu.Unlock()
	o.notify()
}

// ask asks the system whether each named member may stop (its
// component's ok_to_stop call, rendered for the member), each call in
// its own goroutine bounded by its timeout, like every probe; a member
// being asked about already is not asked twice. The answer wakes the
// engine. The calls end with the observation's context; whoever stops
// it waits for them (asks).
func (o *observer) ask(names []string) {
	for _, n := range names {
		info, ok := o.e.members[n]
		if !ok || info.comp.OKToStop == nil {
			continue
		}
		o.mu.Lock()
		ctx := o.ctx
		if ctx == nil || ctx.Err() != nil || o.asking[n] {
			o.mu.Unlock()
			continue
		}
		o.asking[n] = true
		o.asks.Add(1)
		o.mu.Unlock()
		go func() {
			defer o.asks.Done()
			o.askSystem(ctx, n, info)
		}()
	}
}

// askSystem makes member n's ok_to_stop call and keeps its answer: a
// passing call is a yes, a failing one a no, its detail the system's
// words.
func (o *observer) askSystem(ctx context.Context, n string, info memberInfo) {
	st, _ := o.status(n)
	data := info.data
	data.Version, data.PID = st.Version, st.PID
	start := o.e.now()
	res := o.e.prober.Do(ctx, *info.comp.OKToStop, data)
	o.mu.Lock()
	delete(o.asking, n)
	if ctx.Err() == nil && !start.Before(o.answers[n].Asked) {
		o.answers[n] = upgrade.Answer{Yes: res.OK, Words: res.Detail, Asked: start}
		o.gen++
	}
	o.mu.Unlock()
	o.notify()
}

// snapshot is the observation as it stands: the one made before,
// with the time of now, if nothing changed since.
func (o *observer) snapshot() Snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.snap.Statuses != nil && o.snapGen == o.gen {
		snap := o.snap
		snap.Time = o.e.now()
		return snap
	}
	if o.snap.Statuses != nil && o.snapMembers == o.memberGen {
		snap := o.snap
		snap.gen, snap.Time = o.gen, o.e.now()
		snap.verdicts, snap.all = nil, false // the members' part is the one before
		snap.Obs.Gates, snap.Obs.Answers, snap.Obs.Capacity = o.gatesAndAnswers()
		snap.Obs.Refused = o.refused
		o.snap, o.snapGen = snap, o.gen
		return snap
	}
	all := o.snap.Obs.Members == nil
	snap := Snapshot{gen: o.gen, all: all, Time: o.e.now(), Statuses: o.snap.Statuses,
		Obs: upgrade.Observation{Members: make(map[string]upgrade.MemberHealth, len(o.e.order)), Gates: make(map[string]upgrade.Gate, len(o.gates))}}
	// The statuses' map is made anew only when one changed, from the
	// one before when few did: the members' (their Seen moves at each
	// poll) always.
	statuses := snap.Statuses == nil || o.snapStatuses != o.statusGen && len(o.restated) > len(o.e.order)/8
	switch {
	case statuses:
		snap.Statuses = make(map[string]driver.Status, len(o.e.order))
	case o.snapStatuses != o.statusGen:
		snap.Statuses = maps.Clone(snap.Statuses)
		for _, i := range o.restated {
			snap.Statuses[o.e.order[i]] = o.seen[i].status // asked: not "not observed yet"
		}
	}
	o.restated = o.restated[:0]
	if len(o.verdicts) != len(o.e.order) {
		o.verdicts = make([]upgrade.MemberHealth, len(o.e.order))
	}
	for i, n := range o.e.order {
		ms := &o.seen[i]
		st := ms.status
		if !ms.asked {
			// Not asked yet: not known, and not a failure.
			st = driver.Status{Name: n, Unknown: true, Detail: "not observed yet"}
		}
		if statuses {
			snap.Statuses[n] = st
		}
		comp := o.comps[i]
		mh := memberHealth(comp, st, ms.health, ms.probed)
		// A role seen before the process started belongs to the one
		// before it.
		mh.Role = ms.role && st.Running && !ms.roleAt.Before(st.Since)
		mh.Seen = ms.at
		mh.Checked = mh.Seen
		if comp.Health.Member != nil && st.Running && !st.Unknown && ms.probed.Before(mh.Checked) {
			mh.Checked = ms.probed
		}
		if p := &o.verdicts[i]; !all && (p.Healthy != mh.Healthy || p.Role != mh.Role || p.Unknown != mh.Unknown ||
			p.Version != mh.Version || p.Detail != mh.Detail) {
			snap.verdicts = append(snap.verdicts, n)
		}
		o.verdicts[i] = mh
		snap.Obs.Members[n] = mh
	}
	o.snapStatuses = o.statusGen
	snap.Obs.Since = o.since
	snap.Obs.Gates, snap.Obs.Answers, snap.Obs.Capacity = o.gatesAndAnswers()
	snap.Obs.Refused = o.refused
	// Handed to every pass until the next change: what the machine
	// looks for among all members is found once (its admission view
	// taken over from the snapshot before).
	snap.Obs = snap.Obs.SummarizeAfter(o.snap.Obs)
	o.snap, o.snapGen, o.snapMembers = snap, o.gen, o.memberGen
	return snap
}

// gatesAndAnswers are the gates, the system's answers and the hosts'
// capacity answers as they stand, in maps of their own. o.mu is held.
func (o *observer) gatesAndAnswers() (map[string]upgrade.Gate, map[string]upgrade.Answer, map[string]upgrade.Answer) {
	gates := make(map[string]upgrade.Gate, len(o.gates))
	for c, g := range o.gates {
		gates[c] = g
	}
	for _, comp := range o.e.c.ComponentsInOrder() {
		if _, ok := gates[comp.Name]; !ok && comp.Health.Cluster != nil {
			gates[comp.Name] = upgrade.Gate{Detail: "not checked yet"}
		}
	}
	var answers map[string]upgrade.Answer
	if len(o.answers) > 0 {
		answers = make(map[string]upgrade.Answer, len(o.answers))
		for n, a := range o.answers {
			answers[n] = a
		}
	}
	return gates, answers, o.capacity.snapshot()
}

// memberHealth is what the machine sees of one member: its status, and
// its check's verdict if the check was made on the process that runs
// now (a verdict from before a restart belongs to the process before).
func memberHealth(comp *config.Component, st driver.Status, hs health.State, probed time.Time) upgrade.MemberHealth {
	mh := upgrade.MemberHealth{Running: st.Running, Version: st.Version, Unknown: st.Unknown, Started: st.Since, PID: st.PID, Restarts: st.Restarts}
	switch {
	case st.Unknown:
		mh.Detail = st.Detail
	case !st.Running:
		mh.Detail = "not running" + suffix(st.Detail)
	case st.Adopted && st.Version == "":
		// Not a member ferry can plan for: what it runs is not known.
		mh.Detail = "adopted, its version not known" + suffix(st.Detail)
	case comp.Health.Member == nil:
		mh.Healthy, mh.HealthySince, mh.Detail = true, st.Since, "running (no member check)"
	case probed.IsZero() || probed.Before(st.Since):
		mh.Detail = "started, not checked yet"
	default:
		mh.Healthy = hs.Healthy
		mh.HealthySince = hs.Since
		if st.Since.After(mh.HealthySince) {
			mh.HealthySince = st.Since
		}
		mh.Detail = hs.Last.Detail
	}
	return mh
}

// Observe makes one observation: the substrate's statuses, then every
// member's check, gate and role at once, each bounded by its own
// timeout.
func (e *Engine) Observe(ctx context.Context) (Snapshot, error) {
	o := e.newObserver()
	o.pollStatuses(ctx)
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	var wg sync.WaitGroup
	for _, n := range e.order {
		info := e.members[n]
		if info.comp.Health.Member != nil {
			wg.Add(1)
			go func() { defer wg.Done(); o.probeMember(ctx, n) }()
		}
		if r := info.comp.Role; r != nil && r.Check != nil {
			wg.Add(1)
			go func() { defer wg.Done(); o.probeRole(ctx, n) }()
		}
	}
	wg.Wait()
	for _, comp := range e.c.ComponentsInOrder() {
		if comp.Health.Cluster != nil {
			wg.Add(1)
			go func() { defer wg.Done(); o.probeGate(ctx, comp) }()
		}
	}
	wg.Wait()
	snap := o.snapshot()
	for _, st := range snap.Statuses {
		if st.Unknown {
			return snap, fmt.Errorf("engine: observe: %w", unreachable(st.Detail))
		}
	}
	e.mu.Lock()
	e.lastSnap = snap
	e.mu.Unlock()
	return snap, nil
}

// unreachable wraps a substrate's failure to answer (once: a driver's
// detail may say it already).
func unreachable(detail string) error {
	rest, ok := strings.CutPrefix(detail, driver.ErrUnreachable.Error())
	if !ok {
		rest = ": " + detail
	}
	return fmt.Errorf("%w%s", driver.ErrUnreachable, rest)
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// returned begins a new watch at now, after a stall of the engine (it
// was stopped, or starved): every prober runs again at once, and what
// was checked before now gives no verdict.
func (o *observer) returned(now time.Time) {
	o.mu.Lock()
	o.since = now
	o.gen++
	o.memberGen++
	o.mu.Unlock()
	for key := range o.kicks {
		o.kick(key)
	}
}

// setMoving tells the observer which members upgrade u has in flight:
// every member the first time, then those the record from before
// changed (upgrade.Touched, passed each time the record changes).
func (o *observer) setMoving(u upgrade.Upgrade, touched []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.movingSet {
		o.movingSet = true
		touched = slices.Collect(maps.Keys(u.Members))
	}
	for _, n := range touched {
		if info, ok := o.e.members[n]; ok {
			m := u.Members[n]
			o.seen[info.pos].moving = m != nil && m.Step.InFlight()
		}
	}
}
