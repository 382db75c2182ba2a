package upgrade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/step"
)

// Finished folds the outcome of action a, which took took, into the
// record: a success moves its step on, a failure is noted and retried.
// An outcome no step awaits any more (the action was cancelled by an
// abort, or taken again after a crash) changes nothing.
func Finished(u Upgrade, a Action, err error, took time.Duration, now time.Time) Upgrade {
	u = u.clone()
	u.finish(a, err, took, now)
	return u
}

// Outcome is one action's end, as FinishedAll folds it.
type Outcome struct {
	Action Action
	Err    error
	Took   time.Duration
}

// FinishedAll folds outcomes that ended together into the record, in
// order, as Finished folds each: one copy of the record (and of its
// members map) for them all, where Finished one after the other made
// one each (a batch of a thousand members whose starts return at once
// made a thousand copies of a ten-thousand-member map).
func FinishedAll(u Upgrade, outs []Outcome, now time.Time) Upgrade {
	u = u.clone()
	for _, o := range outs {
		u.finish(o.Action, o.Err, o.Took, now)
	}
	return u
}

// finish folds one outcome into u, a clone of its own.
func (u *Upgrade) finish(a Action, err error, took time.Duration, now time.Time) {
	u.Updated = now
	switch {
	case a.Kind == ActStage:
		if !u.awaits(a) {
			return
		}
		u.Stage.Acting = 0
		u.Bound.Stages += took
		switch {
		case err != nil:
			u.Stage.Detail = fmt.Sprintf("try %d: %v", u.Stage.Tries, err)
		case registeredStage(a) && !a.Gate:
			// Its gate, if it has one, is checked next, at once.
			u.Stage.Called, u.Stage.Detail = true, "called"
			u.Stage.LastTry, u.Stage.Tries = time.Time{}, 0
		default:
			u.Stage.Done, u.Stage.Detail = true, "done"
		}
	case a.Kind == ActLock || a.Kind == ActReinstall || a.Kind == ActMigrateHost:
		u.hostFinished(a, err, took)
	case a.Kind == ActFerry:
		u.ferryFinished(a, err, took, now)
	case a.Kind == ActUndo:
		i := u.Effects.ByID(a.Effect)
		if i < 0 || u.Effects[i].Acting != a.Seq {
			return
		}
		e := &u.journal()[i]
		e.Acting = 0
		if err != nil {
			e.Error = err.Error()
			return
		}
		u.Bound.Hooks += took
		u.Effects.Close(e.Key)
	case a.Step != "":
		finishedBatchStep(u, a, err, took, now)
	case (a.Kind == ActHooks || a.Kind == ActPrune) && a.Member == "":
		h := u.Hook
		if h == nil || h.Acting != a.Seq {
			return
		}
		h.Acting = 0
		if err != nil {
			h.Detail = fmt.Sprintf("try %d: %v", h.Tries, err)
			return
		}
		h.Done, h.Detail = true, ""
		u.Bound.Hooks += took
	default:
		if m := u.Members[a.Member]; m == nil || m.Acting != a.Seq {
			return
		}
		m := u.ownOnce(a.Member)
		m.Acting = 0
		if errors.Is(err, context.Canceled) {
			// Cancelled by an abort: no failure of the member's, and no
			// retry to count against the move that follows.
			m.Detail = Describe(a) + ": cancelled"
			return
		}
		if err != nil {
			m.Retries++
			m.Detail = fmt.Sprintf("%s failed (try %d): %v", Describe(a), m.Tries, err)
			if errors.Is(err, ErrRefused) && asked(m.Step, a) {
				m.Refused = fmt.Sprintf("%s: %v", Describe(a), err)
			}
			return
		}
		if !asked(m.Step, a) {
			// Done, but for a step the member has left (a rollback took
			// it from there): it completes no other step.
			return
		}
		m.Acted = true
		m.Busy += took
		switch a.Kind {
		case ActStart:
			m.StartDone, m.StartTook = now, took
			if m.Started.IsZero() {
				m.Started = now.Add(-took)
			}
			m.RestartsSeen = 0
			if !strings.HasPrefix(m.Detail, step.SoakBroken) {
				m.Detail = "" // a failed try is history; a broken soak stays news
			}
		case ActStop:
			m.Stopped, m.StopTook = now.Add(-took), took
		case ActRestore:
			b := m.Backup
			b.Restored = now
			m.Backup = b
		}
	}
}

// Describe says what an action does, for events and errors.
func Describe(a Action) string {
	switch a.Kind {
	case ActStart:
		return fmt.Sprintf("start %s on %s", a.Member, a.Version)
	case ActStop:
		return "stop " + a.Member
	case ActStage:
		switch {
		case registeredStage(a) && a.Gate:
			return fmt.Sprintf("gate of %s %s of release %s", a.Stage, a.Name, a.Version)
		case registeredStage(a):
			return fmt.Sprintf("%s %s of release %s", a.Stage, a.Name, a.Version)
		}
		return fmt.Sprintf("%s of release %s", a.Stage, a.Version)
	case ActLock:
		return "lock host " + a.Host
	case ActBackup:
		return fmt.Sprintf("back up %s (%s) into %s", a.Member, a.Version, a.Backup)
	case ActRestore:
		return fmt.Sprintf("restore %s (%s) from %s", a.Member, a.Version, a.Backup)
	case ActPrune:
		return "prune the backups of " + a.Component
	case ActReinstall:
		return fmt.Sprintf("reinstall host %s with %s", a.Host, a.Version)
	case ActMigrateHost:
		return fmt.Sprintf("migrate the data of host %s to %s", a.Host, a.Version)
	case ActFerry:
		return fmt.Sprintf("ferry first: the agents onto the ferry release %s asks for", a.Version)
	case ActUndo:
		if a.Member != "" {
			return fmt.Sprintf("undo %s of %s", a.Effect, a.Member)
		}
		return "undo " + a.Effect
	case ActHooks:
		owner := cmp.Or(a.Member, a.Component, "the upgrade")
		if a.To != "" {
			return fmt.Sprintf("%s hooks of %s (to %s)", a.Hooks, owner, a.To)
		}
		return fmt.Sprintf("%s hooks of %s", a.Hooks, owner)
	}
	return fmt.Sprintf("%s %s", a.Kind, a.Member)
}

// asked reports whether action a is the action of step n: an outcome
// completes only the step that asked for it (a pre_stop hook's end is
// not a stop).
func asked(n step.Name, a Action) bool {
	def, _, ok := step.Of(n)
	return ok && string(def.Action) == string(a.Kind) && (a.Kind != ActHooks || def.Hooks == a.Hooks)
}

// registeredStage reports whether stage action a is a registered
// kind's stage (config.StageKind: an action), named in a.Name.
func registeredStage(a Action) bool {
	_, ok := config.LookupStageKind(a.Stage)
	return ok
}
