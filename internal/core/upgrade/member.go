package upgrade

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/step"
)

// advance moves member m (its record as it stands; o, what was
// observed of it; p, its position in the admission, or -1) through its
// move (package step) as far as it can go
// without acting, emits the action it needs next, if any, and returns
// its record as it then stands. The
// machine knows no step by name: each step's Def says what to do, when
// it is over, and what ends it badly. The member's record is copied
// (edit) only once something of it changes; m is kept the record as it
// stands (it runs for every member of a batch at each step).
func (s *stepper) advance(comp *config.Component, ph plan.Phase, m *Member, o MemberHealth, p int) *Member {
	n := m.Name
	m = s.countExits(comp, m, o)
	for range 2 * len(step.Move) {
		def, _, ok := step.Of(m.Step)
		if !ok {
			return m // pending, done, failed
		}
		if s.unchecked(o) {
			// Ferry could not watch: the member is checked again before
			// any verdict on it (its deadline moved meanwhile).
			s.wait("%s: to be checked again (ferry could not watch it)", m.Name)
			return m
		}
		owed := s.owedCount(n)
		if !(def.Closes && owed > 0) && s.now.Sub(m.Began) > comp.Deadline.D() {
			reason := s.deadlineReason(comp, m, def, o)
			m = s.edit(n)
			s.failMember(m, reason)
			return m
		}
		f := s.facts(comp, m, o, owed)
		if f.Refused != "" {
			m = s.edit(n)
			s.failMember(m, f.Refused)
			return m
		}
		if def.Fail != nil {
			if why := def.Fail(f); why != "" {
				m = s.edit(n)
				m.CrashLoop = true
				s.failMember(m, fmt.Sprintf("%s on %s", why, m.Target))
				return m
			}
		}
		if def.Back != nil {
			if back, why := def.Back(f); back != "" {
				m = s.edit(n)
				m.Detail = why + cmp.Or(o.Detail, "-")
				m.HealthySince = time.Time{}
				m.SoakBroke = true
				s.setStep(m, back)
				continue
			}
		}
		if def.Closes && owed > 0 {
			// Its effects are undone first (the sweep does it).
			s.wait("%s: undoing %s", m.Name, s.owedText(s.owedOf(n)))
			return m
		}
		if m.Acting != 0 {
			if s.inFlight(m.Acting) {
				// A step is left only once its action has returned, never
				// on what is seen meanwhile: a pre_stop hook that makes a
				// leader step down makes it unready, which is not its stop.
				if def.Action == step.ActStart {
					s.waitHealthy(m, o, p)
				}
				return m
			}
			m = s.edit(n)
			m.Acting = 0 // lost with a process: taken again, at once
		}
		if (def.Skip != nil && def.Skip(f)) || (def.Complete != nil && def.Complete(f)) {
			m = s.edit(n)
			s.leave(comp, m, o)
			continue
		}
		if def.Action == "" {
			why, at := "", time.Time{}
			if def.Wait != nil {
				why, at = def.Wait(f)
			}
			if why != "" {
				s.waiting = append(s.waiting, m.Name+": "+why)
			}
			if !at.IsZero() {
				s.wake(at)
			}
			return m
		}
		needs := !f.Acted
		if def.Needs != nil {
			needs = def.Needs(f)
		}
		if !needs {
			if def.Action == step.ActStart {
				s.waitHealthy(m, o, p)
				s.wake(m.Began.Add(comp.Deadline.D() + time.Millisecond))
			}
			return m
		}
		if def.Admit {
			v := s.view(comp, ph, true)
			if r, awaiting := s.admit(v, m.Name, true); r != nil {
				if awaiting {
					s.wait("%s: drained, asking the system whether it may stop", m.Name)
					return m
				}
				s.refusals = append(s.refusals, *r)
				s.wait("%s: drained, not stopped: %s", m.Name, r)
				return m
			}
		}
		s.try(comp, n, def)
		return s.u.Members[n]
	}
	return m
}

// waitHealthy says that m waits to be healthy on its target: a line
// said for each member starting at each step (a thousand of them in a
// large batch), put together without fmt, and kept by the admission
// for the member at p (what it says changes with the observation, and
// with the member's target).
func (s *stepper) waitHealthy(m *Member, o MemberHealth, p int) {
	a := s.adm
	if a == nil || p < 0 {
		s.waiting = append(s.waiting, m.Name+": waiting to be healthy on "+m.Target+" ("+cmp.Or(o.Detail, "-")+")")
		return
	}
	if w := &a.waits[p]; w.line == "" || w.target != m.Target {
		w.line, w.target = m.Name+": waiting to be healthy on "+m.Target+" ("+cmp.Or(o.Detail, "-")+")", m.Target
	}
	s.waiting = append(s.waiting, a.waits[p].line)
}

// deadlineReason says why member m's move failed at its deadline in
// step def. When the step's own action never succeeded (a pre_stop
// hook refused), that action and its error are the news, not the
// health of a member that was never stopped.
func (s *stepper) deadlineReason(comp *config.Component, m *Member, def step.Def, o MemberHealth) string {
	if def.Action != "" && !m.Acted && m.Tries > 0 {
		a := Describe(Action{Kind: ActionKind(def.Action), Member: m.Name, Hooks: def.Hooks, Version: m.Target})
		last := fmt.Sprintf("try %d still running", m.Tries)
		switch {
		case m.Acting != 0 && !s.inFlight(m.Acting):
			last = fmt.Sprintf("try %d lost with ferry's process", m.Tries)
		case m.Acting == 0 && m.Detail != "":
			last = m.Detail
			if rest, ok := strings.CutPrefix(last, a+" failed (try "); ok {
				last = "try " + strings.Replace(rest, ")", "", 1)
			}
		}
		return fmt.Sprintf("%s did not succeed within healthy_deadline %s; %s", a, comp.Deadline, last)
	}
	why := cmp.Or(o.Detail, m.Detail, "-")
	if strings.HasPrefix(m.Detail, step.SoakBroken) {
		// It was healthy, then was not: that is the news.
		why = m.Detail + "; last seen: " + cmp.Or(o.Detail, "-")
	}
	return fmt.Sprintf("not healthy on %s within healthy_deadline %s: %s", m.Target, comp.Deadline, why)
}

// facts are what member m's step reads.
func (s *stepper) facts(comp *config.Component, m *Member, o MemberHealth, owed int) step.Facts {
	return step.Facts{
		Running:      o.Running,
		OnTarget:     o.Running && o.Version == m.Target && s.replaced(m, o),
		Healthy:      o.Healthy,
		HealthySince: m.HealthySince,
		Hooks:        s.hasHooks(comp),
		Owed:         owed,
		Tries:        m.Tries,
		Acted:        m.Acted,
		Fresh:        !o.Seen.IsZero() && o.Seen.After(m.StartDone),
		SameProcess:  m.HealthyStarted.IsZero() || (o.PID == m.HealthyPID && o.Started.Equal(m.HealthyStarted)),
		Soak:         comp.Soak.D(),
		Now:          s.now,
		Exits:        m.Exits,
		CrashLimit:   comp.CrashLoop.Exits,
		ExitDetail:   m.ExitDetail,
		Backup:       s.backupFacts(comp, m),
		Refused:      m.Refused,
	}
}

// hasHooks reports whether comp has calls in a hook list (step.Facts'
// Hooks), made once per step for the component.
func (s *stepper) hasHooks(comp *config.Component) func(string) bool {
	if s.hooksOf != comp {
		s.hooksOf = comp
		s.hooksIn = func(l string) bool { return len(comp.Hooks.List(l)) > 0 }
	}
	return s.hooksIn
}

// leave moves m (s.edit's) past its current step, keeping what the
// lower bound and the events need: when it became healthy, its time
// down.
func (s *stepper) leave(comp *config.Component, m *Member, o MemberHealth) {
	switch m.Step {
	case StepStarting:
		// Healthy since its move began at the earliest: health from
		// before says nothing of a member that may be on its way down (a
		// stop cancelled by an abort, a lame duck still serving). Nor
		// before its stop began or its start returned, on ferry's clock:
		// the substrate's times may be coarser (Kubernetes' are whole
		// seconds) or another host's, and taken as they are they made a
		// negative time down and a soak shorter than the lower bound
		// counts (a pace below ×1).
		m.HealthySince = o.HealthySince
		for _, t := range []time.Time{m.Began, m.Stopped, m.StartDone} {
			if m.HealthySince.Before(t) {
				m.HealthySince = t
			}
		}
		if m.HealthySince.IsZero() || m.HealthySince.After(s.now) {
			m.HealthySince = s.now
		}
		m.HealthyPID, m.HealthyStarted = o.PID, o.Started
		if !m.StartDone.IsZero() && m.HealthySince.After(m.StartDone) {
			m.Busy += m.HealthySince.Sub(m.StartDone)
		}
	case StepSoaking:
		m.Busy += comp.Soak.D()
	}
	s.setStep(m, step.After(m.Step))
}

// countExits counts member m's exits on its target since its first
// start in this move, within the crash-loop window: an instance seen
// exited (by its start time), or restarts the substrate made itself.
// It returns m's record as it then stands.
func (s *stepper) countExits(comp *config.Component, m *Member, o MemberHealth) *Member {
	n := m.Name
	if m.Started.IsZero() || (m.Step != StepStarting && m.Step != StepSoaking) || o.Unknown {
		return m
	}
	if s.now.Sub(m.Started) > comp.CrashLoop.Window.D() {
		return m
	}
	if o.Restarts > m.RestartsSeen {
		m = s.edit(n)
		m.Exits += o.Restarts - m.RestartsSeen
		m.RestartsSeen = o.Restarts
		m.ExitDetail = cmp.Or(o.Detail, "restarted by its substrate")
	}
	if !o.Running && o.Version == m.Target && !o.Started.IsZero() && !o.Started.Before(m.Started.Add(-time.Second)) &&
		!o.Started.Equal(m.LastExit) && o.Seen.After(m.StartDone) {
		m = s.edit(n)
		m.Exits++
		m.LastExit = o.Started
		m.ExitDetail = o.Detail
	}
	return m
}

// failMember fails m's move (m is s.edit's) and the step with it.
func (s *stepper) failMember(m *Member, why string) {
	s.setStep(m, StepFailed)
	m.Detail = why
	s.fail("member %s: %s", m.Name, why)
}

// try emits the action of step def for member n, unless a previous try
// failed too recently. A hook step opens the effects of its calls that
// have an undo first, in the record written before the action.
func (s *stepper) try(comp *config.Component, n string, def step.Def) {
	m := s.u.Members[n]
	if !s.backoff(m.Tries, m.LastTry) {
		return
	}
	a := Action{Member: m.Name}
	switch def.Action {
	case step.ActHooks:
		a.Kind, a.Hooks, a.Version = ActHooks, def.Hooks, m.Target
		if l := step.Opens(def); l != "" {
			if s.undoing(comp.Hooks.List(l), l, "", m.Name) {
				s.wait("%s: waiting for an undo in flight", m.Name)
				return
			}
			s.openHookEffects(comp.Hooks.List(l), l, "", m.Name)
		}
	case step.ActStop:
		a.Kind = ActStop
	case step.ActStart:
		a.Kind, a.Version = ActStart, m.Target
	case step.ActBackup, step.ActRestore:
		a.Kind = ActionKind(def.Action)
		m = s.edit(n)
		if !s.backupAction(comp, m, &a) {
			s.fail("member %s: step %s, but %s describes no backup", m.Name, def.Name, comp.Name)
			return
		}
	default:
		s.fail("member %s: step %s has an action ferry does not know (%q)", m.Name, def.Name, def.Action)
		return
	}
	m = s.edit(n)
	m.LastTry = s.now
	m.Tries++
	m.Acting = s.act(a)
}

// setStep moves m (s.edit's) to step st.
func (s *stepper) setStep(m *Member, st MemberStep) {
	if m.Step != st {
		s.stepped = append(s.stepped, m.Name)
		m.Step = st
		m.Since = s.now
		m.Tries = 0
		m.LastTry = time.Time{}
		m.Acted = false
		m.Refused = ""
	}
}
