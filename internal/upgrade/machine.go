package upgrade

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/config"
	"github.com/ferry-upgrade/ferry/internal/plan"
)

// soakBroken begins the detail of a member that became healthy and
// then failed within its min_healthy_time.
const soakBroken = "unhealthy during its soak (min_healthy_time): "

// retryBackoff is how long a failed action waits before it is tried
// again (times the number of tries, capped at maxBackoff).
const (
	retryBackoff = 500 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// New returns the record of an upgrade that has not taken any step:
// every planned member pending, every skipped member done.
func New(id string, p plan.Plan, versions map[string]string, components map[string]string, now time.Time) Upgrade {
	u := Upgrade{
		ID:      id,
		From:    majority(versions),
		To:      p.To,
		State:   StateStarted,
		Plan:    p,
		Members: map[string]*Member{},
		Pin:     majority(versions),
		Created: now,
		Updated: now,
	}
	for _, ph := range p.Phases {
		for _, b := range ph.Batches {
			for _, name := range b.Members {
				u.Members[name] = &Member{Name: name, Component: ph.Component, From: versions[name], Target: p.To, Step: StepPending}
			}
		}
		for _, s := range ph.Skipped {
			u.Members[s.Member] = &Member{Name: s.Member, Component: ph.Component, From: versions[s.Member], Target: p.To, Step: StepDone, Detail: s.Reason}
		}
	}
	return u
}

// majority returns the version most members run (ties: the lowest),
// which names the release the upgrade starts from.
func majority(versions map[string]string) string {
	count := map[string]int{}
	for _, v := range versions {
		if v != "" {
			count[v]++
		}
	}
	best, n := "", 0
	keys := make([]string, 0, len(count))
	for v := range count {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	for _, v := range keys {
		if count[v] > n {
			best, n = v, count[v]
		}
	}
	return best
}

// Decision is what Step decided: the record to persist, the actions to
// take once it is persisted, and when to look again if nothing happens
// sooner (zero: at the engine's next tick).
type Decision struct {
	Upgrade Upgrade
	Actions []Action
	After   time.Duration
}

// Step decides the next move of upgrade u given what was just observed.
// It never mutates u; the returned record must be persisted before any
// returned action is taken.
func Step(c *config.Cluster, u Upgrade, obs Observation, now time.Time) Decision {
	s := stepper{c: c, u: u.clone(), obs: obs, now: now}
	s.run()
	s.u.Waiting = strings.Join(append(s.notes, s.waiting...), "; ")
	if s.u.State.Terminal() && s.u.Ended.IsZero() {
		s.u.Ended = now
	}
	s.u.Updated = now
	return Decision{Upgrade: s.u, Actions: s.actions, After: s.after}
}

type stepper struct {
	c       *config.Cluster
	u       Upgrade
	obs     Observation
	now     time.Time
	actions []Action
	waiting []string
	after   time.Duration
	// notes are said in Waiting without holding the step back.
	notes []string
	// failed is set once a step failed in this pass: the phase stops
	// advancing members, whatever the policy made of the failure.
	failed bool
}

// wake asks to be stepped again no later than at t.
func (s *stepper) wake(t time.Time) {
	d := t.Sub(s.now)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if s.after == 0 || d < s.after {
		s.after = d
	}
}

func (s *stepper) wait(format string, args ...any) {
	s.waiting = append(s.waiting, fmt.Sprintf(format, args...))
}

// fail ends the current step in failure. What follows is the policy's
// (on_failure): a rollback of every member touched so far (the
// default), or a pause for the operator. A failure while rolling back
// ends the upgrade in failed: there is no rollback of a rollback.
func (s *stepper) fail(format string, args ...any) {
	s.failBy(s.c.Policy.OnFailure, fmt.Sprintf(format, args...))
}

// failBy is fail under policy (rollback or pause).
func (s *stepper) failBy(policy, reason string) {
	s.actions = nil
	s.waiting = nil
	s.failed = true
	u := &s.u
	switch {
	case !u.Finalized.IsZero() && !u.RollingBack():
		// Past the point of no return: nothing to roll back to.
		u.ResumeTo = u.State
		u.State = StatePaused
		u.Reason = reason + " (after finalize: no rollback; fix the cause, then 'ferry upgrade resume')"
		u.Pausing = false
		s.pausedWait()
	case u.State == StatePreflight || u.State == StateStarted:
		// Nothing was touched: nothing to roll back.
		u.State = StateFailed
		u.Reason = reason
	case u.RollingBack():
		u.State = StateFailed
		u.Reason = "rollback failed: " + reason + " (the cause was: " + u.Reason + ")"
	case policy == "pause":
		u.ResumeTo = u.State
		u.State = StatePaused
		u.Reason = reason
		u.Pausing = false
		s.pausedWait()
	default:
		s.rollback(reason)
	}
}

// rollback begins returning every member touched so far to the version
// it ran before, through the same gated steps, in reverse order: the
// phases from the current one back to the first, the batches of each
// from the last back, the failed member first within its batch.
func (s *stepper) rollback(reason string) {
	u := &s.u
	rb := plan.Plan{From: []string{u.To}, To: u.From}
	last := u.Phase
	if last >= len(u.Plan.Phases) {
		last = len(u.Plan.Phases) - 1
	}
	for i := last; i >= 0; i-- {
		ph := u.Plan.Phases[i]
		var batches []plan.Batch
		for j := len(ph.Batches) - 1; j >= 0; j-- {
			var first, rest []string
			for _, n := range ph.Batches[j].Members {
				m := u.Members[n]
				if m == nil || m.Step == StepPending || m.From == "" {
					continue
				}
				if m.Step == StepFailed {
					first = append(first, n)
				} else {
					rest = append(rest, n)
				}
			}
			if ms := append(first, rest...); len(ms) > 0 {
				batches = append(batches, plan.Batch{Members: ms})
			}
		}
		if len(batches) > 0 {
			rph := ph
			rph.Batches, rph.Skipped = batches, nil
			rph.Note = "rollback to " + u.From
			rb.Phases = append(rb.Phases, rph)
		}
	}
	for _, ph := range rb.Phases {
		for _, b := range ph.Batches {
			for _, n := range b.Members {
				m := u.Members[n]
				m.Target = m.From
				m.Began, m.HealthySince, m.AdmitSince = time.Time{}, time.Time{}, time.Time{}
				m.Detail = ""
				s.setStep(m, StepPending)
			}
		}
	}
	u.Rollback = &rb
	u.Phase, u.Batch = 0, 0
	u.GateSince = time.Time{}
	u.Pausing = false
	u.ResumeTo = ""
	u.Reason = reason
	u.State = StateRollingBack
}

func (s *stepper) pausedWait() {
	why := "by the operator"
	if s.u.Reason != "" {
		why = "on a failure: " + s.u.Reason
	}
	s.wait("paused %s; 'ferry upgrade resume' goes on, 'ferry upgrade abort' rolls back", why)
}

// intent acts once on the operator's latest request.
func (s *stepper) intent() {
	u := &s.u
	in := u.Intent
	if in.Seq <= u.IntentSeen || u.State.Terminal() {
		return
	}
	u.IntentSeen = in.Seq
	switch in.Kind {
	case IntentPause:
		if u.State != StatePaused {
			u.Pausing = true
		}
	case IntentResume:
		u.Pausing = false
		if u.State == StatePaused {
			s.resume()
		}
	case IntentAbort:
		if u.RollingBack() {
			return
		}
		if why := NoAbort(u); why != "" {
			s.notes = append(s.notes, "abort refused: "+why)
			return
		}
		s.rollback("aborted by the operator")
	case IntentFinalize:
		if u.State == StateAwaitingFinalize {
			s.enterStage(StateFinalizing)
		}
	}
}

// NoAbort says why upgrade u may no longer be aborted (rolled back),
// or "" if it may. The point of no return (finalize) comes with data
// migrations; until it is reached, an upgrade may always be aborted.
func NoAbort(u *Upgrade) string {
	switch {
	case u.State.Terminal():
		return fmt.Sprintf("upgrade %s has ended (%s)", u.ID, u.State)
	case u.RollingBack():
		return fmt.Sprintf("upgrade %s is already rolling back", u.ID)
	case !u.Finalized.IsZero():
		return fmt.Sprintf("upgrade %s passed its point of no return: it was finalized at %s, so the cluster's compatibility version is %s and members of %s could not read what %s now writes",
			u.ID, u.Finalized.UTC().Format(time.RFC3339), u.To, u.From, u.To)
	}
	return ""
}

// NoFinalize says why upgrade u cannot be finalized by the operator
// now, or "" if it can.
func NoFinalize(u *Upgrade) string {
	switch {
	case u.State.Terminal():
		return fmt.Sprintf("upgrade %s has ended (%s)", u.ID, u.State)
	case !u.Finalized.IsZero():
		return fmt.Sprintf("upgrade %s is already finalized", u.ID)
	case u.State != StateAwaitingFinalize:
		return fmt.Sprintf("upgrade %s is %s: finalize comes once every member runs %s and the migration is done (and only with policy finalize: manual; with auto ferry finalizes by itself)", u.ID, u.State, u.To)
	}
	return ""
}

// stageCalls are the calls of migration stage st of the target release.
func (s *stepper) stageCalls(st State) []config.Call {
	r := s.c.Release(s.u.To)
	if r == nil {
		return nil
	}
	m := &r.Migrations
	switch st {
	case StateExpanding:
		return m.Expand
	case StateMigrating:
		return m.Migrate
	case StateFinalizing:
		return m.Finalize
	case StateContracting:
		return m.Contract
	}
	return nil
}

// enterStage moves to migration stage st with fresh progress.
func (s *stepper) enterStage(st State) {
	s.u.State = st
	s.u.Stage = Stage{}
}

// nextStage is what follows stage st once it is done (or empty).
func (s *stepper) nextStage(st State) {
	u := &s.u
	switch st {
	case StateExpanding:
		u.Phase, u.Batch = 0, 0
		s.enterPhase()
	case StateMigrating:
		if s.c.Policy.Finalize == "manual" {
			s.enterStage(StateAwaitingFinalize)
			return
		}
		s.enterStage(StateFinalizing)
	case StateFinalizing:
		if u.Finalized.IsZero() {
			u.Finalized = s.now
		}
		u.Pin = u.To
		s.enterStage(StateContracting)
	case StateContracting:
		u.State = StateCompleted
	}
}

// stage advances migration stage st: its calls are made until they
// pass, at the release's interval, within its deadline. Finalize is
// recorded before its first call: once it may have happened, there is
// no going back.
func (s *stepper) stage(st State) {
	u := &s.u
	calls := s.stageCalls(st)
	if len(calls) == 0 || u.Stage.Done {
		s.nextStage(st)
		return
	}
	m := &s.c.Release(u.To).Migrations
	if u.Stage.Since.IsZero() {
		u.Stage.Since = s.now
	}
	if d := m.Deadline.D(); s.now.Sub(u.Stage.Since) > d {
		s.fail("%s: not done within %s: %s", st, d, orDash(u.Stage.Detail))
		return
	}
	if s.u.Pausing {
		return // pauseIfQuiet pauses between two calls
	}
	if !u.Stage.LastTry.IsZero() {
		if next := u.Stage.LastTry.Add(m.Interval.D()); s.now.Before(next) {
			s.wait("%s: %s", st, orDash(u.Stage.Detail))
			s.wake(next)
			return
		}
	}
	if st == StateFinalizing && u.Finalized.IsZero() {
		u.Finalized = s.now
		u.Pin = u.To
	}
	u.Stage.LastTry = s.now
	u.Stage.Tries++
	s.actions = append(s.actions, Action{Kind: ActStage, Stage: stageName(st), Version: u.To})
}

func stageName(st State) string {
	switch st {
	case StateExpanding:
		return "expand"
	case StateMigrating:
		return "migrate"
	case StateFinalizing:
		return "finalize"
	case StateContracting:
		return "contract"
	}
	return string(st)
}

// resume returns a paused upgrade to where it was. Members that failed
// are tried again from their start, and every deadline counts anew
// from now (StarlingX's resume: the state is reset from what runs).
func (s *stepper) resume() {
	u := &s.u
	u.State = u.ResumeTo
	if u.State == "" || u.State == StatePaused {
		u.State = StateStarted
	}
	u.ResumeTo = ""
	if !u.RollingBack() {
		u.Reason = ""
	}
	u.GateSince = time.Time{}
	u.Stage.Since, u.Stage.LastTry = time.Time{}, time.Time{}
	for _, m := range u.Members {
		switch {
		case m.Step == StepFailed:
			m.Began, m.HealthySince = time.Time{}, time.Time{}
			m.Detail = "tried again after resume"
			s.setStep(m, StepPending)
		case m.Step.InFlight():
			m.Began = s.now
		}
		m.AdmitSince = time.Time{}
	}
}

// pauseIfQuiet pauses an upgrade asked to pause once no member is in
// flight: the step in flight finishes first.
func (s *stepper) pauseIfQuiet() {
	u := &s.u
	if !u.Pausing || u.State.Terminal() || u.State == StatePaused {
		return
	}
	for _, m := range u.Members {
		if m.Step.InFlight() {
			return
		}
	}
	u.ResumeTo = u.State
	u.State = StatePaused
	u.Pausing = false
	s.waiting = nil
	s.pausedWait()
}

func (s *stepper) run() {
	// Each pass may move the record forward by a state; loop while it
	// does and no action is due, so one Step reaches the next action.
	for i := 0; i < 64; i++ {
		before := s.u.State
		beforePhase, beforeBatch := s.u.Phase, s.u.Batch
		s.once()
		if len(s.actions) > 0 || s.u.State.Terminal() || s.u.State == StatePaused || len(s.waiting) > 0 {
			return
		}
		if s.u.State == before && s.u.Phase == beforePhase && s.u.Batch == beforeBatch {
			return
		}
		if s.u.State != before && strings.HasPrefix(string(s.u.State), "upgraded-") {
			// A component done is a milestone worth a record of its
			// own (Rook's upgraded-COMPONENT): stop here, go on next.
			s.wake(s.now)
			return
		}
	}
}

func (s *stepper) once() {
	u := &s.u
	s.intent()
	defer s.pauseIfQuiet()
	switch {
	case u.State.Terminal():
		return
	case u.State == StatePaused:
		s.pausedWait()
		return
	case u.State == StateRollingBack:
		s.phase()
	case u.State == StateStarted:
		u.State = StatePreflight
	case u.State == StatePreflight:
		if !s.preflight() {
			return
		}
		s.enterStage(StateExpanding)
	case u.State == StateExpanding, u.State == StateMigrating, u.State == StateFinalizing, u.State == StateContracting:
		s.stage(u.State)
	case u.State == StateAwaitingFinalize:
		s.wait("every member runs %s, pinned to %s; 'ferry upgrade finalize' passes the point of no return, 'ferry upgrade abort' rolls back", u.To, u.Pin)
	case strings.HasPrefix(string(u.State), "upgraded-"):
		u.Phase++
		u.Batch = 0
		s.enterPhase()
	case strings.HasPrefix(string(u.State), "upgrading-"):
		s.phase()
	}
}

// enterPhase moves to the phase at u.Phase, or completes the upgrade.
func (s *stepper) enterPhase() {
	u := &s.u
	u.GateSince = time.Time{}
	if u.Phase >= len(u.Plan.Phases) {
		s.enterStage(StateMigrating)
		return
	}
	u.State = Upgrading(u.Plan.Phases[u.Phase].Component)
}

// preflight passes when every planned member runs healthy and every
// cluster gate is green: ferry does not start on a sick cluster.
func (s *stepper) preflight() bool {
	var sick []string
	for _, name := range s.memberNames() {
		o := s.obs.Members[name]
		if !o.Healthy {
			sick = append(sick, fmt.Sprintf("%s not healthy (%s)", name, orDash(o.Detail)))
		}
	}
	if gate := s.redGates(); gate != "" {
		sick = append(sick, gate)
	}
	if len(sick) == 0 {
		s.u.GateSince = time.Time{}
		return true
	}
	return s.gateWait("preflight", s.maxGateDeadline(), strings.Join(sick, ", "))
}

// gateWait records a wait on a red gate and fails the upgrade once the
// gate has been red for longer than deadline. It returns false.
func (s *stepper) gateWait(what string, deadline time.Duration, detail string) bool {
	u := &s.u
	if u.GateSince.IsZero() {
		u.GateSince = s.now
	}
	if s.now.Sub(u.GateSince) > deadline {
		s.fail("%s: health gate red for %s: %s", what, deadline, detail)
		return false
	}
	s.wait("%s: waiting for health: %s", what, detail)
	s.wake(u.GateSince.Add(deadline + time.Millisecond))
	return false
}

// redGates describes every cluster gate that is red, or "".
func (s *stepper) redGates() string {
	var red []string
	names := make([]string, 0, len(s.obs.Gates))
	for n := range s.obs.Gates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if g := s.obs.Gates[n]; !g.Healthy {
			red = append(red, fmt.Sprintf("cluster gate %s red (%s)", n, orDash(g.Detail)))
		}
	}
	return strings.Join(red, ", ")
}

func (s *stepper) maxGateDeadline() time.Duration {
	var d time.Duration
	for i := range s.c.Components {
		if g := s.c.Components[i].GateDeadline.D(); g > d {
			d = g
		}
	}
	if d == 0 {
		d = time.Minute
	}
	return d
}

func (s *stepper) memberNames() []string {
	names := make([]string, 0, len(s.u.Members))
	for n := range s.u.Members {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// phase advances the current phase: the gate before each batch, the
// members of the batch, the gate after the last batch.
//
// While rolling back, the gate before a batch is skipped (the red gate
// may be the very thing the rollback repairs); the gate after each
// phase is kept, so that rolled-back means healthy.
func (s *stepper) phase() {
	u := &s.u
	active := u.Active()
	if u.Phase >= len(active.Phases) {
		if u.RollingBack() {
			u.State = StateRolledBack
		} else {
			u.State = StateCompleted
		}
		return
	}
	ph := active.Phases[u.Phase]
	comp := s.c.Component(ph.Component)
	if comp == nil {
		s.fail("component %q of the plan is not in the description", ph.Component)
		return
	}
	if u.Batch >= len(ph.Batches) {
		if red := s.redGates(); red != "" {
			s.gateWait("after "+comp.Name, comp.GateDeadline.D(), red)
			return
		}
		u.GateSince = time.Time{}
		if u.RollingBack() {
			u.Phase++
			u.Batch = 0
			return
		}
		u.State = Upgraded(comp.Name)
		return
	}
	batch := ph.Batches[u.Batch]
	started := false
	for _, name := range batch.Members {
		if m := u.Members[name]; m != nil && m.Step != StepPending {
			started = true
		}
	}
	if !started && !u.RollingBack() {
		if red := s.redGates(); red != "" {
			s.gateWait(fmt.Sprintf("before %s batch %d", comp.Name, u.Batch+1), comp.GateDeadline.D(), red)
			return
		}
		u.GateSince = time.Time{}
	}
	done := true
	for _, name := range batch.Members {
		m := u.Members[name]
		if m == nil {
			s.fail("member %q of the plan has no record", name)
			return
		}
		s.advance(comp, ph, m)
		if s.failed {
			return
		}
		if m.Step != StepDone {
			done = false
		}
	}
	if done {
		u.Batch++
	}
}

// advance moves one member of the current batch as far as it can go
// without acting, and emits the action it needs next, if any.
func (s *stepper) advance(comp *config.Component, ph plan.Phase, m *Member) {
	o := s.obs.Members[m.Name]
	onTarget := o.Running && o.Version == m.Target
	for i := 0; i < 8; i++ {
		if m.Step.InFlight() && s.now.Sub(m.Began) > comp.Deadline.D() {
			s.setStep(m, StepFailed)
			why := orDash(firstNonEmpty(o.Detail, m.Detail))
			if strings.HasPrefix(m.Detail, soakBroken) {
				// It was healthy, then was not: that is the news.
				why = m.Detail + "; last seen: " + orDash(o.Detail)
			}
			m.Detail = fmt.Sprintf("not healthy on %s within healthy_deadline %s: %s", m.Target, comp.Deadline, why)
			s.fail("member %s: %s", m.Name, m.Detail)
			return
		}
		switch m.Step {
		case StepPending:
			if onTarget && o.Healthy {
				s.setStep(m, StepDone)
				m.Detail = "already running " + m.Target
				return
			}
			if s.u.Pausing {
				s.wait("%s: not started: pausing", m.Name)
				return
			}
			if why := s.admit(comp, ph, m); why != "" {
				// Trouble ferry did not cause: wait for it to pass, up
				// to the gate deadline.
				if m.AdmitSince.IsZero() {
					m.AdmitSince = s.now
				}
				if gd := comp.GateDeadline.D(); s.now.Sub(m.AdmitSince) > gd {
					s.fail("member %s could not be taken down for %s: %s", m.Name, gd, why)
					return
				}
				s.wait("%s: %s", m.Name, why)
				s.wake(m.AdmitSince.Add(comp.GateDeadline.D() + time.Millisecond))
				return
			}
			m.AdmitSince = time.Time{}
			m.Began = s.now
			s.setStep(m, StepDraining)
		case StepDraining:
			// A member that is not running has nothing to drain; one that
			// runs unhealthy gets one try of its hooks (its load balancer
			// or its peers may not answer for it), then goes on.
			if len(comp.Hooks.PreStop) == 0 || onTarget || !o.Running || (!o.Healthy && m.Tries > 0) {
				s.setStep(m, StepStopping)
				continue
			}
			s.try(m, ActPreStop, "")
			return
		case StepStopping:
			if !o.Running || onTarget {
				s.setStep(m, StepStarting)
				continue
			}
			// Check again at the moment the member goes down: another
			// member may have failed since this one was admitted.
			if why := s.admit(comp, ph, m); why != "" {
				s.wait("%s: drained, not stopped: %s", m.Name, why)
				return
			}
			s.try(m, ActStop, "")
			return
		case StepStarting:
			if !onTarget {
				s.try(m, ActStart, m.Target)
				return
			}
			if !o.Healthy {
				s.wait("%s: waiting to be healthy on %s (%s)", m.Name, m.Target, orDash(o.Detail))
				s.wake(m.Began.Add(comp.Deadline.D() + time.Millisecond))
				return
			}
			m.HealthySince = o.HealthySince
			if m.HealthySince.IsZero() || m.HealthySince.After(s.now) {
				m.HealthySince = s.now
			}
			s.setStep(m, StepSoaking)
		case StepSoaking:
			if !onTarget || !o.Healthy {
				m.Detail = soakBroken + orDash(o.Detail)
				m.HealthySince = time.Time{}
				s.setStep(m, StepStarting)
				continue
			}
			end := m.HealthySince.Add(comp.Soak.D())
			if s.now.Before(end) {
				s.wake(end)
				return
			}
			s.setStep(m, StepRejoining)
		case StepRejoining:
			if len(comp.Hooks.PostStart) == 0 {
				s.setStep(m, StepDone)
				return
			}
			s.try(m, ActPostStart, "")
			return
		default: // done, failed
			return
		}
	}
}

// try emits action k for m unless a previous try failed too recently.
func (s *stepper) try(m *Member, k ActionKind, version string) {
	if m.Tries > 0 {
		back := time.Duration(m.Tries) * retryBackoff
		if back > maxBackoff {
			back = maxBackoff
		}
		if next := m.LastTry.Add(back); s.now.Before(next) {
			s.wake(next)
			return
		}
	}
	m.LastTry = s.now
	m.Tries++
	s.actions = append(s.actions, Action{Kind: k, Member: m.Name, Version: version})
}

func (s *stepper) setStep(m *Member, st MemberStep) {
	if m.Step != st {
		m.Step = st
		m.Since = s.now
		m.Tries = 0
		m.LastTry = time.Time{}
	}
}

// admit says why member m may not be taken down now, or "" if it may:
// max_unavailable counts every member of the component that is down
// for any reason or in flight; a quorum component keeps a quorum of
// healthy members besides m (Ceph's ok-to-stop).
func (s *stepper) admit(comp *config.Component, ph plan.Phase, m *Member) string {
	mh := s.obs.Members[m.Name]
	cost := 0
	if mh.Healthy {
		cost = 1
	}
	var down []string
	healthy := 0
	for i := range comp.Members {
		x := comp.Members[i].Name
		if x == m.Name {
			continue
		}
		inflight := false
		if r := s.u.Members[x]; r != nil && r.Step.InFlight() {
			inflight = true
		}
		o := s.obs.Members[x]
		switch {
		case inflight:
			down = append(down, x+" in progress")
		case !o.Healthy:
			down = append(down, x+" down")
		default:
			healthy++
		}
	}
	maxU := ph.MaxUnavailable
	if maxU < 1 {
		maxU = 1
	}
	if len(down)+cost > maxU {
		return fmt.Sprintf("max_unavailable %d reached (%s)", maxU, strings.Join(down, ", "))
	}
	if ph.Quorum > 0 && cost == 1 && healthy < ph.Quorum {
		return fmt.Sprintf("stopping it would leave %d healthy of quorum %d (%s)", healthy, ph.Quorum, strings.Join(down, ", "))
	}
	return ""
}

// Impacted applies policy on_impact to record u, whose last batch was
// judged to have hurt the clients (why): with pause or rollback the
// upgrade fails as a failed step would under that policy, and the
// decision's actions are to be dropped; with continue nothing changes.
func Impacted(c *config.Cluster, u Upgrade, why string, now time.Time) (Upgrade, bool) {
	p := c.Policy.OnImpact
	if p != "pause" && p != "rollback" || u.RollingBack() || u.State.Terminal() {
		return u, false
	}
	s := stepper{c: c, u: u.clone(), now: now}
	s.failBy(p, "impact: "+why)
	s.u.Waiting = strings.Join(append(s.notes, s.waiting...), "; ")
	s.u.Updated = now
	return s.u, true
}

// Finished folds the outcome of action a into the record: a success
// moves the member to its next step, a failure is noted and retried.
func Finished(u Upgrade, a Action, err error, now time.Time) Upgrade {
	u = u.clone()
	if a.Kind == ActStage {
		if stageName(u.State) != a.Stage {
			return u // a stale outcome
		}
		u.Updated = now
		if err != nil {
			u.Stage.Detail = fmt.Sprintf("try %d: %v", u.Stage.Tries, err)
		} else {
			u.Stage.Done, u.Stage.Detail = true, "done"
		}
		return u
	}
	m := u.Members[a.Member]
	if m == nil {
		return u
	}
	u.Updated = now
	if err != nil {
		m.Detail = fmt.Sprintf("%s failed (try %d): %v", a.Kind, m.Tries, err)
		return u
	}
	next := map[ActionKind]MemberStep{ActPreStop: StepStopping, ActStop: StepStarting, ActPostStart: StepDone}
	from := map[ActionKind]MemberStep{ActPreStop: StepDraining, ActStop: StepStopping, ActPostStart: StepRejoining}
	if st, ok := next[a.Kind]; ok && m.Step == from[a.Kind] {
		m.Step, m.Since, m.Tries, m.LastTry = st, now, 0, time.Time{}
	}
	if a.Kind == ActStart && !strings.HasPrefix(m.Detail, soakBroken) {
		m.Detail = "" // a failed try is history; a broken soak stays news
	}
	return u
}

func (u Upgrade) clone() Upgrade {
	c := u
	c.Members = make(map[string]*Member, len(u.Members))
	for k, v := range u.Members {
		m := *v
		c.Members[k] = &m
	}
	return c
}

// Clone returns a deep copy, for callers that keep records around.
func (u Upgrade) Clone() Upgrade { return u.clone() }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
