package plan

import (
	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

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
	// Flow is the release's own order of stages, when it declares one
	// (config.Release.Flow, a rollout one stage per component); empty
	// for the default order (Stages).
	Flow []Stage `json:"flow,omitempty"`
	// States are the release's names for the upgrade's own states, as
	// shown (config.Release.States).
	States map[string]string `json:"states,omitempty"`
}

// Stage is one stage of an upgrade's flow: Kind is one of
// config.StageKinds (expand, phase, rollout, migrate, finalize,
// contract, hosts, and the registered ones: action…); Component names
// a phase's or a rollout's component, Name a hosts stage or a
// registered kind's stage.
type Stage struct {
	Kind      string `json:"kind"`
	Component string `json:"component,omitempty"`
	Name      string `json:"name,omitempty"`
	// State is the state shown while the stage runs, when the flow
	// names one (config.FlowStage.State).
	State string `json:"state,omitempty"`
	// PointOfNoReturn: once this stage begins, abort and rollback are
	// refused.
	PointOfNoReturn bool `json:"point_of_no_return,omitempty"`
}

// Stages is the plan's flow: the release's own, or the default order
// (expand, every phase, migrate, finalize as the point of no return,
// contract), which is what an upgrade walks.
func (p Plan) Stages() []Stage {
	if len(p.Flow) > 0 {
		return p.Flow
	}
	out := make([]Stage, 0, len(p.Phases)+4)
	out = append(out, Stage{Kind: config.StageExpand})
	for _, ph := range p.Phases {
		out = append(out, Stage{Kind: config.StagePhase, Component: ph.Component})
	}
	return append(out, Stage{Kind: config.StageMigrate}, Stage{Kind: config.StageFinalize, PointOfNoReturn: true},
		Stage{Kind: config.StageContract})
}

// PhaseOf is the index in Phases of phase, rollout or hosts stage st,
// or -1.
func (p Plan) PhaseOf(st Stage) int {
	if st.Kind == config.StageHosts {
		for i, ph := range p.Phases {
			if ph.Hosts != nil && ph.Component == st.Name {
				return i
			}
		}
		return -1
	}
	rollout := st.Kind == config.StageRollout
	if !rollout && st.Kind != config.StagePhase {
		return -1
	}
	part := ""
	if !rollout {
		part = st.Name // a named phase: a part of its component
	}
	for i, ph := range p.Phases {
		if ph.Component == st.Component && ph.Rollout == rollout && ph.Hosts == nil && ph.Part == part {
			return i
		}
	}
	return -1
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
	// Rollout: the phase restarts every member of the component on the
	// release it already runs (the pin moved: a flow's rollout stage);
	// none is skipped for running the target.
	Rollout bool `json:"rollout,omitempty"`
	// Hosts, set for a hosts stage's phase (Component is then the
	// stage's name), says which components it moves host by host and
	// how; its batches are host batches.
	Hosts *Hosts `json:"hosts,omitempty"`
	// Part names the phase when it moves a part of its component (a
	// flow's named phase stage: StarlingX's first-master): its states
	// are upgrading-PART and upgraded-PART, and the component may have
	// other parts in other phases.
	Part string `json:"part,omitempty"`
}

// Name is what the phase's states are named after: its part, its
// hosts stage, or its component.
func (ph Phase) Name() string {
	if ph.Part != "" {
		return ph.Part
	}
	return ph.Component
}

// Batch is the members of a phase that move together; in a hosts
// phase, the hosts locked together and every member to move on them.
type Batch struct {
	Members []string `json:"members"`
	Hosts   []string `json:"hosts,omitempty"`
}

// MemberNames and HostNames are a batch's members and hosts, as
// functions of a batch for code that walks either.
func (b Batch) MemberNames() []string { return b.Members }
func (b Batch) HostNames() []string   { return b.Hosts }

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
