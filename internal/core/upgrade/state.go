package upgrade

import (
	"fmt"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// Kind is a kind of state of an upgrade, named after the seeds' states.
type Kind string

const (
	KindStarted          Kind = "upgrade-started"
	KindPreflight        Kind = "preflight"
	KindExpanding        Kind = "expanding"
	KindUpgrading        Kind = "upgrading" // a component's phase runs
	KindUpgraded         Kind = "upgraded"  // a component's phase passed its gate
	KindMigrating        Kind = "migrating"
	KindAwaitingFinalize Kind = "awaiting-finalize" // policy finalize: manual
	KindFinalizing       Kind = "finalizing"
	KindContracting      Kind = "contracting"
	KindCompleted        Kind = "completed"
	KindFailed           Kind = "failed"
	KindPaused           Kind = "paused"
	KindRollingBack      Kind = "rolling-back"
	KindRolledBack       Kind = "rolled-back"
	// A flow's rollout of a component (the members restarted on the
	// release they run, with the pin moved) runs, then passed its gate.
	KindRollingOut Kind = "rolling-out"
	KindRolledOut  Kind = "rolled-out"
	// KindAction is a flow's cluster action, named in Component: the
	// state of config's registered stage kind action (a registered
	// kind's state is config.StageKind.State, named).
	KindAction Kind = "action"
)

// kinds are the kinds in the order a reader meets them; those of a
// component's phase carry the component.
var kinds = []Kind{KindStarted, KindPreflight, KindExpanding, KindUpgrading, KindUpgraded, KindMigrating,
	KindAwaitingFinalize, KindFinalizing, KindContracting, KindCompleted, KindFailed, KindPaused,
	KindRollingBack, KindRolledBack, KindRollingOut, KindRolledOut}

// named reports whether a state of kind k carries a name: its phase's
// or rollout's component, a registered stage's name (an action's).
func (k Kind) named() bool {
	switch k {
	case KindUpgrading, KindUpgraded, KindRollingOut, KindRolledOut:
		return true
	}
	_, ok := stageKindOf(k)
	return ok
}

// stageKindOf is the registered flow stage kind (config.StageKind)
// whose stages have state kind k: the machine runs them as call stages.
func stageKindOf(k Kind) (config.StageKind, bool) {
	if k == "" {
		return config.StageKind{}, false
	}
	return config.StageKindOfState(string(k))
}

// State is an upgrade's state: a kind, and the component whose phase
// it is for upgrading and upgraded (rolling-out and rolled-out: whose
// rollout; action: the action's name). It is written as one word
// ("upgrading-kv", "completed") in records, events and the API, and
// compared as a value in code: no state is ever matched by prefix.
type State struct {
	Kind      Kind
	Component string
}

// The states without a component.
var (
	StateStarted          = State{Kind: KindStarted}
	StatePreflight        = State{Kind: KindPreflight}
	StateExpanding        = State{Kind: KindExpanding}
	StateMigrating        = State{Kind: KindMigrating}
	StateAwaitingFinalize = State{Kind: KindAwaitingFinalize}
	StateFinalizing       = State{Kind: KindFinalizing}
	StateContracting      = State{Kind: KindContracting}
	StateCompleted        = State{Kind: KindCompleted}
	StateFailed           = State{Kind: KindFailed}
	StatePaused           = State{Kind: KindPaused}
	StateRollingBack      = State{Kind: KindRollingBack}
	StateRolledBack       = State{Kind: KindRolledBack}
)

// Upgrading is the state while component c's phase runs.
func Upgrading(c string) State { return State{Kind: KindUpgrading, Component: c} }

// Upgraded is the state once component c's phase passed its gate.
func Upgraded(c string) State { return State{Kind: KindUpgraded, Component: c} }

// RollingOut is the state while component c's rollout runs.
func RollingOut(c string) State { return State{Kind: KindRollingOut, Component: c} }

// RolledOut is the state once component c's rollout passed its gate.
func RolledOut(c string) State { return State{Kind: KindRolledOut, Component: c} }

// Acting is the state while the flow's cluster action name runs.
func Acting(name string) State { return State{Kind: KindAction, Component: name} }

// Terminal reports whether no further step will be taken.
func (s State) Terminal() bool {
	return s.Kind == KindCompleted || s.Kind == KindFailed || s.Kind == KindRolledBack
}

// IsZero reports whether the state is unset.
func (s State) IsZero() bool { return s.Kind == "" }

func (s State) String() string {
	if s.Component != "" {
		return string(s.Kind) + "-" + s.Component
	}
	return string(s.Kind)
}

// MarshalText writes the state as one word.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state written by MarshalText.
func (s *State) UnmarshalText(b []byte) error {
	st, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// ParseState reads a state as written: "completed", "upgrading-kv".
func ParseState(w string) (State, error) {
	if w == "" {
		return State{}, nil
	}
	for _, k := range kinds {
		if !k.named() && w == string(k) {
			return State{Kind: k}, nil
		}
	}
	for _, k := range kinds {
		if c, ok := strings.CutPrefix(w, string(k)+"-"); ok && k.named() && c != "" {
			return State{Kind: k, Component: c}, nil
		}
	}
	for _, name := range config.StageKinds() {
		sk, ok := config.LookupStageKind(name)
		if !ok {
			continue
		}
		if c, ok := strings.CutPrefix(w, sk.State+"-"); ok && c != "" {
			return State{Kind: Kind(sk.State), Component: c}, nil
		}
	}
	return State{}, &unknownState{w}
}

// unknownState is ParseState's refusal of a word that is no state
// this build knows (Decode names it as such).
type unknownState struct{ word string }

func (e *unknownState) Error() string { return fmt.Sprintf("upgrade: unknown state %q", e.word) }
