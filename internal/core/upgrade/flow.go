package upgrade

import (
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// The upgrade walks its plan's flow (plan.Plan.Stages: the release's
// own, or expand, the phases, migrate, finalize, contract), one stage
// after the other. The stage it is in is read from its state, which
// names the stage (upgrading-kv, rolling-out-api, action-networking):
// a flow lists each at most once, so a record needs no other pointer,
// and a record written before flows existed resumes where it was.

// StageState is the state of an upgrade while flow stage st runs: the
// name the stage has in status, events and the plan.
func StageState(st plan.Stage) State {
	switch st.Kind {
	case config.StageExpand:
		return StateExpanding
	case config.StagePhase:
		if st.Name != "" {
			return Upgrading(st.Name) // a part of its component
		}
		return Upgrading(st.Component)
	case config.StageRollout:
		return RollingOut(st.Component)
	case config.StageHosts:
		return Upgrading(st.Name)
	case config.StageMigrate:
		return StateMigrating
	case config.StageFinalize:
		return StateFinalizing
	case config.StageContract:
		return StateContracting
	}
	if k, ok := config.LookupStageKind(st.Kind); ok {
		return State{Kind: Kind(k.State), Component: st.Name}
	}
	return State{}
}

// Shown is the state of u as the operator sees it: the state its flow's
// stage names (StarlingX's upgrading-controllers for the stages of
// controller-1 and controller-0, activating), or its release names
// among the upgrade's own (upgrade-complete; upgrade-failed for paused
// on a failure), the machine's own otherwise. The record keeps the
// machine's, which names the stage.
func Shown(u *Upgrade) string {
	flow := u.Plan.Stages()
	if i := flowAt(flow, u.State); i >= 0 && flow[i].State != "" {
		return flow[i].State
	}
	if w, ok := u.Plan.States[config.StatePausedOnFailure]; ok && u.State == StatePaused && u.Reason != "" {
		return w
	}
	if w, ok := u.Plan.States[u.State.String()]; ok && u.State.Component == "" {
		return w
	}
	return u.State.String()
}

// ShownWith is Shown followed by the machine's state in parentheses
// when they differ: "upgrading-controllers (upgrading-controller-0)".
func ShownWith(u *Upgrade) string {
	if sh := Shown(u); sh != u.State.String() {
		return sh + " (" + u.State.String() + ")"
	}
	return u.State.String()
}

// flowAt is the index in flow of the stage state st belongs to, or -1
// (before the first: upgrade-started, preflight).
func flowAt(flow []plan.Stage, st State) int {
	switch st.Kind {
	case KindUpgraded:
		st = Upgrading(st.Component)
	case KindRolledOut:
		st = RollingOut(st.Component)
	case KindAwaitingFinalize:
		st = StateFinalizing
	}
	for i, fs := range flow {
		if StageState(fs) == st {
			return i
		}
	}
	return -1
}

// next enters the flow's stage after the current one; after the last,
// the upgrade completes.
func (s *stepper) next() {
	flow := s.u.Plan.Stages()
	i := flowAt(flow, s.u.State) + 1
	if i >= len(flow) {
		s.end(StateCompleted)
		return
	}
	s.enter(flow, i)
}

// enter begins stage i of flow. A stage marked as the point of no
// return is passed as it begins (finalize: before its first call), in
// the record written before anything of it is done.
func (s *stepper) enter(flow []plan.Stage, i int) {
	u := &s.u
	st := flow[i]
	u.GateSince, u.WaitSince, u.WaitRefused = time.Time{}, time.Time{}, false
	u.PhaseHooks = HookProgress{}
	// The boundary stays the last batch's end (or the last stage's):
	// the gate checked after it, which let the stage before end, lets
	// this one begin.
	// A hosts stage's is its first host's lock (lock: StarlingX's
	// abort is possible until the second controller is locked, after the
	// swact before it).
	if st.PointOfNoReturn && st.Kind != config.StageFinalize && st.Kind != config.StageHosts && u.Finalized.IsZero() {
		u.Finalized = s.now
		u.NoReturn = StageState(st)
	}
	switch st.Kind {
	case config.StagePhase, config.StageRollout, config.StageHosts:
		u.Phase = u.Plan.PhaseOf(st)
		if u.Phase < 0 {
			s.fail("the plan has no %s of component %s", st.Kind, st.Component)
			return
		}
		if st.Kind == config.StageRollout {
			s.rollOut(u.Plan.Phases[u.Phase])
		}
		u.State = StageState(st)
		return
	}
	// Phase counts the phases before the stage (the default flow's
	// migrate is past every phase).
	u.Phase = 0
	for _, fs := range flow[:i] {
		if fs.Kind == config.StagePhase || fs.Kind == config.StageRollout || fs.Kind == config.StageHosts {
			u.Phase++
		}
	}
	if st.Kind == config.StageFinalize && s.c.Policy.Finalize == "manual" {
		s.enterStage(StateAwaitingFinalize)
		return
	}
	s.enterStage(StageState(st))
}

// rollOut begins a rollout: the pin moves to the release (Ironic's
// unpin), and every member of the phase is to be restarted on the
// release it runs, where it runs it already too, so that it starts
// with the new pin in its arguments, environment or files.
func (s *stepper) rollOut(ph plan.Phase) {
	u := &s.u
	u.Pin = u.To
	for _, n := range ph.Members() {
		m := s.edit(n)
		if m == nil {
			continue
		}
		m.Target, m.Restart, m.Detail = u.To, true, ""
		s.setStep(m, StepPending)
	}
}

// replaced reports whether member m, on a move that restarts it (a
// rollout), runs another process than the one it ran when admitted:
// until then it is not on its target, whatever version it reports.
// Where the substrate names no process, the start's return is the sign.
func (s *stepper) replaced(m *Member, o MemberHealth) bool {
	if !m.Restart {
		return true
	}
	if m.ReplacesPID == 0 && m.ReplacesStarted.IsZero() {
		return !m.StartDone.IsZero()
	}
	return o.PID != m.ReplacesPID || !o.Started.Equal(m.ReplacesStarted)
}
