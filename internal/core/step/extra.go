package step

import (
	"sort"
	"sync"
	"time"
)

// Extra is a step a strategy adds to a batch, run before the batch's
// moves (a strategy names it in its Choice): a switchover of the
// component's active member before that member goes, as StarlingX
// swacts and cephadm fails its manager over. The machine walks it
// generically, as it walks Move: the action, when it is (still) to be
// taken, what completes it, what it waits for; the change its action
// makes is journaled with its undo before it is made.
//
// An extra step's action is always the component's hook list Hooks
// (switchover, a field of config.Hooks; or, for a step defined in a
// file of its own anywhere, "steps.NAME": the description's
// hooks.steps.NAME), made once for the component, with .To the member
// chosen by the machine to receive what the step hands over
// (BatchFacts.To). Its undo is the same list made again with .To the
// member that held it before (BatchFacts.From).
type Extra struct {
	Name Name
	// Doc says what the step does, in a sentence, for the reader of a
	// refusal ("…, which needs …").
	Doc string
	// Hooks names the hook list its action runs.
	Hooks string
	// NeedsRole: the component must describe its role (the check that
	// finds the member holding it): the step is about who holds it.
	NeedsRole bool
	// Needs says whether the action is (still) to be taken.
	Needs func(f BatchFacts) bool
	// Complete: the step is over.
	Complete func(f BatchFacts) bool
	// Wait says, in words, what the step waits for now.
	Wait func(f BatchFacts) string
	// What and UndoWhat say, in words, the change the action makes and
	// what its undo does, for the journal.
	What     func(f BatchFacts) string
	UndoWhat func(f BatchFacts) string
}

// BatchFacts are what an extra step's checks read: the component's role
// as observed just now, and the step as recorded.
type BatchFacts struct {
	// Role names the component's role ("active").
	Role string
	// Holder is the member holding the role now ("" when none does);
	// HolderMoved: its move in this phase is done (it runs its target).
	Holder      string
	HolderMoved bool
	// From is the member that held the role when the step acted (or
	// holds it now, before); To the member the step hands it to: one
	// whose move is done, healthy and not holding it ("" if none).
	From, To string
	// GateGreen: the component's cluster gate passed in a check begun
	// after the step's action returned (after the step began, if it
	// took none); true for a component without a gate.
	GateGreen bool
	// GateDetail is the gate's last verdict, in words.
	GateDetail string
	// Acted: the action succeeded once; Tries how often it was tried.
	Acted bool
	Tries int
	Now   time.Time
}

var (
	extraMu sync.RWMutex
	extras  = map[Name]Extra{}
)

// RegisterExtra makes an extra step known by name; a second
// registration of a name panics (a programming error, found at
// start-up).
func RegisterExtra(e Extra) {
	extraMu.Lock()
	defer extraMu.Unlock()
	if _, dup := extras[e.Name]; dup {
		panic("step: extra step " + string(e.Name) + " registered twice")
	}
	if _, dup := index[e.Name]; dup {
		panic("step: extra step " + string(e.Name) + " is a step of a member's move")
	}
	extras[e.Name] = e
}

// ExtraOf returns the extra step registered as n.
func ExtraOf(n Name) (Extra, bool) {
	extraMu.RLock()
	defer extraMu.RUnlock()
	e, ok := extras[n]
	return e, ok
}

// ExtraNames lists the registered extra steps, sorted.
func ExtraNames() []string {
	extraMu.RLock()
	defer extraMu.RUnlock()
	out := make([]string, 0, len(extras))
	for n := range extras {
		out = append(out, string(n))
	}
	sort.Strings(out)
	return out
}
