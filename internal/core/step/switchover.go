package step

import (
	"cmp"
	"fmt"
)

// SwitchingOver hands a component's role (its active member) to a
// member already upgraded, before the batch of the member holding it:
// StarlingX's swact, cephadm's "mgr fail". Its action is the
// component's hook list switchover, made with .To the member the role
// goes to; it is complete once a member whose move is done holds the
// role and the component's cluster gate, checked after the call
// returned, is green. Its undo hands the role back to the member that
// held it.
const SwitchingOver Name = "switching-over"

func init() {
	RegisterExtra(Extra{
		Name:      SwitchingOver,
		Doc:       "hands the role to an upgraded member (hooks.switchover, with .To that member) before the batch of the member holding it",
		Hooks:     "switchover",
		NeedsRole: true,
		// Once: a call that succeeded is not made again (the role may
		// take a moment to be seen where it went); not at all when the
		// role is on a moved member already.
		Needs: func(f BatchFacts) bool { return !f.Acted && !f.HolderMoved && f.To != "" },
		Complete: func(f BatchFacts) bool {
			return f.Holder != "" && f.HolderMoved && f.GateGreen
		},
		Wait: func(f BatchFacts) string {
			role := roleOf(f)
			switch {
			case f.Holder == "" && !f.Acted:
				return "no member holds " + role + " right now: waiting to see who does before switching it over"
			case f.To == "" && !f.HolderMoved:
				return fmt.Sprintf("no upgraded member is healthy to take %s from %s", role, f.Holder)
			case !f.HolderMoved:
				return fmt.Sprintf("waiting for %s to hold %s (%s holds it)", f.To, role, cmp.Or(f.Holder, "no member"))
			case !f.GateGreen && f.GateDetail == "":
				return fmt.Sprintf("%s holds %s; waiting for a check of the cluster gate made since", f.Holder, role)
			case !f.GateGreen:
				return fmt.Sprintf("%s holds %s; the cluster gate is red: %s", f.Holder, role, f.GateDetail)
			}
			return ""
		},
		What: func(f BatchFacts) string {
			return fmt.Sprintf("%s switched over from %s to %s", roleOf(f), f.From, f.To)
		},
		UndoWhat: func(f BatchFacts) string {
			return fmt.Sprintf("switch %s back to %s", roleOf(f), f.From)
		},
	})
}

// roleOf names the role in words: "the role active".
func roleOf(f BatchFacts) string {
	if f.Role == "" {
		return "the role"
	}
	return "the role " + f.Role
}
