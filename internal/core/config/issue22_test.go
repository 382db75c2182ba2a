package config

import (
	"strings"
	"testing"
)

// TestIssue22 has one case per bad input of issue #22 fixed in this
// package (6: a port out of range; 10: NUL bytes in any string, control
// characters in names; 11: a file name over the agent's limit, a
// substrate this build lacks, an artifact with a path and an image,
// another type where a string is wanted), each with the exact problems;
// each was accepted before the fix.
func TestIssue22(t *testing.T) {
	const (
		args   = `args: [kv, "--raft={{.Vars.raft}}"]`
		hook   = `pre_stop: [{exec: [step-down, "{{.Name}}"]}]`
		check  = `member: {http: "http://{{.Address}}/ready"}`
		kv1    = "{name: kv-1, host: h1, address: 127.0.0.1:8101, vars: {raft: 127.0.0.1:9101}}"
		host1  = "{name: h1, agent: 127.0.0.1:7101}"
		art1   = "{path: bin/a-1, sha256: " + hexA + "}"
		policy = "policy: {on_failure: rollback}"
	)
	runTable(t, []tcase{
		// Defect 6: ports outside 1-65535 in URLs.
		{"hook port above 65535", []edit{{hook, `pre_stop: [{http: "http://127.0.0.1:99999/drain/{{.Name}}"}]`}},
			[]string{`t.yaml:18: components[0].hooks.pre_stop[0].http: "http://127.0.0.1:99999/drain/kv-1": the port must be a number from 1 to 65535, not 99999`}},
		{"check port 0", []edit{{check, `member: {http: "http://127.0.0.1:0/ready"}`}},
			[]string{`t.yaml:15: components[0].health.member.http: "http://127.0.0.1:0/ready": the port must be a number from 1 to 65535, not 0`}},
		{"traffic target port", []edit{{policy, policy + "\ntraffic: {targets: [\"http://127.0.0.1:70000\"], requests: [{path: /}]}"}},
			[]string{`t.yaml:33: traffic.targets[0]: "http://127.0.0.1:70000": the port must be a number from 1 to 65535, not 70000`}},

		// Defect 10: NUL bytes, wherever they are written.
		{"NUL in an argument", []edit{{args, `args: [kv, "--raft=\0{{.Vars.raft}}"]`}},
			[]string{"t.yaml:13: components[0].run.args[1]: holds a NUL byte at byte 8 of 22: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)"}},
		{"NUL in an environment value", []edit{{args, args + "\n      env: {GODEBUG: \"x=1\\x00\"}"}},
			[]string{"t.yaml:14: components[0].run.env.GODEBUG: holds a NUL byte at byte 4 of 4: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)"}},
		{"NUL in a var", []edit{{kv1, `{name: kv-1, host: h1, address: 127.0.0.1:8101, vars: {raft: "127.0.0.1:9101\0"}}`}},
			[]string{"t.yaml:9: components[0].members[0].vars.raft: holds a NUL byte at byte 15 of 15: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)"}},
		{"NUL in an exec program and argument", []edit{{hook, `pre_stop: [{exec: ["step\0down", "\0{{.Name}}"]}]`}},
			[]string{
				"t.yaml:18: components[0].hooks.pre_stop[0].exec[0]: holds a NUL byte at byte 5 of 9: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)",
				"t.yaml:18: components[0].hooks.pre_stop[0].exec[1]: holds a NUL byte at byte 1 of 10: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)",
			}},
		{"NUL in a header value", []edit{{check, `member: {http: "http://{{.Address}}/ready", headers: {X-Probe: "a\0b"}}`}},
			[]string{"t.yaml:15: components[0].health.member.headers.X-Probe: holds a NUL byte at byte 2 of 3: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)"}},
		{"NUL in an artifact path", []edit{{art1, `{path: "bin/a-1\0.old", sha256: ` + hexA + "}"}},
			[]string{`t.yaml:27: releases[0].artifacts["*"].path: holds a NUL byte at byte 8 of 12: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)`}},
		{"NUL in a token file", []edit{{host1, `{name: h1, agent: 127.0.0.1:7101, token_file: "agent.token\0"}`}},
			[]string{"t.yaml:3: hosts[0].token_file: holds a NUL byte at byte 12 of 12: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)"}},
		{"NUL in a key", []edit{{args, args + "\n      env: {\"GO\\0DEBUG\": x}"}},
			[]string{`t.yaml:14: components[0].run.env["GO\x00DEBUG"]: the key holds a NUL byte at byte 3 of 8: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)`}},
		// Control characters in the names printed on terminals.
		{"an escape in a domain", []edit{{host1, `{name: h1, agent: 127.0.0.1:7101, domain: "zone-a\e[2J"}`}},
			[]string{"t.yaml:3: hosts[0].domain: holds the control character U+001B at byte 7: a name is printed in messages, logs and on terminals, so it holds none"}},
		{"a bell in a member's domain", []edit{{kv1, `{name: kv-1, host: h1, address: 127.0.0.1:8101, domain: "rack\a1", vars: {raft: 127.0.0.1:9101}}`}},
			[]string{"t.yaml:9: components[0].members[0].domain: holds the control character U+0007 at byte 5: a name is printed in messages, logs and on terminals, so it holds none"}},
		{"a C1 control in a role name", []edit{{hook, hook + "\n    role: {name: \"lead\\u009ber\", check: {http: \"http://{{.Address}}/leader\"}}"}},
			[]string{"t.yaml:19: components[0].role.name: holds the control character U+009B at byte 5: a name is printed in messages, logs and on terminals, so it holds none"}},
		{"a title-setting escape in a traffic request's name", []edit{{policy, policy + "\ntraffic: {targets: [\"http://127.0.0.1:8201\"], requests: [{name: \"get\\e]0;pwned\\a\", path: /}]}"}},
			[]string{"t.yaml:33: traffic.requests[0].name: holds the control character U+001B at byte 4: a name is printed in messages, logs and on terminals, so it holds none"}},

		// Defect 11.
		{"a file name over the agent's limit", []edit{{args, args + "\n      files: [{path: conf/" + strings.Repeat("n", 300) + ", content: x}]"}},
			[]string{`t.yaml:14: components[0].run.files[0].path: path "conf/` + strings.Repeat("n", 75) + `..." has an element of 300 bytes, more than 237 (a file name is at most 255 bytes, and the agent writes each file first under its name and 18 more)`}},
		{"a file name at the agent's limit", []edit{{args, args + "\n      files: [{path: conf/" + strings.Repeat("n", 237) + ", content: x}]"}}, nil},
		{"substrate vm", []edit{{"cluster: t", "cluster: t\nsubstrate: vm"}},
			[]string{`t.yaml:2: substrate: unknown substrate "vm"; this build has: kubernetes, process, ssh`}},
		{"an artifact with a path and an image", []edit{{art1, "{path: bin/a-1, image: registry.local/kv:1.0.0, sha256: " + hexA + "}"}},
			[]string{`t.yaml:27: releases[0].artifacts["*"]: has both a path and an image: an artifact is one of them (a binary for the process substrate, an image for kubernetes), and its sha256 is that one's`}},
		{"a name that YAML reads as a boolean", []edit{{"{name: api-1,", "{name: true,"}},
			[]string{`t.yaml:23: components[1].members[0].name: must be a string, not the boolean true: quote it ("true") if the text is meant`}},
		{"a var that YAML reads as an integer", []edit{{kv1, "{name: kv-1, host: h1, address: 127.0.0.1:8101, vars: {raft: 9101}}"}},
			[]string{`t.yaml:9: components[0].members[0].vars.raft: must be a string, not the integer 9101: quote it ("9101") if the text is meant`}},
		{"the same var quoted", []edit{{kv1, `{name: kv-1, host: h1, address: 127.0.0.1:8101, vars: {raft: "9101"}}`}}, nil},
	})
}

// TestKubernetesImagePinned: an image written with a digest is refused
// (ferry pins the image to sha256 itself; the same digest is said
// twice, another would fail the pull at run time).
func TestKubernetesImagePinned(t *testing.T) {
	src := strings.Replace(kubeBase, `"registry.local/app:1.0.0"`, `"registry.local/app:1.0.0@sha256:0000000000000000000000000000000000000000000000000000000000000001"`, 1)
	got := problems(t, src)
	want := `t.yaml:22: releases[0].artifacts["*"].image: "registry.local/app:1.0.0@sha256:0000000000000000000000000000000000000000000000000000000000000001" is pinned by digest already (sha256:0000000000000000000000000000000000000000000000000000000000000001): write the image without it (registry.local/app:1.0.0) and its digest in sha256, which ferry pins it to`
	if strings.Join(got, "\n") != want {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}
