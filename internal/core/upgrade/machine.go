package upgrade

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// retryBackoff is how long a failed action waits before it is tried
// again (times the number of tries, capped at maxBackoff).
const (
	retryBackoff = 500 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// New returns the record of an upgrade that has not taken any step:
// every planned member pending, every skipped member done.
func New(id string, p plan.Plan, versions map[string]string, _ map[string]string, now time.Time) Upgrade {
	u := Upgrade{
		Schema:  Schema,
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
		if ph.Rollout {
			continue // its members are the phases' (a rollout moves them again)
		}
		comp := componentsOf(ph)
		for _, name := range ph.Members() {
			u.Members[name] = &Member{Name: name, Component: comp(name), From: versions[name], Target: p.To, Step: StepPending}
		}
		for _, s := range ph.Skipped {
			u.Members[s.Member] = &Member{Name: s.Member, Component: comp(s.Member), From: versions[s.Member], Target: p.To, Step: StepDone, Detail: s.Reason}
		}
		u.newHosts(ph)
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
	keys := make([]string, 0, len(count))
	for v := range count {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	best, n := "", 0
	for _, v := range keys {
		if count[v] > n {
			best, n = v, count[v]
		}
	}
	return best
}

// Step decides the next move of upgrade u given what was just observed.
// It never mutates u; the returned record must be persisted before any
// returned action is taken.
func Step(c *config.Cluster, u Upgrade, obs Observation, now time.Time) Decision {
	if VerifyAdmission {
		verifySummary(obs)
	}
	s := stepper{c: c, in: u, u: u.clone(), obs: obs, now: now, probe: map[string]bool{}, ask: map[string]bool{}}
	// u's members are shared with s.u until s.edit copies one.
	s.away()
	s.run()
	s.settle()
	s.u.Waiting = strings.Join(append(s.notes, s.waiting...), "; ")
	s.u.Refusals = s.refusals
	if s.u.State.Terminal() && s.u.Ended.IsZero() {
		s.u.Ended = now
	}
	if s.u.State.Terminal() {
		s.u.Held = nil
	}
	s.u.Updated = now
	var probe []string
	for c := range s.probe {
		probe = append(probe, c)
	}
	sort.Strings(probe)
	return Decision{Upgrade: s.u, Actions: s.actions, Probe: probe, Ask: s.asked(), AskHosts: s.askedHosts(), Cancel: s.cancel, After: s.after}
}

type stepper struct {
	c *config.Cluster
	// in is the record Step was given, u the one it makes.
	in       Upgrade
	u        Upgrade
	obs      Observation
	now      time.Time
	actions  []Action
	waiting  []string
	refusals []strategy.Refusal
	// probe are the components whose gates must be checked now; ask
	// the members the system is to be asked about now.
	probe  map[string]bool
	ask    map[string]bool
	cancel []int
	after  time.Duration
	// notes are said in Waiting without holding the step back.
	notes []string
	// failed is set once a step failed in this pass: the phase stops
	// advancing members, whatever the policy made of the failure.
	failed bool

	// askHosts are the hosts whose capacity is to be asked now.
	askHosts map[string]bool
	// mine names the members this step copied to change (edit); nil
	// until the first, when the members map is copied too.
	mine map[string]bool
	// effects indexes the journal's member effects by member when the
	// step has no admission's (memberEffects).
	effects effectIndex
	// adm is the admission view's members this step uses (admission),
	// stepped the members whose step changed since it was brought up
	// to date.
	adm     *admission
	stepped []string
	// hooksIn is hasHooks' answer for component hooksOf.
	hooksOf *config.Component
	hooksIn func(string) bool
	// refs are the template data's Members list of component refsOf
	// (callData).
	refsOf *config.Component
	refs   []config.MemberRef
	// active are the overrides in force at now, found once a step
	// (activeOverrides): admission asks for each member and predicate.
	active     []Override
	activeDone bool
}

// activeOverrides are the record's overrides in force at the step's
// time (Upgrade.ActiveOverrides), which no step changes.
func (s *stepper) activeOverrides() []Override {
	if !s.activeDone {
		s.active, s.activeDone = s.u.ActiveOverrides(s.now), true
	}
	return s.active
}

// edit returns member n of the record being stepped, to change: a copy
// made the first time (and of the members map, the first time any
// member changes), so that the record Step was given is never changed
// and the members a step leaves alone stay shared between the two
// records (a pass over ten thousand members copies the few it moves).
// A member's record is changed only through what edit returned.
// Helpers that take a *Member to change want edit's; those that take a
// name edit it themselves when they change it.
func (s *stepper) edit(n string) *Member {
	m := s.u.Members[n]
	if m == nil || s.mine[n] {
		return m
	}
	if s.mine == nil {
		s.mine = map[string]bool{}
	}
	s.mine[n] = true
	return s.u.own(n)
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

// act emits an action with the next sequence number and returns it.
func (s *stepper) act(a Action) int {
	s.u.ActionSeq++
	a.Seq = s.u.ActionSeq
	a.Pin = s.u.Pin
	s.actions = append(s.actions, a)
	return a.Seq
}

// inFlight reports whether action seq is being taken by the engine
// that observed; one recorded but not in flight was lost with its
// process.
func (s *stepper) inFlight(seq int) bool { return seq != 0 && s.obs.Acting[seq] }

// backoff reports whether an action tried tries times, last at last,
// may be tried again now; if not, it asks to be woken then.
func (s *stepper) backoff(tries int, last time.Time) bool {
	if tries == 0 {
		return true
	}
	back := min(time.Duration(tries)*retryBackoff, maxBackoff)
	if next := last.Add(back); s.now.Before(next) {
		s.wake(next)
		return false
	}
	return true
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
	case !u.Ending.IsZero():
		// A failure of the end's own hooks: the end stands, said so.
		s.notes = append(s.notes, reason)
	case !u.Finalized.IsZero() && !u.RollingBack():
		// Past the point of no return: nothing to roll back to.
		past := "after finalize"
		if !u.NoReturn.IsZero() {
			past = "past the point of no return, " + u.NoReturn.String()
		}
		s.pause(reason + " (" + past + ": no rollback; fix the cause, then 'ferry upgrade resume')")
	case u.State == StatePreflight || u.State == StateStarted:
		// Nothing was touched: nothing to roll back.
		u.Reason = reason
		s.untouched("the upgrade failed before its turn", nil)
		s.end(StateFailed)
	case u.RollingBack():
		u.Reason = "rollback failed: " + reason + " (the cause was: " + u.Reason + ")"
		s.end(StateFailed)
	case policy == "pause":
		s.pause(reason)
	default:
		s.rollback(reason)
	}
}

// pause holds the upgrade for the operator, with the reason ("" for
// the operator's own request).
func (s *stepper) pause(reason string) {
	u := &s.u
	if u.State != StatePaused {
		u.ResumeTo = u.State
	}
	u.State = StatePaused
	u.Reason = reason
	u.Pausing = false
	s.waiting = nil
	s.pausedWait()
}

// end reaches terminal state st once the upgrade's owed undos and its
// post_upgrade hooks have run.
func (s *stepper) end(st State) {
	if st == StateCompleted {
		s.keepHandedOver()
	}
	s.u.Ending = st
	s.u.Pausing = false
}

func (s *stepper) pausedWait() {
	why := "by the operator"
	if s.u.Reason != "" {
		why = "on a failure: " + s.u.Reason
	}
	if !s.u.NoReturn.IsZero() && !s.u.RollingBack() {
		s.wait("paused %s; 'ferry upgrade resume' goes on ('ferry upgrade abort' is refused: past the point of no return, %s)", why, s.u.NoReturn)
		return
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
		// What is in flight is cancelled: the rollback takes each
		// member from wherever it is.
		for _, n := range sortedNames(u.Members) {
			if m := u.Members[n]; m.Acting != 0 {
				s.cancel = append(s.cancel, m.Acting)
			}
		}
		s.cancel = append(s.cancel, s.batchStepsActing()...)
		if f := u.Ferry; f != nil && f.Acting != 0 {
			s.cancel = append(s.cancel, f.Acting)
		}
		s.rollback("aborted by the operator")
	case IntentFinalize:
		if u.State == StateAwaitingFinalize {
			s.enterStage(StateFinalizing)
		}
	}
}

// NoAbort says why upgrade u may no longer be aborted (rolled back),
// or "" if it may. The point of no return (finalize, or the flow's
// stage marked so) comes with data migrations; until it is reached, an
// upgrade may always be aborted.
func NoAbort(u *Upgrade) string {
	switch {
	case u.State.Terminal() || !u.Ending.IsZero():
		return fmt.Sprintf("upgrade %s has ended (%s)", u.ID, orState(u.Ending, u.State))
	case u.RollingBack():
		return fmt.Sprintf("upgrade %s is already rolling back", u.ID)
	case !u.Finalized.IsZero() && u.NoReturnHost != "":
		return fmt.Sprintf("upgrade %s passed its point of no return, host %s's lock in stage %s at %s: members of %s could not read what %s may now write, so there is no going back (a failure pauses; fix it and 'ferry upgrade resume')",
			u.ID, u.NoReturnHost, u.NoReturn, u.Finalized.UTC().Format(time.RFC3339), u.From, u.To)
	case !u.Finalized.IsZero() && !u.NoReturn.IsZero():
		return fmt.Sprintf("upgrade %s passed its point of no return, stage %s, which began at %s: members of %s could not read what %s may now write, so there is no going back (a failure pauses; fix it and 'ferry upgrade resume')",
			u.ID, u.NoReturn, u.Finalized.UTC().Format(time.RFC3339), u.From, u.To)
	case !u.Finalized.IsZero():
		return fmt.Sprintf("upgrade %s passed its point of no return: it was finalized at %s, so the cluster's compatibility version is %s and members of %s could not read what %s now writes",
			u.ID, u.Finalized.UTC().Format(time.RFC3339), u.To, u.From, u.To)
	}
	return ""
}

func orState(a, b State) State {
	if !a.IsZero() {
		return a
	}
	return b
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

// resume returns a paused upgrade to where it was. Members that failed
// are tried again from their start, undos that failed are tried again,
// and every deadline counts anew from now (StarlingX's resume: the
// state is reset from what runs).
func (s *stepper) resume() {
	u := &s.u
	u.State = u.ResumeTo
	if u.State.IsZero() || u.State == StatePaused {
		u.State = StateStarted
	}
	u.ResumeTo = State{}
	u.Resumed = s.now
	if !u.RollingBack() {
		u.Reason = ""
	}
	u.GateSince, u.WaitSince, u.WaitRefused = time.Time{}, time.Time{}, false
	u.Stage.Since, u.Stage.LastTry = time.Time{}, time.Time{}
	if u.Hook != nil {
		u.Hook.Since, u.Hook.Tries = s.now, 0
	}
	for i := range u.Effects {
		if u.Effects[i].State == effect.StateFailed {
			e := &u.journal()[i]
			e.State, e.Undoing, e.Tries, e.Error = effect.StateOpen, time.Time{}, 0, ""
		}
	}
	s.resumeHosts()
	for _, n := range sortedNames(u.Members) {
		switch m := u.Members[n]; {
		case m.Step == StepFailed:
			m = s.edit(n)
			s.resetMove(m)
			m.Detail = "tried again after resume"
			s.setStep(m, StepPending)
		case m.Step.InFlight():
			s.edit(n).Began = s.now
		}
	}
}

// pauseIfQuiet pauses an upgrade asked to pause once no member is in
// flight: the step in flight finishes first.
func (s *stepper) pauseIfQuiet() {
	u := &s.u
	if !u.Pausing || u.State.Terminal() || u.State == StatePaused || !u.Ending.IsZero() {
		return
	}
	for _, m := range u.Members {
		if m.Step.InFlight() {
			return
		}
	}
	for _, seq := range s.batchStepsActing() {
		if s.inFlight(seq) {
			return // a switchover's call returns first
		}
	}
	if s.hostInFlight() {
		return // a locked host's members are moved first
	}
	if f := u.Ferry; f != nil && s.inFlight(f.Acting) {
		return // an agent is re-executing: its turn ends first
	}
	s.pause("")
}

func (s *stepper) run() {
	// Each pass may move the record forward by a state; loop while it
	// does and no action is due, so one Step reaches the next action.
	for range 64 {
		before := s.mark()
		s.once()
		if len(s.actions) > 0 || s.u.State.Terminal() || s.u.State == StatePaused || len(s.waiting) > 0 || s.failed {
			return
		}
		after := s.mark()
		if after == before {
			return
		}
		if (s.u.State.Kind == KindUpgraded || s.u.State.Kind == KindRolledOut) && before.state != s.u.State {
			// A component done is a milestone worth a record of its
			// own (Rook's upgraded-COMPONENT): stop here, go on next.
			s.wake(s.now)
			return
		}
		if s.obs.Judging && after.ended > before.ended && !s.u.RollingBack() {
			// A batch ended: the engine judges it before the next
			// is sized from it.
			s.wake(s.now)
			return
		}
	}
}

// progress is what a pass of the machine may move.
type progress struct {
	state, ending State
	phase         int
	batches       int
	ended         int
	hooks         HookProgress
	upgradeHooks  HookProgress
	stageDone     bool
}

func (s *stepper) mark() progress {
	u := &s.u
	ended := 0
	for _, b := range u.Batches {
		if !b.Ended.IsZero() {
			ended++
		}
	}
	return progress{u.State, u.Ending, u.Phase, len(u.Batches), ended, u.PhaseHooks, u.UpgradeHooks, u.Stage.Done}
}

func (s *stepper) once() {
	u := &s.u
	s.intent()
	if u.State.Terminal() {
		return
	}
	s.abandon()
	if s.refused() {
		return
	}
	if s.outage() {
		return
	}
	defer s.sweep()
	if u.State == StatePaused {
		s.pausedWait()
		return
	}
	if !u.Ending.IsZero() {
		s.ending()
		return
	}
	defer s.pauseIfQuiet()
	switch u.State.Kind {
	case KindRollingBack, KindUpgrading, KindRollingOut:
		s.phase()
	case KindStarted:
		u.State = StatePreflight
	case KindPreflight:
		if !s.ferryFirst() {
			return
		}
		if !s.preflight() {
			return
		}
		if !u.UpgradeHooks.Opened {
			if !s.hooks("pre_upgrade", "", s.maxGateDeadline()) {
				return
			}
			u.UpgradeHooks.Opened = true
		}
		s.next()
	case KindExpanding, KindMigrating, KindFinalizing, KindContracting:
		s.stage(u.State)
	case KindAwaitingFinalize:
		s.wait("every member runs %s, pinned to %s; 'ferry upgrade finalize' passes the point of no return, 'ferry upgrade abort' rolls back", u.To, u.Pin)
	case KindUpgraded, KindRolledOut:
		s.next()
	default:
		if _, ok := stageKindOf(u.State.Kind); ok {
			s.stage(u.State) // a registered kind's stage: its calls, then its gate
		}
	}
}

// ending reaches the terminal state u.Ending: every owed undo first
// (the sweep runs them), then the post_upgrade hooks.
func (s *stepper) ending() {
	u := &s.u
	if owed := s.owedEffects(); owed != "" {
		s.wait("ending %s once its undos are done: %s", u.Ending, owed)
		return
	}
	if !s.pruneBackups() {
		return
	}
	if !u.UpgradeHooks.Closed {
		if !s.hooks("post_upgrade", "", s.maxGateDeadline()) && !s.failed {
			return
		}
		u.UpgradeHooks.Closed = true
	}
	u.State, u.Ending = u.Ending, State{}
	u.Hook = nil
}

// outage holds the upgrade while the substrate does not answer for
// some member: nothing is admitted, no deadline runs, nothing is
// acted on; a member whose substrate is away has not failed. When it
// answers again every deadline moves by the time it was away.
func (s *stepper) outage() bool {
	u := &s.u
	var away []string
	reinstalling := s.reinstallingMembers()
	if sum := s.obs.summary; sum != nil {
		for _, n := range sum.unknown {
			if u.Members[n] != nil && !reinstalling[n] {
				away = append(away, n)
			}
		}
	} else {
		away = namesWhere(u.Members, func(n string, _ *Member) bool { return s.obs.Members[n].Unknown && !reinstalling[n] })
	}
	if len(away) > 0 {
		detail := s.obs.Members[away[0]].Detail
		if u.Outage == nil {
			u.Outage = &Outage{Since: s.now, Detail: detail}
		}
		s.wait("the substrate does not answer for %s since %s (%s): holding, no member is admitted and no deadline runs until it answers",
			names(away), u.Outage.Since.UTC().Format(time.RFC3339), detail)
		return true
	}
	if u.Outage != nil {
		d := s.now.Sub(u.Outage.Since)
		s.shift(d)
		s.notes = append(s.notes, fmt.Sprintf("the substrate answers again after %s: every deadline moved by as much", d.Round(time.Millisecond)))
		u.Outage = nil
	}
	return false
}

// refused stops the upgrade when the substrate is refused (a host's
// key is not the one ferry trusts): unlike an outage it is not waited
// out (the answer would never be trusted), and unlike a member's
// failure nothing is rolled back (a rollback goes through the same
// substrate). The upgrade pauses with the reason, naming the host and
// both keys; a resume with the cause still there pauses again. Before
// the first member's turn it fails, nothing touched.
func (s *stepper) refused() bool {
	u := &s.u
	why := s.obs.Refused
	if why == "" || !u.Ending.IsZero() {
		return false
	}
	reason := "stopped: " + why
	switch {
	case u.State == StatePaused:
		if u.Reason != reason {
			u.Reason = reason
		}
		s.pausedWait()
	case u.State == StatePreflight || u.State == StateStarted:
		s.failBy("pause", reason)
	default:
		s.pause(reason)
	}
	return true
}

// away accounts for the time ferry itself could not check: from the
// record's last step (Alive) to the start of the watch that observed
// (a new process after a kill, or the same one back from a stall), no
// engine watched, so every running deadline moves by as much, as for
// an outage of the substrate. No verdict on a member is made until it
// is checked again (see unchecked).
func (s *stepper) away() {
	u := &s.u
	if since := s.obs.Since; !since.IsZero() && !u.Alive.IsZero() && u.Alive.Before(since) && !u.State.Terminal() {
		d := since.Sub(u.Alive)
		s.shift(d)
		if u.Outage != nil {
			// The outage's own shift, when it ends, counts from here.
			u.Outage.Since = u.Outage.Since.Add(d)
		}
		s.notes = append(s.notes, fmt.Sprintf("ferry could not check for %s (from %s): every deadline moved by as much; each member in flight is checked again before any verdict on it",
			d.Round(time.Millisecond), u.Alive.UTC().Format(time.RFC3339)))
	}
	u.Alive = s.now
}

// unchecked reports whether what was observed of a member predates the
// watch that observed it (ferry was away): no verdict is made on it.
func (s *stepper) unchecked(o MemberHealth) bool {
	return unchecked(s.obs.Since, o)
}

// unchecked reports whether member o was checked before since, when
// the watch that observed it began.
func unchecked(since time.Time, o MemberHealth) bool {
	return !since.IsZero() && !o.Unknown && o.Checked.Before(since)
}

// checkedBefore names the members (some of them) not checked since the
// watch began; "" if none.
func (s *stepper) checkedBefore() string {
	if sum := s.obs.summary; sum != nil {
		return names(sum.unchecked)
	}
	return names(namesWhere(s.obs.Members, func(_ string, o MemberHealth) bool { return s.unchecked(o) }))
}

// shift moves every running deadline by d (an outage's length).
func (s *stepper) shift(d time.Duration) {
	u := &s.u
	move := func(t *time.Time) {
		if !t.IsZero() {
			*t = t.Add(d)
		}
	}
	move(&u.GateSince)
	move(&u.WaitSince)
	move(&u.Stage.Since)
	if u.Hook != nil {
		move(&u.Hook.Since)
	}
	for i := range u.Effects {
		if !u.Effects[i].Undoing.IsZero() {
			move(&u.journal()[i].Undoing)
		}
	}
	for n, m := range u.Members {
		if m.Step.InFlight() && !m.Began.IsZero() {
			move(&s.edit(n).Began)
		}
	}
}

// preflight passes when every planned member runs healthy and every
// cluster gate is green: ferry does not start on a sick cluster.
func (s *stepper) preflight() bool {
	var sick []string
	for _, name := range namesWhere(s.u.Members, func(n string, _ *Member) bool { return !s.obs.Members[n].Healthy }) {
		sick = append(sick, fmt.Sprintf("%s not healthy (%s)", name, cmp.Or(s.obs.Members[name].Detail, "-")))
	}
	if gate := s.redGates(time.Time{}); gate != "" {
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

// redGates describes every cluster gate that is red, or not checked
// since after (when after is set; those are asked to be checked now),
// or "".
func (s *stepper) redGates(after time.Time) string {
	var red []string
	for _, n := range sortedNames(s.obs.Gates) {
		g := s.obs.Gates[n]
		switch {
		case g.Checked.IsZero():
			s.probe[n] = true
			red = append(red, fmt.Sprintf("cluster gate %s not checked yet", n))
		case !after.IsZero() && g.Checked.Before(after):
			s.probe[n] = true
			red = append(red, fmt.Sprintf("cluster gate %s not checked since the last batch", n))
		case !g.Healthy:
			red = append(red, fmt.Sprintf("cluster gate %s red (%s)", n, cmp.Or(g.Detail, "-")))
		}
	}
	return strings.Join(red, ", ")
}

func (s *stepper) maxGateDeadline() time.Duration {
	var d time.Duration
	for i := range s.c.Components {
		d = max(d, s.c.Components[i].GateDeadline.D())
	}
	if d == 0 {
		d = time.Minute
	}
	return d
}

// namesWhere returns the names in m whose entry keep keeps, in order:
// the machine looks at every member at each pass, and sorts the few it
// names.
func namesWhere[V any](m map[string]V, keep func(string, V) bool) []string {
	var out []string
	for n, v := range m {
		if keep(n, v) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Impacted records that batch i of record u was judged to have hurt
// the clients (why): the batch counts as strained, so that the adaptive
// canary halves the next one instead of doubling it. Policy on_impact
// then acts on it: with pause or rollback the upgrade fails as a failed
// step would under that policy and stop is true (the decision's actions
// are to be dropped); with continue the upgrade goes on.
func Impacted(c *config.Cluster, u Upgrade, i int, why string, now time.Time) (_ Upgrade, stop bool) {
	s := stepper{c: c, u: u.clone(), now: now, probe: map[string]bool{}}
	if i >= 0 && i < len(s.u.Batches) {
		o := &s.u.Batches[i].Outcome
		strain := "it hurt the clients (" + why + ")"
		if o.Strained && o.Why != "" {
			strain = o.Why + ", " + strain
		}
		o.Strained, o.Clean, o.Why = true, false, strain
	}
	p := c.Policy.OnImpact
	if p != "pause" && p != "rollback" || u.RollingBack() || u.State.Terminal() || !u.Ending.IsZero() {
		return s.u, false
	}
	s.failBy(p, "impact: "+why)
	s.u.Waiting = strings.Join(append(s.notes, s.waiting...), "; ")
	s.u.Updated = now
	return s.u, true
}

// clone is the next record made from u, for the machine to change:
// its own lists of batches, overrides and refusals, hook run and
// outage; the plans, each batch's members, the members' records and
// the journal shared with u (a batch's members and a plan are never
// changed in place; a member is copied before it changes: stepper.edit,
// own; the journal likewise: journal).
func (u Upgrade) clone() Upgrade {
	c := u
	c.from, c.changed = nil, nil
	c.Batches = append([]Batch(nil), u.Batches...)
	for i := range c.Batches {
		// Their members and hosts shared, cut to their length: a batch
		// that grows (a hosts stage's, as hosts join it) appends to new
		// arrays. Its steps' progress is its own.
		bt := &c.Batches[i]
		bt.Members, bt.Hosts = bt.Members[:len(bt.Members):len(bt.Members)], bt.Hosts[:len(bt.Hosts):len(bt.Hosts)]
		bt.Before = append([]BatchStep(nil), bt.Before...)
	}
	if u.Hosts != nil {
		c.Hosts = make(map[string]*HostMove, len(u.Hosts))
		for k, v := range u.Hosts {
			h := *v
			c.Hosts[k] = &h
		}
	}
	// Cut to its length: an effect opened goes to a new array.
	c.Effects, c.ownJournal = u.Effects[:len(u.Effects):len(u.Effects)], false
	c.Overrides = append([]Override(nil), u.Overrides...)
	c.Refusals = append([]strategy.Refusal(nil), u.Refusals...)
	if u.Hook != nil {
		h := *u.Hook
		c.Hook = &h
	}
	if u.Outage != nil {
		o := *u.Outage
		c.Outage = &o
	}
	if u.Held != nil {
		h := *u.Held
		c.Held = &h
	}
	if u.Ferry != nil {
		f := *u.Ferry
		c.Ferry = &f
	}
	return c
}

// Clone returns a deep copy, for callers that keep records around.
func (u Upgrade) Clone() Upgrade {
	c := u.clone()
	c.Members = make(map[string]*Member, len(u.Members))
	for k, v := range u.Members {
		m := *v
		c.Members[k] = &m
	}
	for i := range c.Batches {
		c.Batches[i].Members = append([]string(nil), c.Batches[i].Members...)
		c.Batches[i].Hosts = append([]string(nil), c.Batches[i].Hosts...)
	}
	c.journal()
	return c
}

// journal returns u's effects to change in place: copied the first
// time, as a clone shares its journal with the record it was made from.
func (u *Upgrade) journal() effect.Journal {
	if !u.ownJournal {
		u.Effects, u.ownJournal = slices.Clone(u.Effects), true
	}
	return u.Effects
}

// own gives record u (a clone) its own copy of member n to change, and
// of the members map the first time: the record it was cloned from
// keeps its own. Each member is to be owned once (stepper.edit).
func (u *Upgrade) own(n string) *Member {
	if u.from == nil {
		u.from = u.Members
		u.Members = maps.Clone(u.Members)
	}
	c := *u.Members[n]
	u.Members[n] = &c
	u.changed = append(u.changed, n)
	return &c
}

// ownOnce is own for a record that may own member n already (an
// outcome folded with others, FinishedAll): the copy it has then.
func (u *Upgrade) ownOnce(n string) *Member {
	if u.from != nil && u.Members[n] != u.from[n] {
		return u.Members[n]
	}
	return u.own(n)
}

// names lists member names, the first few of them when there are many.
func names(ns []string) string {
	const most = 5
	if len(ns) <= most {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:most], ", "), len(ns)-most)
}

func itoa(i int) string { return strconv.Itoa(i) }
