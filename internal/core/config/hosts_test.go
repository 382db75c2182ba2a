package config

import (
	"slices"
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
			[]string{"t.yaml:34: releases[1].flow[1].component: component kv has a second phase (also releases[1].flow[0]): a component is upgraded once, or in parts, each phase named with the part it takes (take:, hosts: or host_labels:)"}},
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
		{"a hosts stage's keys elsewhere", []edit{flow("{stage: phase, component: kv, max_unavailable_per_domain: 2}", "{stage: phase, component: api}")},
			[]string{"t.yaml:33: releases[1].flow[0].max_unavailable_per_domain: the phase stage takes no max_unavailable_per_domain"}},
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

// TestHostsStagesSelectHosts: a hosts stage selects its hosts by name
// or label, its components default to those on them, its budget may be
// a share of them, and a component spanning stages has each member
// moved by exactly one (StarlingX: controller-1, controller-0, storage
// at most half, workers, each a stage of its own).
func TestHostsStagesSelectHosts(t *testing.T) {
	// Three hosts: h1 storage (kv-1), h2 and h3 workers (kv-2 api-1,
	// kv-3 api-2); the hosts' lines are 3 to 5, the flow's from 35.
	three := []edit{
		{"  - {name: h1, agent: 127.0.0.1:7101}\n", "  - {name: h1, agent: 127.0.0.1:7101, labels: {personality: storage}}\n" +
			"  - {name: h2, agent: 127.0.0.2:7101, labels: {personality: worker}}\n  - {name: h3, agent: 127.0.0.3:7101, labels: {personality: worker}}\n" +
			"host_defaults: {lock: [{exec: [lock, \"{{.Host}}\"]}], unlock: [{exec: [unlock, \"{{.Host}}\"]}]}\n"},
		{"host: h1, address: 127.0.0.1:8102", "host: h2, address: 127.0.0.1:8102"},
		{"host: h1, address: 127.0.0.1:8103", "host: h3, address: 127.0.0.1:8103"},
		{"host: h1, address: 127.0.0.1:8201", "host: h2, address: 127.0.0.1:8201"},
		{"host: h1, address: 127.0.0.1:8202", "host: h3, address: 127.0.0.1:8202"},
	}
	flow := func(stages ...string) []edit {
		return append(slices.Clone(three), edit{"policy: {on_failure: rollback}\n", "    flow:\n      - " + strings.Join(stages, "\n      - ") + "\npolicy: {on_failure: rollback}\n"})
	}
	const storage, workers = "{stage: hosts, name: storage, hosts: [h1], max_unavailable: 50%}", "{stage: hosts, name: workers, host_labels: {personality: worker}, max_unavailable: 2}"
	runTable(t, []tcase{
		{"storage by name, workers by label", flow(storage, workers), nil},
		{"a component's members left on a host no stage selects", flow("{stage: hosts, name: storage, components: [kv], hosts: [h1]}", "{stage: phase, component: api}"),
			[]string{"t.yaml:35: releases[1].flow: component kv: kv-2 (on h2), kv-3 (on h3) moved by no stage: the hosts stages of kv select none of their hosts"}},
		{"a member moved by two stages", flow("{stage: hosts, name: a, hosts: [h1, h2]}", workers),
			[]string{
				"t.yaml:37: releases[1].flow[1]: member kv-2 of kv is moved by two hosts stages (also releases[1].flow[0]): select its host in one",
				"t.yaml:37: releases[1].flow[1]: member api-1 of api is moved by two hosts stages (also releases[1].flow[0]): select its host in one"}},
		{"an unknown host, labels no host has", flow("{stage: hosts, name: a, components: [kv, api], hosts: [h9], host_labels: {personality: gpu}}"),
			[]string{
				"t.yaml:35: releases[1].flow: component kv: kv-1 (on h1), kv-2 (on h2), kv-3 (on h3) moved by no stage: the hosts stages of kv select none of their hosts",
				"t.yaml:35: releases[1].flow: component api: api-1 (on h2), api-2 (on h3) moved by no stage: the hosts stages of api select none of their hosts",
				`t.yaml:36: releases[1].flow[0].hosts[0]: no host "h9" (known: h1, h2, h3)`,
				"t.yaml:36: releases[1].flow[0].host_labels: no host has the labels personality=gpu: the stage would move nothing by them",
				"t.yaml:36: releases[1].flow[0].hosts: the hosts it selects carry no member of kv, api: the stage would move nothing"}},
		{"a share of no sense", flow("{stage: hosts, name: a, max_unavailable: 150%, components: [kv, api]}"),
			[]string{`t.yaml:36: releases[1].flow[0].max_unavailable: not a share of the stage's hosts (from 1% to 100%): "150%"`}},
		{"a spanning component's phase too", flow("{stage: hosts, name: a, components: [kv], hosts: [h1]}", "{stage: phase, component: kv}", "{stage: phase, component: api}"),
			[]string{"t.yaml:37: releases[1].flow[1].component: component kv has a second phase (also releases[1].flow[0]): a component is upgraded once, or in parts, each phase named with the part it takes (take:, hosts: or host_labels:)"}},
		{"stages shown in StarlingX's states", flow("{stage: hosts, name: storage, hosts: [h1], state: upgrading-hosts}", "{stage: hosts, name: workers, host_labels: {personality: worker}, state: upgrading-hosts}"), nil},
		{"a shown state that is no name", flow("{stage: hosts, name: storage, hosts: [h1], state: \"upgrading hosts\"}", workers),
			[]string{`t.yaml:36: releases[1].flow[0].state: "upgrading hosts" is not a state's name: letters, digits, _ and -, starting with a letter`}},
		{"a phase takes a part unnamed, the rest by none", flow("{stage: phase, component: kv, hosts: [h1]}", "{stage: phase, component: api}"),
			[]string{
				"t.yaml:35: releases[1].flow: component kv: kv-2 (on h2), kv-3 (on h3) moved by no part: no phase of kv selects their hosts, and none moves the rest",
				"t.yaml:36: releases[1].flow[0].name: a phase that moves a part of kv (take:, hosts: or host_labels:) must be named: its states are upgrading-NAME and upgraded-NAME"}},
	})
	c, err := Parse([]byte(edited(t, flow(storage, workers)...)), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Release("2.0.0")
	for i, want := range []struct {
		components, hosts string
		budget            int
	}{{"kv", "h1", 1}, {"kv api", "h2 h3", 2}} {
		st := &r.Flow[i]
		got := strings.Join(st.Components, " ") + " / " + strings.Join(c.StageHosts(st), " ")
		if got != want.components+" / "+want.hosts || st.MaxUnavailable.Hosts(len(c.StageHosts(st))) != want.budget {
			t.Errorf("stage %s moves %s, budget %d; want %s / %s, budget %d", st.Name, got, st.MaxUnavailable.Hosts(len(c.StageHosts(st))), want.components, want.hosts, want.budget)
		}
	}
}

// TestHostBudget: a count (0 means 1) or a share of the stage's hosts,
// rounded down, at least one.
func TestHostBudget(t *testing.T) {
	for _, tc := range []struct {
		text  string
		hosts int
		want  int
	}{{"0", 4, 1}, {"2", 4, 2}, {"50%", 4, 2}, {"50%", 5, 2}, {"50%", 1, 1}, {"100%", 3, 3}, {"10%", 3, 1}} {
		var b HostBudget
		if err := b.UnmarshalText([]byte(tc.text)); err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		if got := b.Hosts(tc.hosts); got != tc.want || b.String() != tc.text {
			t.Errorf("%s of %d hosts: %d (%s), want %d", tc.text, tc.hosts, got, b, tc.want)
		}
	}
	for _, bad := range []string{"0%", "101%", "x", "1.5", "%"} {
		var b HostBudget
		if err := b.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q read as %v, want an error", bad, b)
		}
	}
}
