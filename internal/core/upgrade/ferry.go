package upgrade

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// FerryFirst is the upgrade's first step when its release asks for a
// newer ferry than the agents run (requires_ferry, or a ferry binary of
// its own): every agent older than that ferry re-executed on it, one
// host at a time, its members running on, before the pre_upgrade hooks
// and before any member moves (ActFerry). The engine sets it when it
// begins an upgrade on a substrate with agents. The step is
// level-triggered like the rest: an agent on the release already is
// skipped, so a step lost with its process is simply taken again.
type FerryFirst struct {
	// Requires is the release's requires_ferry ("" when it names a
	// binary alone); Binary the ferry binary the agents re-execute on,
	// as the description names it ("" for the ferry that runs the
	// upgrade).
	Requires string `json:"requires,omitempty"`
	Binary   string `json:"binary,omitempty"`
	// Done is when every agent answered on the ferry the step asks for.
	Done time.Time `json:"done,omitzero"`
	// Acting is the ActFerry action in flight; Tries and LastTry count
	// its takes (a take lost with its process is taken again).
	Acting  int       `json:"acting,omitempty"`
	Tries   int       `json:"tries,omitempty"`
	LastTry time.Time `json:"last_try,omitzero"`
	// Failed says why it could not be done: the upgrade fails on it,
	// nothing of the cluster touched.
	Failed string `json:"failed,omitempty"`
}

// ferryFirst runs the upgrade's first step, if it has one, and reports
// whether it is done. Its failure fails the upgrade before its turn:
// no member moved, no hook ran; the agents already moved stay on the
// newer ferry (it understands what the older one did).
func (s *stepper) ferryFirst() bool {
	f := s.u.Ferry
	switch {
	case f == nil || !f.Done.IsZero():
		return true
	case f.Failed != "":
		s.fail("ferry first: %s", f.Failed)
		return false
	case s.inFlight(f.Acting):
		s.wait("ferry first: the agents onto ferry %s, one host at a time, before any member moves", ferryOf(f))
		return false
	}
	// Not begun, or lost with the process that took it: taken (again).
	// (s.u is a clone: its FerryFirst is its own.)
	f.Tries++
	f.LastTry = s.now
	f.Acting = s.act(Action{Kind: ActFerry, Version: s.u.To})
	s.wait("ferry first: the agents onto ferry %s, one host at a time, before any member moves", ferryOf(f))
	return false
}

// ferryOf says which ferry the step moves the agents to.
func ferryOf(f *FerryFirst) string {
	switch {
	case f.Binary != "" && f.Requires != "":
		return fmt.Sprintf("%s or later (%s)", f.Requires, f.Binary)
	case f.Binary != "":
		return "the release of " + f.Binary
	}
	return f.Requires + " or later"
}

// ferryFinished folds in the outcome of the ActFerry action a. A
// cancellation (ferry stopped, or an abort) is no failure: the step is
// taken again, or the abort ends the upgrade.
func (u *Upgrade) ferryFinished(a Action, err error, took time.Duration, now time.Time) {
	f := u.Ferry
	if f == nil || f.Acting != a.Seq {
		return
	}
	f.Acting = 0
	u.Bound.Hooks += took
	switch {
	case errors.Is(err, context.Canceled):
	case err != nil:
		f.Failed = err.Error()
	default:
		f.Done = now
	}
}
