package config

import (
	"slices"
	"strings"
	"testing"
)

// TestValidatePhaseParts has one case per rule of a component moved in
// parts, each a named phase (StarlingX's first control plane, the
// networking, the second): how a part takes its members, its name (a
// state's), and how the parts divide the component. The hosts are h1
// (kv-1, controller), h2 (kv-2 api-1) and h3 (kv-3 api-2), workers; the
// flow begins at line 34.
func TestValidatePhaseParts(t *testing.T) {
	three := []edit{
		{"  - {name: h1, agent: 127.0.0.1:7101}\n", "  - {name: h1, agent: 127.0.0.1:7101, labels: {personality: controller}}\n" +
			"  - {name: h2, agent: 127.0.0.2:7101, labels: {personality: worker}}\n  - {name: h3, agent: 127.0.0.3:7101, labels: {personality: worker}}\n"},
		{"host: h1, address: 127.0.0.1:8102", "host: h2, address: 127.0.0.1:8102"},
		{"host: h1, address: 127.0.0.1:8103", "host: h3, address: 127.0.0.1:8103"},
		{"host: h1, address: 127.0.0.1:8201", "host: h2, address: 127.0.0.1:8201"},
		{"host: h1, address: 127.0.0.1:8202", "host: h3, address: 127.0.0.1:8202"},
	}
	flow := func(stages ...string) []edit {
		return append(slices.Clone(three), edit{"policy: {on_failure: rollback}\n", "    flow:\n      - " + strings.Join(stages, "\n      - ") + "\npolicy: {on_failure: rollback}\n"})
	}
	const api = "{stage: phase, component: api}"
	const net = `{stage: action, name: networking, component: kv, calls: [{http: "http://{{.Any}}/net", method: POST}]}`
	runTable(t, []tcase{
		{"StarlingX's control plane: the first, the networking, the rest", flow("{stage: phase, component: kv, name: first-master, take: 1}", net,
			"{stage: phase, component: kv, name: second-master}", api), nil},
		{"by label and the rest, each with its budget", flow("{stage: phase, component: kv, name: controllers, host_labels: {personality: controller}, max_unavailable: 1}",
			"{stage: phase, component: kv, name: workers, max_unavailable: 50%}", api), nil},
		{"a named phase alone: its states renamed", flow("{stage: phase, component: kv, name: kubelets}", api), nil},
		{"by host name, every member taken", flow("{stage: phase, component: kv, name: a, hosts: [h1]}", "{stage: phase, component: kv, name: b, hosts: [h2, h3]}", api), nil},
		{"a part unnamed", flow("{stage: phase, component: kv, take: 1}", "{stage: phase, component: kv, name: rest}", api),
			[]string{
				"t.yaml:35: releases[1].flow[0].name: a phase that moves a part of kv (take:, hosts: or host_labels:) must be named: its states are upgrading-NAME and upgraded-NAME"}},
		{"a part and a whole phase", flow("{stage: phase, component: kv, name: first, take: 1}", "{stage: phase, component: kv}", api),
			[]string{
				"t.yaml:36: releases[1].flow[1].component: component kv has a second phase (also releases[1].flow[0]): a component is upgraded once, or in parts, each phase named with the part it takes (take:, hosts: or host_labels:)"}},
		{"two parts take the rest", flow("{stage: phase, component: kv, name: a}", "{stage: phase, component: kv, name: b}", api),
			[]string{"t.yaml:36: releases[1].flow[1]: a second part of kv that moves the rest (also releases[1].flow[0]): give it take:, hosts: or host_labels:"}},
		{"a part's name taken: a component's, another stage's", flow("{stage: phase, component: kv, name: api, take: 1}", "{stage: phase, component: kv, name: b}",
			"{stage: phase, component: api, name: b}"),
			[]string{
				"t.yaml:35: releases[1].flow[0].name: api is a component's name too: the part's state upgrading-api would be that component's phase's; name the part otherwise",
				"t.yaml:37: releases[1].flow[2].name: b names another stage too (releases[1].flow[1]): its state upgrading-b would be both's; name each its own"}},
		{"take and hosts both, a negative take and budget", flow("{stage: phase, component: kv, name: a, take: 1, hosts: [h1]}",
			"{stage: phase, component: kv, name: b, take: -1, max_unavailable: -2}", "{stage: phase, component: kv, name: c}", api),
			[]string{
				"t.yaml:35: releases[1].flow[0].hosts: a part takes its members by count (take) or by host (hosts), not both",
				"t.yaml:36: releases[1].flow[1].take: must not be negative (got -1): the number of members the part moves",
				"t.yaml:36: releases[1].flow[1].max_unavailable: must not be negative (got -2; 0 means the component's strategy's)"}},
		{"an unknown host, labels on no member's host", flow("{stage: phase, component: kv, name: a, hosts: [h9]}",
			"{stage: phase, component: kv, name: b, host_labels: {personality: gpu}}", "{stage: phase, component: kv, name: c}", api),
			[]string{
				`t.yaml:35: releases[1].flow[0].hosts[0]: no host "h9" (known: h1, h2, h3)`,
				"t.yaml:35: releases[1].flow[0].hosts: no member of kv is on the hosts it selects: the part would move nothing",
				"t.yaml:36: releases[1].flow[1].host_labels: no member of kv is on the hosts it selects: the part would move nothing"}},
		{"members no part takes, a member two take", flow("{stage: phase, component: kv, name: a, hosts: [h1, h2]}", "{stage: phase, component: kv, name: b, hosts: [h2]}", api),
			[]string{
				"t.yaml:34: releases[1].flow: member kv-2 of kv is taken by 2 parts: select its host in one",
				"t.yaml:34: releases[1].flow: component kv: kv-3 (on h3) moved by no part: no phase of kv selects their hosts, and none moves the rest"}},
		{"a part after the rollout", flow("{stage: phase, component: kv, name: a, take: 1}", api, "{stage: rollout, components: [api]}", "{stage: phase, component: kv, name: b}"),
			[]string{"t.yaml:38: releases[1].flow[3].component: the phase of kv comes after rollout (releases[1].flow[2]), which moved the pin to 2.0.0: members of kv still on the release before would run with a pin they cannot honour; put every phase before it"}},
	})
}

// TestSelectsMember: a part selects a member by its host's name or
// labels: the description's host's, or, for a host it does not list (a
// Kubernetes node), the labels the substrate found.
func TestSelectsMember(t *testing.T) {
	c := &Cluster{Hosts: []Host{{Name: "h1", Labels: map[string]string{"personality": "controller"}}}}
	byLabel := &FlowStage{Stage: StagePhase, Component: "kubelet", Name: "controllers", HostLabels: map[string]string{"personality": "controller"}}
	byName := &FlowStage{Stage: StagePhase, Component: "kubelet", Name: "c1", Hosts: []string{"controller-1"}}
	rest := &FlowStage{Stage: StagePhase, Component: "kubelet", Name: "workers"}
	for _, tc := range []struct {
		m               Member
		byLabel, byName bool
		rest, takesRest bool
	}{
		{Member{Name: "a", Host: "h1"}, true, false, false, true},
		{Member{Name: "b", Host: "controller-1", Labels: map[string]string{"personality": "controller"}}, true, true, false, true},
		{Member{Name: "c", Host: "worker-0", Labels: map[string]string{"personality": "worker"}}, false, false, false, true},
		{Member{Name: "d", Host: "worker-1"}, false, false, false, true},
		// A described host's labels win over what a substrate found.
		{Member{Name: "e", Host: "h1", Labels: map[string]string{"personality": "worker"}}, true, false, false, true},
	} {
		if got := c.SelectsMember(byLabel, &tc.m); got != tc.byLabel {
			t.Errorf("%s by label: %v, want %v", tc.m.Name, got, tc.byLabel)
		}
		if got := c.SelectsMember(byName, &tc.m); got != tc.byName {
			t.Errorf("%s by name: %v, want %v", tc.m.Name, got, tc.byName)
		}
		if got := c.SelectsMember(rest, &tc.m); got != tc.rest {
			t.Errorf("%s by the rest's stage: %v, want %v (it selects none by host)", tc.m.Name, got, tc.rest)
		}
	}
	if !rest.TakesRest() || byLabel.TakesRest() || (&FlowStage{Stage: StagePhase, Take: 1}).TakesRest() {
		t.Error("TakesRest: only a part that selects by neither host nor count takes the rest")
	}
	if !rest.IsPart() || (&FlowStage{Stage: StagePhase, Component: "x"}).IsPart() || (&FlowStage{Stage: StageHosts, Name: "x"}).IsPart() {
		t.Error("IsPart: a named phase, not a whole phase or a hosts stage")
	}
}

// TestValidateShownStates: a release names the upgrade's own states
// as its operators know them (StarlingX's upgrade-complete and
// upgrade-failed); a key that is no such state, or a name that is no
// state's, is refused at its line.
func TestValidateShownStates(t *testing.T) {
	states := func(s string) []edit {
		return []edit{{"    downgrade_to: [2.0.x]\n", "    downgrade_to: [2.0.x]\n    states: " + s + "\n"}}
	}
	runTable(t, []tcase{
		{"StarlingX's", states("{completed: upgrade-complete, paused-on-failure: upgrade-failed, rolled-back: upgrade-aborted}"), nil},
		{"a stage's state, a name that is none", states(`{upgrading-kv: kv-now, failed: "failed badly"}`),
			[]string{
				`t.yaml:31: releases[1].states.failed: "failed badly" is not a state's name: letters, digits, _ and -, starting with a letter`,
				`t.yaml:31: releases[1].states.upgrading-kv: "upgrading-kv" is no state of an upgrade outside its flow's stages (those are named by each stage's state:); known: upgrade-started, preflight, completed, failed, paused, paused-on-failure, rolling-back, rolled-back`}},
	})
}

// TestValidateApplications: each application is named once and says
// which releases it supports (versions or x-ranges), or has a check to
// ask, at its line.
func TestValidateApplications(t *testing.T) {
	apps := func(s string) []edit {
		return []edit{{"policy: {on_failure: rollback}\n", "policy: {on_failure: rollback}\napplications:\n" + s}}
	}
	runTable(t, []tcase{
		{"a list, a check, both", apps("  - {name: cert-manager, supports: [1.0.x, 2.0.0]}\n  - {name: vault, check: {http: \"http://vault/supports?k8s={{.Version}}\"}}\n  - {name: x, supports: [2.x], check: {exec: [x-supports, \"{{.Version}}\"]}}\n"), nil},
		{"unnamed, twice, saying nothing, a bad range, a bad check", apps("  - {supports: [1.0.x]}\n  - {name: a, supports: [1.0.x]}\n  - {name: a, supports: [one]}\n  - {name: b}\n  - {name: c, check: {http: \"http://x/{{.Versoin}}\"}}\n"),
			[]string{
				"t.yaml:34: applications[0].name: must be set: the health query lists the application by it",
				`t.yaml:36: applications[2].name: duplicate application "a" (also applications[1])`,
				`t.yaml:36: applications[2].supports[0]: "one" is not a version (1.2.3) or an x-range (1.2.x, 1.x, *)`,
				"t.yaml:37: applications[3].supports: must be set, or check: which releases the application runs on (versions or x-ranges like 1.38.x), or a call that answers for {{.Version}}",
				"t.yaml:38: applications[4].check.http: template: no field Versoin (there are .Name, .Component, .Host, .Address, .Version, .Any, .Pin, .To, .Backup, .Vars, .Members, .PID)"}},
	})
}
