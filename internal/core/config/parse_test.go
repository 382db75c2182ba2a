package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseGood checks the demo description: what was written, and
// the defaults filled in for what was not.
func TestParseGood(t *testing.T) {
	c, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "demo" || c.Substrate != SubstrateProcess || c.File != "testdata/good.yaml" {
		t.Errorf("cluster = %q %q %q", c.Name, c.Substrate, c.File)
	}
	if h := c.Hosts; len(h) != 1 || h[0].Name != "host-1" || h[0].Agent != "127.0.0.1:7101" || h[0].TokenFile != "agent/token" {
		t.Errorf("hosts = %+v", c.Hosts)
	}
	wd, _ := os.Getwd()
	if got, want := c.ResolvePath(c.Hosts[0].TokenFile), filepath.Join(wd, "testdata/agent/token"); got != want {
		t.Errorf("token file resolves to %s, want %s", got, want)
	}

	kv, api := c.Component("kv"), c.Component("api")
	if kv == nil || api == nil {
		t.Fatalf("components kv, api missing: %+v", c.Components)
	}
	eqStrategy(t, "kv", kv.Strategy, Strategy{Type: OneAtATime, Quorum: 2, MaxBatch: 1, MaxUnavailable: 1})
	eqStrategy(t, "api", api.Strategy, Strategy{Type: Canary, MaxBatch: 2, MaxUnavailable: 2})
	if got := len(kv.Members); got != 3 {
		t.Errorf("kv has %d members", got)
	}
	if m := kv.Members[1]; m.Name != "kv-2" || m.Host != "host-1" || m.Address != "127.0.0.1:8102" || m.Vars["raft"] != "127.0.0.1:9102" {
		t.Errorf("kv-2 = %+v", m)
	}
	if len(kv.Run.Args) != 11 || kv.Run.StopTimeout != Duration(10*time.Second) {
		t.Errorf("kv run = %+v", kv.Run)
	}
	if api.Run.StopTimeout != DefaultStopTimeout {
		t.Errorf("api stop_timeout = %s, want the default", api.Run.StopTimeout)
	}
	if kv.Soak != Duration(time.Second) || kv.Deadline != Duration(30*time.Second) || kv.GateDeadline != DefaultGateDeadline {
		t.Errorf("kv soak/deadline/gate = %s %s %s", kv.Soak, kv.Deadline, kv.GateDeadline)
	}

	member := kv.Health.Member
	wantMember := Check{
		Call:     Call{HTTP: "http://{{.Address}}/ready", Method: "GET", ExpectStatus: 200, Timeout: Duration(time.Second)},
		Interval: Duration(100 * time.Millisecond), SuccessThreshold: 1, FailureThreshold: 1,
	}
	wantMember.pos = member.pos
	if !reflect.DeepEqual(*member, wantMember) {
		t.Errorf("kv member check = %+v\nwant %+v", *member, wantMember)
	}
	cl := kv.Health.Cluster
	if cl.HTTP != "http://{{.Any}}/cluster" || cl.Method != "GET" || cl.Timeout != DefaultCheckTimeout ||
		cl.Interval != DefaultCheckInterval || !reflect.DeepEqual(cl.JSON, &JSONMatch{Path: "quorum", Equals: true}) {
		t.Errorf("kv cluster check = %+v (json %+v)", *cl, cl.JSON)
	}
	if h := kv.Hooks.PreStop; len(h) != 1 || h[0].Method != "POST" || h[0].Timeout != DefaultHookTimeout {
		t.Errorf("kv pre_stop = %+v", h)
	}
	if h := api.Hooks.PostStart; len(h) != 1 || h[0].HTTP != "http://127.0.0.1:8001/admin/backends/{{.Name}}/enable" {
		t.Errorf("api post_start = %+v", h)
	}

	r := c.Release("2.0.0")
	if r == nil || !reflect.DeepEqual(r.UpgradeFrom, []string{"1.0.x"}) || !reflect.DeepEqual(r.DowngradeTo, []string{"2.0.x"}) {
		t.Fatalf("release 2.0.0 = %+v", r)
	}
	if a, ok := r.ArtifactFor("kv"); !ok || a.Path != "bin/sample-2.0.0" || len(a.SHA256) != 64 {
		t.Errorf("kv artifact = %+v %v", a, ok)
	}
	if !reflect.DeepEqual(c.Policy, Policy{OnFailure: "rollback", OnImpact: "continue", Tick: DefaultTick, Finalize: DefaultFinalize, UndoDeadline: DefaultUndoDeadline}) {
		t.Errorf("policy = %+v", c.Policy)
	}

	// Positions: lines of nodes and keys, for messages.
	if got := kv.Strategy.pos.Line("quorum"); got != 9 {
		t.Errorf("kv strategy quorum on line %d, want 9", got)
	}
	if got := kv.Run.pos.at("args[10]"); got != 16 {
		t.Errorf("kv run.args[10] on line %d, want 16", got)
	}
	if got := c.pos.at("policy.on_failure"); got != 49 {
		t.Errorf("policy.on_failure on line %d, want 49", got)
	}
}

func eqStrategy(t *testing.T, name string, got, want Strategy) {
	t.Helper()
	got.pos = positions{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s strategy = %+v, want %+v", name, got, want)
	}
}

// TestParseErrors covers what goes wrong before validation: the YAML
// itself, types, unknown and duplicate keys.
func TestParseErrors(t *testing.T) {
	runTable(t, []tcase{
		{"unknown key with a suggestion", []edit{{"max_batch: 2", "maxbatch: 2"}},
			[]string{"t.yaml:21: components[1].strategy.maxbatch: unknown key (did you mean max_batch?); known keys: type, quorum, max_batch, max_unavailable, max_unavailable_per_host, max_unavailable_per_domain"}},
		{"unknown key in a check lists the call's keys", []edit{{`{http: "http://{{.Address}}/ready"}`, `{http: "http://{{.Address}}/ready", intervall: 1s}`}},
			[]string{"t.yaml:15: components[0].health.member.intervall: unknown key (did you mean interval?); known keys: http, method, body, headers, expect_status, json, pattern, tcp, exec, timeout, undo, interval, success_threshold, failure_threshold"}},
		{"unknown key in a struct without positions", []edit{{"policy: {on_failure: rollback}", "policy: {on_failure: rollback,\n  ticks: 1s}"}},
			[]string{"t.yaml:33: policy.ticks: unknown key (did you mean tick?); known keys: on_failure, on_impact, tick, finalize, undo_deadline, windows"}},
		{"unknown top-level key", []edit{{"cluster: t\n", "cluster: t\nhostss: {}\n"}},
			[]string{"t.yaml:2: hostss: unknown key (did you mean hosts?); known keys: cluster, substrate, hosts, host_defaults, components, releases, policy, kubernetes, traffic, hooks, signing_key, alarms, applications"}},
		{"duplicate key", []edit{{"cluster: t\n", "cluster: t\ncluster: u\n"}},
			[]string{"t.yaml:2: cluster: duplicate key (first on line 1)"}},
		{"string for an integer", []edit{{"order: 2", "order: two"}},
			[]string{"t.yaml:20: components[1].order: must be an integer, not the string \"two\""}},
		{"quoted integer", []edit{{"max_batch: 2", `max_batch: "2"`}},
			[]string{"t.yaml:21: components[1].strategy.max_batch: must be an integer, not the string \"2\""}},
		{"float for an integer", []edit{{"order: 2", "order: 2.5"}},
			[]string{"t.yaml:20: components[1].order: must be an integer, not the number 2.5"}},
		{"integer out of range", []edit{{"order: 2", "order: 99999999999999999999"}},
			[]string{"t.yaml:20: components[1].order: the integer 99999999999999999999 is out of range (at most 19 digits)"}},
		{"bad duration", []edit{{"    order: 2\n", "    order: 2\n    soak: 2x\n"}},
			[]string{"t.yaml:21: components[1].soak: not a duration (like 2s or 150ms): \"2x\""}},
		{"duration without a unit", []edit{{`{http: "http://{{.Address}}/ready"}`, `{http: "http://{{.Address}}/ready", interval: 5}`}},
			[]string{"t.yaml:15: components[0].health.member.interval: not a duration (like 2s or 150ms): \"5\""}},
		{"negative duration", []edit{{"policy: {on_failure: rollback}", "policy: {tick: -1s}"}},
			[]string{"t.yaml:32: policy.tick: negative duration \"-1s\""}},
		{"list for a string", []edit{{"cluster: t\n", "cluster: [t]\n"}},
			[]string{"t.yaml:1: cluster: must be a string, not a list"}},
		{"string for a list", []edit{{`args: [kv, "--raft={{.Vars.raft}}"]`, `args: kv`}},
			[]string{"t.yaml:13: components[0].run.args: must be a list, not the string \"kv\""}},
		{"list for a mapping", []edit{{`member: {http: "http://{{.Address}}/ready"}`, `member: [a]`}},
			[]string{"t.yaml:15: components[0].health.member: must be a mapping, not a list"}},
		{"list for a map value", []edit{{`vars: {raft: 127.0.0.1:9101}`, `vars: {raft: [1]}`}},
			[]string{"t.yaml:9: components[0].members[0].vars.raft: must be a string, not a list"}},
		{"non-string key", []edit{{"cluster: t\n", "cluster: t\n? [a]\n: b\n"}},
			[]string{"t.yaml:2: a key must be a plain string, not a list"}},
		{"merge keys are honoured", []edit{
			{"      - {name: api-1, host: h1, address: 127.0.0.1:8201}", "      - &api {name: api-1, host: h1, address: 127.0.0.1:8201}"},
			{"      - {name: api-2, host: h1, address: 127.0.0.1:8202}", "      - {<<: *api, name: api-2, address: 127.0.0.1:8202}"}},
			nil},
		{"a bad merge", []edit{{"      - {name: api-2, host: h1, address: 127.0.0.1:8202}", "      - {<<: [1], name: api-2, host: h1, address: 127.0.0.1:8202}"}},
			[]string{"t.yaml:24: components[1].members[1]: << merges mappings, not the integer 1"}},
		{"a decoding problem hides what validation says of the same field", []edit{{"max_unavailable: 2", "max_unavailable: x"}},
			[]string{"t.yaml:21: components[1].strategy.max_unavailable: must be an integer, not the string \"x\""}},
	})
}

// TestParseWholeFile covers inputs that are not a description at all.
func TestParseWholeFile(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	var bomb strings.Builder
	bomb.WriteString("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for c := 'b'; c <= 'i'; c++ {
		p := string(c - 1)
		fmt.Fprintf(&bomb, "%c: &%c [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", c, c, p, p, p, p, p, p, p, p, p)
	}
	bomb.WriteString("components: [{name: a, health: {member: {http: 'http://a:1', json: {path: p, equals: *i}}}}]\n")

	for _, tc := range []struct {
		name, in string
		want     string
	}{
		{"empty", "", "f.yaml: the file is empty: a description starts with cluster: and components:"},
		{"comments only", "# nothing\n\n", "f.yaml: the file is empty: a description starts with cluster: and components:"},
		{"empty document", "---\n", "f.yaml:2: the document is empty: a description starts with cluster: and components:"},
		{"a list", "- cluster: x\n", "f.yaml:1: the description must be a mapping (cluster: ..., components: ...), not a list"},
		{"a scalar", "42\n", "f.yaml:1: the description must be a mapping (cluster: ..., components: ...), not the integer 42"},
		{"two documents", "cluster: x\n---\ncluster: y\n", "f.yaml:2: a second document: a description is one YAML document"},
		{"syntax", "cluster: [x\n", "f.yaml:1: not valid YAML: did not find expected ',' or ']'"},
		{"invalid UTF-8", "cluster: x\nhosts: \xff\xfe\xfd\n", "f.yaml:2: not valid UTF-8: a description is a YAML text file"},
		{"control characters", "cluster: x\n\x07: 1\n", "f.yaml:2: not valid YAML: control characters are not allowed"},
		{"binary", "\x00\x01\x02\x03", "f.yaml:1: not valid YAML: control characters are not allowed"},
		{"unknown anchor", "cluster: x\nsubstrate: *nope\n", "f.yaml:2: not valid YAML: unknown anchor 'nope' referenced"},
		{"too deep for the parser", deep, "f.yaml: not valid YAML: exceeded max depth of 10000"},
		{"too deep", "components: [{health: {member: {json: {path: p, equals: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "}}}}]",
			"nested more than 64 levels deep"},
		{"alias bomb", bomb.String(), "f.yaml:10: components[0].health.member.json.equals: the aliases expand to more than 100000 nodes (an alias bomb?): refused; write the repeated parts out, or alias less"},
		{"merge bomb", "policy: &a {<<: [*a, *a]}\n", "f.yaml:1: policy: the aliases expand to more than 100000 nodes (an alias bomb?): refused; write the repeated parts out, or alias less"},
		{"too large", "cluster: x\n#" + strings.Repeat("x", MaxFileSize), "f.yaml: the file is larger than 8388608 bytes: not a cluster description"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := Parse([]byte(tc.in), "f.yaml")
			if c != nil || err == nil {
				t.Fatalf("Parse = %v, %v; want an error", c, err)
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T, want *Errors", err)
			}
			got := err.Error()
			if tc.name == "too deep" {
				// Validation problems come along; the depth one is what matters.
				if !strings.Contains(got, tc.want) {
					t.Errorf("error:\n%s\nwant among them:\n%s", got, tc.want)
				}
			} else if got != tc.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// TestAllProblemsAtOnce checks that Parse reports every problem of a
// description, in line order, not only the first.
func TestAllProblemsAtOnce(t *testing.T) {
	src, err := os.ReadFile("testdata/bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/bad.errors")
	if err != nil {
		t.Fatal(err)
	}
	_, perr := Parse(src, "bad.yaml")
	if perr == nil {
		t.Fatal("Parse(bad.yaml) succeeded")
	}
	got := perr.Error() + "\n"
	if *update {
		if err := os.WriteFile("testdata/bad.errors", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(want) {
		t.Errorf("problems:\n%s\nwant (testdata/bad.errors; -update rewrites it):\n%s", got, want)
	}
	n := strings.Count(got, "\n")
	if n < 20 {
		t.Errorf("only %d problems", n)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ResolvePath("bin/a-1"), filepath.Join(dir, "bin/a-1"); got != want {
		t.Errorf("ResolvePath = %s, want %s", got, want)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want a not-exist error", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(base, "max_batch: 2", "max_batch: -1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if want := bad + ":21: components[1].strategy.max_batch: must be at least 1 (got -1)"; err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %s", err, want)
	}
}

// TestLoadTrafficBounded: LoadTraffic read its file whole before it
// looked at the size, so --traffic=/dev/zero read for ever.
func TestLoadTrafficBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	within(t, 10*time.Second, func() {
		_, err := LoadTraffic("/dev/zero")
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadTraffic(/dev/zero) = %v, want it refused, at once, as not a regular file", err)
		}
	})
}
