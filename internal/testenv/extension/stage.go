package extension

import (
	"strconv"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// StageCheckpoint is a kind of flow stage: a checkpoint of the whole
// cluster between two stages (a backup taken, a snapshot of the data
// before the next component moves), one call made against a running
// member of its component until it passes, within its deadline. Its
// state is checkpointing-NAME; like any stage it may be the point of no
// return.
const StageCheckpoint = "checkpoint"

func init() {
	config.RegisterStageKind(config.StageKind{
		Name:  StageCheckpoint,
		State: "checkpointing",
		Doc:   "one call for the whole cluster, made until it passes: a checkpoint between two stages",
		Takes: []string{"component", "calls", "deadline"},
		Check: func(n config.Node, st *config.FlowStage) {
			comp := n.StageComponent("component", st.Component)
			if len(st.Calls) != 1 {
				n.AddAt("", "calls", "a checkpoint is one call (it has %d)", len(st.Calls))
			}
			for i := range st.Calls {
				n.StageCall("calls["+strconv.Itoa(i)+"]", &st.Calls[i], comp)
			}
			n.StageDeadline("deadline", st.Deadline)
		},
		Calls: func(st *config.FlowStage, gate bool) (string, []config.Call) {
			if gate {
				return st.Component, nil // no gate: its call passing is the checkpoint
			}
			return st.Component, st.Calls
		},
	})
}
