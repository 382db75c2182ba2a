package upgrade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// A hosts stage moves hosts, not members (StarlingX's workers): the
// next batch's hosts are chosen by the host predicates (the hosts'
// budgets, their capacity call), each is locked — its lock journaled
// with its unlock as the undo, in the record written before the first
// lock call —, every member on it is moved in the components' order
// (each admitted by the member predicates with its own component's
// settings), and it is unlocked: the undo of its lock, which the sweep
// makes once its members are done, or when its turn ends any other way
// (an abort, a rollback, the upgrade's end). A rollback locks each host
// again while its members go back, in the components' reverse order.

// HostStep is where a host is in its turn.
type HostStep string

const (
	HostPending      HostStep = "pending"
	HostLocking      HostStep = "locking"      // its lock calls are made
	HostReinstalling HostStep = "reinstalling" // its reinstall runs (the host may not answer)
	HostMigrating    HostStep = "migrating"    // its data migration runs
	HostLocked       HostStep = "locked"       // its members move
	HostUnlocking    HostStep = "unlocking"    // its unlock is owed
	HostDone         HostStep = "done"
)

// hostSteps are the host steps this build knows (Understood refuses a
// record with another): a new step above is added here too.
var hostSteps = []HostStep{HostPending, HostLocking, HostReinstalling, HostMigrating, HostLocked, HostUnlocking, HostDone}

// held reports whether a host in step st is locked by its turn (its
// lock made or being made, its unlock not yet).
func (st HostStep) held() bool { return st != HostPending && st != HostDone }

// HostMove is one host's progress in a hosts stage.
type HostMove struct {
	Name string   `json:"name"`
	Step HostStep `json:"step"`
	// Since is when the current step began.
	Since time.Time `json:"since,omitzero"`
	// LastTry, Tries, Acted and Acting are its lock's, as a member's
	// action's.
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Acted   bool      `json:"acted,omitempty"`
	Acting  int       `json:"acting,omitempty"`
	// WaitSince is when a member on the locked host was first refused
	// with none of its members in flight: the wait fails at the
	// component's gate_deadline.
	WaitSince time.Time `json:"wait_since,omitzero"`
	Detail    string    `json:"detail,omitempty"`
	// Reinstalled is the release its last reinstall began with: a
	// rollback reinstalls the release before on a host whose reinstall
	// began with another (even one that failed).
	Reinstalled string `json:"reinstalled,omitempty"`
	// Reinstalling is the sequence number of its reinstall in flight:
	// the host may not answer until it ends, whatever its step (an
	// abort does not cut a reinstall short).
	Reinstalling int `json:"reinstalling,omitempty"`
}

// lockKey names the effect of host h's lock.
func lockKey(h string) string { return "host/" + h + "/lock" }

// componentsOf returns, for the members of phase ph, their component:
// the phase's, or in a hosts phase each member's own.
func componentsOf(ph plan.Phase) func(string) string {
	if ph.Hosts == nil {
		return func(string) string { return ph.Component }
	}
	of := map[string]string{}
	for _, part := range ph.Hosts.Parts {
		for _, n := range part.Members() {
			of[n] = part.Component
		}
		for _, sk := range part.Skipped {
			of[sk.Member] = part.Component
		}
	}
	return func(n string) string { return of[n] }
}

// newHosts adds the hosts of hosts phase ph to the record, pending.
func (u *Upgrade) newHosts(ph plan.Phase) {
	if ph.Hosts == nil {
		return
	}
	if u.Hosts == nil {
		u.Hosts = map[string]*HostMove{}
	}
	for h := range ph.Hosts.On {
		u.Hosts[h] = &HostMove{Name: h, Step: HostPending}
	}
}

func (s *stepper) setHostStep(h *HostMove, st HostStep) {
	if h.Step != st {
		h.Step, h.Since = st, s.now
		h.Tries, h.LastTry, h.Acted, h.WaitSince = 0, time.Time{}, false, time.Time{}
	}
}

// hostPhase advances a hosts stage's phase: the batch in progress, the
// next host batch, and at its end the gate and the phase's undos.
func (s *stepper) hostPhase(ph plan.Phase) {
	u := &s.u
	if b := u.Current(); b != nil {
		s.runHostBatch(ph, b)
		return
	}
	if !u.PhaseHooks.Closing {
		if pending := s.pendingHosts(ph); len(pending) > 0 {
			s.formHostBatch(ph, pending)
			return
		}
		if red := s.redGates(u.Boundary); red != "" {
			s.gateWait("after "+ph.Component, s.hostsGateDeadline(ph), red)
			return
		}
		u.GateSince = time.Time{}
		s.addGateBound()
		u.PhaseHooks.Closing = true
	}
	if owed := s.owedIn(effect.Is(effect.Phase(ph.Component))); owed != "" {
		s.wait("%s: undoing: %s", ph.Component, owed)
		return
	}
	u.PhaseHooks.Closed = true
	if u.RollingBack() {
		u.Phase++
		u.PhaseHooks = HookProgress{}
		u.Boundary = s.now
		return
	}
	u.State = Upgraded(ph.Component)
}

// hostsGateDeadline is the longest gate_deadline of the components a
// hosts phase moves: how long it waits on a gate or an admission.
func (s *stepper) hostsGateDeadline(ph plan.Phase) time.Duration {
	var d time.Duration
	for _, n := range ph.Hosts.Components {
		if comp := s.c.Component(n); comp != nil {
			d = max(d, comp.GateDeadline.D())
		}
	}
	return cmp.Or(d, time.Minute)
}

// hostOrder is the hosts of phase ph in its batches' order.
func hostOrder(ph plan.Phase) []string {
	var out []string
	for _, b := range ph.Batches {
		out = append(out, b.Hosts...)
	}
	return out
}

// membersOn lists the members of hosts phase ph on host h that are in
// the active plan, in the components' order (reversed while rolling
// back: the clients go back before what they need).
func (s *stepper) membersOn(ph plan.Phase, h string) []string {
	in := map[string]bool{}
	for _, n := range ph.Members() {
		in[n] = true
	}
	var out []string
	for _, n := range ph.Hosts.On[h] {
		if in[n] {
			out = append(out, n)
		}
	}
	if s.u.RollingBack() {
		comps := slices.Clone(ph.Hosts.Components)
		slices.Reverse(comps)
		rank := func(n string) int { return slices.Index(comps, s.u.Members[n].Component) }
		slices.SortStableFunc(out, func(a, b string) int { return rank(a) - rank(b) })
	}
	return out
}

// pendingHosts are the hosts of phase ph still to move, in its order:
// those pending with a member still pending. Members on them already
// running their target, healthy and owing no undo are done without a
// move (after a crash, or adopted).
func (s *stepper) pendingHosts(ph plan.Phase) []string {
	u := &s.u
	var out []string
	for _, h := range hostOrder(ph) {
		hm := u.Hosts[h]
		if hm == nil || hm.Step != HostPending {
			continue
		}
		left := false
		for _, n := range s.membersOn(ph, h) {
			m, o := u.Members[n], s.obs.Members[n]
			if m.Step != StepPending {
				continue
			}
			if o.Running && o.Version == m.Target && o.Healthy && s.owedCount(n) == 0 && !m.Restart {
				m = s.edit(n)
				s.setStep(m, StepDone)
				m.Detail = "already running " + m.Target
				continue
			}
			left = true
		}
		if u.RollingBack() && s.reinstallOwed(hm) {
			left = true
		}
		if left {
			out = append(out, h)
		} else if !u.RollingBack() || s.hostOwes(h) == "" {
			s.setHostStep(hm, HostDone)
		}
	}
	if u.RollingBack() {
		if todo := rollbackNext(ph, out, plan.Batch.HostNames); len(todo) > 0 {
			return todo
		}
	}
	return out
}

// hostView is what the host predicates judge the hosts of phase ph
// against, as observed now.
func (s *stepper) hostView(ph plan.Phase) *strategy.HostView {
	u := &s.u
	v := &strategy.HostView{MaxUnavailable: ph.Hosts.MaxUnavailable, MaxUnavailablePerDomain: ph.Hosts.MaxUnavailablePerDomain, Admitted: map[string]bool{}}
	on := map[string][]string{}
	for i := range s.c.Components {
		for _, m := range s.c.Components[i].Members {
			on[m.Host] = append(on[m.Host], m.Name)
		}
	}
	// A capacity answer counts if asked after the hosts last changed
	// (a lock or an unlock that ended), and none is changing now.
	since, settling := s.answerSince(nil, false), ""
	for _, name := range hostOrder(ph) {
		if hm := u.Hosts[name]; hm != nil {
			if hm.Since.After(since) {
				since = hm.Since
			}
			if hm.Step == HostLocking || hm.Step == HostUnlocking {
				settling = name
			}
		}
	}
	for _, name := range hostOrder(ph) {
		hm := u.Hosts[name]
		h := strategy.Host{Name: name, Domain: ph.Hosts.Domains[name]}
		if hm != nil {
			// Locked as long as its lock is owed (a rollback keeps it
			// locked for its members' return).
			h.Locked = hm.Step.held() || s.hostOwes(name) != ""
		}
		for _, n := range on[name] {
			o := s.obs.Members[n]
			switch {
			case o.Unknown:
				h.Unknown = true
			case !o.Healthy:
				h.Down = append(h.Down, n)
			}
			h.Role = h.Role || o.Role
		}
		if hc := s.c.Host(name); hc != nil && s.c.CallsOf(hc).Capacity != nil {
			h.AskCapacity = true
			switch a, ok := s.obs.Capacity[name]; {
			case settling != "":
				h.CapacityWait = "asked once " + settling + " is " + map[HostStep]string{HostLocking: "locked", HostUnlocking: "unlocked"}[u.Hosts[settling].Step]
			case ok && !a.Asked.Before(since):
				h.Capacity = strategy.Answer{Answered: true, Yes: a.Yes, Words: a.Words}
			}
		}
		v.Hosts = append(v.Hosts, h)
	}
	if !u.RollingBack() {
		for _, n := range sortedNames(s.obs.Gates) {
			g := s.obs.Gates[n]
			v.Gates = append(v.Gates, strategy.Gate{Component: n, Healthy: g.Healthy, Fresh: !g.Checked.Before(u.Boundary), Detail: g.Detail})
		}
	}
	return v
}

// admitHost asks every host predicate about host h. A refusal by
// host_capacity has the host's capacity call made: at once when it has
// no answer that counts (awaiting is then set), again once a no is
// askAgain old.
func (s *stepper) admitHost(v *strategy.HostView, h strategy.Host) (r *strategy.Refusal, awaiting bool) {
	r = strategy.AdmitHost(v, h, s.overridden)
	if r == nil || r.Predicate != strategy.PredHostCapacity || h.CapacityWait != "" {
		return r, false
	}
	if a, ok := s.obs.Capacity[h.Name]; s.tooSoon(a, ok && h.Capacity.Answered) {
		return r, false
	}
	if s.askHosts == nil {
		s.askHosts = map[string]bool{}
	}
	s.askHosts[h.Name] = true
	return r, !h.Capacity.Answered
}

// askedHosts lists the hosts whose capacity is to be asked now.
func (s *stepper) askedHosts() []string {
	out := make([]string, 0, len(s.askHosts))
	for h := range s.askHosts {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// formHostBatch forms the next host batch of phase ph from the hosts
// still to move: as many as the host predicates let be locked now, in
// their order (a host with a member down first, one holding a role
// last); the refused are named with their predicate.
func (s *stepper) formHostBatch(ph plan.Phase, pending []string) {
	u := &s.u
	gd := s.hostsGateDeadline(ph)
	const next = "locking the next host"
	if s.pausing(ph.Component, next) || s.outsideWindow(ph.Component, next) || !s.mayForm(ph.Component, next, gd) {
		return
	}
	size := ph.Hosts.MaxUnavailable
	if u.RollingBack() {
		size = len(pending) // the rollback's batch, as it was formed
	}
	chosen, refused, asking := s.chooseHosts(ph, pending, size)
	if len(chosen) == 0 && len(asking) > 0 {
		s.wait("%s: asking whether the other hosts can take the load of %s", ph.Component, strings.Join(asking, ", "))
		s.refusals = append(s.refusals, refused...)
		return
	}
	if len(chosen) == 0 {
		if u.WaitSince.IsZero() {
			u.WaitSince = s.now
		}
		if s.now.Sub(u.WaitSince) > gd {
			s.fail("no host of %s could be locked for %s: %s", ph.Component, gd, refusalText(refused))
			return
		}
		s.refusals = append(s.refusals, refused...)
		s.wait("%s", refusalText(refused))
		s.wake(u.WaitSince.Add(gd + time.Millisecond))
		return
	}
	if !u.RollingBack() {
		s.addGateBound()
	}
	why := ""
	if u.RollingBack() {
		why = "the rollback returns the host batches in reverse"
	}
	if u.RollingBack() && s.roleBackFirst(ph, chosen) {
		return
	}
	b := Batch{Phase: u.Phase, Component: ph.Component, Rollback: u.RollingBack(), Number: len(u.PhaseBatches(u.Phase)) + 1,
		Size: size, Why: why, Began: s.now, Waited: !u.WaitSince.IsZero()}
	u.WaitSince, u.WaitRefused = time.Time{}, false
	s.addHosts(ph, &b, chosen)
	u.Batches = append(u.Batches, b)
	s.runHostBatch(ph, &u.Batches[len(u.Batches)-1])
}

// roleBackFirst reports whether the rollback's next hosts wait for a
// role a switchover handed away to come back first (its undo made, the
// member that held it seen holding it again): a host whose member
// holds the role now is not locked under it, unless that member is the
// one the role goes back to.
func (s *stepper) roleBackFirst(ph plan.Phase, hosts []string) bool {
	for _, name := range ph.Hosts.Components {
		comp := s.c.Component(name)
		if comp == nil {
			continue
		}
		var left []string
		for _, h := range hosts {
			for _, n := range s.membersOn(ph, h) {
				if m := s.u.Members[n]; m != nil && m.Component == name && s.stillToRollBack(n) {
					left = append(left, n)
				}
			}
		}
		if len(left) > 0 && s.handBackFirst(comp, left) {
			return true
		}
	}
	return false
}

// chooseHosts asks the host predicates about the hosts still to move
// (pending), in the order the stage's strategy takes them
// (strategy.NextHostsBy: by-domain one domain's hosts at a time, the
// default order without one), and chooses up to room of them, each
// counting as locked for the next. It returns the refusals, and the
// hosts whose capacity is being asked.
func (s *stepper) chooseHosts(ph plan.Phase, pending []string, room int) (chosen []string, refused []strategy.Refusal, asking []string) {
	v := s.hostView(ph)
	var candidates, begun []strategy.Host
	for _, h := range v.Hosts {
		if slices.Contains(pending, h.Name) {
			candidates = append(candidates, h)
		}
	}
	for i := range s.u.Batches {
		if b := &s.u.Batches[i]; b.Phase != s.u.Phase || b.Rollback != s.u.RollingBack() {
			continue
		}
		for _, n := range s.u.Batches[i].Hosts {
			begun = append(begun, strategy.Host{Name: n, Domain: ph.Hosts.Domains[n]})
		}
	}
	r := strategy.HostRound{Candidates: candidates, Begun: begun, Size: room}
	r.Admit = func(h strategy.Host, chosen []string) *strategy.Refusal {
		v.Admitted = map[string]bool{}
		for _, n := range chosen {
			v.Admitted[n] = true
		}
		capped := false
		switch {
		case len(chosen) > 0 && h.AskCapacity:
			// Its capacity is judged with the hosts chosen before it
			// locked: asked once they are (the batch grows then).
			h.Capacity = strategy.Answer{}
			h.CapacityWait = "asked once " + strings.Join(chosen, ", ") + " is locked"
		case len(asking) >= room && h.AskCapacity && !h.Capacity.Answered:
			// At most a batch's worth of hosts is asked about at once.
			h.CapacityWait, capped = "asked once "+strings.Join(asking, ", ")+" answered", true
		}
		r, awaiting := s.admitHost(v, h)
		switch {
		case r == nil:
		case awaiting:
			asking = append(asking, h.Name)
		case capped && r.Predicate == strategy.PredHostCapacity:
		case !slices.Contains(refused, *r):
			refused = append(refused, *r)
		}
		return r
	}
	chosen = strategy.NextHostsBy(ph.Hosts.Strategy, r)
	return chosen, refused, asking
}

// addHosts adds hosts to batch b, to be locked.
func (s *stepper) addHosts(ph plan.Phase, b *Batch, hosts []string) {
	for _, h := range hosts {
		b.Hosts = append(b.Hosts, h)
		b.Members = append(b.Members, s.membersOn(ph, h)...)
		s.setHostStep(s.u.Hosts[h], HostLocking)
	}
}

// growHostBatch adds hosts to batch b while it runs, as the host
// budgets and each host's capacity call let: a capacity answer is
// judged with the hosts locked as they are, so a host whose capacity
// is asked is admitted once those before it are locked, one after the
// other, not with them. A batch grows up to the stage's max_unavailable
// hosts, and only until one of its hosts is done with its members: the
// next hosts are the next batch's.
func (s *stepper) growHostBatch(ph plan.Phase, b *Batch) {
	u := &s.u
	room := ph.Hosts.MaxUnavailable - len(b.Hosts)
	for _, h := range b.Hosts {
		if hm := u.Hosts[h]; hm == nil || !hm.Step.held() || hm.Step == HostUnlocking {
			return
		}
	}
	if room < 1 || u.RollingBack() || u.Pausing || s.failed || u.State == StatePaused {
		return
	}
	if open, _ := s.c.Policy.MaintenanceWindows().At(s.now); !open {
		return // no host more once the window closed: the batch's own finish
	}
	var pending []string
	for _, h := range s.pendingHosts(ph) {
		if !slices.Contains(b.Hosts, h) {
			pending = append(pending, h)
		}
	}
	if len(pending) == 0 || s.redGates(u.Boundary) != "" || s.checkedBefore() != "" || s.seenBefore(u.Resumed) != "" {
		return
	}
	chosen, refused, _ := s.chooseHosts(ph, pending, room)
	if len(refused) > 0 {
		s.refusals = append(s.refusals, refused...)
		s.wait("%s", refusalText(refused))
	}
	if len(chosen) > 0 {
		b.Why = strings.TrimPrefix(b.Why+"; "+strings.Join(chosen, ", ")+" added once "+strings.Join(b.Hosts, ", ")+" locked", "; ")
		s.addHosts(ph, b, chosen)
	}
}

// runHostBatch advances each host of batch b; once every one is done
// (unlocked) the batch ends, with its part of the lower bound: its
// slowest host's members, one component after the other.
func (s *stepper) runHostBatch(ph plan.Phase, b *Batch) {
	u := &s.u
	s.growHostBatch(ph, b)
	done := true
	for _, h := range b.Hosts {
		hm := u.Hosts[h]
		if hm == nil {
			s.fail("host %q of the plan has no record", h)
			return
		}
		s.moveHost(ph, b, hm)
		if s.failed {
			return
		}
		if hm.Step != HostDone {
			done = false
		}
	}
	if !done {
		return
	}
	b.Ended = s.now
	b.Outcome = strategy.Outcome{Size: len(b.Hosts), Clean: !b.Waited}
	for _, h := range b.Hosts {
		busy := map[string]time.Duration{}
		for _, n := range b.Members {
			if m := u.Members[n]; m != nil && slices.Contains(ph.Hosts.On[h], n) {
				busy[m.Component] = max(busy[m.Component], m.Busy)
			}
		}
		var sum time.Duration
		for _, d := range busy {
			sum += d
		}
		b.Bound = max(b.Bound, sum)
	}
	u.Bound.Batches += b.Bound
	u.Boundary = s.now
}

// moveHost takes host hm through its turn: its lock, its members'
// moves, its unlock.
func (s *stepper) moveHost(ph plan.Phase, b *Batch, hm *HostMove) {
	for range 4 {
		switch hm.Step {
		case HostLocking:
			if !hm.Acted {
				if s.switchOverFirst(ph, b, hm) {
					s.lock(ph, hm)
				}
				return
			}
			s.setHostStep(hm, s.afterLock(hm))
		case HostReinstalling:
			if !s.reinstall(hm) {
				return
			}
			next := HostLocked
			if s.migrateDue() && s.c.HostCommandOf(hm.Name, config.HostMigrate) != nil {
				next = HostMigrating
			}
			s.setHostStep(hm, next)
		case HostMigrating:
			if !s.migrate(ph, hm) {
				return
			}
			s.setHostStep(hm, HostLocked)
		case HostLocked:
			if !s.hostMembers(ph, b, hm) {
				return
			}
			s.setHostStep(hm, HostUnlocking)
		case HostUnlocking:
			// The sweep makes the unlock (the undo of its lock).
			if owed := s.hostOwes(hm.Name); owed != "" {
				s.wait("host %s: unlocking: %s", hm.Name, owed)
				return
			}
			s.setHostStep(hm, HostDone)
		default:
			return
		}
	}
}

// switchOverFirst runs, before host hm is first locked going forward,
// the extra steps of each component of the stage whose role a member
// on hm holds (active-standby's switchover, to a member already on the
// target): the step a phase runs before the holder's batch, journaled
// with its undo, complete once an upgraded member holds the role and
// the gate is green (StarlingX's swact before the active controller's
// lock). It reports whether the lock may be made; the lock's deadline
// counts from the steps' end.
func (s *stepper) switchOverFirst(ph plan.Phase, b *Batch, hm *HostMove) bool {
	if s.u.RollingBack() || b.Rollback || hm.Tries > 0 || hm.Acting != 0 {
		return true
	}
	for _, name := range ph.Hosts.Components {
		comp := s.c.Component(name)
		if comp == nil || comp.Role == nil {
			continue
		}
		adds := strategy.Adds(string(cmp.Or(comp.Strategy.Type, config.DefaultStrategy)))
		mine := func(bs BatchStep) bool { return bs.Component == name && bs.Host == hm.Name }
		if len(adds) == 0 {
			continue
		}
		if !slices.ContainsFunc(b.Before, mine) {
			if !s.holdsRoleOn(comp, hm.Name) {
				continue
			}
			for _, st := range batchSteps(adds) {
				st.Component, st.Host = name, hm.Name
				b.Before = append(b.Before, st)
			}
		}
		if !s.runBatchSteps(comp, b) {
			return false
		}
		for _, bs := range b.Before {
			if mine(bs) && bs.Ended.After(hm.Since) {
				hm.Since = bs.Ended
			}
		}
	}
	return true
}

// holdsRoleOn reports whether a member of comp on host h holds its
// role, as observed now.
func (s *stepper) holdsRoleOn(comp *config.Component, h string) bool {
	for _, m := range comp.Members {
		if o := s.obs.Members[m.Name]; m.Host == h && o.Role && !o.Unknown {
			return true
		}
	}
	return false
}

// lock makes host hm's lock calls, its effect journaled first with the
// unlock as its undo; retried with backoff within the stage's deadline.
func (s *stepper) lock(ph plan.Phase, hm *HostMove) {
	u := &s.u
	if hm.Acting != 0 {
		switch {
		case s.inFlight(hm.Acting) && hm.Acting == hm.Reinstalling:
			s.wait("host %s: waiting for its reinstall with %s to end before locking it again (a reinstall is not cut short)", hm.Name, hm.Reinstalled)
			return
		case s.inFlight(hm.Acting):
			s.wait("host %s: locking", hm.Name)
			return
		}
		hm.Acting, hm.Reinstalling = 0, 0 // lost with a process: taken again
	}
	deadline := cmp.Or(ph.Hosts.LockDeadline.D(), config.DefaultLockDeadline.D())
	if s.now.Sub(hm.Since) > deadline {
		s.fail("host %s: not locked within %s: %s", hm.Name, deadline, cmp.Or(hm.Detail, "-"))
		return
	}
	if i := u.Effects.Find(lockKey(hm.Name)); i >= 0 && s.inFlight(u.Effects[i].Acting) {
		s.wait("host %s: waiting for its unlock in flight before locking it again", hm.Name)
		return
	}
	if !s.backoff(hm.Tries, hm.LastTry) {
		s.wait("host %s: locking: %s", hm.Name, cmp.Or(hm.Detail, "-"))
		return
	}
	h := s.c.Host(hm.Name)
	if h == nil {
		s.fail("host %q of the plan is not in the description", hm.Name)
		return
	}
	calls, data := s.c.CallsOf(h), s.c.HostData(h)
	what, undo := "by its substrate", "by its substrate"
	switch {
	case len(calls.Lock) > 0:
		what, undo = callsText(calls.Lock, data), callsText(calls.Unlock, data)
	case calls.Commands != nil && calls.Commands.Lock != nil && calls.Commands.Unlock != nil:
		what, undo = s.hostCommandText(hm.Name, calls.Commands.Lock), s.hostCommandText(hm.Name, calls.Commands.Unlock)
	}
	if !u.RollingBack() && u.Finalized.IsZero() {
		// A hosts stage marked as the point of no return passes it with
		// its first lock, in the record written before the lock call.
		flow := u.Plan.Stages()
		if i := flowAt(flow, u.State); i >= 0 && flow[i].Kind == config.StageHosts && flow[i].PointOfNoReturn {
			u.Finalized, u.NoReturn, u.NoReturnHost = s.now, StageState(flow[i]), hm.Name
		}
	}
	u.Effects.Open(effect.Effect{Key: lockKey(hm.Name), Scope: effect.Host(hm.Name), What: "host " + hm.Name + " locked: " + what,
		UndoWhat: undo, Undo: effect.Undo{Unlock: hm.Name}}, &u.EffectSeq, s.now)
	hm.Tries++
	hm.LastTry = s.now
	hm.Acting = s.act(Action{Kind: ActLock, Host: hm.Name, Version: u.To})
}

func callsText(calls []config.Call, d config.TemplateData) string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = callText(c, d)
	}
	return strings.Join(out, ", ")
}

// hostMembers moves the members on locked host hm, one component after
// the other, and reports whether every one is done.
func (s *stepper) hostMembers(ph plan.Phase, b *Batch, hm *HostMove) bool {
	u := &s.u
	var cur string // the component moving on the host
	busy := false
	var refused []strategy.Refusal
	for _, n := range s.membersOn(ph, hm.Name) {
		m := u.Members[n]
		if m == nil || !slices.Contains(b.Members, n) {
			continue
		}
		if cur != "" && m.Component != cur {
			return false // the next component waits for this one
		}
		comp, part := s.c.Component(m.Component), ph.Hosts.Part(m.Component)
		if comp == nil || part == nil {
			s.fail("member %s of the hosts stage %s: component %q is not in the description", n, ph.Component, m.Component)
			return false
		}
		if m.Step == StepPending {
			if u.State == StatePaused {
				cur = m.Component
				continue
			}
			if u.RollingBack() && !s.stillToRollBack(n) {
				continue
			}
			v := s.view(comp, *part, false)
			v.ByHost = true
			if r, awaiting := s.admit(v, n, true); r != nil {
				cur = m.Component
				if awaiting {
					s.wait("%s: asking the system whether it may stop", n)
					continue
				}
				s.refusals = append(s.refusals, *r)
				refused = append(refused, *r)
				s.wait("%s", r)
				continue
			}
			hm.WaitSince = time.Time{}
			m = s.edit(n)
			s.begin(m)
		}
		if u.State != StatePaused {
			m = s.advance(comp, *part, m, s.obs.Members[n], -1)
		}
		if s.failed {
			return false
		}
		if m.Step != StepDone {
			cur = m.Component
			busy = busy || m.Step.InFlight()
		}
	}
	if cur == "" {
		return true
	}
	if !busy && len(refused) > 0 && u.State != StatePaused {
		// Refused with nothing of the host in flight: the wait is
		// bounded like an admission's.
		if hm.WaitSince.IsZero() {
			hm.WaitSince = s.now
		}
		gd := s.hostsGateDeadline(ph)
		if s.now.Sub(hm.WaitSince) > gd {
			s.fail("host %s is locked, but no member of %s on it could be taken down for %s: %s", hm.Name, cur, gd, refusalText(refused))
			return false
		}
		s.wake(hm.WaitSince.Add(gd + time.Millisecond))
	}
	return false
}

// hostOwes describes host h's owed effects (its lock's unlock), or "".
func (s *stepper) hostOwes(h string) string { return s.owedIn(effect.Is(effect.Host(h))) }

// hostDue reports whether the unlock of host h is due: its members are
// done (or its turn ended otherwise), unless the rollback is to lock
// it again for its members' return (it stays locked until then), or
// its lock is in flight (it comes back first).
func (s *stepper) hostDue(h string) bool {
	hm := s.u.Hosts[h]
	switch {
	case hm == nil:
		return true
	case s.inFlight(hm.Acting):
		return false
	case hm.Step.held() && hm.Step != HostUnlocking:
		return false
	case hm.Step == HostPending && s.u.RollingBack():
		return !s.hostStillToRollBack(h)
	}
	return true
}

// hostStillToRollBack reports whether a member on host h is still to be
// moved by the rollback.
func (s *stepper) hostStillToRollBack(h string) bool {
	if hm := s.u.Hosts[h]; hm != nil && s.reinstallOwed(hm) {
		return true
	}
	for _, ph := range s.u.Rollback.Phases[min(s.u.Phase, len(s.u.Rollback.Phases)):] {
		if ph.Hosts != nil && slices.ContainsFunc(ph.Hosts.On[h], s.stillToRollBack) {
			return true
		}
	}
	return false
}

// rollbackHosts makes the hosts of rollback rb's hosts phases pending
// again, their locks in flight cancelled: the rollback locks each again
// while its members go back (a host locked now stays locked until
// then: its lock's effect is not due).
func (s *stepper) rollbackHosts(rb plan.Plan) {
	for _, ph := range rb.Phases {
		if ph.Hosts == nil {
			continue
		}
		for _, h := range hostOrder(ph) {
			hm := s.u.Hosts[h]
			if hm == nil {
				continue
			}
			if hm.Acting != 0 && hm.Step != HostReinstalling {
				// A reinstall is not cut short (it runs on the host in
				// a session of its own): the host's lock for its
				// return waits for it to end.
				s.cancel = append(s.cancel, hm.Acting)
			}
			s.setHostStep(hm, HostPending)
		}
	}
}

// hostInFlight reports whether a host is locked, or being locked or
// unlocked: a pause waits for its turn to end.
func (s *stepper) hostInFlight() bool {
	for _, hm := range s.u.Hosts {
		if hm.Step.held() {
			return true
		}
	}
	return false
}

// hostFinished folds in the outcome of a host's action a (its lock,
// reinstall or data migration): it completes only the step that asked
// for it (a reinstall that ends once an abort made the host pending
// again completes nothing).
func (u *Upgrade) hostFinished(a Action, err error, took time.Duration) {
	hm := u.Hosts[a.Host]
	if hm != nil && a.Kind == ActReinstall && hm.Reinstalling == a.Seq {
		hm.Reinstalling = 0
	}
	if hm == nil || hm.Acting != a.Seq {
		return
	}
	hm.Acting = 0
	if hostActions[hm.Step] != a.Kind {
		return
	}
	switch {
	case err != nil && a.Kind == ActReinstall && errors.Is(err, context.Canceled):
		// ferry stopped waiting, the host did not fail: taken again
		// (the driver joins the run under way).
		hm.Tries, hm.Detail = max(0, hm.Tries-1), "cancelled: taken again"
		return
	case err != nil:
		hm.Detail = fmt.Sprintf("try %d: %v", hm.Tries, err)
		return
	}
	hm.Acted, hm.Detail = true, ""
	u.Bound.Hooks += took
}

// hostActions is the action of each host step that has one.
var hostActions = map[HostStep]ActionKind{HostLocking: ActLock, HostReinstalling: ActReinstall, HostMigrating: ActMigrateHost}

// hostVersion is the release a host moves to: the target, or the
// release before while rolling back.
func (s *stepper) hostVersion() string {
	if s.u.RollingBack() {
		return s.u.From
	}
	return s.u.To
}

// migrateDue: a host's data migration runs on the way up only (going
// back, the release before finds its own data, kept).
func (s *stepper) migrateDue() bool { return !s.u.RollingBack() }

// afterLock is the step of locked host hm after its lock: its
// reinstall (going up when it has one; going back when one began with
// another release), its data migration, or its members' moves.
func (s *stepper) afterLock(hm *HostMove) HostStep {
	hasReinstall := s.c.HostCommandOf(hm.Name, config.HostReinstall) != nil
	switch {
	case hasReinstall && !s.u.RollingBack(), s.reinstallOwed(hm):
		return HostReinstalling
	case s.migrateDue() && s.c.HostCommandOf(hm.Name, config.HostMigrate) != nil:
		return HostMigrating
	}
	return HostLocked
}

// reinstallOwed reports whether, rolling back, host hm is to be
// reinstalled with the release before: a reinstall began on it with
// another.
func (s *stepper) reinstallOwed(hm *HostMove) bool {
	return s.u.RollingBack() && hm.Reinstalled != "" && hm.Reinstalled != s.u.From
}

// reinstall reinstalls locked host hm with the release it moves to,
// once: it is not retried (a reinstall half done is no state to run it
// again on), a failure ends the host's move as its on_failure (or the
// policy) says, naming the host. An action lost with ferry's process
// is taken again: the driver joins the run under way. It reports
// whether the reinstall is done.
func (s *stepper) reinstall(hm *HostMove) bool {
	version := s.hostVersion()
	if hm.Acting != 0 {
		if s.inFlight(hm.Acting) {
			s.wait("host %s: reinstalling %s (it may not answer meanwhile)", hm.Name, version)
			return false
		}
		hm.Acting, hm.Reinstalling, hm.Detail = 0, 0, "" // lost with a process: taken again
	} else if hm.Acted {
		return true
	} else if hm.Tries > 0 {
		cmd := s.c.HostCommandOf(hm.Name, config.HostReinstall)
		policy := s.c.Policy.OnFailure
		if cmd != nil && cmd.OnFailure != "" {
			policy = cmd.OnFailure
		}
		s.failBy(policy, fmt.Sprintf("host %s: its reinstall with %s failed: %s", hm.Name, version, cmp.Or(hm.Detail, "-")))
		return false
	}
	hm.Reinstalled = version
	hm.Tries++
	hm.LastTry = s.now
	hm.Acting = s.act(Action{Kind: ActReinstall, Host: hm.Name, Version: version})
	hm.Reinstalling = hm.Acting
	s.wait("host %s: reinstalling %s (it may not answer meanwhile)", hm.Name, version)
	return false
}

// migrate migrates the data of locked host hm to the release it moves
// to, retried with backoff within the longer of the stage's deadline
// and the command's timeout. It reports whether the migration is done.
func (s *stepper) migrate(ph plan.Phase, hm *HostMove) bool {
	version := s.hostVersion()
	if hm.Acting != 0 {
		if s.inFlight(hm.Acting) {
			s.wait("host %s: migrating its data to %s", hm.Name, version)
			return false
		}
		hm.Acting = 0 // lost with a process: taken again
	}
	if hm.Acted {
		return true
	}
	deadline := cmp.Or(ph.Hosts.LockDeadline.D(), config.DefaultLockDeadline.D())
	if cmd := s.c.HostCommandOf(hm.Name, config.HostMigrate); cmd != nil {
		deadline = max(deadline, cmd.Timeout.D())
	}
	if s.now.Sub(hm.Since) > deadline {
		s.fail("host %s: its data not migrated to %s within %s: %s", hm.Name, version, deadline, cmp.Or(hm.Detail, "-"))
		return false
	}
	if !s.backoff(hm.Tries, hm.LastTry) {
		s.wait("host %s: migrating its data to %s: %s", hm.Name, version, cmp.Or(hm.Detail, "-"))
		return false
	}
	hm.Tries++
	hm.LastTry = s.now
	hm.Acting = s.act(Action{Kind: ActMigrateHost, Host: hm.Name, Version: version})
	s.wait("host %s: migrating its data to %s", hm.Name, version)
	return false
}

// reinstallingMembers are the members on the hosts reinstalling now:
// their substrate may not answer for them, and that is the reinstall's
// (bounded by its own unreachable), not an outage to hold on.
func (s *stepper) reinstallingMembers() map[string]bool {
	var out map[string]bool
	for _, hm := range s.u.Hosts {
		if !s.inFlight(hm.Reinstalling) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		for i := range s.c.Components {
			for _, m := range s.c.Components[i].Members {
				if m.Host == hm.Name {
					out[m.Name] = true
				}
			}
		}
	}
	return out
}

// hostCommandText says host h's command cmd in words: its argv and
// where it runs.
func (s *stepper) hostCommandText(h string, cmd *config.HostCommand) string {
	argv, on, err := s.c.RenderHostCommand(h, cmd, s.hostVersion())
	if err != nil {
		return err.Error()
	}
	return strings.Join(argv, " ") + " (run on " + cmp.Or(on, cmd.RunOn.String()) + ")"
}

// resumeHosts gives each host held in its turn its step anew after a
// resume: its deadline counts from now, and a reinstall that failed
// (paused by its on_failure, or stopped by a refused host key) is
// taken again: the driver reports a run that ended well on the host
// without running it again, and runs one that failed again.
func (s *stepper) resumeHosts() {
	for _, n := range sortedNames(s.u.Hosts) {
		hm := s.u.Hosts[n]
		if !hm.Step.held() || hm.Acting != 0 {
			continue
		}
		hm.Since = s.now
		if !hm.Acted {
			hm.Tries, hm.LastTry = 0, time.Time{}
		}
	}
}
