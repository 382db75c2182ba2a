package config

import (
	"strings"
	"testing"
)

// TestValidateHosts has one case per rule of hosts' calls and of a
// flow's hosts stage, with the exact problems and their lines.
func TestValidateHosts(t *testing.T) {
	flow := func(stages ...string) edit {
		return edit{"policy: {on_failure: rollback}\n", "    flow:\n      - " + strings.Join(stages, "\n      - ") + "\npolicy: {on_failure: rollback}\n"}
	}
	hostCalls := func(calls string) edit {
		return edit{"  - {name: h1, agent: 127.0.0.1:7101}\n", "  - {name: h1, agent: 127.0.0.1:7101, " + calls + "}\n"}
	}
	defaults := func(calls string) edit {
		return edit{"components:\n", "host_defaults: " + calls + "\ncomponents:\n"}
	}
	const lock = `lock: [{http: "http://lb/hosts/{{.Host}}/lock", method: POST}], unlock: [{http: "http://lb/hosts/{{.Host}}/unlock", method: POST}]`
	const hosts = "{stage: hosts, components: [kv, api]}"
	runTable(t, []tcase{
		{"a hosts stage with the defaults' lock", []edit{defaults("{" + lock + `, capacity: {http: "http://lb/capacity?without={{.Address}}"}}`), flow(hosts)}, nil},
		{"a host's own calls", []edit{hostCalls(lock), flow("{stage: hosts, name: workers, components: [kv, api], max_unavailable: 2, deadline: 1m}")}, nil},
		{"hosts one domain at a time", []edit{hostCalls(lock), flow("{stage: hosts, components: [kv, api], strategy: by-domain}")}, nil},
		{"a strategy that orders no hosts", []edit{hostCalls(lock), flow("{stage: hosts, components: [kv, api], strategy: canary}")},
			[]string{`t.yaml:33: releases[1].flow[0].strategy: "canary" is no strategy that orders hosts; this build's: by-domain`}},
		{"a hosts stage's strategy elsewhere", []edit{flow("{stage: phase, component: kv, strategy: by-domain}", "{stage: phase, component: api}")},
			[]string{"t.yaml:33: releases[1].flow[0].strategy: the phase stage takes no strategy"}},
		{"a lock without its unlock", []edit{defaults(`{lock: [{http: "http://lb/{{.Host}}/lock", method: POST}]}`)},
			[]string{"t.yaml:4: host_defaults.lock: a lock needs its unlock: ferry journals the unlock as the lock's undo before the first lock call, and makes it once the host's members are done or its turn ends any other way"}},
		{"an unlock without a lock", []edit{hostCalls(`unlock: [{http: "http://lb/{{.Host}}/unlock", method: POST}]`)},
			[]string{"t.yaml:3: hosts[0].unlock: an unlock without a lock: nothing would lock the host"}},
		{"a host call's template checked", []edit{hostCalls(`lock: [{http: "http://lb/{{.Vars.rack}}/lock"}], unlock: [{http: "http://lb/x"}]`)},
			[]string{`t.yaml:3: hosts[0].lock[0].http: template: at <.Vars.rack>: map has no entry for key "rack"`}},
		{"a lock with an undo of its own", []edit{defaults(`{lock: [{http: "http://lb/l", undo: {http: "http://lb/u"}}], unlock: [{http: "http://lb/u"}]}`)},
			[]string{"t.yaml:4: host_defaults.lock[0].undo: undo applies only to the hooks that change something for a while: pre_upgrade, pre_phase, pre_stop"}},
		{"a component in a hosts stage and a phase", []edit{flow(hosts, "{stage: phase, component: kv}")},
			[]string{"t.yaml:34: releases[1].flow[1].component: component kv has a second phase (also releases[1].flow[0]): a component is upgraded once"}},
		{"a component left out", []edit{flow("{stage: hosts, components: [kv]}")},
			[]string{"t.yaml:32: releases[1].flow: component api has no phase: a flow upgrades every component once ({stage: phase, component: api})"}},
		{"a hosts stage named as a component", []edit{flow("{stage: hosts, name: kv, components: [kv]}", "{stage: phase, component: api}")},
			[]string{"t.yaml:33: releases[1].flow[0].name: its name is a component's too: the stage's state upgrading-kv would be the component's phase's; name the stage"}},
		{"hosts stage without components, bad budgets", []edit{flow("{stage: phase, component: kv}", "{stage: phase, component: api}", "{stage: hosts, max_unavailable: -1, max_unavailable_per_domain: 3}")},
			[]string{
				"t.yaml:35: releases[1].flow[2].components: a hosts stage must list the components it upgrades host by host (known: api, kv)",
				"t.yaml:35: releases[1].flow[2].max_unavailable: must not be negative (got -1; 0 means 1 host at a time)",
				"t.yaml:35: releases[1].flow[2].max_unavailable_per_domain: 3 is more than max_unavailable 1: it would never bind"}},
		{"phase hooks a hosts stage would not run", []edit{{"      pre_stop: [{exec: [step-down, \"{{.Name}}\"]}]\n", "      pre_stop: [{exec: [step-down, \"{{.Name}}\"]}]\n      pre_phase: [{exec: [noout]}]\n"}, flow(hosts)},
			[]string{"t.yaml:34: releases[1].flow[0].components[0]: component kv has pre_phase hooks, which a hosts stage does not run (it has no phase of the component alone); move them to host_defaults' lock and unlock, or upgrade kv in a phase"}},
		{"a hosts stage's keys elsewhere", []edit{flow("{stage: phase, component: kv, max_unavailable: 2}", "{stage: phase, component: api}")},
			[]string{"t.yaml:33: releases[1].flow[0].max_unavailable: the phase stage takes no max_unavailable"}},
		{"two hosts stages of one name", []edit{flow("{stage: hosts, components: [kv]}", "{stage: hosts, components: [api]}")},
			[]string{"t.yaml:34: releases[1].flow[1].name: a second hosts stage hosts (also releases[1].flow[0]): name each its own"}},
	})
}

// TestAddressOfSSHHost: a host reached over SSH that gives no address
// has its sshd's host as its address in its lock calls.
func TestAddressOfSSHHost(t *testing.T) {
	h := Host{Name: "h1", SSH: &HostSSH{Address: "10.0.0.1:22"}}
	if got := h.AddressOf(); got != "10.0.0.1" {
		t.Errorf("AddressOf = %q, want 10.0.0.1", got)
	}
	h.Address = "ctl-1.example"
	if got := h.AddressOf(); got != "ctl-1.example" {
		t.Errorf("AddressOf with address: = %q", got)
	}
}
