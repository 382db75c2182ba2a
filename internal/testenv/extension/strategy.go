package extension

import (
	"cmp"
	"slices"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// Reverse upgrades a component's members in reverse name order, the
// highest-named first, max_batch at a time (default 1); the member
// holding the component's role goes last, alone, once the step
// Promoting has handed the role to an upgraded member. Who holds the
// role is observed before each batch; until some member is seen
// holding it, only members down may go (a healthy one may be the
// holder, not seen yet).
const Reverse = "reverse"

func init() { strategy.Register(Reverse, reverse{}) }

type reverse struct{}

var _ strategy.StepAdder = reverse{}

func (reverse) Validate(_ strategy.Settings, members []strategy.Member) []strategy.Problem {
	if len(members) == 1 {
		return []strategy.Problem{{Field: "", Reason: "reverse hands the role to an upgraded member before its holder goes, but the component has 1 member: it needs at least 2"}}
	}
	return nil
}

func (reverse) Defaults(s strategy.Settings) strategy.Settings {
	if s.MaxBatch == 0 {
		s.MaxBatch = 1
	}
	return s
}

func (reverse) Quorum(strategy.Settings, int) int { return 0 }

// Adds: the promotion, before the batch of the member holding the role.
func (reverse) Adds() []string { return []string{string(Promoting)} }

// Expected shows the members highest-named first, max_batch at a time,
// the last alone: which member holds the role is known only at run
// time, so the note says it goes last.
func (reverse) Expected(s strategy.Settings, members []strategy.Member) ([][]string, string) {
	if len(members) == 0 {
		return nil, ""
	}
	return strategy.Cut(byNameDown(members), strategy.HolderLast(len(members), s)), "highest-named first; the member holding the role (observed at run time) last, alone, once the role is promoted to an upgraded member"
}

func (reverse) Next(r strategy.Round) strategy.Choice {
	size := max(1, r.Settings.MaxBatch)
	switch rs := strategy.SplitByRole(r); {
	case !rs.Seen:
		return strategy.Choice{Members: strategy.Take(byNameDown(rs.Down), size, r.Admit), Size: size,
			Why: "no member holds the role right now: only members down may go until one does"}
	case len(rs.Others) > 0:
		return strategy.Choice{Members: strategy.Take(byNameDown(rs.Others), size, r.Admit), Size: size, Why: "the highest-named first"}
	default:
		return strategy.Choice{Members: strategy.Take(rs.Holders, 1, r.Admit), Size: 1, Before: []string{string(Promoting)},
			Why: "the role's holder last, alone, once an upgraded member is promoted to the role"}
	}
}

func (reverse) Explain() string {
	return "batches: the members highest-named first, max_batch at a time; the member holding the role last, alone, after an upgraded member is promoted to it (hooks.steps.promote)"
}

// byNameDown is ms by name, the highest first.
func byNameDown(ms []strategy.Member) []strategy.Member {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, func(a, b strategy.Member) int { return cmp.Compare(b.Name, a.Name) })
	return out
}
