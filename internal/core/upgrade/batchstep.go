package upgrade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/step"
)

// The extra steps a strategy adds before a batch's moves
// (strategy.Choice.Before; package step's Extra): active-standby's
// switchover. The batch is formed with its members admitted but not
// begun; its steps run first, one at a time, in order; then each
// member is admitted again and begins its move. An extra step's action
// hands something over (the role, to the member .To): the change is
// journaled before it is made, with its undo (the same hook list made
// with .To the member that held it), in the upgrade's scope:
//
//   - going forward, it is kept: once the upgrade completes it leaves
//     the journal undone (the role stays on the upgraded member);
//   - going back (an abort, a rollback), it is due as soon as the member
//     it hands back to needs nothing more of the rollback (it runs its
//     release again, or never left it) and no call of its step is in
//     flight; the component's next rollback batch waits until it is
//     undone, so the role is back before the member holding it is
//     returned.
//
// Never two at once: a step's action is not taken while another extra
// step's action, or the undo of one's change, is in flight.

// BatchStep is one extra step of a batch, as recorded.
type BatchStep struct {
	Name step.Name `json:"name"`
	// Component and Host, in a host batch: the component whose step it
	// is and the host whose lock waits for it (a phase's batch is its
	// component's, and has no host).
	Component string `json:"component,omitempty"`
	Host      string `json:"host,omitempty"`
	// Since is when it began, Ended when it was complete.
	Since time.Time `json:"since,omitzero"`
	Ended time.Time `json:"ended,omitzero"`
	// LastTry, Tries, Acting and Acted are its action's, as a member's
	// step's; ActedAt is when the action returned (a gate must have
	// been checked after it).
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Acting  int       `json:"acting,omitempty"`
	Acted   bool      `json:"acted,omitempty"`
	ActedAt time.Time `json:"acted_at,omitzero"`
	// From held what the step hands over when it acted; To received it.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Effect is the key of the change it journaled.
	Effect string `json:"effect,omitempty"`
	Done   bool   `json:"done,omitempty"`
	// Back: going back, what it handed over was seen back with From
	// (its change undone); the component's rollback went on from there.
	Back   bool   `json:"back,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// batchSteps are the records of the extra steps named.
func batchSteps(names []string) []BatchStep {
	var out []BatchStep
	for _, n := range names {
		out = append(out, BatchStep{Name: step.Name(n)})
	}
	return out
}

// runBatchSteps advances batch b's extra steps and reports whether all
// are done (its members may then begin their moves).
func (s *stepper) runBatchSteps(comp *config.Component, b *Batch) bool {
	u := &s.u
	if u.RollingBack() || b.Rollback {
		return true
	}
	for i := range b.Before {
		bs := &b.Before[i]
		if bs.Done || bs.Component != "" && bs.Component != comp.Name {
			continue
		}
		def, ok := step.ExtraOf(bs.Name)
		if !ok {
			s.fail("%s: its step %s is not in this build (it has: %s)", b.Name(), bs.Name, strings.Join(step.ExtraNames(), ", "))
			return false
		}
		if bs.Since.IsZero() {
			bs.Since = s.now
		}
		// Its deadline is the component's gate_deadline, counted like a
		// gate's wait (moved by an outage, anew after a resume).
		if u.GateSince.IsZero() {
			u.GateSince = s.now
		}
		what := fmt.Sprintf("%s: %s", b.Name(), bs.Name)
		if bs.Acting != 0 {
			if s.inFlight(bs.Acting) {
				s.wait("%s: hooks.%s of %s running (to %s)", what, def.Hooks, comp.Name, bs.To)
				return false
			}
			bs.Acting = 0 // lost with a process: taken again
		}
		f := s.batchFacts(comp, bs)
		if def.Complete(f) {
			bs.Done, bs.Ended = true, s.now
			bs.Detail = fmt.Sprintf("%s holds %s on %s, the cluster gate green", f.Holder, cmp.Or(f.Role, "the role"), s.obs.Members[f.Holder].Version)
			u.GateSince = time.Time{}
			continue
		}
		deadline := comp.GateDeadline.D()
		if s.now.Sub(u.GateSince) > deadline {
			s.fail("%s not complete within gate_deadline %s: %s", what, deadline, cmp.Or(def.Wait(f), bs.Detail, "-"))
			return false
		}
		s.wake(u.GateSince.Add(deadline + time.Millisecond))
		if def.Needs(f) {
			if busy := s.handingOver(); busy != "" {
				s.wait("%s: waiting for %s", what, busy)
				return false
			}
			if !s.backoff(bs.Tries, bs.LastTry) {
				s.wait("%s: %s", what, cmp.Or(bs.Detail, "-"))
				return false
			}
			if bs.Tries == 0 {
				bs.From, bs.To = f.From, f.To
			}
			// The change is journaled, with its undo, in the record
			// written before the call is made.
			bs.Effect = fmt.Sprintf("step/%s/%s/%d", bs.Name, comp.Name, len(u.Batches))
			f.From, f.To = bs.From, bs.To
			u.Effects.Open(effect.Effect{
				Key:      bs.Effect,
				Scope:    effect.Upgrade(),
				What:     comp.Name + ": " + def.What(f),
				UndoWhat: def.UndoWhat(f) + " (hooks." + def.Hooks + " with .To " + bs.From + ")",
				Undo:     effect.Undo{Hook: &effect.Hook{List: def.Hooks, Component: comp.Name, Index: -1, To: bs.From}},
			}, &u.EffectSeq, s.now)
			bs.Tries++
			bs.LastTry = s.now
			bs.Acting = s.act(Action{Kind: ActHooks, Hooks: def.Hooks, Component: comp.Name, Version: u.To, Step: bs.Name, To: bs.To})
			return false
		}
		if f.HolderMoved && !f.GateGreen {
			s.probe[comp.Name] = true
		}
		s.wait("%s: %s", what, cmp.Or(def.Wait(f), "-"))
		return false
	}
	return true
}

// batchFacts are what extra step bs of a batch of comp reads now.
func (s *stepper) batchFacts(comp *config.Component, bs *BatchStep) step.BatchFacts {
	u := &s.u
	f := step.BatchFacts{Acted: bs.Acted, Tries: bs.Tries, Now: s.now, From: bs.From, To: bs.To, GateGreen: true}
	if comp.Role != nil {
		f.Role = comp.Role.Name
	}
	moved := func(n string) bool {
		m, o := u.Members[n], s.obs.Members[n]
		return m != nil && m.Step == StepDone && o.Running && !o.Unknown && o.Version == m.Target
	}
	for _, cm := range comp.Members {
		o := s.obs.Members[cm.Name]
		if o.Role && !o.Unknown {
			f.Holder = cm.Name
			break
		}
	}
	f.HolderMoved = f.Holder != "" && moved(f.Holder)
	if !bs.Acted && bs.Tries == 0 {
		f.From = f.Holder
		f.To = ""
		for _, cm := range comp.Members {
			if o := s.obs.Members[cm.Name]; moved(cm.Name) && o.Healthy && !o.Role {
				f.To = cm.Name
				break
			}
		}
	}
	if g, ok := s.obs.Gates[comp.Name]; ok {
		// Checked after the call returned, and after the watch began
		// (a call whose outcome was lost with ferry's process may have
		// landed at any time before).
		after := bs.Since
		for _, t := range []time.Time{bs.ActedAt, s.obs.Since} {
			if t.After(after) {
				after = t
			}
		}
		switch {
		case g.Checked.Before(after):
			f.GateGreen, f.GateDetail = false, ""
		default:
			f.GateGreen, f.GateDetail = g.Healthy, g.Detail
		}
	}
	return f
}

// handingOver says what extra step's action or undo is in flight ("" if
// none): never two handovers at once.
func (s *stepper) handingOver() string {
	u := &s.u
	for i := range u.Batches {
		for _, x := range u.Batches[i].Before {
			if s.inFlight(x.Acting) {
				return fmt.Sprintf("%s of %s in flight", x.Name, u.Batches[i].Name())
			}
		}
	}
	for _, e := range u.Effects {
		if e.Undo.Hook != nil && e.Undo.Hook.To != "" && s.inFlight(e.Acting) {
			return "the undo of " + e.ID + " (" + e.UndoWhat + ") in flight"
		}
	}
	return ""
}

// batchStepsActing lists the actions of extra steps in flight: an
// abort cancels them.
func (s *stepper) batchStepsActing() []int {
	var out []int
	for _, b := range s.u.Batches {
		for _, x := range b.Before {
			if x.Acting != 0 {
				out = append(out, x.Acting)
			}
		}
	}
	return out
}

// handedOver reports whether e is the change of an extra step (its
// undo hands back what the step handed over).
func handedOver(e *effect.Effect) bool {
	return e.Undo.Hook != nil && e.Undo.Hook.To != ""
}

// handOverDue says whether the undo of e, the change of an extra step,
// is due now (ok false when e is not one): kept going forward (see
// keepHandedOver), due going back once the member it hands back to
// needs nothing more of the rollback, no call of an extra step is in
// flight and a member holds the role (a handover still under way is
// let land first: never two at once), or nobody has held it for the
// component's gate_deadline since the last batch ended (then the undo
// is tried: the system answers for itself).
func (s *stepper) handOverDue(e *effect.Effect) (due, ok bool) {
	if !handedOver(e) {
		return false, false
	}
	return s.handOverWaits(e) == "", true
}

// handOverWaits says what the undo of e, the change of an extra step,
// waits for before it is due ("" when it is due).
func (s *stepper) handOverWaits(e *effect.Effect) string {
	u := &s.u
	if !u.RollingBack() {
		return "the upgrade goes back (it is kept if it completes)"
	}
	for _, seq := range s.batchStepsActing() {
		if s.inFlight(seq) {
			return "the switchover's call in flight has returned"
		}
	}
	h := e.Undo.Hook
	if m := u.Members[h.To]; m != nil && (m.Step.InFlight() || s.inFlight(m.Acting) || s.stillToRollBack(h.To)) {
		return h.To + " is returned"
	}
	comp := s.c.Component(h.Component)
	if comp == nil {
		return ""
	}
	for _, m := range comp.Members {
		if o := s.obs.Members[m.Name]; o.Role && !o.Unknown {
			return ""
		}
	}
	if s.now.Sub(u.Boundary) > comp.GateDeadline.D() {
		return ""
	}
	s.wake(u.Boundary.Add(comp.GateDeadline.D() + time.Millisecond))
	return "a member of " + comp.Name + " holds the role (a handover under way lands first)"
}

// handBackFirst reports whether comp's next rollback batch, of the
// members left, must wait for what an extra step handed over to come
// back (the role, to the member that held it), and says so: every
// batch but that member's own waits (the former active is returned
// first, when it moved at all) until the change's undo is done and
// the member is seen holding the role again, or nobody has held it for
// the component's gate_deadline since the last batch ended.
func (s *stepper) handBackFirst(comp *config.Component, left []string) bool {
	u := &s.u
	if !u.RollingBack() {
		return false
	}
	for i := range u.Batches {
		b := &u.Batches[i]
		for j := range b.Before {
			x := &b.Before[j]
			if b.Rollback || cmp.Or(x.Component, b.Component) != comp.Name || x.Effect == "" || x.Back || slices.Contains(left, x.From) {
				continue
			}
			if k := u.Effects.Find(x.Effect); k >= 0 && u.Effects[k].Owed() {
				e := &u.Effects[k]
				if why := s.handOverWaits(e); why != "" {
					s.wait("%s: %s first (%s), once %s", comp.Name, e.UndoWhat, e.ID, why)
				} else {
					s.wait("%s: %s first (%s)", comp.Name, e.UndoWhat, e.ID)
				}
				return true
			}
			// Undone: the member it went back to must be seen holding it
			// (a handover may land after its call returned).
			if o := s.obs.Members[x.From]; o.Role && !o.Unknown {
				x.Back = true
				continue
			}
			if d := comp.GateDeadline.D(); s.now.Sub(u.Boundary) > d {
				x.Back = true
				s.notes = append(s.notes, fmt.Sprintf("%s: %s not seen holding the role again within gate_deadline %s: going on", comp.Name, x.From, d))
				continue
			}
			s.wake(u.Boundary.Add(comp.GateDeadline.D() + time.Millisecond))
			s.wait("%s: waiting for %s to hold the role again (its switchover undone)", comp.Name, x.From)
			return true
		}
	}
	return false
}

// keepHandedOver closes, as the upgrade completes, the changes of its
// extra steps: what they handed over stays where it went (the role on
// an upgraded member); their undo was for the way back.
func (s *stepper) keepHandedOver() {
	var keys []string
	for i := range s.u.Effects {
		if e := &s.u.Effects[i]; e.Owed() && handedOver(e) {
			keys = append(keys, e.Key)
		}
	}
	if len(keys) > 0 {
		s.u.journal()
	}
	for _, k := range keys {
		s.u.Effects.Close(k)
	}
}

// finishedBatchStep folds the outcome of the action of an extra step
// into its record.
func finishedBatchStep(u *Upgrade, a Action, err error, took time.Duration, now time.Time) {
	for i := range u.Batches {
		for j := range u.Batches[i].Before {
			bs := &u.Batches[i].Before[j]
			if bs.Acting != a.Seq {
				continue
			}
			bs.Acting = 0
			switch {
			case errors.Is(err, context.Canceled):
				bs.Detail = Describe(a) + ": cancelled"
			case err != nil:
				bs.Detail = fmt.Sprintf("%s failed (try %d): %v", Describe(a), bs.Tries, err)
			default:
				bs.Acted, bs.ActedAt, bs.Detail = true, now, ""
				u.Bound.Hooks += took
			}
			return
		}
	}
}
