package config

import (
	"strings"
	"testing"
)

// TestValidateFlow has one case per rule of a release's flow, with the
// exact problems and their lines (release 2.0.0 of base gets the flow
// at line 32).
func TestValidateFlow(t *testing.T) {
	flow := func(stages ...string) []edit {
		return []edit{{"policy: {on_failure: rollback}\n", "    flow:\n      - " + strings.Join(stages, "\n      - ") + "\npolicy: {on_failure: rollback}\n"}}
	}
	const kv, api = "{stage: phase, component: kv}", "{stage: phase, component: api}"
	runTable(t, []tcase{
		{"Ironic's flow", flow("{stage: expand}", kv, api,
			`{stage: action, name: networking, component: kv, calls: [{http: "http://{{.Any}}/net", method: POST}], gate: {http: "http://{{.Any}}/net/ok"}, deadline: 5m}`,
			"{stage: rollout, components: [kv, api], point_of_no_return: true}", "{stage: migrate}", "{stage: finalize}", "{stage: contract}"), nil},
		{"unknown stage", flow(kv, api, "{stage: unpin}"),
			[]string{`t.yaml:35: releases[1].flow[2].stage: unknown stage "unpin"; known: expand, phase, rollout, migrate, finalize, contract, hosts, action`}},
		{"stage missing", flow(kv, api, "{component: kv}"),
			[]string{"t.yaml:35: releases[1].flow[2].stage: must be set: one of expand, phase, rollout, migrate, finalize, contract, hosts, action"}},
		{"a component twice", flow(kv, api, kv),
			[]string{"t.yaml:35: releases[1].flow[2].component: component kv has a second phase (also releases[1].flow[0]): a component is upgraded once, or in parts, each phase named with the part it takes (take:, hosts: or host_labels:)"}},
		{"a component missing", flow(kv),
			[]string{"t.yaml:32: releases[1].flow: component api has no phase: a flow upgrades every component once ({stage: phase, component: api})"}},
		{"unknown component", flow(kv, api, "{stage: phase, component: db}"),
			[]string{`t.yaml:35: releases[1].flow[2].component: no component "db" (known: api, kv)`}},
		{"a phase after finalize", flow(kv, "{stage: finalize}", api),
			[]string{"t.yaml:35: releases[1].flow[2].component: the phase of api comes after finalize (releases[1].flow[1]), which moved the pin to 2.0.0: members of api still on the release before would run with a pin they cannot honour; put every phase before it"}},
		{"a phase after a rollout", flow(kv, "{stage: rollout, components: [kv]}", api),
			[]string{"t.yaml:35: releases[1].flow[2].component: the phase of api comes after rollout (releases[1].flow[1]), which moved the pin to 2.0.0: members of api still on the release before would run with a pin they cannot honour; put every phase before it"}},
		{"a rollout before its phase", flow(kv, "{stage: rollout, components: [kv, api]}", api),
			[]string{
				"t.yaml:34: releases[1].flow[1].components[1]: component api is rolled out before its phase: a rollout restarts members on the release they already run, so its phase comes first",
				"t.yaml:35: releases[1].flow[2].component: the phase of api comes after rollout (releases[1].flow[1]), which moved the pin to 2.0.0: members of api still on the release before would run with a pin they cannot honour; put every phase before it"}},
		{"two points of no return", flow(kv, "{stage: phase, component: api, point_of_no_return: true}", "{stage: finalize, point_of_no_return: true}"),
			[]string{"t.yaml:35: releases[1].flow[2].point_of_no_return: a second point of no return (also releases[1].flow[1]): an upgrade has one"}},
		{"point of no return after finalize", flow(kv, api, "{stage: finalize}", "{stage: contract, point_of_no_return: true}"),
			[]string{"t.yaml:36: releases[1].flow[3].point_of_no_return: the point of no return comes after finalize (releases[1].flow[2]), which is one already: finalize moves the pin, which nothing undoes"}},
		{"migrate before a phase", flow(kv, "{stage: migrate}", api),
			[]string{"t.yaml:34: releases[1].flow[1]: migrate comes before the phase of api (releases[1].flow[2]): migrate runs once every member runs the release"}},
		{"Glance's order: migrate after its component's phase, before another's", append(flow("{stage: expand}", kv, "{stage: migrate}", api, "{stage: finalize}", "{stage: contract}"),
			edit{"    downgrade_to: [2.0.x]\n", "    downgrade_to: [2.0.x]\n    migrations: {component: kv, expand: [{http: \"http://{{.Any}}/e\", method: POST}], migrate: [{http: \"http://{{.Any}}/m\", method: POST}], finalize: [{http: \"http://{{.Any}}/f\", method: POST}], contract: [{http: \"http://{{.Any}}/c\", method: POST}]}\n"}), nil},
		{"migrate before its component's phase", append(flow(api, "{stage: migrate}", kv),
			edit{"    downgrade_to: [2.0.x]\n", "    downgrade_to: [2.0.x]\n    migrations: {component: kv, migrate: [{http: \"http://{{.Any}}/m\", method: POST}]}\n"}),
			[]string{"t.yaml:35: releases[1].flow[1]: migrate comes before the phase of kv (releases[1].flow[2]): migrate runs once the members of its component (migrations.component: kv) run the release"}},
		{"finalize before migrate", flow(kv, api, "{stage: finalize}", "{stage: migrate}"),
			[]string{"t.yaml:35: releases[1].flow[2]: finalize comes before migrate (releases[1].flow[3]): finalize moves the pin once the data is migrated"}},
		{"contract before finalize", flow(kv, api, "{stage: contract}", "{stage: finalize}"),
			[]string{"t.yaml:35: releases[1].flow[2]: contract comes before finalize (releases[1].flow[3]): contract drops what only the release before needed, once there is no going back"}},
		{"expand after a phase", flow(kv, "{stage: expand}", api),
			[]string{"t.yaml:34: releases[1].flow[1]: expand comes after the phase of kv (releases[1].flow[0]): expand runs before any member runs the release"}},
		{"a stage twice", flow("{stage: expand}", kv, api, "{stage: expand}"),
			[]string{
				"t.yaml:36: releases[1].flow[3].stage: expand is listed twice (also releases[1].flow[0])"}},
		{"a key the stage does not take", flow("{stage: expand, component: kv}", kv, api),
			[]string{"t.yaml:33: releases[1].flow[0].component: the expand stage takes no component"}},
		{"keys the phase, rollout and action stages do not take", flow("{stage: phase, component: kv, name: x, deadline: 5m}", api,
			"{stage: rollout, components: [kv], component: kv, gate: {http: \"http://{{.Any}}/ok\"}}",
			`{stage: action, name: net, component: kv, components: [kv], calls: [{http: "http://{{.Any}}/net", method: POST}]}`),
			[]string{
				"t.yaml:33: releases[1].flow[0].deadline: the phase stage takes no deadline",
				"t.yaml:35: releases[1].flow[2].component: the rollout stage takes no component",
				"t.yaml:35: releases[1].flow[2].gate: the rollout stage takes no gate",
				"t.yaml:36: releases[1].flow[3].components: the action stage takes no components"}},
		{"an action without a name, a component or calls", flow(kv, api, "{stage: action}"),
			[]string{
				"t.yaml:35: releases[1].flow[2].name: must be set: a stage of kind action is named (its state is action-NAME)",
				"t.yaml:35: releases[1].flow[2].component: must name the component whose running member (.Any) the stage's calls are made against (known: api, kv)",
				"t.yaml:35: releases[1].flow[2].calls: an action needs at least one call"}},
		{"an action's call checked", flow(kv, api, `{stage: action, name: net, component: kv, calls: [{http: "http://{{.Adress}}/x"}]}`),
			[]string{"t.yaml:35: releases[1].flow[2].calls[0].http: template: no field Adress (there are .Name, .Component, .Host, .Address, .Version, .Any, .Pin, .To, .Backup, .Vars, .Members, .PID)"}},
		{"migration calls without their stage", append(flow(kv, api), edit{"    downgrade_to: [2.0.x]\n", "    downgrade_to: [2.0.x]\n    migrations: {component: kv, finalize: [{http: \"http://{{.Any}}/f\", method: POST}]}\n"}),
			[]string{"t.yaml:31: releases[1].migrations.finalize: the flow has no finalize stage: these calls would never be made; add {stage: finalize}"}},
		{"the pin in a member's arguments", []edit{{`args: [kv, "--raft={{.Vars.raft}}"]`, `args: [kv, "--raft={{.Vars.raft}}", "--pin={{.Pin}}"]`}}, nil},
	})
}
