package rehearse

import (
	"gopkg.in/yaml.v3"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/rehearsal"
)

// stageCheck is the kind of flow stage a rehearsal inserts into its
// copy of the description after each stage that moves members: one call
// the rehearsal answers itself once it has checked the cluster as that
// stage left it. Its state is rehearsing-NAME (rehearsing-rehearse-1).
// Only `ferry rehearse` writes it, in the copy; a description may name
// it but gains nothing by it (its call is made like any other).
const stageCheck = "rehearsal-check"

func init() {
	config.RegisterStageKind(config.StageKind{
		Name:  stageCheck,
		State: "rehearsing",
		Doc:   "ferry rehearse's checks of the cluster as the stage before left it (written into the rehearsal's copy only)",
		Takes: []string{"component", "calls", "deadline"},
		Check: func(n config.Node, st *config.FlowStage) {
			comp := n.StageComponent("component", st.Component)
			if len(st.Calls) != 1 {
				n.AddAt("", "calls", "a rehearsal's check is one call (it has %d)", len(st.Calls))
			}
			for i := range st.Calls {
				n.StageCall("calls", &st.Calls[i], comp)
			}
			n.StageDeadline("deadline", st.Deadline)
		},
		Calls: func(st *config.FlowStage, gate bool) (string, []config.Call) {
			if gate {
				return st.Component, nil
			}
			return st.Component, st.Calls
		},
	})
}

// checkStage is checkpoint cp as a stage of the copy's flow.
func checkStage(cp rehearsal.Checkpoint) *yaml.Node {
	call := mapping("http", checkpointURL+cp.Name, "method", "POST", "timeout", checkpointTimeout)
	st := mapping("stage", stageCheck, "name", cp.Name, "component", cp.Component, "deadline", checkpointTimeout)
	st.Content = append(st.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "calls"},
		&yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{call}})
	return st
}
