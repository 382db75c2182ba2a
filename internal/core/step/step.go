// Package step describes, as data, the steps of one member's move to
// its target version: drain, stop, (back up or restore,) start, soak,
// rejoin. Each step says
// what action the engine takes in it, how its completion is seen in
// what was observed, when it has nothing to do, and what ends it
// badly. The state machine (package upgrade) walks Move generically;
// it never names a step. It is pure, like the machine.
//
// To add a step to a member's move (lock a host): write its Def in
// this package and put it in Move where it belongs. If its action is a
// list of hooks, name the list in Hooks (the description then needs
// that list: a field of config.Hooks); an action the engine cannot
// already take needs a case in the engine's dispatch too.
//
// A step a strategy adds before a batch's moves (switch over an active
// member: switchover.go) is an Extra, registered by name with
// RegisterExtra in a file of its own; the strategy names it in its
// choice, the machine walks it generically (extra.go).
package step

import (
	"cmp"
	"fmt"
	"time"
)

// Name is a member's step, as recorded and shown.
type Name string

const (
	Pending   Name = "pending"
	Draining  Name = "draining"  // pre-stop hooks: out of rotation, leadership away
	Stopping  Name = "stopping"  // graceful stop
	Starting  Name = "starting"  // started on the target, waiting to be healthy
	Soaking   Name = "soaking"   // healthy, staying healthy for min_healthy_time
	Rejoining Name = "rejoining" // the member's effects undone, post-start hooks: back into rotation
	Done      Name = "done"
	Failed    Name = "failed"
)

// InFlight reports whether a member in step n is (or may be) out of
// service because of ferry.
func (n Name) InFlight() bool {
	_, ok := index[n]
	return ok
}

// Action is what the engine does in a step.
type Action string

const (
	ActHooks Action = "hooks" // run the hook list the step names
	ActStop  Action = "stop"  // stop the member gracefully through the driver
	ActStart Action = "start" // start the member on its target through the driver
)

// Facts are what a step's checks read: the member as observed just
// now, and as recorded.
type Facts struct {
	Running  bool
	OnTarget bool // running the target version
	Healthy  bool // its member check passes, thresholds applied
	// HealthySince is when it became healthy on the target.
	HealthySince time.Time
	// Hooks reports whether the component has calls in hook list l.
	Hooks func(l string) bool
	// Owed is the number of the member's effects whose undo is owed.
	Owed int
	// Tries is how often the step's action was tried; Acted is true
	// once it succeeded.
	Tries int
	Acted bool
	// Fresh: the member was observed after the step's last action
	// returned (what it did can be seen).
	Fresh bool
	// SameProcess: the member runs the process that became healthy
	// (same pid and start time), so its soak goes on across a time
	// ferry could not watch; a restart unseen meanwhile breaks it.
	SameProcess bool
	Soak        time.Duration
	Now         time.Time
	// Exits counts the member's exits on its target since its first
	// start in this move, within the crash-loop window; CrashLimit is
	// how many make a crash loop, ExitDetail how the last one ended.
	Exits      int
	CrashLimit int
	ExitDetail string
	// Backup is the member's backup, for the backup steps.
	Backup BackupFacts
	// Refused is set when the step's last action was refused in a way
	// no retry mends (a backup that does not verify): the move fails at
	// once, with it.
	Refused string
}

// Def is one step of a member's move.
type Def struct {
	Name Name
	// Action is what the engine does in the step; "" for a step that
	// only waits (the soak).
	Action Action
	// Hooks names the hook list an ActHooks action runs; calls of it
	// with an undo open member effects before the action.
	Hooks string
	// Closes: before its action, the member's owed effects are undone
	// (the normal end of a drain).
	Closes bool
	// Admit: the member's admission is checked again before the action
	// (the moment it goes down: another member may have failed since).
	Admit bool
	// Needs says whether the action is (still) to be taken; nil means
	// until it has succeeded once.
	Needs func(f Facts) bool
	// Skip: the step has nothing to do for this member now.
	Skip func(f Facts) bool
	// Complete: the step is over (for a step with an action, seen after
	// it; a start is complete when the member is healthy on its target).
	Complete func(f Facts) bool
	// Fail, if set, says why the member's move fails at once.
	Fail func(f Facts) string
	// Back, if set, sends the member back to an earlier step, and says
	// why (a soak broken by the member turning unhealthy).
	Back func(f Facts) (Name, string)
	// Wait says what the step waits for, and when to look again (zero:
	// at the next observation).
	Wait func(f Facts) (string, time.Time)
}

// SoakBroken begins the detail of a member that became healthy and
// then failed within its soak.
const SoakBroken = "unhealthy during its soak (min_healthy_time): "

// Move is a member's move, step by step.
var Move = []Def{
	{
		Name: Draining, Action: ActHooks, Hooks: "pre_stop",
		// A member that is not running has nothing to drain; one that
		// runs unhealthy gets one try of its hooks (its load balancer or
		// its peers may not answer for it), then goes on.
		Skip: func(f Facts) bool {
			return !f.Hooks("pre_stop") || f.OnTarget || !f.Running || (!f.Healthy && f.Tries > 0)
		},
		Complete: func(f Facts) bool { return f.Acted },
	},
	{
		Name: Stopping, Action: ActStop, Admit: true,
		Skip:     func(f Facts) bool { return !f.Running || f.OnTarget },
		Complete: func(f Facts) bool { return f.Acted },
	},
	backingUp,
	restoring,
	{
		Name: Starting, Action: ActStart,
		// Started again when it is not running its target: after an exit
		// (a crash loop counts them), or a start that did not take.
		Needs:    func(f Facts) bool { return !f.OnTarget && (!f.Acted || f.Fresh) },
		Complete: func(f Facts) bool { return f.OnTarget && f.Healthy },
		Fail: func(f Facts) string {
			if f.CrashLimit > 0 && f.Exits >= f.CrashLimit {
				return fmt.Sprintf("crash loop: exited %d times since its start (%s)", f.Exits, cmp.Or(f.ExitDetail, "-"))
			}
			return ""
		},
	},
	{
		Name:     Soaking,
		Complete: func(f Facts) bool { return !f.Now.Before(f.HealthySince.Add(f.Soak)) },
		Back: func(f Facts) (Name, string) {
			if !f.OnTarget || !f.Healthy {
				return Starting, SoakBroken
			}
			if !f.SameProcess {
				return Starting, SoakBroken + "its process changed (restarted); now: "
			}
			return "", ""
		},
		Wait: func(f Facts) (string, time.Time) { return "", f.HealthySince.Add(f.Soak) },
		Fail: func(f Facts) string {
			if f.CrashLimit > 0 && f.Exits >= f.CrashLimit {
				return fmt.Sprintf("crash loop: exited %d times since its start (%s)", f.Exits, cmp.Or(f.ExitDetail, "-"))
			}
			return ""
		},
	},
	{
		Name: Rejoining, Action: ActHooks, Hooks: "post_start", Closes: true,
		Skip:     func(f Facts) bool { return !f.Hooks("post_start") && f.Owed == 0 },
		Complete: func(f Facts) bool { return f.Acted },
	},
}

var index = func() map[Name]int {
	m := map[Name]int{}
	for i, d := range Move {
		m[d.Name] = i
	}
	return m
}()

// Of returns the Def of step n and its position in Move.
func Of(n Name) (Def, int, bool) {
	i, ok := index[n]
	if !ok {
		return Def{}, -1, false
	}
	return Move[i], i, true
}

// Known reports whether n is a step this build knows: one of Move's,
// or pending, done or failed. A record naming another was written by a
// build with steps this one cannot take.
func Known(n Name) bool {
	_, ok := index[n]
	return ok || n == Pending || n == Done || n == Failed
}

// First is the step a member admitted to a batch begins with.
func First() Name { return Move[0].Name }

// After is the step after n (Done after the last).
func After(n Name) Name {
	i, ok := index[n]
	if !ok || i+1 >= len(Move) {
		return Done
	}
	return Move[i+1].Name
}

// Opens lists the hook lists whose undos open member effects: a move's
// steps that run hooks, before their action.
func Opens(d Def) string {
	if d.Action == ActHooks && !d.Closes {
		return d.Hooks
	}
	return ""
}
