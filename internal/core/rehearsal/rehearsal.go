// Package rehearsal chooses, from a seed, how one rehearsal of an
// upgrade goes (`ferry rehearse`): the order of each component's
// members, where the checks run (before, after each stage that moves
// members, after finalize, after a rollback) and whether and where the
// upgrade is aborted and rolled back before it is run again. It is
// pure: the same seed and flow give the same schedule, printed first
// so that a failed run can be replayed (CockroachDB's mixedversion
// framework prints its plan and seed the same way).
package rehearsal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// Stage is one stage of the release's flow, as the schedule needs it.
type Stage struct {
	Kind string // config.StagePhase, StageRollout, StageHosts, StageFinalize…
	// Component is a phase's or rollout's component; Name a hosts
	// stage's (or a call stage's) name; Components a hosts stage's.
	Component  string
	Name       string
	Components []string
	// PointOfNoReturn marks the stage after whose beginning no abort is
	// allowed (finalize when no stage is marked).
	PointOfNoReturn bool
}

// moves reports whether the stage moves members: the cluster after it
// is a state of its own to check.
func (s Stage) moves() bool {
	switch s.Kind {
	case config.StagePhase, config.StageRollout, config.StageHosts:
		return true
	}
	return false
}

// label names the stage in a checkpoint's name: the component, or the
// hosts stage's name.
func (s Stage) label() string {
	switch s.Kind {
	case config.StageRollout:
		return "rollout " + s.Component
	case config.StageHosts:
		return "hosts " + s.Name
	}
	if s.Name != "" {
		return "phase " + s.Component + " (" + s.Name + ")" // a part of it
	}
	return "phase " + s.Component
}

// Component is one component's members, in the description's order.
type Component struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// Input is what a schedule is chosen from.
type Input struct {
	Seed uint64
	// Flow is the release's flow, or DefaultFlow's when it declares
	// none.
	Flow []Stage
	// Components are the components, each with its members.
	Components []Component
}

// Checkpoint is a check stage inserted into the flow: the cluster as it
// stands after the flow's stage After (an index into Input.Flow).
type Checkpoint struct {
	// Name is the check stage's name in the flow (its state is
	// rehearsing-NAME): rehearse-1, rehearse-2… in flow order.
	Name string `json:"name"`
	// Stage is what the report calls it: "after phase kv".
	Stage string `json:"stage"`
	After int    `json:"after"`
	// Component is the component its call is made against (the
	// stage's own, or a hosts stage's first).
	Component string `json:"component"`
}

// The stages of a rehearsal that are not checkpoints of the flow.
const (
	StageBefore   = "before"
	StageFinal    = "after finalize"
	StageRollback = "after rollback"
)

// Schedule is one rehearsal, chosen from the seed.
type Schedule struct {
	Seed uint64 `json:"seed"`
	// Order is each component's members in the order the copy of the
	// description lists them: what the strategies take as "the plan's
	// order" (members down first and a role's holder last still apply).
	Order []Component `json:"order"`
	// Checkpoints are the check stages inserted into the flow, in flow
	// order.
	Checkpoints []Checkpoint `json:"checkpoints"`
	// AbortAt, if not empty, is the stage (a checkpoint's Stage, or
	// StageBefore) after whose checks the first upgrade is aborted:
	// every member touched rolls back, the checks run again, and the
	// upgrade is run again to its end.
	AbortAt string `json:"abort_at,omitempty"`
}

// Choose chooses a schedule from in.Seed: a permutation of each
// component's members, a checkpoint after each stage that moves
// members, and with even odds an abort at one of the stages before the
// point of no return (before any member moves, or at a checkpoint).
func Choose(in Input) (Schedule, error) {
	if len(in.Flow) == 0 {
		return Schedule{}, errors.New("rehearsal: the flow has no stage")
	}
	// Nearby seeds (1, 2, 3…) are what people type: splitmix64 spreads
	// them before PCG takes them, or their first draws would agree.
	s1 := splitmix64(in.Seed)
	rng := rand.New(rand.NewPCG(s1, splitmix64(s1)))
	s := Schedule{Seed: in.Seed}
	for _, c := range in.Components {
		ms := slices.Clone(c.Members)
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		s.Order = append(s.Order, Component{Name: c.Name, Members: ms})
	}
	noReturn := pointOfNoReturn(in.Flow)
	abortable := []string{StageBefore}
	for i, st := range in.Flow {
		if !st.moves() {
			continue
		}
		cp := Checkpoint{Name: fmt.Sprintf("rehearse-%d", len(s.Checkpoints)+1), Stage: "after " + st.label(), After: i, Component: st.Component}
		if st.Kind == config.StageHosts && len(st.Components) > 0 {
			cp.Component = st.Components[0]
		}
		s.Checkpoints = append(s.Checkpoints, cp)
		// A checkpoint sits after its stage and before the next: an
		// abort there comes before the point of no return unless its
		// stage is that point or after it.
		if i < noReturn {
			abortable = append(abortable, cp.Stage)
		}
	}
	if len(s.Checkpoints) == 0 {
		return Schedule{}, errors.New("rehearsal: the flow moves no member (no phase, rollout or hosts stage)")
	}
	if rng.IntN(2) == 1 {
		s.AbortAt = abortable[rng.IntN(len(abortable))]
	}
	return s, nil
}

// Stages are the check stages in the order a rehearsal runs them: the
// first upgrade up to its abort and the rollback's, then the upgrade
// again to its end.
func (s Schedule) Stages() []string {
	out := []string{StageBefore}
	if s.AbortAt != "" {
		for _, cp := range s.Checkpoints {
			if s.AbortAt == StageBefore {
				break
			}
			out = append(out, cp.Stage)
			if cp.Stage == s.AbortAt {
				break
			}
		}
		out = append(out, StageRollback)
	}
	for _, cp := range s.Checkpoints {
		out = append(out, cp.Stage)
	}
	return append(out, StageFinal)
}

// String is the schedule as `ferry rehearse` prints it first:
// "seed 42; plan: order kv: kv-2, kv-1, kv-3; …; checks: before → …".
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d; plan: order", s.Seed)
	for i, c := range s.Order {
		sep := ";"
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %s: %s", sep, c.Name, strings.Join(c.Members, ", "))
	}
	b.WriteString("; checks: ")
	for i, st := range s.Stages() {
		if i > 0 {
			b.WriteString(" → ")
		}
		if st == StageRollback {
			b.WriteString("abort → ")
		}
		b.WriteString(st)
		if st == StageRollback {
			b.WriteString(" → upgrade again")
		}
	}
	return b.String()
}

// AbortAfter reports whether the upgrade is aborted after the checks of
// stage: the schedule aborts there and the rollback has not been made.
func (s Schedule) AbortAfter(stage string, rolledBack bool) bool {
	return !rolledBack && s.AbortAt != "" && stage == s.AbortAt
}

// splitmix64 is one step of SplitMix64 (Steele, Lea and Flood 2014): a
// seed's bits spread over the whole word.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// pointOfNoReturn is the index of the stage marked point_of_no_return,
// else of finalize, else len(flow).
func pointOfNoReturn(flow []Stage) int {
	for i, st := range flow {
		if st.PointOfNoReturn {
			return i
		}
	}
	for i, st := range flow {
		if st.Kind == config.StageFinalize {
			return i
		}
	}
	return len(flow)
}

// DefaultFlow is the flow of a release that declares none, as
// plan.Plan.Stages lays it out (expand, a phase per component in order,
// migrate, finalize as the point of no return, contract): taken from
// it, so that a rehearsal checks the stages an upgrade walks.
func DefaultFlow(componentsInOrder []string) []Stage {
	var p plan.Plan
	for _, c := range componentsInOrder {
		p.Phases = append(p.Phases, plan.Phase{Component: c})
	}
	stages := p.Stages()
	out := make([]Stage, len(stages))
	for i, st := range stages {
		out[i] = Stage{Kind: st.Kind, Component: st.Component, Name: st.Name, PointOfNoReturn: st.PointOfNoReturn}
	}
	return out
}

// FromConfig is a release's flow as the schedule needs it.
func FromConfig(flow []config.FlowStage) []Stage {
	out := make([]Stage, len(flow))
	for i, f := range flow {
		out[i] = Stage{Kind: f.Stage, Component: f.Component, Name: f.Name, Components: slices.Clone(f.Components), PointOfNoReturn: f.PointOfNoReturn}
	}
	return out
}
