package extension

import (
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/step"
)

// Promoting hands the component's role to an upgraded member before
// the batch of the member holding it (Reverse adds it): its action is
// the component's own hook list hooks.steps.promote, made once with .To
// the member promoted; it is complete once an upgraded member holds the
// role (it waits for no cluster gate: the role check says it all). It
// fails, like a member, past the component's gate_deadline; its undo,
// journaled before its call, makes the list again with .To the member
// that held the role, when an abort or a rollback goes back.
const Promoting step.Name = "promoting"

func init() {
	step.RegisterExtra(step.Extra{
		Name:      Promoting,
		Doc:       "promotes an upgraded member to the role (hooks.steps.promote, with .To that member) before the batch of the member holding it",
		Hooks:     config.StepHooks + "promote",
		NeedsRole: true,
		Needs:     func(f step.BatchFacts) bool { return !f.Acted && !f.HolderMoved && f.To != "" },
		Complete:  func(f step.BatchFacts) bool { return f.HolderMoved },
		Wait: func(f step.BatchFacts) string {
			switch {
			case f.Holder == "":
				return "no member holds " + f.Role + " right now"
			case f.To == "":
				return "no upgraded member is healthy to be promoted to " + f.Role
			}
			return fmt.Sprintf("waiting for %s to hold %s (%s holds it)", f.To, f.Role, f.Holder)
		},
		What: func(f step.BatchFacts) string {
			return fmt.Sprintf("%s promoted to %s (from %s)", f.To, f.Role, f.From)
		},
		UndoWhat: func(f step.BatchFacts) string { return fmt.Sprintf("promote %s to %s again", f.From, f.Role) },
	})
}
