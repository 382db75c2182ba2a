package upgrade

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
)

// Record journals effect e (a driver's change, or a hook's) as open in
// record u, unless it is already journaled: the engine writes the
// result before the change is made.
func Record(u Upgrade, e effect.Effect, now time.Time) (Upgrade, bool) {
	u = u.clone()
	added := u.Effects.Open(e, &u.EffectSeq, now)
	u.Updated = now
	return u, added
}

// Undone drops the effect with key from record u's journal: the step
// that made the change undid it itself (a node uncordoned once
// upgraded).
func Undone(u Upgrade, key string, now time.Time) (Upgrade, effect.Effect, bool) {
	u = u.clone()
	u.journal()
	e, ok := u.Effects.Close(key)
	u.Updated = now
	return u, e, ok
}

// hookKey names the effect of call i of a hook list.
func hookKey(list, component, member string, i int) string {
	owner := component
	if member != "" {
		owner = member
	}
	if owner == "" {
		owner = "cluster"
	}
	return fmt.Sprintf("hook/%s/%s/%d", owner, list, i)
}

// openHookEffects journals the effects of the calls of a hook list
// that have an undo, before the list runs: scope member when member is
// set, the phase of component when component is set, else the upgrade.
func (s *stepper) openHookEffects(calls []config.Call, list, component, member string) {
	scope := effect.Upgrade()
	switch {
	case member != "":
		scope = effect.Member(member)
	case component != "":
		scope = effect.Phase(component)
	}
	data := s.callData(component, member)
	for i, c := range calls {
		if c.Undo == nil {
			continue
		}
		owner := member
		if owner == "" {
			owner = cmp.Or(component, "the cluster")
		}
		s.u.Effects.Open(effect.Effect{
			Key:      hookKey(list, component, member, i),
			Scope:    scope,
			What:     fmt.Sprintf("%s hook %d of %s: %s", list, i+1, owner, callText(c, data)),
			UndoWhat: callText(*c.Undo, data),
			Undo:     effect.Undo{Hook: &effect.Hook{List: list, Component: component, Index: i, Member: member}},
		}, &s.u.EffectSeq, s.now)
	}
}

// callData is the template data a call made for member (or for
// component's phase) is shown with.
func (s *stepper) callData(component, member string) config.TemplateData {
	if member != "" {
		if comp, m := s.c.MemberOf(member); comp != nil {
			// The component's Members list is made once a step: a
			// batch of a thousand members opens an effect each.
			if s.refsOf != comp {
				s.refsOf, s.refs = comp, config.MemberRefs(comp)
			}
			return config.DataWith(comp, m, s.refs)
		}
	}
	if comp := s.c.Component(component); comp != nil {
		return s.c.DataFor(comp, nil)
	}
	return config.TemplateData{}
}

// callText says what a call does: its method and URL, address or
// program, rendered for the member (headers and bodies, which may hold
// secrets, are never copied into the record).
func callText(c config.Call, d config.TemplateData) string {
	r := func(t string) string {
		if v, err := config.Render(t, d); err == nil {
			return v
		}
		return t
	}
	switch {
	case c.HTTP != "":
		return c.Method + " " + r(c.HTTP)
	case c.TCP != "":
		return "tcp " + r(c.TCP)
	case len(c.Exec) > 0:
		return "exec " + r(c.Exec[0])
	}
	return "-"
}

// owedOf returns the indexes of member n's owed effects, the last
// opened first (as effect.Journal.Owed).
func (s *stepper) owedOf(n string) []int {
	var out []int
	for _, i := range slices.Backward(s.memberEffects(n)) {
		if s.u.Effects[i].Owed() {
			out = append(out, i)
		}
	}
	return out
}

// owedCount counts member n's owed effects.
func (s *stepper) owedCount(n string) int {
	c := 0
	for _, i := range s.memberEffects(n) {
		if s.u.Effects[i].Owed() {
			c++
		}
	}
	return c
}

// memberEffects returns the indexes in the journal of member n's
// effects, in order, from an index of the journal by member: a step
// asks about each member in flight, and the journal holds an effect
// or more of each. The index is the admission's when the step has one
// (kept from step to step), else the step's own.
func (s *stepper) memberEffects(n string) []int {
	if s.adm != nil {
		return s.adm.effects.of(s.u.Effects, n)
	}
	return s.effects.of(s.u.Effects, n)
}

// effectIndex is a journal's member effects by member, as of the
// journal it was made from: its first entry, its length and its last
// effect's ID. A journal is changed in place only in the state of its
// effects (the machine copies one before it closes an effect), and an
// effect is opened at its end with an ID never used before, so a
// journal whose positions changed differs in one of those three; one
// that only grew holds the last effect indexed where it was, and only
// its new effects are indexed (a batch of a thousand members opens an
// effect each, one after the other).
type effectIndex struct {
	first *effect.Effect
	n     int
	last  string
	at    map[string][]int
}

// of returns the indexes of member n's effects in journal j, made
// again from j when it is not the journal the index was made from.
func (x *effectIndex) of(j effect.Journal, n string) []int {
	var first *effect.Effect
	last := ""
	if len(j) > 0 {
		first, last = &j[0], j[len(j)-1].ID
	}
	if x.at == nil || x.first != first || x.n != len(j) || x.last != last {
		from := x.n
		if x.at == nil || x.first != first || x.n == 0 || x.n > len(j) || j[x.n-1].ID != x.last {
			from, x.at = 0, map[string][]int{}
		}
		x.first, x.n, x.last = first, len(j), last
		for i := from; i < len(j); i++ {
			if j[i].Scope.Kind == effect.ScopeMember {
				x.at[j[i].Scope.Name] = append(x.at[j[i].Scope.Name], i)
			}
		}
	}
	return x.at[n]
}

// owedIn describes the owed effects of the scopes match matches, or "".
func (s *stepper) owedIn(match func(effect.Scope) bool) string {
	return s.owedText(s.u.Effects.Owed(match))
}

// owedText describes the owed effects at indexes is, or "".
func (s *stepper) owedText(is []int) string {
	var out []string
	for _, i := range is {
		e := &s.u.Effects[i]
		t := e.ID + " " + e.What
		if e.State == effect.StateFailed {
			t += " (its undo FAILED: " + e.Error + ")"
		} else if e.Error != "" {
			t += " (try " + itoa(e.Tries) + ": " + e.Error + ")"
		}
		out = append(out, t)
	}
	return strings.Join(out, "; ")
}

func (s *stepper) owedEffects() string { return s.owedIn(effect.Any) }

// due reports whether the undo of effect e is due now: its member's
// move has ended (done, failed, reset to pending by a rollback that
// will not move it again) or reached its rejoin; its phase has ended
// or is ending; the upgrade is ending.
func (s *stepper) due(e *effect.Effect) bool {
	u := &s.u
	if !u.Ending.IsZero() {
		return true
	}
	if due, ok := s.handOverDue(e); ok {
		return due
	}
	switch e.Scope.Kind {
	case effect.ScopeMember:
		m := u.Members[e.Scope.Name]
		switch {
		case m == nil:
			return true
		case s.inFlight(m.Acting):
			return false // its own action (maybe cancelled) comes back first
		case m.Step == StepRejoining:
			return true
		case m.Step.InFlight():
			return false
		case m.Step == StepPending && s.stillToRollBack(m.Name):
			return false // its rollback move rejoins it
		}
		return true
	case effect.ScopePhase:
		st := u.State
		if st == StatePaused {
			st = u.ResumeTo
		}
		cur := ""
		if (st.Kind == KindUpgrading || st.Kind == KindRollingBack) && u.Phase < len(u.Active().Phases) {
			cur = u.Active().Phases[u.Phase].Component
		}
		return cur != e.Scope.Name || u.PhaseHooks.Closing
	case effect.ScopeHost:
		return s.hostDue(e.Scope.Name)
	}
	return false // the upgrade's: at its end
}

// sweep emits the undo of every effect that is due, the last opened
// first within each scope (one at a time per scope, in reverse order),
// each retried with backoff until policy.undo_deadline; past it the
// effect is marked failed and the upgrade pauses for the operator.
func (s *stepper) sweep() {
	u := &s.u
	if u.State.Terminal() || u.Outage != nil || s.failed {
		return
	}
	// Whether an effect is due depends on its scope alone: the effects
	// of a scope not due are passed over without marking it busy.
	var busy map[effect.Scope]bool
	for i := len(u.Effects) - 1; i >= 0; i-- {
		e := &u.Effects[i]
		if !e.Owed() || !s.due(e) || busy[e.Scope] {
			continue
		}
		if busy == nil {
			busy = map[effect.Scope]bool{}
		}
		busy[e.Scope] = true
		if e.State == effect.StateFailed || e.Acting != 0 && s.inFlight(e.Acting) {
			continue
		}
		e = &u.journal()[i] // changed below, or its Acting lost with a process
		e.Acting = 0
		if d := s.c.Policy.UndoDeadline.D(); d > 0 && !e.Undoing.IsZero() && s.now.Sub(e.Undoing) > d {
			e.State = effect.StateFailed
			s.pauseOnUndo(e, d)
			return
		}
		if !s.backoff(e.Tries, e.LastTry) {
			continue
		}
		if e.Undoing.IsZero() {
			e.Undoing = s.now
		}
		e.Tries++
		e.LastTry = s.now
		e.Acting = s.act(Action{Kind: ActUndo, Effect: e.ID, Member: memberOf(e)})
	}
}

func memberOf(e *effect.Effect) string {
	if e.Scope.Kind == effect.ScopeMember {
		return e.Scope.Name
	}
	return ""
}

// pauseOnUndo pauses the upgrade on an undo that kept failing: nothing
// ends as if the cluster were restored while it is not.
func (s *stepper) pauseOnUndo(e *effect.Effect, d time.Duration) {
	reason := fmt.Sprintf("the undo of %s (%s; its undo: %s) failed for %s: %s; fix its cause and 'ferry upgrade resume' to try it again, or 'ferry upgrade override --effect %s' to leave it undone",
		e.ID, e.What, e.UndoWhat, d, cmp.Or(e.Error, "-"), e.ID)
	if s.u.State == StatePaused {
		s.u.Reason = reason
		return
	}
	// An end in progress stays: resuming goes back to it, and tries
	// the undo again.
	s.pause(reason)
}

// abandon marks the effects the operator gave up on.
func (s *stepper) abandon() {
	u := &s.u
	for _, o := range s.activeOverrides() {
		if o.Effect == "" {
			continue
		}
		if i := u.Effects.ByID(o.Effect); i >= 0 && u.Effects[i].State != effect.StateAbandoned {
			e := &u.journal()[i]
			e.State = effect.StateAbandoned
			e.Abandoned = fmt.Sprintf("%s at %s", o.By, o.At.UTC().Format(time.RFC3339))
		}
	}
}

// hooks runs the hook list of the upgrade (component "") or of a
// phase: its effects opened first, retried with backoff until deadline.
// It reports whether the list is done.
func (s *stepper) hooks(list, component string, deadline time.Duration) bool {
	u := &s.u
	var calls []config.Call
	if component == "" {
		calls = s.c.Hooks.List(list)
	} else if comp := s.c.Component(component); comp != nil {
		calls = comp.Hooks.List(list)
	}
	if len(calls) == 0 {
		return true
	}
	h := u.Hook
	if h == nil || h.List != list || h.Component != component {
		h = &HookRun{List: list, Component: component, Since: s.now}
		u.Hook = h
	}
	if h.Done {
		u.Hook = nil
		return true
	}
	if h.Acting != 0 {
		if s.inFlight(h.Acting) {
			s.wait("%s hooks of %s running", list, cmp.Or(component, "the upgrade"))
			return false
		}
		h.Acting = 0
	}
	if s.now.Sub(h.Since) > deadline {
		s.fail("%s hooks of %s failed for %s: %s", list, cmp.Or(component, "the upgrade"), deadline, cmp.Or(h.Detail, "-"))
		return false
	}
	if !s.backoff(h.Tries, h.LastTry) {
		s.wait("%s hooks of %s: %s", list, cmp.Or(component, "the upgrade"), cmp.Or(h.Detail, "-"))
		return false
	}
	if strings.HasPrefix(list, "pre_") {
		if s.undoing(calls, list, component, "") {
			s.wait("%s hooks of %s: waiting for an undo in flight", list, cmp.Or(component, "the upgrade"))
			return false
		}
		s.openHookEffects(calls, list, component, "")
	}
	h.Tries++
	h.LastTry = s.now
	h.Acting = s.act(Action{Kind: ActHooks, Hooks: list, Component: component, Version: u.To})
	return false
}

// undoing reports whether an undo of one of the effects call list l
// opens (for component's phase, or member) is in flight: the list is
// not run again until it is back, so that an undo never lands after
// the change it undoes was made again.
func (s *stepper) undoing(calls []config.Call, list, component, member string) bool {
	for i, c := range calls {
		if c.Undo == nil {
			continue
		}
		if j := s.u.Effects.Find(hookKey(list, component, member, i)); j >= 0 && s.inFlight(s.u.Effects[j].Acting) {
			return true
		}
	}
	return false
}
