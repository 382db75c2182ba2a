package config

// StageAction is a flow's cluster action: one gated call for the whole
// cluster (StarlingX's "upgrade networking" between its two control
// plane phases). Its calls are made until they pass, then its gate
// until it passes, within its deadline; its state is action-NAME.
const StageAction = "action"

func init() {
	RegisterStageKind(StageKind{
		Name:  StageAction,
		State: "action",
		Doc:   "one gated call for the whole cluster: its calls until they pass, then its gate, within its deadline",
		Takes: []string{"component", "calls", "gate", "deadline"},
		Check: func(n Node, st *FlowStage) {
			comp := n.StageComponent("component", st.Component)
			if len(st.Calls) == 0 {
				n.AddAt("", "calls", "an action needs at least one call")
			}
			for j := range st.Calls {
				n.StageCall(index("calls", j), &st.Calls[j], comp)
			}
			if st.Gate != nil {
				n.StageCall("gate", st.Gate, comp)
			}
			n.StageDeadline("deadline", st.Deadline)
		},
		Calls: func(st *FlowStage, gate bool) (string, []Call) {
			switch {
			case !gate:
				return st.Component, st.Calls
			case st.Gate != nil:
				return st.Component, []Call{*st.Gate}
			}
			return st.Component, nil
		},
	})
}
