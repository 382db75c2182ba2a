package upgrade

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// phase advances the current phase of the active plan: its pre_phase
// hooks, the batch in progress, the next batch (formed now, from what
// is observed), and at its end the gate, the phase's undos and its
// post_phase hooks.
//
// While rolling back, no gate is asked before a batch (the red gate may
// be the very thing the rollback repairs); the gate after each phase is
// kept, so that rolled-back means healthy.
func (s *stepper) phase() {
	u := &s.u
	active := u.Active()
	if u.Phase >= len(active.Phases) {
		if u.RollingBack() {
			s.end(StateRolledBack)
		} else {
			s.next()
		}
		return
	}
	ph := active.Phases[u.Phase]
	if ph.Hosts != nil {
		s.hostPhase(ph)
		return
	}
	comp := s.c.Component(ph.Component)
	if comp == nil {
		s.fail("component %q of the plan is not in the description", ph.Component)
		return
	}
	if !u.PhaseHooks.Opened {
		if !s.hooks("pre_phase", comp.Name, comp.GateDeadline.D()) {
			return
		}
		u.PhaseHooks.Opened = true
	}
	if b := u.Current(); b != nil {
		s.runBatch(comp, ph, b)
		return
	}
	if !u.PhaseHooks.Closing {
		pending := s.pendingOf(ph)
		if len(pending) > 0 {
			s.formBatch(comp, ph, pending)
			return
		}
		if red := s.redGates(u.Boundary); red != "" {
			s.gateWait("after "+comp.Name, comp.GateDeadline.D(), red)
			return
		}
		u.GateSince = time.Time{}
		s.addGateBound()
		u.PhaseHooks.Closing = true
	}
	// The phase's end: its undos (the sweep runs them), then its
	// post_phase hooks.
	if owed := s.owedIn(effect.Is(effect.Phase(comp.Name))); owed != "" {
		s.wait("%s: undoing: %s", comp.Name, owed)
		return
	}
	if !u.PhaseHooks.Closed {
		if !s.hooks("post_phase", comp.Name, comp.GateDeadline.D()) {
			return
		}
		u.PhaseHooks.Closed = true
	}
	if u.RollingBack() {
		u.Phase++
		u.PhaseHooks = HookProgress{}
		u.Boundary = s.now
		return
	}
	if ph.Rollout {
		u.State = RolledOut(comp.Name)
		return
	}
	u.State = Upgraded(ph.Name())
}

// pendingOf lists the members of phase ph that still have to move, in
// the plan's order.
func (s *stepper) pendingOf(ph plan.Phase) []string {
	var out []string
	for _, n := range ph.Members() {
		if m := s.u.Members[n]; m != nil && m.Step == StepPending {
			out = append(out, n)
		}
	}
	return out
}

// formBatch forms the phase's next batch: the strategy chooses its
// members from what is observed now (a rollback follows its plan's
// batches), asking the admission predicates as it goes, and each
// chosen member must pass every predicate again; the refused are named
// with their predicate.
func (s *stepper) formBatch(comp *config.Component, ph plan.Phase, pending []string) {
	u := &s.u
	// Members already running their target, healthy and owing no
	// undo, are done without a move (after a crash, or adopted); not
	// those a rollout restarts on the release they run.
	var left []string
	for _, n := range pending {
		m, o := u.Members[n], s.obs.Members[n]
		if o.Running && o.Version == m.Target && o.Healthy && s.owedCount(n) == 0 && !m.Restart {
			m = s.edit(n)
			s.setStep(m, StepDone)
			m.Detail = "already running " + m.Target
			continue
		}
		left = append(left, n)
	}
	const next = "starting the next batch"
	if len(left) == 0 || s.pausing(comp.Name, next) || s.outsideWindow(comp.Name, next) || s.handBackFirst(comp, left) || !s.mayForm(comp.Name, next, comp.GateDeadline.D()) {
		return
	}

	// Admission is the machine's: it keeps every refusal, whoever
	// asked, and checks each chosen member again.
	v := s.view(comp, ph, false)
	var refused []strategy.Refusal
	refuse := func(r strategy.Refusal) {
		if !slices.Contains(refused, r) {
			refused = append(refused, r)
		}
	}
	// The system is asked about at most a batch's worth of candidates
	// at once (ok_to_stop): a strategy walking a long list does not
	// turn into a call per member.
	var asking []string
	askCap := max(1, ph.Settings.MaxBatch)
	check := func(n string) *strategy.Refusal {
		// Past the cap, ok_to_stop's refusal is neither asked about
		// nor kept: the system is asked of it once others answer.
		mayAsk := len(asking) < askCap || slices.Contains(asking, n)
		r, awaiting := s.admit(v, n, mayAsk)
		switch {
		case r == nil:
		case awaiting:
			if !slices.Contains(asking, n) {
				asking = append(asking, n)
			}
		case mayAsk || r.Predicate != strategy.PredOKToStop:
			refuse(*r)
		}
		return r
	}
	// v.Admitted holds the names in inView: a strategy that grows its
	// choice one member at a time (strategy.Take) has the next ones
	// added, not the whole set made again for each candidate. passed
	// holds, for each candidate admitted, the choice it was admitted
	// beside.
	var inView []string
	passed := map[string][]string{}
	admit := func(c strategy.Member, chosen []string) *strategy.Refusal {
		if len(chosen) < len(inView) || !slices.Equal(chosen[:len(inView)], inView) {
			v.ResetAdmitted()
			inView = nil
		}
		for _, n := range chosen[len(inView):] {
			v.Admit(n)
		}
		inView = append(inView, chosen[len(inView):]...) // only appended: a prefix kept in passed stays as it was
		r := check(c.Name)
		if r == nil {
			passed[c.Name] = inView
		}
		return r
	}
	size, why, chosen, before, err := s.nextBatch(ph, left, v, admit)
	if err != "" {
		s.fail("%s", err)
		return
	}
	v.ResetAdmitted()
	var admitted []string
	for _, n := range chosen {
		if v.Admitted[n] || !slices.Contains(left, n) {
			continue // a strategy's slip: only a candidate, once
		}
		// Checked again, unless admitted already beside the very
		// members admitted before it here (the same question).
		if p, ok := passed[n]; !ok || !slices.Equal(p, admitted) {
			if r := check(n); r != nil {
				continue
			}
		}
		admitted = append(admitted, n)
		v.Admit(n)
	}
	if len(asking) > 0 && len(admitted) < size {
		// The system's answers are on their way (each within its
		// call's timeout): the batch is formed with them. Asking is
		// no refusal, and no wait yet.
		s.wait("%s: asking the system whether %s may stop", comp.Name, strings.Join(asking, ", "))
		for _, r := range refused {
			if !slices.Contains(asking, r.Member) {
				s.refusals = append(s.refusals, r)
				s.wait("%s", r)
			}
		}
		return
	}
	if len(admitted) == 0 {
		if u.WaitSince.IsZero() {
			u.WaitSince = s.now
		}
		if len(refused) == 0 || slices.ContainsFunc(refused, func(r strategy.Refusal) bool { return r.Predicate != strategy.PredGate }) {
			u.WaitRefused = true
		}
		if gd := comp.GateDeadline.D(); s.now.Sub(u.WaitSince) > gd {
			s.fail("no member of %s could be taken down for %s: %s", comp.Name, gd, refusalText(refused))
			return
		}
		s.refusals = append(s.refusals, refused...)
		if len(refused) == 0 && why != "" {
			s.wait("%s: %s", comp.Name, why) // the strategy chose none, and says why
		} else {
			s.wait("%s", refusalText(refused))
		}
		s.wake(u.WaitSince.Add(comp.GateDeadline.D() + time.Millisecond))
		return
	}
	if !u.RollingBack() {
		s.addGateBound()
	}
	b := Batch{Phase: u.Phase, Component: comp.Name, Rollback: u.RollingBack(), Rollout: ph.Rollout && !u.RollingBack(), Number: len(u.PhaseBatches(u.Phase)) + 1,
		Members: admitted, Size: size, Why: why, Began: s.now, Waited: u.WaitRefused, Before: batchSteps(before)}
	u.WaitSince, u.WaitRefused = time.Time{}, false
	for _, n := range admitted {
		if len(b.Before) == 0 { // else admitted again once its steps are done
			s.begin(s.edit(n))
		}
	}
	u.Batches = append(u.Batches, b)
	s.runBatch(comp, ph, &u.Batches[len(u.Batches)-1])
}

// pausing reports whether a pause is asked for, and says phase name
// does not go on with what ("starting the next batch") meanwhile.
func (s *stepper) pausing(name, what string) bool {
	if s.u.Pausing {
		s.wait("%s: not %s: pausing", name, what)
	}
	return s.u.Pausing
}

// mayForm reports whether phase name's next batch may be formed now
// (what: "starting the next batch"), and says why not: not on what was
// checked before ferry's watch or seen before a resume, nor before the
// gates were checked after the last batch ended (a green from before
// says nothing of what the batch did; no gate is asked while rolling
// back), which fails the step after gd.
func (s *stepper) mayForm(name, what string, gd time.Duration) bool {
	u := &s.u
	if stale := s.checkedBefore(); stale != "" {
		s.wait("%s: not %s before %s is checked again (ferry could not watch)", name, what, stale)
		return false
	}
	if stale := s.seenBefore(u.Resumed); stale != "" {
		s.wait("%s: not %s on what was seen before the resume: waiting for %s to be observed again", name, what, stale)
		return false
	}
	if u.RollingBack() {
		return true
	}
	if stale := s.staleGates(); len(stale) > 0 {
		if u.GateSince.IsZero() {
			u.GateSince = s.now
		}
		if s.now.Sub(u.GateSince) > gd {
			s.fail("before %s batch %d: cluster gate %s not checked for %s", name, len(u.PhaseBatches(u.Phase))+1, strings.Join(stale, ", "), gd)
			return false
		}
		s.wait("%s: waiting for a check of cluster gate %s made after the last batch", name, strings.Join(stale, ", "))
		return false
	}
	u.GateSince = time.Time{}
	return true
}

// seenBefore names the members (some of them) last asked about before
// t, whose state is then too old to admit anyone on; "" if none. A
// member the substrate cannot tell about is the outage's business.
func (s *stepper) seenBefore(t time.Time) string {
	if sum := s.obs.summary; t.IsZero() || sum != nil && !sum.oldestSeen.Before(t) {
		return ""
	}
	stale := namesWhere(s.obs.Members, func(_ string, o MemberHealth) bool { return !o.Unknown && o.Seen.Before(t) })
	if len(stale) > 3 {
		stale = append(stale[:3], fmt.Sprintf("%d more", len(stale)-3))
	}
	return strings.Join(stale, ", ")
}

// nextBatch is the next batch's members (each asked of admit), the
// size meant and why: the rollback's next batch while rolling back (the
// machine's business: it returns what was done), else what the phase's
// strategy chooses from the candidates left (in the plan's order) and
// the batches done. err says why no strategy could be asked.
func (s *stepper) nextBatch(ph plan.Phase, left []string, v *strategy.View, admit strategy.Admission) (size int, why string, chosen, before []string, err string) {
	u := &s.u
	members := func(ns []string) []strategy.Member {
		out := make([]strategy.Member, len(ns))
		for i, n := range ns {
			out[i] = s.admissionMember(v, n)
		}
		return out
	}
	if u.RollingBack() {
		if todo := rollbackNext(ph, left, plan.Batch.MemberNames); len(todo) > 0 {
			return len(todo), "the rollback returns the batches in reverse", strategy.Take(members(todo), len(todo), admit), nil, ""
		}
		return 1, "", strategy.Take(members(left), 1, admit), nil, ""
	}
	name := strategyOf(ph)
	st, ok := strategy.Lookup(name)
	if !ok {
		return 0, "", nil, nil, fmt.Sprintf("component %s: strategy %q is not in this build (known: %s)", ph.Component, name, strings.Join(strategy.Names(), ", "))
	}
	r := strategy.Round{Settings: ph.Settings, Candidates: members(left), Admit: admit}
	for _, b := range u.PhaseBatches(u.Phase) {
		r.Done = append(r.Done, strategy.Done{Members: members(b.Members), Outcome: b.Outcome})
	}
	c := st.Next(r)
	return max(1, c.Size), c.Why, c.Members, c.Before, ""
}

// strategyOf names the strategy of phase ph: its settings', or, in a
// plan made without them, the phase's own name for it; never a default
// (Understood refuses a phase naming none).
func strategyOf(ph plan.Phase) string { return cmp.Or(ph.Settings.Type, ph.Strategy) }

// begin starts member m's move (s.edit's); a restart notes the
// process it replaces.
func (s *stepper) begin(m *Member) {
	s.resetMove(m)
	m.Began = s.now
	m.Detail = ""
	if m.Restart {
		o := s.obs.Members[m.Name]
		m.ReplacesPID, m.ReplacesStarted = o.PID, o.Started
	}
	s.setStep(m, step.First())
}

// resetMove clears what one move of m (s.edit's) recorded.
func (s *stepper) resetMove(m *Member) {
	m.Began, m.HealthySince, m.Started, m.LastExit, m.StartDone, m.Stopped = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	m.HealthyPID, m.HealthyStarted = 0, time.Time{}
	m.Exits, m.RestartsSeen, m.Retries, m.Busy = 0, 0, 0, 0
	m.SoakBroke, m.CrashLoop, m.ExitDetail, m.Refused = false, false, "", ""
}

// runBatch advances the members of batch b; once all are done the
// batch ends, with its outcome (what the strategy sizes the next one
// from) and its part of the lower bound.
func (s *stepper) runBatch(comp *config.Component, ph plan.Phase, b *Batch) {
	u := &s.u
	if !s.runBatchSteps(comp, b) {
		return
	}
	done := true
	// Members done are passed over (a batch of a thousand ends long
	// after most of it), from the steps the admission keeps: a member
	// the walk has not reached yet changed only if the step failed.
	a := s.admission(ph)
	pos := a.positions(b.Members)
	for i, n := range b.Members {
		p := pos[i]
		if p >= 0 && a.steps[p] == StepDone {
			continue
		}
		m := u.Members[n]
		if m == nil {
			s.fail("member %q of the plan has no record", n)
			return
		}
		if m.Step == StepPending {
			// Tried again after a resume: it is admitted anew.
			if u.State == StatePaused || u.Pausing {
				done = false
				continue
			}
			v := s.view(comp, ph, true)
			if r, awaiting := s.admit(v, n, true); r != nil {
				if awaiting {
					s.wait("%s: asking the system whether it may stop", n)
				} else {
					s.refusals = append(s.refusals, *r)
					s.wait("%s", r)
				}
				done = false
				continue
			}
			m = s.edit(n)
			s.begin(m)
		}
		if u.State != StatePaused {
			o := MemberHealth{}
			if p >= 0 {
				o = a.health[p]
			} else {
				o = s.obs.Members[n]
			}
			m = s.advance(comp, ph, m, o, p)
		}
		if s.failed {
			return
		}
		if m.Step != StepDone {
			done = false
		}
	}
	if !done {
		return
	}
	b.Ended = s.now
	b.Outcome = s.outcome(comp, b)
	for _, n := range b.Members {
		b.Bound = max(b.Bound, u.Members[n].Busy)
	}
	u.Bound.Batches += b.Bound
	u.Boundary = s.now
}

// outcome judges how batch b went, for the adaptive canary: clean when
// every member became healthy within half its deadline with no retry
// and the batch was admitted without a refusal (a wait on the gate
// alone, the cluster recovering from the batch before, is none);
// strained after a retry, a broken soak, or a member past three
// quarters of its deadline.
func (s *stepper) outcome(comp *config.Component, b *Batch) strategy.Outcome {
	o := strategy.Outcome{Size: len(b.Members), Clean: !b.Waited}
	deadline := comp.Deadline.D()
	var strain []string
	for _, n := range b.Members {
		m := s.u.Members[n]
		took := s.now.Sub(m.Began)
		ready := m.HealthySince.Sub(m.Began)
		switch {
		case m.Retries > 0:
			strain = append(strain, fmt.Sprintf("%s needed %d retr%s", n, m.Retries, plural(m.Retries, "y", "ies")))
		case m.SoakBroke:
			strain = append(strain, n+"'s soak broke")
		case deadline > 0 && took > deadline*3/4:
			strain = append(strain, fmt.Sprintf("%s took %s of its %s deadline", n, took.Round(time.Millisecond), deadline))
		}
		if m.Retries > 0 || m.SoakBroke || m.HealthySince.IsZero() || (deadline > 0 && ready > deadline/2) {
			o.Clean = false
		}
	}
	if len(strain) > 0 {
		o.Strained, o.Clean = true, false
		o.Why = strings.Join(strain, ", ")
	} else if !o.Clean && b.Waited {
		o.Why = "it waited for its admission"
	}
	return o
}

// staleGates lists the gates not checked since the last boundary, and
// asks for their check.
func (s *stepper) staleGates() []string {
	var out []string
	for _, n := range sortedNames(s.obs.Gates) {
		if s.obs.Gates[n].Checked.Before(s.u.Boundary) {
			out = append(out, n)
			s.probe[n] = true
		}
	}
	return out
}

// addGateBound adds the gates' first passing check at this boundary to
// the lower bound (they are checked together: the slowest counts).
func (s *stepper) addGateBound() {
	var took time.Duration
	for _, g := range s.obs.Gates {
		took = max(took, g.Took)
	}
	s.u.Bound.Gates += took
}

// view is what the admission predicates judge members of comp against.
// stopping: the check made again at the moment an admitted member goes
// down (budgets, quorum and substrate only).
func (s *stepper) view(comp *config.Component, ph plan.Phase, stopping bool) *strategy.View {
	u := &s.u
	v := &strategy.View{Component: comp.Name, Settings: ph.Settings, Quorum: ph.Quorum, Stopping: stopping,
		RollingBack: u.RollingBack(), AskSystem: comp.OKToStop != nil, Verify: VerifyAdmission}
	v.ResetAdmitted()
	if v.Settings.MaxUnavailable < 1 {
		v.Settings.MaxUnavailable = max(1, ph.MaxUnavailable)
	}
	if comp.Role != nil {
		v.RoleName = comp.Role.Name
	}
	// Every member, kept from step to step (admission.go): shared,
	// never changed by the predicates or the strategies.
	a := s.admission(ph)
	v.Members, v.Index, v.Tally = a.members, a.index, a.tally
	if v.AskSystem {
		v.Members = slices.Clone(v.Members)
		for i := range v.Members {
			if sm := &v.Members[i]; sm.Component == comp.Name {
				sm.System = s.systemAnswer(u.Members[sm.Name], sm.Name, stopping)
			}
		}
	}
	if r, ok := a.own[comp.Name]; ok {
		v.Own = v.Members[r[0]:r[1]:r[1]] // the component's own, apart
	}
	if !u.RollingBack() && !stopping {
		for _, n := range sortedNames(s.obs.Gates) {
			g := s.obs.Gates[n]
			v.Gates = append(v.Gates, strategy.Gate{Component: n, Healthy: g.Healthy, Fresh: !g.Checked.Before(u.Boundary), Detail: g.Detail})
		}
	}
	return v
}

func (s *stepper) admissionMember(v *strategy.View, name string) strategy.Member {
	if s.adm != nil {
		if i, ok := s.adm.index[name]; ok && i < len(v.Members) && v.Members[i].Name == name {
			return v.Members[i]
		}
	}
	for _, m := range v.Members {
		if m.Name == name {
			return m
		}
	}
	o := s.obs.Members[name]
	return strategy.Member{Name: name, Component: v.Component, Healthy: o.Healthy, Unknown: o.Unknown, Role: o.Role, Version: o.Version}
}

// overridden reports whether the operator switched predicate off for
// member (or for every member).
func (s *stepper) overridden(predicate, member string) bool {
	for _, o := range s.activeOverrides() {
		if o.Predicate != predicate || o.Member != "" && o.Member != member {
			continue
		}
		if o.Component != "" {
			if m := s.u.Members[member]; m == nil || m.Component != o.Component {
				continue // a host's name, or another component's member
			}
		}
		if o.Phase > 0 && (o.Phase != s.u.Phase+1 || o.PhaseRollback != s.u.RollingBack()) {
			continue
		}
		return true
	}
	return false
}

func refusalText(rs []strategy.Refusal) string {
	if len(rs) == 0 {
		return "no member may go down now"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}

// rollback begins returning every member touched so far to the version
// it ran before, through the same gated steps, in reverse order: the
// phases from the current one back to the first, the batches of each
// from the last back, the failed member first within its batch.
// Members never touched are left alone, and their record says so.
func (s *stepper) rollback(reason string) {
	u := &s.u
	// No phase at all when nothing was touched yet: an empty list, not
	// none (the API promises an array).
	rb := plan.Plan{From: []string{u.To}, To: u.From, Phases: []plan.Phase{}}
	last := min(u.Phase, len(u.Plan.Phases)-1)
	inRollback := map[string]bool{}
	// A member moved in a phase and again in a rollout is returned in
	// its phase's turn (the phases' reverse order: Ironic's APIs before
	// its conductors), and restarted even where it runs its From
	// already, for its pin goes back too.
	firstPhase, restart := map[string]int{}, map[string]bool{}
	for _, b := range u.Batches {
		if b.Rollback {
			continue
		}
		for _, n := range b.Members {
			if f, ok := firstPhase[n]; !ok || b.Phase < f {
				firstPhase[n] = b.Phase
			}
			if b.Phase < len(u.Plan.Phases) && u.Plan.Phases[b.Phase].Rollout {
				restart[n] = true
			}
		}
	}
	for i := last; i >= 0; i-- {
		ph := u.Plan.Phases[i]
		var batches []plan.Batch
		var formed []Batch
		for _, b := range u.Batches {
			if !b.Rollback && b.Phase == i {
				formed = append(formed, b)
			}
		}
		for j := len(formed) - 1; j >= 0; j-- {
			var first, rest []string
			for _, n := range formed[j].Members {
				// Every member of a batch formed was touched (a member
				// tried again after a resume may be pending again).
				m := u.Members[n]
				if m == nil || m.From == "" || inRollback[n] || firstPhase[n] != i {
					continue
				}
				inRollback[n] = true
				if m.Step == StepFailed {
					first = append(first, n)
				} else {
					rest = append(rest, n)
				}
			}
			if ms := append(first, rest...); len(ms) > 0 {
				batches = append(batches, plan.Batch{Members: ms, Hosts: formed[j].Hosts})
			}
		}
		if len(batches) > 0 {
			rph := ph
			rph.Batches, rph.Skipped, rph.Rollout = batches, nil, false
			rph.Note = "rollback to " + u.From
			rb.Phases = append(rb.Phases, rph)
		}
	}
	for _, n := range sortedNames(u.Members) {
		m := u.Members[n]
		switch {
		case inRollback[n]:
			// Its move's record stays until the rollback admits it (how
			// it failed: a crash loop's exits, for the events); begin
			// resets it then.
			m = s.edit(n)
			m.Target = m.From
			m.Detail = ""
			m.Restart = restart[n]
			// An action in flight (cancelled) stays Acting until it
			// returns: nothing else is done to the member meanwhile.
			s.setStep(m, StepPending)
		}
	}
	s.untouched("the upgrade rolled back before its turn", inRollback)
	s.rollbackHosts(rb)
	if b := u.Current(); b != nil {
		b.Ended = s.now
	}
	u.Rollback = &rb
	if u.Finalized.IsZero() {
		u.Pin = u.From // a rollout's pin goes back with the members
	}
	u.Phase = 0
	u.PhaseHooks = HookProgress{}
	u.Hook = nil
	u.Boundary = s.now
	u.GateSince, u.WaitSince, u.WaitRefused = time.Time{}, time.Time{}, false
	u.Pausing = false
	u.ResumeTo = State{}
	u.Reason = reason
	u.State = StateRollingBack
}

// untouched marks every member still pending as left alone: it keeps
// what it runs, and its record says so (no target it will never get).
func (s *stepper) untouched(why string, except map[string]bool) {
	for _, n := range sortedNames(s.u.Members) {
		if m := s.u.Members[n]; m.Step == StepPending && !except[n] {
			m = s.edit(n)
			m.Target = m.From
			m.Detail = "untouched: " + why
			s.setStep(m, StepDone)
		}
	}
}

// stillToRollBack reports whether member n is still to be moved by the
// rollback.
func (s *stepper) stillToRollBack(n string) bool {
	u := &s.u
	if !u.RollingBack() {
		return false
	}
	m := u.Members[n]
	if m == nil || m.Step != StepPending {
		return false
	}
	for i := u.Phase; i < len(u.Rollback.Phases); i++ {
		if slices.Contains(u.Rollback.Phases[i].Members(), n) {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// rollbackNext is the rollback's next batch, in its order (ph's batches
// as the rollback plans them): of the first batch with something still
// to move, the members or hosts (of) that are in left.
func rollbackNext(ph plan.Phase, left []string, of func(plan.Batch) []string) []string {
	for _, b := range ph.Batches {
		var todo []string
		for _, n := range of(b) {
			if slices.Contains(left, n) {
				todo = append(todo, n)
			}
		}
		if len(todo) > 0 {
			return todo
		}
	}
	return nil
}
