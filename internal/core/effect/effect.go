// Package effect is the journal of an upgrade's side effects: every
// change ferry makes outside a member's own process (a backend out of a
// load balancer's rotation, leadership moved, a node cordoned, a
// workload's update strategy changed, a cluster flag such as Ceph's
// noout set) is recorded with what undoes it, in the upgrade's record,
// in the same write as the step that makes it and before it is made.
// Whatever ends that step — its own undo step, an abort, a rollback, a
// failure, a pause, a crash of ferry and a resume — finds the effect
// open and undoes it. Undos are idempotent and retried.
//
// The package is pure: it keeps the journal's entries and answers
// which are open in which scope; the state machine (package upgrade)
// decides when to undo, the engine does it.
package effect

import (
	"fmt"
	"slices"
	"time"
)

// ScopeKind says how long an effect is meant to last.
type ScopeKind string

const (
	// ScopeMember lasts for one member's move: undone when it rejoins,
	// or when its move ends any other way.
	ScopeMember ScopeKind = "member"
	// ScopePhase lasts for one component's phase (Ceph's noout for the
	// OSDs, a workload's update strategy): undone when the phase ends.
	ScopePhase ScopeKind = "phase"
	// ScopeUpgrade lasts for the whole upgrade: undone at its end.
	ScopeUpgrade ScopeKind = "upgrade"
	// ScopeHost lasts while a host is locked for the moves of its
	// members (StarlingX's host-lock, a balancer's maintenance mode):
	// undone (unlocked) once they are done, or when the host's turn
	// ends any other way.
	ScopeHost ScopeKind = "host"
)

// Scope is what an effect belongs to: a member, a host, a component's
// phase, or the upgrade.
type Scope struct {
	Kind ScopeKind `json:"kind"`
	// Name is the member, the host or the component; empty for the
	// upgrade.
	Name string `json:"name,omitempty"`
}

func (s Scope) String() string {
	if s.Name == "" {
		return string(s.Kind)
	}
	return string(s.Kind) + " " + s.Name
}

// Member, Host, Phase and Upgrade make scopes.
func Member(name string) Scope     { return Scope{Kind: ScopeMember, Name: name} }
func Host(name string) Scope       { return Scope{Kind: ScopeHost, Name: name} }
func Phase(component string) Scope { return Scope{Kind: ScopePhase, Name: component} }
func Upgrade() Scope               { return Scope{Kind: ScopeUpgrade} }

// State is where an effect's undo stands. Undone effects leave the
// journal (their history is in the events).
type State string

const (
	// StateOpen: the change may have been made; its undo is owed.
	StateOpen State = "open"
	// StateFailed: its undo kept failing past its deadline; the
	// upgrade paused on it, and a resume tries again.
	StateFailed State = "failed"
	// StateAbandoned: the operator gave up on undoing it ('ferry
	// upgrade override --effect'); it is listed, loudly, to the end.
	StateAbandoned State = "abandoned"
)

// Hook names one hook call whose undo undoes an effect: the call at
// Index of the hook list List (pre_stop, pre_phase, pre_upgrade) of
// Component ("" for the cluster's own hooks), rendered for Member (for
// member hooks). The undo is rendered from the description when it
// runs, so that no secret of a call is copied into the record.
type Hook struct {
	List      string `json:"list"`
	Component string `json:"component,omitempty"`
	Index     int    `json:"index"`
	Member    string `json:"member,omitempty"`
	// To, when set, makes the undo the whole list made again with .To
	// this member (Index unused): a switchover's undo hands the role
	// back to the member that held it.
	To string `json:"to,omitempty"`
}

// Undo is how an effect is undone: a hook call's undo, a host's
// unlock, or the driver's own description, handed back to it.
type Undo struct {
	Hook *Hook `json:"hook,omitempty"`
	// Unlock names the host whose unlock undoes the effect (its lock):
	// its unlock calls, rendered from the description when they run.
	Unlock string `json:"unlock,omitempty"`
	Driver []byte `json:"driver,omitempty"`
}

// Effect is one journaled change.
type Effect struct {
	// ID is short and unique within the upgrade ("e7"), for the
	// operator to name.
	ID string `json:"id"`
	// Key names the change, stable across retries and processes, so
	// that recording it again is a no-op.
	Key   string `json:"key"`
	Scope Scope  `json:"scope"`
	// What says it in words: "api-2 out of the load balancer".
	What string `json:"what"`
	// UndoWhat says what its undo does, in words.
	UndoWhat string    `json:"undo_what,omitempty"`
	Undo     Undo      `json:"undo"`
	State    State     `json:"state"`
	Opened   time.Time `json:"opened"`
	// Undoing is when its undo was first tried; Tries, LastTry and
	// Error its attempts so far.
	Undoing time.Time `json:"undoing,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	LastTry time.Time `json:"last_try,omitzero"`
	Error   string    `json:"error,omitempty"`
	// Abandoned says who gave up on it, and when.
	Abandoned string `json:"abandoned,omitempty"`
	// Acting is the sequence number of the undo action in flight.
	Acting int `json:"acting,omitempty"`
}

// Detail says the effect in one line for an operator: what it did,
// its undo, the undo's last failure and who abandoned it.
func (e *Effect) Detail() string {
	d := e.What
	if e.UndoWhat != "" {
		d += "; undo: " + e.UndoWhat
	}
	if e.Error != "" {
		d += fmt.Sprintf(" (try %d: %s)", e.Tries, e.Error)
	}
	if e.Abandoned != "" {
		d += " (abandoned by " + e.Abandoned + ")"
	}
	return d
}

// Owed reports whether the effect's undo is still to be done.
func (e *Effect) Owed() bool { return e.State == StateOpen || e.State == StateFailed }

// Journal is an upgrade's effects, in the order they were opened.
type Journal []Effect

// Find returns the index of the effect with key, or -1.
func (j Journal) Find(key string) int {
	return slices.IndexFunc(j, func(e Effect) bool { return e.Key == key })
}

// ByID returns the index of the effect with id, or -1.
func (j Journal) ByID(id string) int {
	return slices.IndexFunc(j, func(e Effect) bool { return e.ID == id })
}

// Open records e as open unless an effect of the same key is already
// journaled (then it is left as it is: an undo owed once is owed once).
// seq numbers the journal's IDs. It reports whether e was new.
func (j *Journal) Open(e Effect, seq *int, now time.Time) bool {
	if j.Find(e.Key) >= 0 {
		return false
	}
	*seq++
	e.ID = fmt.Sprintf("e%d", *seq)
	e.State = StateOpen
	e.Opened = now
	*j = append(*j, e)
	return true
}

// Close removes the effect with key (undone, or undone by the step
// that made it), returning it.
func (j *Journal) Close(key string) (Effect, bool) {
	i := j.Find(key)
	if i < 0 {
		return Effect{}, false
	}
	e := (*j)[i]
	*j = slices.Delete(*j, i, i+1)
	return e, true
}

// Owed returns the indexes of the effects of scope whose undo is owed,
// the last opened first: undos run in reverse order.
func (j Journal) Owed(match func(Scope) bool) []int {
	var out []int
	for i := len(j) - 1; i >= 0; i-- {
		if j[i].Owed() && match(j[i].Scope) {
			out = append(out, i)
		}
	}
	return out
}

// Is returns a matcher of exactly scope s.
func Is(s Scope) func(Scope) bool { return func(x Scope) bool { return x == s } }

// Any matches every scope.
func Any(Scope) bool { return true }
