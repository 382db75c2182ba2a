package config

import "testing"

// TestValidateAdoption: adopt, the version call an adopted member
// needs, patterns, equals_path and the stop signal, each rule with the
// problem it gives.
func TestValidateAdoption(t *testing.T) {
	const hooks = "    hooks:\n      pre_stop"
	with := func(s string) []edit { return []edit{{hooks, s + "\n" + hooks}} }
	runTable(t, []tcase{
		{"adopt by pid file, version by json", with(`    adopt: {pid_file: "/run/kv/{{.Name}}.pid"}
    version: {http: "http://{{.Address}}/version", json: {path: etcdserver}}`), nil},
		{"adopt by listen, version by exec", with(`    adopt: {listen: true}
    version: {exec: ["/proc/{{.PID}}/exe", --version], pattern: 'Version: (\S+)'}`), nil},
		{"a member's own adopt", []edit{{"vars: {raft: 127.0.0.1:9102}}", "vars: {raft: 127.0.0.1:9102}, adopt: {pid_file: kv-2.pid}}"},
			{hooks, "    version: {http: \"http://{{.Address}}/v\", pattern: 'v(.*)'}\n" + hooks}}, nil},
		{"adopt without version", with(`    adopt: {listen: true}`),
			[]string{"t.yaml:17: components[0].version: must be set when members may be adopted: the call that reads what an adopted member runs (ferry did not start it), like {http: \"http://{{.Address}}/version\", json: {path: version}}"}},
		{"a member's adopt without version", []edit{{"vars: {raft: 127.0.0.1:9102}}", "vars: {raft: 127.0.0.1:9102}, adopt: {listen: true}}"}},
			[]string{"t.yaml:5: components[0].version: must be set when members may be adopted: the call that reads what an adopted member runs (ferry did not start it), like {http: \"http://{{.Address}}/version\", json: {path: version}}"}},
		{"adopt empty", with("    adopt: {}\n    version: {http: \"http://{{.Address}}/v\", json: {path: v}}"),
			[]string{"t.yaml:17: components[0].adopt: needs pid_file (a file holding the process id) or listen: true (the process listening on the member's address)"}},
		{"adopt both", with("    adopt: {pid_file: a.pid, listen: true}\n    version: {http: \"http://{{.Address}}/v\", json: {path: v}}"),
			[]string{"t.yaml:17: components[0].adopt: has both pid_file and listen: give one way to find the process"}},
		{"adopt pid file template", with("    adopt: {pid_file: \"{{.Nme}}.pid\"}\n    version: {http: \"http://{{.Address}}/v\", json: {path: v}}"),
			[]string{"t.yaml:17: components[0].adopt.pid_file: template: no field Nme (there are .Name, .Component, .Host, .Address, .Version, .Any, .Pin, .To, .Backup, .Vars, .Members, .PID)"}},
		{"version by tcp", with(`    version: {tcp: "{{.Address}}"}`),
			[]string{"t.yaml:17: components[0].version.tcp: a version call reads an answer: use http (json.path or pattern) or exec (pattern)"}},
		{"version http without json or pattern", with(`    version: {http: "http://{{.Address}}/version"}`),
			[]string{"t.yaml:17: components[0].version: needs json: {path: FIELD} (the field holding the version) or pattern: a regexp whose one group is the version"}},
		{"version exec without pattern", with(`    version: {exec: [kv, --version]}`),
			[]string{"t.yaml:17: components[0].version.pattern: must be set for an exec version call: a regexp whose one group is the version in the command's output"}},
		{"version compares nothing", with(`    version: {http: "http://{{.Address}}/version", json: {path: v, equals: "1"}}`),
			[]string{"t.yaml:17: components[0].version.json.equals: a version call reads the field, it compares nothing"}},
		{"version pattern groups", with(`    version: {exec: [kv, --version], pattern: '(v)(\d+)'}`),
			[]string{"t.yaml:17: components[0].version.pattern: has 2 groups: a version pattern has exactly one, the version (write other groups as (?:...))"}},
		{"pattern not a regexp", with(`    role: {name: leader, check: {http: "http://{{.Address}}/metrics", pattern: 'is_leader (1'}}`),
			[]string{"t.yaml:17: components[0].role.check.pattern: not a regular expression (RE2): missing closing ): `is_leader (1`"}},
		{"pattern on tcp", with(`    role: {name: leader, check: {tcp: "{{.Address}}", pattern: x}}`),
			[]string{"t.yaml:17: components[0].role.check.pattern: applies to http and exec calls only (a tcp call has no answer to match)"}},
		{"equals_path", with(`    role: {name: leader, check: {http: "http://{{.Address}}/v3/maintenance/status", body: "{}", json: {path: leader, equals_path: header.member_id}}}`), nil},
		{"equals and equals_path", with(`    role: {name: leader, check: {http: "http://{{.Address}}/s", json: {path: leader, equals: x, equals_path: y}}}`),
			[]string{"t.yaml:17: components[0].role.check.json: has both equals and equals_path: compare the field with a value or with another field"}},
		{"equals is a template", with(`    role: {name: leader, check: {http: "http://{{.Address}}/jsz", json: {path: meta_cluster.leader, equals: "{{.Nam}}"}}}`),
			[]string{"t.yaml:17: components[0].role.check.json.equals: template: no field Nam (there are .Name, .Component, .Host, .Address, .Version, .Any, .Pin, .To, .Backup, .Vars, .Members, .PID)"}},
		{"stop signal", []edit{{`args: [kv, "--raft={{.Vars.raft}}"]`, `args: [kv, "--raft={{.Vars.raft}}"]` + "\n      stop_signal: usr2"}}, nil},
		{"stop signal unknown", []edit{{`args: [kv, "--raft={{.Vars.raft}}"]`, `args: [kv, "--raft={{.Vars.raft}}"]` + "\n      stop_signal: KILL"}},
			[]string{"t.yaml:14: components[0].run.stop_signal: \"SIGKILL\" is not a stop signal; known: SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2"}},
	})
}

// TestStopSignalNormalized: a stop signal is written as the agent
// takes it.
func TestStopSignalNormalized(t *testing.T) {
	for in, want := range map[string]string{"": "", "term": "SIGTERM", "SIGUSR2": "SIGUSR2", " usr1 ": "SIGUSR1", "sigint": "SIGINT"} {
		if got := NormalizeSignal(in); got != want {
			t.Errorf("NormalizeSignal(%q) = %q, want %q", in, got, want)
		}
	}
	c, err := Parse([]byte(base), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Components[0].Run.StopSignal; got != DefaultStopSignal {
		t.Errorf("default stop signal %q, want %q", got, DefaultStopSignal)
	}
}
