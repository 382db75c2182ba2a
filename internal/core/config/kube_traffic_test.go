package config

import (
	"os"
	"strings"
	"testing"
)

// kubeBase is a valid description on the kubernetes substrate: each
// kind of workload, members found at run time.
const kubeBase = `cluster: k
substrate: kubernetes
kubernetes: {kubeconfig: kube.yaml}
components:
  - name: mon
    order: 1
    workload: {kind: StatefulSet, namespace: storage, name: mon}
  - name: osd
    order: 2
    strategy: {type: canary, max_unavailable: 4}
    workload: {kind: DaemonSet, selector: app=osd}
  - name: web
    order: 3
    strategy: {type: canary, max_unavailable: 2}
    workload: {kind: Deployment, name: web, container: web}
  - name: workers
    order: 4
    workload: {kind: NodePool, selector: "pool=workers,!frozen", upgrade: [/usr/local/bin/upgrade-node]}
releases:
  - version: 1.0.0
    artifacts:
      "*": {image: "registry.local/app:1.0.0", sha256: "0000000000000000000000000000000000000000000000000000000000000001"}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    artifacts:
      "*": {image: "registry.local/app:2.0.0", sha256: "0000000000000000000000000000000000000000000000000000000000000002"}
`

// trafficBase is a traffic spec added to kubeBase.
const trafficBase = `traffic:
  targets: [http://127.0.0.1:8000]
  rate: 200
  requests:
    - {name: write, method: PUT, path: "/v1/kv/{{.Key}}", body: "{{.Value}}", writes: true, share: 1}
    - {name: read, path: "/v1/kv/{{.Written}}", verify: true, share: 3}
`

func TestKubernetesAndTrafficValid(t *testing.T) {
	c, err := Parse([]byte(kubeBase+trafficBase), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Components[0].Workload.Namespace; got != "default" && got != "storage" {
		t.Errorf("namespace %q", got)
	}
	if got := c.Components[1].Workload.Namespace; got != "default" {
		t.Errorf("default namespace: %q", got)
	}
	if got := c.Components[3].Workload.Namespace; got != "" {
		t.Errorf("a NodePool has no namespace, got %q", got)
	}
	tr := c.Traffic
	if tr.Concurrency != DefaultTrafficConcurrency || tr.Timeout != DefaultTrafficTimeout || tr.Baseline != DefaultTrafficBaseline ||
		tr.Verdict.Alpha != DefaultAlpha || tr.Verdict.P99Ratio != DefaultP99Ratio || tr.Verdict.MinRequests != DefaultMinRequests {
		t.Errorf("traffic defaults not applied: %+v", tr)
	}
	if tr.Requests[1].Method != "GET" || !tr.Requests[1].UsesWritten() || tr.Requests[0].UsesWritten() {
		t.Errorf("requests: %+v", tr.Requests)
	}
}

func TestKubernetesAndTrafficRules(t *testing.T) {
	cases := []struct {
		name      string
		old, new  string
		wantLines []string
	}{
		{"workload missing", "    workload: {kind: StatefulSet, namespace: storage, name: mon}\n", "    members: [{name: mon-0}, {name: mon-1}, {name: mon-2}]\n",
			[]string{"t.yaml:5: components[0].workload: must be set for the kubernetes substrate: kind (StatefulSet, DaemonSet, Deployment, NodePool) and name or selector"}},
		{"kind unknown", "kind: StatefulSet", "kind: ReplicaSet",
			[]string{`t.yaml:7: components[0].workload.kind: unknown kind "ReplicaSet"; known: StatefulSet, DaemonSet, Deployment, NodePool`}},
		{"name and selector", "name: mon}", "name: mon, selector: app=mon}",
			[]string{"t.yaml:7: components[0].workload.selector: name and selector are exclusive: name the StatefulSet, or select it"}},
		{"neither name nor selector", "{kind: Deployment, name: web, container: web}", "{kind: Deployment}",
			[]string{"t.yaml:15: components[2].workload.name: must be set, or a selector that matches exactly one Deployment"}},
		{"bad name", "name: mon}", "name: Mon_1}",
			[]string{`t.yaml:7: components[0].workload.name: "Mon_1" is not a Kubernetes object name`}},
		{"bad selector", "selector: app=osd", "selector: \"app in (a b\"",
			[]string{`t.yaml:11: components[1].workload.selector: "app in (a b" is not a label selector (key=value, key!=value, key, !key, separated by commas)`}},
		{"node pool without selector", `selector: "pool=workers,!frozen", `, "",
			[]string{"t.yaml:18: components[3].workload.selector: must be set: the label selector of the pool's nodes"}},
		{"node pool with a name", "{kind: NodePool, ", "{kind: NodePool, name: w, ",
			[]string{"t.yaml:18: components[3].workload: a NodePool is found by its selector: name, namespace and container do not apply"}},
		{"upgrade on a workload", "name: web, container: web}", "name: web, upgrade: [x]}",
			[]string{"t.yaml:15: components[2].workload.upgrade: applies to a NodePool only: a Deployment's members are upgraded by their image"}},
		{"workload on the process substrate", "substrate: kubernetes\n", "substrate: process\n",
			nil}, // checked below: every component says it
		{"traffic without targets", "  targets: [http://127.0.0.1:8000]\n", "",
			[]string{"t.yaml:27: traffic: needs targets (ferry drives requests to them) or prometheus (ferry watches the service's own traffic)"}},
		{"traffic target not a URL", "[http://127.0.0.1:8000]", "[127.0.0.1:8000]",
			[]string{`t.yaml:28: traffic.targets[0]: "127.0.0.1:8000" is not an http(s) URL`}},
		{"traffic path", `path: "/v1/kv/{{.Written}}"`, `path: "v1/kv"`,
			[]string{"t.yaml:32: traffic.requests[1].path: must be set and start with '/': the request's path (a template)"}},
		{"traffic template field", `body: "{{.Value}}"`, `body: "{{.Valu}}"`,
			nil}, // checked below: the message names the field
		{"traffic rate", "rate: 200", "rate: -1",
			[]string{"t.yaml:29: traffic.rate: -1 is not above 0 and at most 100000: the requests per second of all clients together; write one in that range, or leave it out for the default 100"}},
		{"traffic writes and verifies", "verify: true", "verify: true, writes: true",
			[]string{"t.yaml:32: traffic.requests[1]: a request either writes (.Key = .Value) or verifies a read (.WrittenValue), not both"}},
		{"traffic alpha", "  rate: 200\n", "  rate: 200\n  verdict: {alpha: 0.7}\n",
			[]string{"t.yaml:30: traffic.verdict.alpha: 0.7 is not between 0 and 0.5: the significance level of the latency test; write one in that range (e.g. 0.01), or leave it out for the default 0.01"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := kubeBase + trafficBase
			if strings.Count(src, tc.old) != 1 {
				t.Fatalf("edit %q: not found once", tc.old)
			}
			got := problems(t, strings.Replace(src, tc.old, tc.new, 1))
			switch tc.name {
			case "workload on the process substrate":
				if len(got) < 4 || !strings.Contains(strings.Join(got, "\n"), "components[0].workload: applies to the kubernetes substrate only (this description's is process)") {
					t.Errorf("problems:\n%s", strings.Join(got, "\n"))
				}
				return
			case "traffic template field":
				if len(got) != 1 || !strings.Contains(got[0], "traffic.requests[0].body") || !strings.Contains(got[0], "Valu") {
					t.Errorf("problems:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if strings.Join(got, "\n") != strings.Join(tc.wantLines, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantLines, "\n"))
			}
		})
	}
}

func TestLoadTraffic(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tr, err := LoadTraffic(write("ok.yaml", trafficBase))
	if err != nil || tr.Rate != 200 || tr.Concurrency != DefaultTrafficConcurrency {
		t.Fatalf("LoadTraffic: %+v, %v", tr, err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"bad number", "traffic:\n  targets: [http://x:1]\n  requests: [{path: /x}]\n  rate: nope\n", "bad.yaml:4: traffic.rate: must be a number"},
		{"more than traffic", "cluster: c\n" + trafficBase, "a traffic file holds traffic: only"},
		{"empty", "{}\n", "traffic: must be set: the traffic spec"},
		{"a list", "- 1\n", "a traffic spec is a mapping"},
	} {
		_, err := LoadTraffic(write("bad.yaml", tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
