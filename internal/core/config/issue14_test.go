package config

import "testing"

// TestIssue14 has one case per defect of issue #14 fixed in this
// package (4: duplicate addresses, 8: zero and absurd values, a
// self-referencing catalog, shared agents, misspelt keys), each with
// the exact problems; each failed before the fix.
func TestIssue14(t *testing.T) {
	const (
		api1  = "{name: api-1, host: h1, address: 127.0.0.1:8201}"
		api2  = "{name: api-2, host: h1, address: 127.0.0.1:8202}"
		host1 = "  - {name: h1, agent: 127.0.0.1:7101}\n"
		args  = `args: [kv, "--raft={{.Vars.raft}}"]`
		peers = `args: [kv, "--raft={{.Vars.raft}}", "--peers={{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Name}}={{$m.Vars.raft}}{{end}}"]`
		check = `member: {http: "http://{{.Address}}/ready"}`
	)
	runTable(t, []tcase{
		// Defect 4: duplicate addresses.
		{"address twice in a component", []edit{{api2, "{name: api-2, host: h1, address: 127.0.0.1:8201}"}},
			[]string{"t.yaml:24: components[1].members[1].address: 127.0.0.1:8201 is also the address of components[1].members[0] (api-1, line 23): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"address twice across components", []edit{{api2, "{name: api-2, host: h1, address: 127.0.0.1:8101}"}},
			[]string{"t.yaml:24: components[1].members[1].address: 127.0.0.1:8101 is also the address of components[0].members[0] (kv-1, line 9): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"localhost is 127.0.0.1", []edit{{api2, "{name: api-2, host: h1, address: localhost:8201}"}},
			[]string{"t.yaml:24: components[1].members[1].address: localhost:8201 is the same address as 127.0.0.1:8201 (localhost is the loopback address, 127.0.0.1 and ::1), the address of components[1].members[0] (api-1, line 23): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"localhost is ::1", []edit{{api1, "{name: api-1, host: h1, address: \"[::1]:8201\"}"}, {api2, "{name: api-2, host: h1, address: LocalHost:8201}"}},
			[]string{"t.yaml:24: components[1].members[1].address: LocalHost:8201 is the same address as [::1]:8201 (localhost is the loopback address, 127.0.0.1 and ::1), the address of components[1].members[0] (api-1, line 23): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"an IPv4-mapped IPv6 address", []edit{{api2, "{name: api-2, host: h1, address: \"[::ffff:127.0.0.1]:8201\"}"}},
			[]string{"t.yaml:24: components[1].members[1].address: [::ffff:127.0.0.1]:8201 is the same address as 127.0.0.1:8201 (an IPv4-mapped IPv6 address is its IPv4 address, 127.0.0.1), the address of components[1].members[0] (api-1, line 23): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"a wildcard takes the port on its host", []edit{{api2, "{name: api-2, host: h1, address: 0.0.0.0:8201}"}},
			[]string{"t.yaml:24: components[1].members[1].address: 0.0.0.0:8201 listens on every address of host h1, so also on 127.0.0.1:8201, the address of components[1].members[0] (api-1, line 23): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"an address on a host where a wildcard listens", []edit{{api1, "{name: api-1, host: h1, address: \"[::]:8201\"}"}, {api2, "{name: api-2, host: h1, address: 127.0.0.1:8201}"}},
			[]string{"t.yaml:24: components[1].members[1].address: 127.0.0.1:8201 is on host h1, where [::]:8201, the address of components[1].members[0] (api-1, line 23), listens on every address: one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"a wildcard on another host is another machine", []edit{{host1, host1 + "  - {name: h2, agent: 127.0.0.2:7101}\n"}, {api2, "{name: api-2, host: h2, address: 0.0.0.0:8201}"}}, nil},
		{"a member on its agent's address", []edit{{api2, "{name: api-2, host: h1, address: 127.0.0.1:7101}"}},
			[]string{"t.yaml:24: components[1].members[1].address: 127.0.0.1:7101 is also the agent of hosts[0] (h1, line 3): an agent listens there, and a member cannot; give the member another host:port"}},
		{"two hosts share one agent", []edit{{host1, host1 + "  - {name: h2, agent: localhost:7101}\n"}},
			[]string{"t.yaml:4: hosts[1].agent: localhost:7101 is the same address as 127.0.0.1:7101 (localhost is the loopback address, 127.0.0.1 and ::1), the agent of hosts[0] (h1, line 3): two hosts cannot share one agent (it would run the members of both on one machine); give each host its own agent"}},
		{"names compare without case", []edit{{api1, "{name: api-1, host: h1, address: db.example:8201}"}, {api2, "{name: api-2, host: h1, address: DB.Example.:8201}"}},
			[]string{"t.yaml:24: components[1].members[1].address: DB.Example.:8201 is the same address as db.example:8201, the address of components[1].members[0] (api-1, line 23): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"same port, other addresses", []edit{{api2, "{name: api-2, host: h1, address: 127.0.0.2:8201}"}}, nil},
		{"a peer var twice", []edit{{args, peers}, {"vars: {raft: 127.0.0.1:9103}", "vars: {raft: 127.0.0.1:9102}"}},
			[]string{"t.yaml:11: components[0].members[2].vars.raft: 127.0.0.1:9102 is also vars.raft of components[0].members[1] (kv-2, line 10): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"a peer var on another member's address", []edit{{args, peers}, {"vars: {raft: 127.0.0.1:9103}", "vars: {raft: 127.0.0.1:8201}"}},
			[]string{"t.yaml:23: components[1].members[0].address: 127.0.0.1:8201 is also vars.raft of components[0].members[2] (kv-3, line 11): one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"}},
		{"a peer var on its own member's address is allowed", []edit{{args, peers}, {"vars: {raft: 127.0.0.1:9103}", "vars: {raft: 127.0.0.1:8103}"}}, nil},
		{"a var that is no peer var may repeat", []edit{{"vars: {raft: 127.0.0.1:9103}", "vars: {raft: 127.0.0.1:9102}"}}, nil},

		// Defect 8: written zeros are not defaults.
		{"max_unavailable written as 0", []edit{{"max_batch: 2, max_unavailable: 2", "max_batch: 1, max_unavailable: 0"}},
			[]string{"t.yaml:21: components[1].strategy.max_unavailable: 0 is written, but with 0 down at once no member could ever be upgraded: write 1 to 2 (2 members), or leave it out for the default 1"}},
		{"max_batch written as 0", []edit{{"max_batch: 2", "max_batch: 0"}},
			[]string{"t.yaml:21: components[1].strategy.max_batch: 0 is written, but a batch of 0 members never moves: write 1 to 2 (max_unavailable), or leave it out for the default (max_unavailable)"}},
		{"max_batch 0 on one-at-a-time", []edit{{"quorum: 2}", "quorum: 2, max_batch: 0}"}},
			[]string{"t.yaml:7: components[0].strategy.max_batch: 0 is written, but a batch of 0 members never moves, and one-at-a-time moves one at a time: leave it out"}},
		{"max_unavailable left out", []edit{{"max_batch: 2, max_unavailable: 2", "max_batch: 1"}}, nil},
		{"tick 1ns", []edit{{"policy: {on_failure: rollback}", "policy: {on_failure: rollback, tick: 1ns}"}},
			[]string{"t.yaml:32: policy.tick: 1ns is not from 10ms to 1m: the engine's observation interval (a shorter one busy-loops the engine, a longer one reacts late); write one in that range, or leave it out for the default 100ms"}},
		{"tick an hour", []edit{{"policy: {on_failure: rollback}", "policy: {on_failure: rollback, tick: 1h}"}},
			[]string{"t.yaml:32: policy.tick: 1h is not from 10ms to 1m: the engine's observation interval (a shorter one busy-loops the engine, a longer one reacts late); write one in that range, or leave it out for the default 100ms"}},
		{"tick 0s", []edit{{"policy: {on_failure: rollback}", "policy: {on_failure: rollback, tick: 0s}"}},
			[]string{"t.yaml:32: policy.tick: 0s is not from 10ms to 1m: the engine's observation interval (a shorter one busy-loops the engine, a longer one reacts late); write one in that range, or leave it out for the default 100ms"}},
		{"interval 1ns", []edit{{check, `member: {http: "http://{{.Address}}/ready", interval: 1ns}`}},
			[]string{"t.yaml:15: components[0].health.member.interval: 1ns is not from 10ms to 1h: the time between two probes; write one in that range, or leave it out for the default 250ms"}},
		{"timeout 1ns", []edit{{check, `member: {http: "http://{{.Address}}/ready", timeout: 1ns}`}},
			[]string{"t.yaml:15: components[0].health.member.timeout: 1ns is not from 10ms to 1h: how long one call may take; write one in that range, or leave it out for the default 2s"}},
		{"hook timeout of years", []edit{{`{exec: [step-down, "{{.Name}}"]}`, `{exec: [step-down, "{{.Name}}"], timeout: 87600h}`}},
			[]string{"t.yaml:18: components[0].hooks.pre_stop[0].timeout: 87600h is not from 10ms to 1h: how long one call may take; write one in that range, or leave it out for the default 5s"}},
		{"deadline of years", []edit{{"    order: 2\n", "    order: 2\n    deadline: 87600h\n"}},
			[]string{"t.yaml:21: components[1].deadline: 87600h is not from 100ms to 24h: how long a member has, from its drain, to become healthy and finish its soak; write one in that range, or leave it out for the default 1m"}},
		{"deadline 1ns", []edit{{"    order: 2\n", "    order: 2\n    deadline: 1ns\n"}},
			[]string{"t.yaml:21: components[1].deadline: 1ns is not from 100ms to 24h: how long a member has, from its drain, to become healthy and finish its soak; write one in that range, or leave it out for the default 1m"}},
		{"gate_deadline 0s", []edit{{"    order: 2\n", "    order: 2\n    gate_deadline: 0s\n"}},
			[]string{"t.yaml:21: components[1].gate_deadline: 0s is not from 100ms to 24h: how long a cluster gate may stay red; write one in that range, or leave it out for the default 1m"}},
		{"stop_timeout above the agent's bound", []edit{{"    run:\n", "    run:\n      stop_timeout: 2h\n"}},
			[]string{"t.yaml:13: components[0].run.stop_timeout: 2h is not from 10ms to 1h: how long a graceful stop may take before SIGKILL (the agent allows up to 1h); write one in that range, or leave it out for the default 10s"}},
		{"thresholds of a thousand", []edit{{check, `member: {http: "http://{{.Address}}/ready", success_threshold: 1000, failure_threshold: 0}`}},
			[]string{"t.yaml:15: components[0].health.member.success_threshold: 1000 is not from 1 to 100: the consecutive passes that make a check healthy; write one in that range, or leave it out for the default 1",
				"t.yaml:15: components[0].health.member.failure_threshold: 0 is not from 1 to 100: the consecutive failures that make a check unhealthy; write one in that range, or leave it out for the default 1"}},
		{"undo_deadline 1ms", []edit{{"policy: {on_failure: rollback}", "policy: {on_failure: rollback, undo_deadline: 1ms}"}},
			[]string{"t.yaml:32: policy.undo_deadline: 1ms is not from 1s to 24h: how long an undo is retried before the upgrade pauses on it; write one in that range, or leave it out for the default 2m"}},
		{"migration deadline and interval", []edit{{"    upgrade_from: [1.0.x]\n", "    upgrade_from: [1.0.x]\n    migrations: {component: kv, migrate: [{exec: [m]}], deadline: 100h, interval: 1ns}\n"}},
			[]string{"t.yaml:30: releases[1].migrations.deadline: 100h is not from 1s to 24h: how long one migration stage may take; write one in that range, or leave it out for the default 10m",
				"t.yaml:30: releases[1].migrations.interval: 1ns is not from 10ms to 1h: the pause between two calls of a stage not done yet; write one in that range, or leave it out for the default 1s"}},
		{"a key left empty takes the default", []edit{{"policy: {on_failure: rollback}", "policy: {on_failure: rollback, tick: }"}}, nil},

		// The catalog.
		{"upgrade_from the release itself", []edit{{"upgrade_from: [1.0.x]", "upgrade_from: [1.0.x, 2.0.0]"}},
			[]string{"t.yaml:29: releases[1].upgrade_from[1]: \"2.0.0\" is this release itself: a release cannot upgrade from itself (a self-referencing catalog); list the versions before it"}},
		{"upgrade_from a newer release", []edit{{"upgrade_from: [1.0.x]", "upgrade_from: [1.0.x, 3.0.0]"}},
			[]string{"t.yaml:29: releases[1].upgrade_from[1]: \"3.0.0\" is newer than 2.0.0: going from it to 2.0.0 is a downgrade, which 3.0.0's downgrade_to says; list older versions here"}},
		{"downgrade_to the release itself", []edit{{"downgrade_to: [2.0.x]", "downgrade_to: [2.0.0]"}},
			[]string{"t.yaml:30: releases[1].downgrade_to[0]: \"2.0.0\" is this release itself: a release cannot go back to itself (a self-referencing catalog); list the earlier patches it may go back to"}},
		{"an x-range that includes the release is allowed", []edit{{"upgrade_from: [1.0.x]", "upgrade_from: [1.0.x, 2.0.x]"}}, nil},

		// Misspelt keys: named, and what follows from them left out.
		{"misspelt address in a flow mapping", []edit{{api2, "{name: api-2, host: h1, adress: 127.0.0.1:8202}"}},
			[]string{"t.yaml:24: components[1].members[1].adress: unknown key (did you mean address?); known keys: name, host, address, vars, domain, adopt"}},
		{"misspelt address in block style", []edit{{"      - " + api2 + "\n", "      - name: api-2\n        host: h1\n        adress: 127.0.0.1:8202\n"}},
			[]string{"t.yaml:26: components[1].members[1].adress: unknown key (did you mean address?); known keys: name, host, address, vars, domain, adopt"}},
		{"misspelt address of the member checks render with", []edit{{"{name: kv-1, host: h1, address: 127.0.0.1:8101,", "{name: kv-1, host: h1, adress: 127.0.0.1:8101,"}},
			[]string{"t.yaml:9: components[0].members[0].adress: unknown key (did you mean address?); known keys: name, host, address, vars, domain, adopt"}},
		{"misspelt vars", []edit{{"{name: kv-2, host: h1, address: 127.0.0.1:8102, vars:", "{name: kv-2, host: h1, address: 127.0.0.1:8102, var:"}},
			[]string{"t.yaml:10: components[0].members[1].var: unknown key (did you mean vars?); known keys: name, host, address, vars, domain, adopt"}},
		{"misspelt http", []edit{{check, `member: {htp: "http://{{.Address}}/ready"}`}},
			[]string{"t.yaml:15: components[0].health.member.htp: unknown key (did you mean http?); known keys: http, method, body, headers, expect_status, json, pattern, tcp, exec, timeout, undo, interval, success_threshold, failure_threshold"}},
		{"an abbreviated key", []edit{{api2, "{name: api-2, host: h1, addr: 127.0.0.1:8202}"}},
			[]string{"t.yaml:24: components[1].members[1].addr: unknown key (did you mean address?); known keys: name, host, address, vars, domain, adopt"}},
		{"a misspelt key beside the right one", []edit{{api2, "{name: api-2, host: h1, address: 127.0.0.1:8202, adress: x}"}},
			[]string{"t.yaml:24: components[1].members[1].adress: unknown key (did you mean address?); known keys: name, host, address, vars, domain, adopt"}},

		// Names.
		{"a cluster name of control characters", []edit{{"cluster: t\n", "cluster: \"a\\x01b\"\n"}},
			[]string{"t.yaml:1: cluster: \"a\\x01b\" is not a cluster name: at most 253 characters, none of them control characters"}},
	})
}
