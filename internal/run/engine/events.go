package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// changes describes, as events, how record b differs from record a:
// the upgrade's state, each batch formed and ended, each member's step,
// each effect opened, undone, failed or abandoned, an outage, what the
// upgrade waits on.
func changes(a, b upgrade.Upgrade) []store.Event {
	var evs []store.Event
	if a.State != b.State {
		// As the operator names them where the flow does (StarlingX's
		// upgrading-controllers), the machine's word beside.
		msg := fmt.Sprintf("state %s → %s", upgrade.ShownWith(&a), upgrade.ShownWith(&b))
		if b.Reason != "" && (b.State == upgrade.StateFailed || b.State == upgrade.StateRollingBack || b.State == upgrade.StatePaused) {
			msg += ": " + b.Reason
		}
		evs = append(evs, store.Event{Kind: "state", Message: msg})
	}
	if a.Ending.IsZero() && !b.Ending.IsZero() && !b.State.Terminal() {
		evs = append(evs, store.Event{Kind: "state", Message: fmt.Sprintf("ending %s: the upgrade's undos and post_upgrade hooks run first", b.Ending)})
	}
	for i, bb := range b.Batches {
		if i >= len(a.Batches) || len(a.Batches[i].Hosts) < len(bb.Hosts) {
			msg := fmt.Sprintf("%s: %s (size %d", bb.Name(), strings.Join(bb.Members, ", "), bb.Size)
			if len(bb.Hosts) > 0 {
				msg = fmt.Sprintf("%s: hosts %s: %s (up to %d locked at once", bb.Name(), strings.Join(bb.Hosts, ", "), strings.Join(bb.Members, ", "), bb.Size)
			}
			if bb.Why != "" {
				msg += ": " + bb.Why
			}
			evs = append(evs, store.Event{Kind: "batch", Component: bb.Component, Message: msg + ")"})
		}
		if !bb.Ended.IsZero() && (i >= len(a.Batches) || a.Batches[i].Ended.IsZero()) && bb.Outcome.Size > 0 {
			how := "neither clean nor strained"
			switch {
			case bb.Outcome.Clean:
				how = "clean"
			case bb.Outcome.Strained:
				how = "strained: " + bb.Outcome.Why
			case bb.Outcome.Why != "":
				how += ": " + bb.Outcome.Why
			}
			evs = append(evs, store.Event{Kind: "batch", Component: bb.Component,
				DurationMS: float64(bb.Ended.Sub(bb.Began).Microseconds()) / 1000,
				Message: fmt.Sprintf("%s done in %s (%s); its slowest member needed %s",
					bb.Name(), bb.Ended.Sub(bb.Began).Round(time.Millisecond), how, bb.Bound.Round(time.Millisecond))})
		}
	}
	// A batch's steps come before its members' moves.
	evs = append(evs, batchStepChanges(a, b)...)
	for _, n := range upgrade.Touched(a, b) {
		mb := b.Members[n]
		ma := a.Members[n]
		if ma == nil || ma.Step != mb.Step {
			from := upgrade.MemberStep("")
			if ma != nil {
				from = ma.Step
			}
			msg := fmt.Sprintf("%s: %s → %s", n, from, mb.Step)
			if mb.Step == upgrade.StepFailed || mb.Step == upgrade.StepDone && mb.Detail != "" {
				msg += " (" + mb.Detail + ")"
			}
			evs = append(evs, store.Event{Kind: "step", Member: n, Component: mb.Component, Message: msg})
		}
		// Its time down, once the move records when it became healthy:
		// by that fact, not by a step, as one write can take a member
		// from stopping past soaking (to rejoining, or done) when its
		// start, its first healthy check and the end of its soak all
		// land in one turn of a busy loop. Once only: a member whose
		// soak broke (unhealthy again, back to starting) becomes healthy
		// a second time in the same move, and its time down from the
		// stop was said at the first (said again, the two overlapped).
		if ma != nil && !mb.Stopped.IsZero() && !mb.HealthySince.IsZero() && !mb.HealthySince.Equal(ma.HealthySince) && !ma.SoakBroke {
			down := mb.HealthySince.Sub(mb.Stopped)
			evs = append(evs, store.Event{Kind: "down", Member: n, Component: mb.Component,
				DurationMS: float64(down.Microseconds()) / 1000,
				Message:    fmt.Sprintf("%s healthy on %s: down for %s (from its stop to its first healthy check)", n, mb.Target, down.Round(time.Millisecond))})
		}
	}
	evs = append(evs, hostChanges(a, b)...)
	evs = append(evs, effectChanges(a.Effects, b.Effects, b.State == upgrade.StateCompleted || b.Ending == upgrade.StateCompleted)...)
	switch {
	case a.Outage == nil && b.Outage != nil:
		evs = append(evs, store.Event{Kind: "outage", Message: "the substrate does not answer: " + b.Outage.Detail +
			"; no member is admitted and no deadline runs until it does"})
	case a.Outage != nil && b.Outage == nil:
		evs = append(evs, store.Event{Kind: "outage", Message: fmt.Sprintf("the substrate answers again after %s; every deadline moved by as much",
			b.Updated.Sub(a.Outage.Since).Round(time.Millisecond))})
	}
	if a.Waiting != b.Waiting && b.Waiting != "" {
		evs = append(evs, store.Event{Kind: "wait", Message: "waiting: " + b.Waiting})
	}
	return evs
}

// effectChanges describes the effects opened, failed, abandoned and
// closed between journals a and b; completed: b's upgrade completed,
// so a handover's change that left the journal was kept, not undone. A
// journal keeps its order (effects are appended, closed ones removed),
// so each effect of b is looked for in a from where the one before it
// was found: one walk of both (a journal holds an effect per member in
// flight), with a search of all of a only for one out of that order.
func effectChanges(a, b effect.Journal, completed bool) []store.Event {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0] ||
		slices.EqualFunc(a, b, func(x, y effect.Effect) bool { return x.ID == y.ID && x.State == y.State })) {
		return nil // one journal (the machine shares it until it changes), or the same effects
	}
	var evs []store.Event
	found := make([]bool, len(a))
	next := 0
	for _, eb := range b {
		i := slices.IndexFunc(a[next:], func(e effect.Effect) bool { return e.ID == eb.ID })
		if i >= 0 {
			i += next
			next = i + 1
		} else {
			i = a.ByID(eb.ID)
		}
		if i >= 0 {
			found[i] = true
		}
		member := ""
		if eb.Scope.Kind == effect.ScopeMember {
			member = eb.Scope.Name
		}
		switch {
		case i < 0:
			msg := fmt.Sprintf("effect %s opened (%s): %s", eb.ID, eb.Scope, eb.What)
			if eb.UndoWhat != "" {
				msg += "; its undo: " + eb.UndoWhat
			}
			evs = append(evs, store.Event{Kind: "effect", Member: member, Message: msg})
		case a[i].State != eb.State:
			evs = append(evs, store.Event{Kind: "effect", Member: member,
				Message: fmt.Sprintf("effect %s %s: %s%s", eb.ID, eb.State, eb.What, errSuffix(eb.Error))})
		}
	}
	for i, ea := range a {
		if !found[i] {
			member := ""
			if ea.Scope.Kind == effect.ScopeMember {
				member = ea.Scope.Name
			}
			how := "undone"
			if h := ea.Undo.Hook; completed && h != nil && h.To != "" {
				how = "kept (the upgrade completed; its undo was for the way back)"
			}
			evs = append(evs, store.Event{Kind: "effect", Member: member, Message: fmt.Sprintf("effect %s %s: %s", ea.ID, how, ea.What)})
		}
	}
	return evs
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// healthEvents reports members, gates and roles whose verdict changed
// since the last report: the members whose verdict differs from the
// snapshot before (snap.verdicts), every member for the first (each
// snapshot the loop makes is reported once).
func (e *Engine) healthEvents(snap Snapshot, last, roles map[string]bool) []store.Event {
	var evs []store.Event
	members := snap.verdicts
	if snap.all || len(last) == 0 && len(roles) == 0 {
		members = e.order
	}
	for _, n := range members {
		mh := snap.Obs.Members[n]
		if mh.Unknown {
			continue
		}
		if prev, ok := last[n]; !ok || prev != mh.Healthy {
			last[n] = mh.Healthy
			verdict := "healthy"
			if !mh.Healthy {
				verdict = "unhealthy"
			}
			evs = append(evs, store.Event{Kind: "health", Member: n, Component: e.members[n].comp.Name,
				Message: fmt.Sprintf("%s %s on %s: %s", n, verdict, orDash(mh.Version), orDash(mh.Detail))})
		}
		if r := e.members[n].comp.Role; r != nil {
			if prev, ok := roles[n]; ok && prev != mh.Role || !ok && mh.Role {
				verb := "holds"
				if !mh.Role {
					verb = "no longer holds"
				}
				evs = append(evs, store.Event{Kind: "role", Member: n, Component: e.members[n].comp.Name,
					Message: fmt.Sprintf("%s %s the role %s", n, verb, r.Name)})
			}
			roles[n] = mh.Role
		}
	}
	for _, c := range sortedKeys(snap.Obs.Gates) {
		g := snap.Obs.Gates[c]
		if g.Checked.IsZero() {
			continue
		}
		key := "cluster:" + c
		if prev, ok := last[key]; !ok || prev != g.Healthy {
			last[key] = g.Healthy
			verdict := "green"
			if !g.Healthy {
				verdict = "red"
			}
			evs = append(evs, store.Event{Kind: "health", Component: c,
				Message: fmt.Sprintf("cluster gate %s %s: %s", c, verdict, orDash(g.Detail))})
		}
	}
	return evs
}

// answerEvents reports the system's answers to whether a member may
// stop (ok_to_stop) that differ from the last one reported for it: its
// yes or no, in its words.
func (e *Engine) answerEvents(snap Snapshot, last map[string]upgrade.Answer) []store.Event {
	var evs []store.Event
	for _, n := range sortedKeys(snap.Obs.Answers) {
		a := snap.Obs.Answers[n]
		if prev, ok := last[n]; ok && prev.Yes == a.Yes && prev.Words == a.Words {
			continue
		}
		last[n] = a
		verdict := "may stop"
		if !a.Yes {
			verdict = "may not stop"
		}
		evs = append(evs, store.Event{Kind: "ok_to_stop", Member: n, Component: e.members[n].comp.Name,
			Message: fmt.Sprintf("the system says %s %s: %s", n, verdict, orDash(a.Words))})
	}
	return evs
}

// overheads measures the engine's own delay: for each member whose
// soak ended before this decision, the time from the end of its soak
// (its health gate passing) to this decision's action.
func (e *Engine) overheads(a upgrade.Upgrade, d upgrade.Decision, now time.Time) []store.Event {
	if len(d.Actions) == 0 {
		return nil
	}
	var evs []store.Event
	for _, n := range upgrade.Touched(a, d.Upgrade) {
		ma, mb := a.Members[n], d.Upgrade.Members[n]
		if ma == nil || ma.Step != upgrade.StepSoaking || mb.Step == upgrade.StepSoaking || mb.Step == upgrade.StepStarting {
			continue
		}
		passed := ma.HealthySince.Add(e.members[n].comp.Soak.D())
		if over := now.Sub(passed); over >= 0 {
			evs = append(evs, store.Event{Kind: "overhead", Member: n, Component: mb.Component,
				DurationMS: float64(over.Microseconds()) / 1000,
				Message:    fmt.Sprintf("%s passed its gate; next action %s later", n, over.Round(time.Microsecond))})
		}
	}
	return evs
}
