package plan

import "github.com/ferry-upgrade/ferry/internal/strategy"

// Plan is the ordered work of one upgrade: phases one after another,
// batches one after another inside a phase. It is computed, never
// edited: after a restart the engine recomputes nothing it has already
// recorded, and members already at the target are simply skipped.
type Plan struct {
	From   []string `json:"from"` // versions observed at planning time, sorted
	To     string   `json:"to"`
	Phases []Phase  `json:"phases"`
	// Path is the chain of releases when the target is more than one
	// step away: To is its first, run to completion (finalized) before
	// the next is planned from what then runs.
	Path []string `json:"path,omitempty"`
}

// Phase is one component's turn; nothing of another component moves
// while it runs.
type Phase struct {
	Component      string `json:"component"`
	Strategy       string `json:"strategy"`
	MaxUnavailable int    `json:"max_unavailable"`
	Quorum         int    `json:"quorum,omitempty"` // strategies that keep one
	// Settings are the component's strategy settings: the state machine
	// asks the strategy for each next batch with them.
	Settings strategy.Settings `json:"settings"`
	// Batches are the batches the strategy expects when every batch
	// goes well (its Expected sizes over the members in order); the
	// upgrade forms the real ones at run time (their sizes adapt, and
	// members holding the component's role go last). A rollback plan's
	// batches are the ones it follows.
	Batches []Batch   `json:"batches"`
	Skipped []Skipped `json:"skipped,omitempty"` // members already at the target
	// Note tells the operator what shaped the phase: members already
	// down, a budget the engine will have to wait for.
	Note string `json:"note,omitempty"`
}

// Batch is the members of a phase that move together.
type Batch struct {
	Members []string `json:"members"`
}

// Skipped is a member the plan leaves alone, and why.
type Skipped struct {
	Member string `json:"member"`
	Reason string `json:"reason"`
}

// Observed is what the planner needs to know of the running cluster.
type Observed struct {
	// Version maps a member name to the version it runs ("" if unknown).
	Version map[string]string
	// Down lists members that are down or unhealthy right now, for any
	// reason: they count against max_unavailable.
	Down map[string]bool
}

// Members lists the phase's members in their planned order.
func (ph Phase) Members() []string {
	var out []string
	for _, b := range ph.Batches {
		out = append(out, b.Members...)
	}
	return out
}
