package upgrade

import (
	"cmp"
	"fmt"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// stageCalls are the calls the current migration stage (or registered
// kind's stage) st of the target release makes next, and the action
// that makes them: a registered kind's calls, then, once they passed
// (Stage.Called), its gate.
func (s *stepper) stageCalls(st State) ([]config.Call, Action) {
	a := Action{Kind: ActStage, Stage: stageName(st), Version: s.u.To}
	r := s.c.Release(s.u.To)
	if r == nil {
		return nil, a
	}
	if k, ok := stageKindOf(st.Kind); ok {
		a.Stage, a.Name, a.Gate = k.Name, st.Component, s.u.Stage.Called
	}
	_, calls := r.StageCalls(a.Stage, a.Name, a.Gate)
	return calls, a
}

// stageTimes are stage st's deadline and the pause between two tries:
// the release's migrations', a registered kind's stage's own deadline.
func (s *stepper) stageTimes(st State) (deadline, interval time.Duration) {
	r := s.c.Release(s.u.To)
	m := &r.Migrations
	deadline, interval = m.Deadline.D(), m.Interval.D()
	if k, ok := stageKindOf(st.Kind); ok {
		if fs := r.FlowStage(k.Name, st.Component); fs != nil && fs.Deadline > 0 {
			deadline = fs.Deadline.D()
		}
	}
	return deadline, interval
}

// enterStage moves to migration stage st with fresh progress.
func (s *stepper) enterStage(st State) {
	s.u.State = st
	s.u.Stage = Stage{}
}

// nextStage is what follows stage st once it is done: finalize moves
// the pin first.
func (s *stepper) nextStage(st State) {
	u := &s.u
	if st == StateFinalizing {
		if u.Finalized.IsZero() {
			u.Finalized = s.now
		}
		u.Pin = u.To
	}
	s.next()
}

// stage advances migration stage st (or a registered kind's stage, an
// action): its calls are made until they pass, at the release's
// interval, within its deadline; its gate likewise once its calls
// passed. Finalize
// is recorded before its first call: once it may have happened, there
// is no going back.
func (s *stepper) stage(st State) {
	u := &s.u
	calls, a := s.stageCalls(st)
	if len(calls) == 0 || u.Stage.Done {
		if len(calls) > 0 || u.Stage.Called {
			u.Boundary = s.now // what it changed is checked before a batch
		}
		s.nextStage(st)
		return
	}
	deadline, interval := s.stageTimes(st)
	if u.Stage.Since.IsZero() {
		u.Stage.Since = s.now
	}
	if u.Stage.Acting != 0 {
		if s.inFlight(u.Stage.Acting) {
			s.wait("%s: %s", st, cmp.Or(u.Stage.Detail, "-"))
			return
		}
		u.Stage.Acting = 0
	}
	if s.now.Sub(u.Stage.Since) > deadline {
		s.fail("%s: not done within %s: %s", st, deadline, cmp.Or(u.Stage.Detail, "-"))
		return
	}
	if s.u.Pausing {
		return // pauseIfQuiet pauses between two calls
	}
	if !u.Stage.LastTry.IsZero() {
		if next := u.Stage.LastTry.Add(interval); s.now.Before(next) {
			s.wait("%s: %s", st, cmp.Or(u.Stage.Detail, "-"))
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
	u.Stage.Acting = s.act(a)
}

// stageName is the name of migration stage st as the release calls it.
func stageName(st State) string {
	switch st {
	case StateExpanding:
		return config.StageExpand
	case StateMigrating:
		return config.StageMigrate
	case StateFinalizing:
		return config.StageFinalize
	case StateContracting:
		return config.StageContract
	}
	return fmt.Sprint(st)
}

// awaits reports whether stage action a is the one the upgrade's
// current stage awaits.
func (u *Upgrade) awaits(a Action) bool {
	if u.Stage.Acting != a.Seq {
		return false
	}
	if k, ok := stageKindOf(u.State.Kind); ok {
		return a.Stage == k.Name && a.Name == u.State.Component
	}
	return stageName(u.State) == a.Stage
}
