package config

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/template"

	"gopkg.in/yaml.v3"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// The description's reference, docs/description.md, is generated from
// the types themselves: every key with its YAML name and type (read by
// reflection, as Parse reads them), its doc comment (read from the
// source), its default (defaultsDoc, built from defaults.go's
// constants) and an example per type (examplesDoc, each decoded here
// like a description, so that an example with a wrong key fails).
// TestDescriptionReference fails when the file is stale;
// `go test ./internal/core/config -run TestDescriptionReference -update`
// rewrites it.

// strategyBatchDefaults says each registered strategy's default
// max_batch, from its Defaults: "max_unavailable" when it follows the
// budget, the number otherwise.
func strategyBatchDefaults() string {
	var parts []string
	for _, name := range strategy.Names() {
		st, _ := strategy.Lookup(name)
		d := fmt.Sprint(st.Defaults(strategy.Settings{Type: name, MaxUnavailable: 3}).MaxBatch)
		if d == "3" && st.Defaults(strategy.Settings{Type: name, MaxUnavailable: 5}).MaxBatch == 5 {
			d = "max_unavailable"
		}
		parts = append(parts, name+": "+d)
	}
	return strings.Join(parts, "; ")
}

// defaultDoc is a key's default: the substrate's is the registered
// default, known once the substrates have registered (after package
// variables are set), so it is asked for here.
func defaultDoc(key string) string {
	if key == "Cluster.substrate" {
		return DefaultSubstrate()
	}
	return defaultsDoc[key]
}

// defaultsDoc is each key's default, by "Type.key", where it has one
// (defaults.go applies them).
var defaultsDoc = map[string]string{
	"Component.deadline":                   DefaultDeadline.String(),
	"Component.gate_deadline":              DefaultGateDeadline.String(),
	"Component.soak":                       "0s (no soak)",
	"Strategy.type":                        string(DefaultStrategy),
	"Strategy.max_unavailable":             fmt.Sprint(DefaultMaxUnavailable),
	"Strategy.max_batch":                   strategyBatchDefaults(),
	"Strategy.quorum":                      "0: a majority of the members",
	"Strategy.max_unavailable_per_host":    "0 (no bound)",
	"Strategy.max_unavailable_per_domain":  "0 (no bound)",
	"Member.domain":                        "its host's domain",
	"Run.stop_timeout":                     DefaultStopTimeout.String(),
	"Run.stop_signal":                      DefaultStopSignal,
	"Run.restart":                          "no",
	"RunFile.mode":                         fmt.Sprintf("%04o", DefaultFileMode),
	"Check.interval":                       DefaultCheckInterval.String() + " (a role check: " + DefaultRoleInterval.String() + ")",
	"Check.success_threshold":              fmt.Sprint(DefaultThreshold),
	"Check.failure_threshold":              fmt.Sprint(DefaultThreshold),
	"Call.timeout":                         DefaultCheckTimeout.String() + " in checks, version and ok_to_stop calls, " + DefaultHookTimeout.String() + " in hooks, undos and migrations, " + DefaultBackupTimeout.String() + " in backup calls",
	"Call.method":                          defaultMethodWithABody + " with a body, else " + defaultMethod,
	"Call.expect_status":                   "any 2xx",
	"Backup.keep":                          fmt.Sprint(DefaultBackupKeep),
	"CrashLoop.exits":                      fmt.Sprint(DefaultCrashExits),
	"CrashLoop.window":                     DefaultCrashWindow.String(),
	"Policy.on_failure":                    DefaultOnFailure,
	"Policy.on_impact":                     "continue",
	"Policy.tick":                          DefaultTick.String(),
	"Policy.finalize":                      DefaultFinalize,
	"Policy.undo_deadline":                 DefaultUndoDeadline.String(),
	"Migrations.deadline":                  fmt.Sprint(Duration(DefaultMigrateDeadline)),
	"Migrations.interval":                  fmt.Sprint(Duration(DefaultMigrateInterval)),
	"FlowStage.deadline":                   "the release's migrations.deadline (a hosts stage: " + DefaultLockDeadline.String() + ")",
	"FlowStage.name":                       "an action: none; a hosts stage: " + DefaultHostsName,
	"FlowStage.max_unavailable":            "1 (a hosts stage)",
	"FlowStage.max_unavailable_per_domain": "0 (no bound)",
	"Workload.namespace":                   "default (not for a NodePool)",
	"Workload.drain_timeout":               DefaultDrainTimeout.String(),
	"Traffic.concurrency":                  fmt.Sprint(DefaultTrafficConcurrency),
	"Traffic.rate":                         fmt.Sprint(DefaultTrafficRate),
	"Traffic.timeout":                      DefaultTrafficTimeout.String(),
	"Traffic.baseline":                     DefaultTrafficBaseline.String(),
	"TrafficRequest.method":                defaultMethodWithABody + " with a body, else " + defaultMethod,
	"TrafficRequest.share":                 "1",
	"TrafficRequest.expect_status":         "any 2xx",
	"Verdict.alpha":                        fmt.Sprint(DefaultAlpha),
	"Verdict.p99_ratio":                    fmt.Sprint(DefaultP99Ratio),
	"Verdict.min_requests":                 fmt.Sprint(DefaultMinRequests),
	"Prometheus.step":                      "1s",
	"TrafficControl.rate":                  fmt.Sprint(DefaultControlRate),
	"Kubernetes.kubeconfig":                "$KUBECONFIG, then the in-cluster service account",
	"HostSSH.user":                         "ferry's own user, as ssh",
	"HostSSH.dir":                          ".ferry",
	"HostSSH.max_sessions":                 "4",
	"HostSSH.connect_timeout":              "5s",
	"HostCommand.run_on":                   "the host itself",
	"HostCommand.timeout":                  "2m (a reinstall's 10m)",
	"HostCommand.unreachable":              "2m",
	"HostCommand.on_failure":               "the policy's on_failure",
}

// examplesDoc is an example of each type, as it is written in a
// description.
var examplesDoc = map[string]string{
	"Cluster": `cluster: shop
substrate: process
hosts: [{name: host-1, agent: "127.0.0.1:7101", token_file: agent/token}]
components: [...]
releases: [...]
signing_key: keys/release.pub
policy: {on_failure: rollback}`,
	"Host":    `{name: host-1, agent: "10.0.0.1:7101", token_file: /etc/ferry/agent-1.token, domain: zone-a, tls: {fingerprint: "sha256:5d41402abc4b2a76b9719d911017c592ae2c6c1d8e3b8f6f0e2c1a9d8b7c6e5f"}}`,
	"HostTLS": `{ca_file: /etc/ferry/agents-ca.pem}`,
	"HostSSH": `{address: "10.0.0.1:22", user: ferry, known_hosts: ssh/known_hosts, identity_files: [ssh/id_ed25519], dir: /var/lib/ferry, max_sessions: 4}`,
	"Commands": `start: [systemctl, start, "kv@{{.Name}}"]
stop: [systemctl, stop, "kv@{{.Name}}"]
status: [systemctl, is-active, --quiet, "kv@{{.Name}}"]
logs: [journalctl, --unit, "kv@{{.Name}}", --lines, "200", --no-pager]
sudo: [start, stop, install]`,
	"HostCalls": `lock: [{exec: [system, host-lock, "{{.Host}}"], timeout: 5m}]
unlock: [{exec: [system, host-unlock, "{{.Host}}"], timeout: 5m}]
capacity: {http: "http://lb:8001/admin/capacity?without={{.Host}}"}`,
	"HostCommands": `lock: {argv: [system, host-lock, "{{.Host}}"], run_on: controller-0, sudo: true}
unlock: {argv: [system, host-unlock, "{{.Host}}"], run_on: controller-0, sudo: true}
reinstall: {argv: [/usr/local/sbin/install-load, "{{.Version}}"], sudo: true, unreachable: 5m, timeout: 30m}
migrate: {argv: [/usr/local/sbin/migrate-data, --to, "{{.Version}}"], sudo: true}`,
	"RunOn":       `{active: coord}`,
	"HostCommand": `{argv: [system, host-lock, "{{.Host}}"], run_on: controller-0, sudo: true, timeout: 5m}`,
	"Kubernetes":  `{kubeconfig: ~/.kube/config, context: prod}`,
	"Component": `name: kv
order: 1
strategy: {type: one-at-a-time, quorum: 2}
members: [{name: kv-1, host: host-1, address: "127.0.0.1:2379"}]
run: {args: [etcd, --name, "{{.Name}}"], stop_timeout: 10s}
health:
  member: {http: "http://{{.Address}}/readyz"}
soak: 3s
deadline: 60s
role: {name: leader, check: {http: "http://{{.Address}}/metrics", pattern: '(?m)^etcd_server_is_leader 1$'}}
adopt: {listen: true}
version: {http: "http://{{.Address}}/version", json: {path: etcdserver}}
ok_to_stop: {exec: [ceph, osd, ok-to-stop, "{{.Vars.id}}"], timeout: 5s}`,
	"Adopt":     `{pid_file: "/var/run/kv/{{.Name}}.pid"}`,
	"Role":      `{name: leader, check: {http: "http://{{.Address}}/jsz", json: {path: meta_cluster.leader, equals: "{{.Name}}"}}}`,
	"CrashLoop": `{exits: 3, window: 1m}`,
	"Backup": `dir: /var/backups/kv
data: "/var/lib/kv/{{.Name}}"
command: {exec: [kv-backup, --data, "/var/lib/kv/{{.Name}}", --to, "{{.Backup}}"]}
sums: SHA256SUMS
check: {exec: [kv-backup, --check, "{{.Backup}}"]}
restore: {exec: [kv-restore, --from, "{{.Backup}}", --data, "/var/lib/kv/{{.Name}}"]}
keep: 2`,
	"Workload": `{kind: StatefulSet, namespace: shop, name: kv, container: kv}`,
	"Strategy": `{type: canary, max_batch: 4, max_unavailable: 4, max_unavailable_per_domain: 1}`,
	"Member":   `{name: kv-1, host: host-1, address: "127.0.0.1:2379", vars: {peer: "127.0.0.1:2380"}, domain: rack-1}`,
	"Run": `args: [etcd, --name, "{{.Name}}", --data-dir, data]
env: {GOMAXPROCS: "2"}
stop_timeout: 10s
stop_signal: SIGTERM
restart: on-failure
files: [{path: conf/kv.conf, mode: "0640", content: "name = {{.Name}}\n"}]`,
	"RunFile": `{path: nats.conf, mode: "0600", content: "server_name: {{.Name}}\n"}`,
	"Health": `member: {http: "http://{{.Address}}/readyz", interval: 100ms}
cluster: {http: "http://{{.Any}}/health", json: {path: health, equals: "true"}}`,
	"Check": `{http: "http://{{.Address}}/ready", expect_status: 200, interval: 100ms, timeout: 1s, success_threshold: 2}`,
	"Call": `{http: "http://127.0.0.1:8404/stats", method: POST, body: "s={{.Name}}&action=drain&b=be", expect_status: 303,
 undo: {http: "http://127.0.0.1:8404/stats", method: POST, body: "s={{.Name}}&action=ready&b=be", expect_status: 303}}`,
	"JSONMatch": `{path: leader, equals_path: header.member_id}`,
	"Hooks": `pre_stop: [{http: "http://lb:8001/admin/backends/{{.Name}}/drain", method: POST,
            undo: {http: "http://lb:8001/admin/backends/{{.Name}}/enable", method: POST}}]`,
	"Alarm":        `{name: no management-affecting alarms, exec: [fm, alarm-list, --mgmt_affecting, --nowrap], pattern: '^$', timeout: 10s}`,
	"Application":  `{name: cert-manager, supports: [1.37.x, 1.38.x], check: {exec: [cert-manager-supports, "{{.Version}}"]}}`,
	"UpgradeHooks": `pre_upgrade: [{exec: [alerts, silence, "{{.Version}}"], undo: {exec: [alerts, unsilence]}}]`,
	"Release": `version: 2.0.0
upgrade_from: ["1.0.x"]
downgrade_to: []
artifacts: {"*": {path: bin/sample-2.0.0, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}`,
	"Artifact": `{path: bin/etcd-3.6.8, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e, signature: bin/etcd-3.6.8.minisig}`,
	"Migrations": `component: kv
expand: [{http: "http://{{.Any}}/admin/compat?level=1", method: POST}]
migrate: [{http: "http://{{.Any}}/admin/migrate", method: POST, json: {path: done, equals: true}}]
finalize: [{http: "http://{{.Any}}/admin/compat?level=2", method: POST}]`,
	"FlowStage": `{stage: hosts, name: workers, components: [storage, compute], max_unavailable: 2, max_unavailable_per_domain: 1}`,
	"Policy":    `{on_failure: rollback, on_impact: pause, finalize: manual, tick: 50ms, windows: [{days: [sat, sun], start: "01:00", end: "05:00", zone: UTC}]}`,
	"Window":    `{days: [mon, tue, wed, thu], start: "22:00", end: "04:00", zone: Europe/Berlin}`,
	"Traffic": `targets: ["http://127.0.0.1:8080"]
rate: 200
requests:
  - {name: put, method: PUT, path: "/v1/kv/{{.Key}}", body: "{{.Value}}", writes: true}
  - {name: get, path: "/v1/kv/{{.Written}}", verify: true}`,
	"TrafficRequest": `{name: get, path: "/v1/kv/{{.Written}}", verify: true, share: 3}`,
	"Verdict":        `{alpha: 0.01, p99_ratio: 2, min_requests: 50}`,
	"Prometheus":     `{url: "http://127.0.0.1:9090", latency: 'histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[30s])))', errors: 'sum(rate(http_errors_total[30s]))'}`,
	"TrafficControl": `{url: "http://127.0.0.1:8001/admin/backends", rate: 20}`,
}

// TestDescriptionReference fails when docs/description.md is not what
// the types, their comments, the defaults and the examples make of it.
func TestDescriptionReference(t *testing.T) {
	got := generateReference(t)
	path := filepath.Join(sourceDir(t), "..", "..", "..", "docs", "description.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/core/config -run TestDescriptionReference -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("docs/description.md is stale from its line %d:\n  file: %s\n  now:  %s\nrun: go test ./internal/core/config -run TestDescriptionReference -update", i+1, wl[i], gl[i])
			}
		}
		t.Fatalf("docs/description.md is stale (%d lines, now %d); run: go test ./internal/core/config -run TestDescriptionReference -update", len(wl), len(gl))
	}
}

// TestDescriptionExamples: every example decodes into its type with no
// problem (no unknown key, no wrong type), and every default is a key
// that exists.
func TestDescriptionExamples(t *testing.T) {
	types := referenceTypes()
	for name, ex := range examplesDoc {
		rt, ok := types[name]
		if !ok {
			t.Errorf("examplesDoc[%s]: no such type in the reference", name)
			continue
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(ex, "[...]", "[]")), &n); err != nil {
			t.Errorf("example of %s: %v", name, err)
			continue
		}
		d := &decoder{file: name}
		d.decode(n.Content[0], reflect.New(rt).Elem(), "", nil, "", 0)
		for _, p := range d.probs {
			t.Errorf("example of %s: %s", name, p)
		}
	}
	for key := range defaultsDoc {
		typ, field, _ := strings.Cut(key, ".")
		rt, ok := types[typ]
		if !ok || !slices.Contains(structInfoOf(rt).known, field) {
			t.Errorf("defaultsDoc[%s]: no such key", key)
		}
	}
	for name := range types {
		if _, ok := examplesDoc[name]; !ok {
			t.Errorf("type %s has no example in examplesDoc", name)
		}
	}
}

func sourceDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no source path")
	}
	return filepath.Dir(file)
}

// referenceTypes are the struct types a description is made of,
// reached from Cluster, by name.
func referenceTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[Cluster]().PkgPath() || reflect.PointerTo(t).Implements(textUnmarshaler) {
			return // a scalar in YAML (HostBudget): its field says how
		}
		if _, seen := out[t.Name()]; seen {
			return
		}
		out[t.Name()] = t
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && f.Tag.Get("yaml") != "-" {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[Cluster]())
	return out
}

// docs holds the doc comments of the package's types and fields.
type docs struct {
	types  map[string]string
	fields map[string]string // "Type.Field"
}

func readDocs(t *testing.T) docs {
	fset := token.NewFileSet()
	d := docs{types: map[string]string{}, fields: map[string]string{}}
	for _, name := range []string{"types.go", "template.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(sourceDir(t), name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil {
					doc = gd.Doc
				}
				d.types[ts.Name.Name] = text(doc)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				// A comment above a group of fields (Rate, Concurrency
				// and Timeout share one) belongs to each of them.
				var group string
				for _, f := range st.Fields.List {
					c := text(f.Doc)
					if c == "" {
						c = text(f.Comment)
					}
					if f.Doc != nil {
						group = c
					}
					for _, n := range f.Names {
						fc := c
						if fc == "" && strings.Contains(group, n.Name) {
							fc = group
						}
						d.fields[ts.Name.Name+"."+n.Name] = fc
					}
				}
			}
		}
	}
	return d
}

func text(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	return strings.Join(strings.Fields(cg.Text()), " ")
}

// order is the order of the reference's sections: the description's
// shape, top down.
var order = []string{"Cluster", "Host", "HostTLS", "HostSSH", "HostCalls", "HostCommands", "HostCommand", "RunOn", "Component", "Member", "Strategy", "Run", "RunFile", "Health", "Check", "Call",
	"JSONMatch", "Hooks", "Role", "CrashLoop", "Adopt", "Backup", "Workload", "Commands", "Release", "Artifact", "Migrations", "FlowStage", "UpgradeHooks", "Alarm", "Application",
	"Policy", "Window", "Kubernetes", "Traffic", "TrafficRequest", "Verdict", "Prometheus", "TrafficControl"}

// typeDoc writes a field's type as a reader of YAML sees it.
func typeDoc(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return "duration (`2s`, `150ms`)"
	case reflect.TypeFor[HostBudget]():
		return "hosts (`2`, or a share of the stage's: `50%`)"
	case reflect.TypeFor[FileMode]():
		return "octal mode (`\"0640\"`)"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeDoc(t.Elem())
	case reflect.Slice:
		return "list of " + typeDoc(t.Elem())
	case reflect.Map:
		return "mapping of names to " + typeDoc(t.Elem())
	case reflect.Struct:
		return "[" + t.Name() + "](#" + strings.ToLower(t.Name()) + ")"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Uint64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Interface:
		return "any value"
	}
	return t.String()
}

// usedAt lists where each type appears in a description, by key path.
func usedAt() map[string][]string {
	out := map[string][]string{}
	var walk func(t reflect.Type, path string, depth int)
	walk = func(t reflect.Type, path string, depth int) {
		if depth > 6 {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			ft := f.Type
			if opts == "inline" {
				walk(ft, path, depth)
				continue
			}
			p := join(path, name)
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
				switch ft.Kind() {
				case reflect.Slice:
					p += "[]"
				case reflect.Map:
					p += ".NAME"
				}
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeFor[Cluster]().PkgPath() && ft != reflect.TypeFor[Duration]() && ft != reflect.TypeFor[HostBudget]() {
				if !slices.Contains(out[ft.Name()], p) && len(out[ft.Name()]) < 12 {
					out[ft.Name()] = append(out[ft.Name()], p)
				}
				if ft.Name() != "Call" || !strings.Contains(p, "undo") {
					walk(ft, p, depth+1)
				}
			}
		}
	}
	walk(reflect.TypeFor[Cluster](), "", 0)
	return out
}

var backtickRE = regexp.MustCompile("\\|")

func cell(s string) string { return backtickRE.ReplaceAllString(s, "\\|") }

func generateReference(t *testing.T) []byte {
	t.Helper()
	d := readDocs(t)
	types := referenceTypes()
	for name := range types {
		if !slices.Contains(order, name) {
			t.Fatalf("type %s is part of the description but not of the reference's order", name)
		}
	}
	used := usedAt()
	var ref strings.Builder
	ref.WriteString("## Reference\n\nOne section per part of a description, top down; each key with its type, its default (when it has one) and what it does.\n")
	for _, name := range order {
		rt := types[name]
		fmt.Fprintf(&ref, "\n### %s\n\n%s\n", name, d.types[name])
		if u := used[name]; len(u) > 0 {
			q := make([]string, len(u))
			for i, p := range u {
				q[i] = "`" + p + "`"
			}
			fmt.Fprintf(&ref, "\nAt %s.\n", strings.Join(q, ", "))
		}
		ref.WriteString("\n| key | type | default | |\n|---|---|---|---|\n")
		var rows func(rt reflect.Type, owner string)
		rows = func(rt reflect.Type, owner string) {
			for i := range rt.NumField() {
				f := rt.Field(i)
				key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if !f.IsExported() || key == "-" {
					continue
				}
				if opts == "inline" {
					fmt.Fprintf(&ref, "| | | | and every key of [%s](#%s): |\n", f.Type.Name(), strings.ToLower(f.Type.Name()))
					continue
				}
				def := defaultDoc(owner + "." + key)
				if def == "" {
					def = "-"
				}
				// "Soak is min_healthy_time" reads "`soak` is …" here.
				doc := d.fields[owner+"."+f.Name]
				if rest, ok := strings.CutPrefix(doc, f.Name+" "); ok {
					doc = "`" + key + "` " + rest
				}
				fmt.Fprintf(&ref, "| `%s` | %s | %s | %s |\n", key, typeDoc(f.Type), cell(def), cell(doc))
			}
		}
		rows(rt, name)
		fmt.Fprintf(&ref, "\n```yaml\n%s\n```\n", examplesDoc[name])
	}

	var tf strings.Builder
	tf.WriteString("| field | |\n|---|---|\n")
	td := reflect.TypeFor[TemplateData]()
	for i := range td.NumField() {
		f := td.Field(i)
		doc := d.fields["TemplateData."+f.Name]
		if rest, ok := strings.CutPrefix(doc, f.Name+" "); ok {
			doc = "`." + f.Name + "` " + rest
		}
		fmt.Fprintf(&tf, "| `.%s` | %s |\n", f.Name, cell(doc))
	}
	mr := reflect.TypeFor[MemberRef]()
	var refFields []string
	for i := range mr.NumField() {
		refFields = append(refFields, "`."+mr.Field(i).Name+"`")
	}
	fmt.Fprintf(&tf, "\nEach of `.Members` has %s: `{{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Name}}=http://{{$m.Vars.peer}}{{end}}` writes etcd's `--initial-cluster`.",
		strings.Join(refFields, ", "))

	src, err := os.ReadFile(filepath.Join(sourceDir(t), "testdata", "description.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("description").Delims("[[", "]]").Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]string{"Templates": tf.String(), "Reference": strings.TrimRight(ref.String(), "\n")}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
