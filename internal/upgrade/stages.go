package upgrade

import (
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/config"
)

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

// nextStage is what follows stage st once it is done.
func (s *stepper) nextStage(st State) {
	u := &s.u
	switch st {
	case StateExpanding:
		u.Phase = 0
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
		s.end(StateCompleted)
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
		if len(calls) > 0 {
			u.Boundary = s.now // what it changed is checked before a batch
		}
		s.nextStage(st)
		return
	}
	m := &s.c.Release(u.To).Migrations
	if u.Stage.Since.IsZero() {
		u.Stage.Since = s.now
	}
	if u.Stage.Acting != 0 {
		if s.inFlight(u.Stage.Acting) {
			s.wait("%s: %s", st, orDash(u.Stage.Detail))
			return
		}
		u.Stage.Acting = 0
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
	u.Stage.Acting = s.act(Action{Kind: ActStage, Stage: stageName(st), Version: u.To})
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
	return fmt.Sprint(st)
}
