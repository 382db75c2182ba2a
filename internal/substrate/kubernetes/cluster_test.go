package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// TestMain lets the test binary serve as a node pool's Upgrade command
// in the tests (ferry runs no shell): "upgrade-node KUBECTL KUBECONFIG"
// sets the kubelet version of $FERRY_NODE to v$FERRY_VERSION, as a real
// upgrade's kubelet would report it.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "upgrade-node" {
		patch := fmt.Sprintf(`{"status":{"nodeInfo":{"kubeletVersion":"v%s"}}}`, os.Getenv("FERRY_VERSION"))
		out, err := exec.Command(os.Args[2], "--kubeconfig="+os.Args[3], "patch", "node", os.Getenv("FERRY_NODE"),
			"--subresource=status", "--type=merge", "-p", patch).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "upgrade-node: %v: %s", err, out)
			os.Exit(1)
		}
		fmt.Printf("upgraded %s to %s\n", os.Getenv("FERRY_NODE"), os.Getenv("FERRY_VERSION"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cluster is one control plane for all the driver's tests, with the
// driver running as a ServiceAccount bound to the RBAC ClusterRole only
// (every call the tests make through the driver is thereby checked to
// be allowed by it) and an admin client for set-up and assertions.
type cluster struct {
	env   *kubetest.Env
	admin kubernetes.Interface
	drv   *Driver
	logs  *logSink
}

func TestDriver(t *testing.T) {
	began := time.Now()
	env := kubetest.Start(t, kubetest.Options{Nodes: 5})
	rc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	// The driver's identity: a ServiceAccount with the ClusterRole of
	// rbac.yaml and nothing else.
	must(t, env.Apply(RBAC))
	must(t, env.Apply(`apiVersion: v1
kind: Namespace
metadata: {name: ferry-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ferry, namespace: ferry-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ferry-driver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ferry-driver}
subjects: [{kind: ServiceAccount, name: ferry, namespace: ferry-system}]
`))
	token, err := env.Kubectl("create", "token", "ferry", "-n", "ferry-system", "--duration=2h")
	must(t, err)
	src := *rc
	src.BearerToken, src.BearerTokenFile = strings.TrimSpace(token), ""
	if out, err := env.Kubectl("auth", "can-i", "update", "statefulsets", "--as=system:serviceaccount:ferry-system:ferry"); err == nil || strings.TrimSpace(out) != "no" {
		t.Fatalf("the driver's ServiceAccount may update statefulsets (%q, %v): the test would not check the ClusterRole", out, err)
	}

	logs := &logSink{t: t}
	drv, err := NewForConfig(&src, WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		WithPollInterval(200*time.Millisecond), WithEvictionRetry(500*time.Millisecond))
	must(t, err)
	t.Cleanup(func() { drv.Close() })
	c := &cluster{env: env, admin: admin, drv: drv, logs: logs}
	t.Logf("control plane, nodes and ServiceAccount ready in %s", time.Since(began).Round(time.Millisecond))

	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *cluster)
	}{
		{"StatefulSet", testStatefulSet},
		{"StatefulSetPartition", testStatefulSetPartition},
		{"Digest", testDigest},
		{"DaemonSet", testDaemonSet},
		{"DaemonSetInPlace", testDaemonSetInPlace},
		{"Deployment", testDeployment},
		{"PerWorkload", testPerWorkload},
		{"NodePool", testNodePool},
		{"Logs", testLogs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			tc.fn(t, c)
			t.Logf("%s took %s", tc.name, time.Since(t0).Round(time.Millisecond))
		})
	}
}

const statefulSet = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: %[2]s, namespace: %[1]s, labels: {tier: %[2]s}}
spec:
  replicas: %[3]d
  serviceName: %[2]s
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - {name: sidecar, image: registry.local/proxy:9.9.9}
      - {name: %[2]s, image: registry.local/%[2]s:1.0.0}
`

// testStatefulSet: Start of one pod replaces that pod only, on the new
// image pinned to its digest; the others stay; Start again is a no-op;
// Stop brings a pod back on the template's version.
func testStatefulSet(t *testing.T, c *cluster) {
	ctx := context.Background()
	must(t, c.env.Apply(fmt.Sprintf(statefulSet, "sts", "mon", 3)))
	// Found by selector, with the version in the second container.
	w := &driver.Workload{Kind: kindStatefulSet, Namespace: "sts", Selector: "tier=mon", Container: "mon"}
	c.waitVersions(t, w, 3, map[string]string{"mon-0": "1.0.0", "mon-1": "1.0.0", "mon-2": "1.0.0"})
	ms := c.discover(t, "mon", w)
	if got := memberNames(ms); got != "mon-2 mon-1 mon-0" {
		t.Fatalf("Discover: %s", got)
	}
	for _, m := range ms {
		if m.Host == "" || m.Address == "" || m.Component != "mon" {
			t.Errorf("Discover: member %+v lacks host, address or component", m)
		}
	}
	before := c.podUIDs(t, "sts", "app=mon")

	a := driver.Artifact{Version: "2.0.0", Image: "registry.local/mon:2.0.0", SHA256: sumA}
	t0 := time.Now()
	must(t, c.drv.Start(ctx, ms[1], a))
	t.Logf("Start returned in %s", time.Since(t0).Round(time.Millisecond))
	c.waitVersions(t, w, 3, map[string]string{"mon-0": "1.0.0", "mon-1": "2.0.0", "mon-2": "1.0.0"})

	s, err := c.admin.AppsV1().StatefulSets("sts").Get(ctx, "mon", metav1.GetOptions{})
	must(t, err)
	if s.Spec.UpdateStrategy.Type != "OnDelete" {
		t.Errorf("update strategy %s, want OnDelete", s.Spec.UpdateStrategy.Type)
	}
	p, err := c.admin.CoreV1().Pods("sts").Get(ctx, "mon-1", metav1.GetOptions{})
	must(t, err)
	if img := p.Spec.Containers[1].Image; img != "registry.local/mon:2.0.0@sha256:"+sumA {
		t.Errorf("mon-1 runs %s, want the image pinned to its digest", img)
	}
	if img := p.Spec.Containers[0].Image; img != "registry.local/proxy:9.9.9" {
		t.Errorf("the sidecar's image changed to %s", img)
	}
	after := c.podUIDs(t, "sts", "app=mon")
	if after["mon-0"] != before["mon-0"] || after["mon-2"] != before["mon-2"] || after["mon-1"] == before["mon-1"] {
		t.Errorf("pods replaced: before %v, after %v; want only mon-1", before, after)
	}

	// Idempotent: mon-1 already runs 2.0.0.
	must(t, c.drv.Start(ctx, ms[1], a))
	if again := c.podUIDs(t, "sts", "app=mon"); again["mon-1"] != after["mon-1"] {
		t.Errorf("a second Start replaced mon-1 again")
	}

	// Stop: the pod comes back, from the template (now 2.0.0).
	must(t, c.drv.Stop(ctx, ms[0]))
	c.waitVersions(t, w, 3, map[string]string{"mon-0": "1.0.0", "mon-1": "2.0.0", "mon-2": "2.0.0"})
	if again := c.podUIDs(t, "sts", "app=mon"); again["mon-2"] == after["mon-2"] {
		t.Errorf("Stop did not replace mon-2")
	}
}

// testStatefulSetPartition: a RollingUpdate StatefulSet moved highest
// ordinal first is rolled by a partition: Kubernetes replaces each pod
// ferry starts, and a pod below the partition deleted by hand between
// two Starts (an upgrade paused there) comes back on the old image;
// the journal says which way it was rolled.
func testStatefulSetPartition(t *testing.T, c *cluster) {
	ctx := context.Background()
	must(t, c.env.Apply(fmt.Sprintf(statefulSet, "part", "kv", 3)))
	w := &driver.Workload{Kind: kindStatefulSet, Namespace: "part", Name: "kv", Container: "kv"}
	c.waitVersions(t, w, 3, map[string]string{"kv-0": "1.0.0", "kv-1": "1.0.0", "kv-2": "1.0.0"})
	ms := c.discover(t, "kv", w)
	if got := memberNames(ms); got != "kv-2 kv-1 kv-0" {
		t.Fatalf("Discover: %s, want the highest ordinal first", got)
	}
	j := &effects{}
	jctx := driver.WithJournal(ctx, j)
	a := driver.Artifact{Version: "2.0.0", Image: "registry.local/kv:2.0.0", SHA256: sumA}

	must(t, c.drv.Start(jctx, ms[0], a))
	c.waitVersions(t, w, 3, map[string]string{"kv-0": "1.0.0", "kv-1": "1.0.0", "kv-2": "2.0.0"})
	s, err := c.admin.AppsV1().StatefulSets("part").Get(ctx, "kv", metav1.GetOptions{})
	must(t, err)
	if r := s.Spec.UpdateStrategy.RollingUpdate; s.Spec.UpdateStrategy.Type != "RollingUpdate" || r == nil || r.Partition == nil || *r.Partition != 2 {
		t.Fatalf("update strategy %+v, want RollingUpdate with partition 2", s.Spec.UpdateStrategy)
	}

	// Paused here: kv-0, below the partition, deleted by hand.
	before := c.podUIDs(t, "part", "app=kv")
	must(t, c.admin.CoreV1().Pods("part").Delete(ctx, "kv-0", metav1.DeleteOptions{}))
	must(t, c.env.WaitUntil(time.Minute, "kv-0 recreated", func() (bool, string, error) {
		now := c.podUIDs(t, "part", "app=kv")
		return now["kv-0"] != "" && now["kv-0"] != before["kv-0"], fmt.Sprint(now), nil
	}))
	c.waitVersions(t, w, 3, map[string]string{"kv-0": "1.0.0", "kv-1": "1.0.0", "kv-2": "2.0.0"})
	p, err := c.admin.CoreV1().Pods("part").Get(ctx, "kv-0", metav1.GetOptions{})
	must(t, err)
	if img := p.Spec.Containers[1].Image; img != "registry.local/kv:1.0.0" {
		t.Errorf("kv-0 recreated below the partition runs %s, want the old registry.local/kv:1.0.0", img)
	}

	must(t, c.drv.Start(jctx, ms[1], a))
	c.waitVersions(t, w, 3, map[string]string{"kv-0": "1.0.0", "kv-1": "2.0.0", "kv-2": "2.0.0"})
	must(t, c.drv.Start(jctx, ms[2], a))
	c.waitVersions(t, w, 3, map[string]string{"kv-0": "2.0.0", "kv-1": "2.0.0", "kv-2": "2.0.0"})
	got := j.whats()
	if len(got) != 1 || !strings.Contains(got[0], "RollingUpdate → "+setPartition) {
		t.Errorf("journal: %q, want one change to %q", got, setPartition)
	}
	// The end of the phase: the strategy as it was (no partition).
	must(t, j.undoAll(ctx, c.drv))
	s, err = c.admin.AppsV1().StatefulSets("part").Get(ctx, "kv", metav1.GetOptions{})
	must(t, err)
	if r := s.Spec.UpdateStrategy.RollingUpdate; s.Spec.UpdateStrategy.Type != "RollingUpdate" || (r != nil && r.Partition != nil && *r.Partition != 0) {
		t.Errorf("after the undo: update strategy %+v, want RollingUpdate without a partition", s.Spec.UpdateStrategy)
	}
}

// testDigest: an image that carries a digest must carry the artifact's.
func testDigest(t *testing.T, c *cluster) {
	ctx := context.Background()
	must(t, c.env.Apply(fmt.Sprintf(statefulSet, "digest", "db", 1)))
	w := &driver.Workload{Kind: kindStatefulSet, Namespace: "digest", Name: "db"}
	c.waitVersions(t, w, 1, map[string]string{"db-0": "9.9.9"}) // the first container: the sidecar
	w.Container = "db"
	c.waitVersions(t, w, 1, map[string]string{"db-0": "1.0.0"})
	m := c.discover(t, "db", w)[0]

	err := c.drv.Start(ctx, m, driver.Artifact{Version: "2.0.0", Image: "registry.local/db:2.0.0@sha256:" + sumB, SHA256: sumA})
	if err == nil || !strings.Contains(err.Error(), "carries digest") {
		t.Fatalf("Start with another digest: %v", err)
	}
	s, err := c.admin.AppsV1().StatefulSets("digest").Get(ctx, "db", metav1.GetOptions{})
	must(t, err)
	if img := s.Spec.Template.Spec.Containers[1].Image; img != "registry.local/db:1.0.0" {
		t.Fatalf("a refused artifact changed the template to %s", img)
	}

	ref := "registry.local/db@sha256:" + sumA // no tag: the annotation says the version
	must(t, c.drv.Start(ctx, m, driver.Artifact{Version: "2.0.0", Image: ref, SHA256: "sha256:" + sumA}))
	c.waitVersions(t, w, 1, map[string]string{"db-0": "2.0.0"})
	s, err = c.admin.AppsV1().StatefulSets("digest").Get(ctx, "db", metav1.GetOptions{})
	must(t, err)
	tm := s.Spec.Template
	if tm.Spec.Containers[1].Image != ref || tm.Annotations[AnnotationVersion] != "2.0.0" || tm.Annotations[AnnotationImage] != ref {
		t.Errorf("template: image %s, annotations %v", tm.Spec.Containers[1].Image, tm.Annotations)
	}
}

const daemonSet = `apiVersion: v1
kind: Namespace
metadata: {name: ds}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ds}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "registry.local/agent:v1.0.0"}]
`

// testDaemonSet: Start of one node's member replaces that node's pod only.
func testDaemonSet(t *testing.T, c *cluster) {
	ctx := context.Background()
	// Nodes 0 and 1 in zone a, 2 and 3 in zone b, 4 in none: each
	// member's domain is its node's zone.
	zones := map[int]string{0: "a", 1: "a", 2: "b", 3: "b"}
	for i, z := range zones {
		_, err := c.env.Kubectl("label", "node", fmt.Sprintf("kwok-node-%d", i), ZoneLabel+"="+z, "--overwrite")
		must(t, err)
	}
	t.Cleanup(func() {
		for i := range zones {
			c.env.Kubectl("label", "node", fmt.Sprintf("kwok-node-%d", i), ZoneLabel+"-")
		}
	})
	w := &driver.Workload{Kind: kindDaemonSet, Namespace: "ds", Name: "agent"}
	ms, want := c.daemonSetUp(t, daemonSet, w)
	if ms[2].Name != "agent.kwok-node-2" || ms[2].Host != "kwok-node-2" {
		t.Fatalf("Discover: member 2 is %+v", ms[2])
	}
	for i, m := range ms {
		if m.Domain != zones[i] {
			t.Errorf("Discover: %s's domain is %q, want its node's zone %q", m.Name, m.Domain, zones[i])
		}
		// Its labels are its node's (what a flow's part selects by).
		if m.Labels["kubernetes.io/hostname"] != m.Host || m.Labels[ZoneLabel] != zones[i] {
			t.Errorf("Discover: %s's labels are %v, want its node's", m.Name, m.Labels)
		}
	}
	before := c.podsByNode(t, "ds", "app=agent")

	// A start taken again at once (the engine does, on an observation
	// made after the first returned) reads the driver's cache: the pod
	// the first deleted is seen deleting there, not deleted again.
	deletes := c.drv.Requests().ByMethod()["DELETE"]
	art := driver.Artifact{Version: "2.0.0", Image: "registry.local/agent:v2.0.0", SHA256: sumA}
	must(t, c.drv.Start(ctx, ms[2], art))
	must(t, c.drv.Start(ctx, ms[2], art))
	if n := c.drv.Requests().ByMethod()["DELETE"] - deletes; n != 1 {
		t.Errorf("two starts of %s in a row deleted %d pods, want 1", ms[2].Name, n)
	}
	want["agent.kwok-node-2"] = "2.0.0"
	c.waitVersions(t, w, 5, want)
	after := c.podsByNode(t, "ds", "app=agent")
	for node, uid := range before {
		if changed := after[node] != uid; changed != (node == "kwok-node-2") {
			t.Errorf("pod on %s replaced: %t", node, changed)
		}
	}
}

const daemonSetInPlace = `apiVersion: v1
kind: Namespace
metadata: {name: dsip}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: probe, namespace: dsip}
spec:
  selector: {matchLabels: {app: probe}}
  updateStrategy: {type: OnDelete}
  template:
    metadata: {labels: {app: probe}}
    spec:
      containers: [{name: probe, image: "registry.local/probe:v1.0.0"}]
`

// testDaemonSetInPlace: with update: in-place, Start changes the image
// of a node's pod where it runs (no delete: the same pod, taken by the
// DaemonSet controller as updated), and its version is the new one once
// the kubelet (kwok's stage pod-container-image-changed, in
// scripts/kube-testenv.sh) has restarted the container; a pod whose
// template differs from the new one in more than the image is
// recreated, and the log says where they differ.
func testDaemonSetInPlace(t *testing.T, c *cluster) {
	ctx := context.Background()
	w := &driver.Workload{Kind: kindDaemonSet, Namespace: "dsip", Name: "probe", Update: updateInPlace}
	ms, want := c.daemonSetUp(t, daemonSetInPlace, w)
	before := c.podsByNode(t, "dsip", "app=probe")

	// Twice in a row, as the engine may: one template patch, one pod
	// patch, no delete.
	calls := c.drv.Requests().ByMethod()
	art := driver.Artifact{Version: "2.0.0", Image: "registry.local/probe:v2.0.0", SHA256: sumA}
	must(t, c.drv.Start(ctx, ms[1], art))
	must(t, c.drv.Start(ctx, ms[1], art))
	now := c.drv.Requests().ByMethod()
	if d, p := now["DELETE"]-calls["DELETE"], now["PATCH"]-calls["PATCH"]; d != 0 || p != 2 {
		t.Errorf("two starts of %s in place: %d deletes and %d patches, want 0 and 2 (the template, the pod)", ms[1].Name, d, p)
	}
	want["probe.kwok-node-1"] = "2.0.0"
	c.waitVersions(t, w, 5, want)
	if after := c.podsByNode(t, "dsip", "app=probe"); !maps.Equal(after, before) {
		t.Errorf("pods by node %v, want the same pods as before %v", after, before)
	}
	st, err := c.drv.Observe(ctx, ms[1:2])
	must(t, err)
	if st[0].Restarts != 0 {
		t.Errorf("%s: %d restarts after its change in place, want 0 (that restart is no crash)", ms[1].Name, st[0].Restarts)
	}
	ds, err := c.admin.AppsV1().DaemonSets("dsip").Get(ctx, "probe", metav1.GetOptions{})
	must(t, err)
	ref, err := ImageRef(art)
	must(t, err)
	for _, p := range c.pods(t, "dsip", "app=probe") {
		if p.Spec.NodeName != "kwok-node-1" {
			continue
		}
		if p.Spec.Containers[0].Image != ref || p.Labels[labelTemplateGen] != ds.Annotations[appsv1.DeprecatedTemplateGeneration] {
			t.Errorf("pod %s: image %s, labels %v; want %s and %s %s", p.Name, p.Spec.Containers[0].Image, p.Labels, ref, labelTemplateGen, ds.Annotations[appsv1.DeprecatedTemplateGeneration])
		}
	}
	// The DaemonSet controller counts that pod updated.
	must(t, c.env.WaitUntil(30*time.Second, "the DaemonSet's updatedNumberScheduled 1", func() (bool, string, error) {
		ds, err := c.admin.AppsV1().DaemonSets("dsip").Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return ds.Status.UpdatedNumberScheduled == 1, fmt.Sprintf("updatedNumberScheduled %d", ds.Status.UpdatedNumberScheduled), nil
	}))

	// Someone changes more than the image: the next pods are recreated.
	_, err = c.env.Kubectl("-n", "dsip", "set", "env", "daemonset/probe", "MODE=fast")
	must(t, err)
	art3 := driver.Artifact{Version: "3.0.0", Image: "registry.local/probe:v3.0.0", SHA256: sumA}
	must(t, c.drv.Start(ctx, ms[3], art3))
	want["probe.kwok-node-3"] = "3.0.0"
	c.waitVersions(t, w, 5, want)
	after := c.podsByNode(t, "dsip", "app=probe")
	if after["kwok-node-3"] == before["kwok-node-3"] {
		t.Errorf("the pod on kwok-node-3 was changed in place, its template differing in its env")
	}
	if log := c.logs.String(); !strings.Contains(log, "differs from the new one in more than the images (at spec.containers[0].env)") {
		t.Errorf("the driver's log does not say why the pod was recreated:\n%s", log)
	}

	// A release the kubelet never starts: the pod still runs 3.0.0, and
	// says so; taken back to 3.0.0 before the kubelet acted (a rollback),
	// it runs 3.0.0 with nothing pending, and no pod was deleted.
	calls = c.drv.Requests().ByMethod()
	must(t, c.drv.Start(ctx, ms[3], driver.Artifact{Version: "4.0.0", Image: "registry.local/probe:never-ready", SHA256: sumA}))
	st, err = c.drv.Observe(ctx, ms[3:4])
	must(t, err)
	if st[0].Version != "3.0.0" || !st[0].Running || !strings.Contains(st[0].Detail, "restarts in place with version 4.0.0") {
		t.Errorf("%s changed in place to a release never started: %+v, want running 3.0.0, restarting in place", ms[3].Name, st[0])
	}
	must(t, c.drv.Start(ctx, ms[3], art3))
	must(t, c.env.WaitUntil(30*time.Second, ms[3].Name+" on 3.0.0, nothing pending", func() (bool, string, error) {
		st, err := c.drv.Observe(ctx, ms[3:4])
		if err != nil {
			return false, "", err
		}
		return st[0].Version == "3.0.0" && st[0].Running && st[0].Detail == "", fmt.Sprintf("%+v", st[0]), nil
	}))
	if now := c.drv.Requests().ByMethod(); now["DELETE"] != calls["DELETE"] {
		t.Errorf("the change to 4.0.0 and back deleted %d pods, want none", now["DELETE"]-calls["DELETE"])
	}
	if got := c.podsByNode(t, "dsip", "app=probe")["kwok-node-3"]; got != after["kwok-node-3"] {
		t.Errorf("the pod on kwok-node-3 was replaced on its way to 4.0.0 and back")
	}
}

const deployment = `apiVersion: v1
kind: Namespace
metadata: {name: dep}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: dep}
spec:
  replicas: 4
  # kwok makes a pod Ready within milliseconds of its creation; real
  # pods take seconds. minReadySeconds gives the rollout gate that time.
  minReadySeconds: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "registry.local/web:1.0.0"}]
`

// testDeployment: Start of slot 2 lets the rollout make two (at most
// three: the surge) new pods and pauses it there; the last slot
// finishes it and leaves it unpaused.
func testDeployment(t *testing.T, c *cluster) {
	ctx := context.Background()
	must(t, c.env.Apply(deployment))
	w := &driver.Workload{Kind: kindDeployment, Namespace: "dep", Name: "web"}
	old := map[string]string{"web.1": "1.0.0", "web.2": "1.0.0", "web.3": "1.0.0", "web.4": "1.0.0"}
	c.waitVersions(t, w, 4, old)
	ms := c.discover(t, "web", w)
	if got := memberNames(ms); got != "web.1 web.2 web.3 web.4" {
		t.Fatalf("Discover: %s", got)
	}

	a := driver.Artifact{Version: "2.0.0", Image: "registry.local/web:2.0.0", SHA256: sumA}
	must(t, c.drv.Start(ctx, ms[1], a))
	c.waitVersions(t, w, 4, map[string]string{"web.1": "2.0.0", "web.2": "2.0.0", "web.3": "1.0.0", "web.4": "1.0.0"})
	must(t, c.env.WaitUntil(10*time.Second, "the rollout paused", func() (bool, string, error) {
		dep, err := c.admin.AppsV1().Deployments("dep").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && dep.Spec.Paused, fmt.Sprintf("paused %t", dep != nil && dep.Spec.Paused), err
	}))
	// It stays there: for a few seconds, 2 or 3 new pods (the surge),
	// and every slot Running.
	most := 0
	stays := time.Now().Add(3 * time.Second)
	err := c.env.WaitUntil(5*time.Second, "the gate to stay for 3s", func() (bool, string, error) {
		news, olds := c.versionCounts(t, "dep", "app=web")
		most = max(most, news)
		if news > 3 || news < 2 || olds < 2 {
			return false, "", fmt.Errorf("the gate of slot 2 let %d new pods run (%d old)", news, olds)
		}
		st, err := c.drv.Observe(ctx, ms)
		if err != nil {
			return false, "", err
		}
		for _, s := range st {
			if !s.Running {
				return false, "", fmt.Errorf("slot %s down while paused: %s", s.Name, s.Detail)
			}
		}
		return time.Now().After(stays), fmt.Sprintf("%d new, %d old", news, olds), nil
	})
	must(t, err)
	t.Logf("gate at slot 2 held with at most %d new pods", most)

	must(t, c.drv.Start(ctx, ms[3], a))
	c.waitVersions(t, w, 4, map[string]string{"web.1": "2.0.0", "web.2": "2.0.0", "web.3": "2.0.0", "web.4": "2.0.0"})
	must(t, c.env.WaitUntil(time.Minute, "the rollout done, unpaused, 4 pods", func() (bool, string, error) {
		dep, err := c.admin.AppsV1().Deployments("dep").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		news, olds := c.versionCounts(t, "dep", "app=web")
		return !dep.Spec.Paused && news == 4 && olds == 0, fmt.Sprintf("paused %t, %d new, %d old", dep.Spec.Paused, news, olds), nil
	}))
}

const guarded = `apiVersion: v1
kind: Namespace
metadata: {name: pool}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: guarded, namespace: pool}
spec:
  replicas: 1
  selector: {matchLabels: {app: guarded}}
  template:
    metadata: {labels: {app: guarded}}
    spec:
      nodeSelector: {pool: a}
      containers: [{name: app, image: "registry.local/guarded:1.0.0"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: pool}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: guarded}}
`

// testNodePool: a node whose pod a PodDisruptionBudget protects stays
// cordoned with the pod on it (Start waits, naming the budget) until
// the budget allows the eviction; then the node is upgraded and
// uncordoned, and the pod runs elsewhere.
func testNodePool(t *testing.T, c *cluster) {
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		node := fmt.Sprintf("kwok-node-%d", i)
		_, err := c.env.Kubectl("label", "node", node, "pool=a")
		must(t, err)
		_, err = c.env.Kubectl("patch", "node", node, "--subresource=status", "--type=merge",
			"-p", `{"status":{"nodeInfo":{"kubeletVersion":"v1.37.2"}}}`)
		must(t, err)
	}
	self, err := os.Executable()
	must(t, err)
	w := &driver.Workload{Kind: kindNodePool, Selector: "pool=a", DrainTimeout: 2 * time.Second,
		Upgrade: []string{self, "upgrade-node", filepath.Join(c.env.BinDir, "kubectl"), c.env.Kubeconfig}}
	c.waitVersions(t, w, 3, map[string]string{"kwok-node-0": "1.37.2", "kwok-node-1": "1.37.2", "kwok-node-2": "1.37.2"})
	ms := c.discover(t, "nodes", w)
	if got := memberNames(ms); got != "kwok-node-0 kwok-node-1 kwok-node-2" {
		t.Fatalf("Discover: %s", got)
	}

	must(t, c.env.Apply(guarded))
	var pod *corev1.Pod
	must(t, c.env.WaitUntil(time.Minute, "the guarded pod Ready and its budget at 0 disruptions", func() (bool, string, error) {
		ps, err := c.admin.CoreV1().Pods("pool").List(ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
		if err != nil || len(ps.Items) != 1 || !podReady(&ps.Items[0]) {
			return false, "pod not Ready", err
		}
		pod = &ps.Items[0]
		b, err := c.admin.PolicyV1().PodDisruptionBudgets("pool").Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return b.Status.CurrentHealthy == 1 && b.Status.DisruptionsAllowed == 0, fmt.Sprintf("budget %+v", b.Status), nil
	}))
	var m driver.Member
	for _, x := range ms {
		if x.Name == pod.Spec.NodeName {
			m = x
		}
	}
	t.Logf("the guarded pod %s runs on %s", pod.Name, m.Name)
	a := driver.Artifact{Version: "1.38.0"}

	// A drain timeout: Start fails, naming the budget; the node stays
	// cordoned on its version.
	err = c.drv.Start(ctx, m, a)
	if err == nil || !strings.Contains(err.Error(), "PodDisruptionBudget pool/guarded") {
		t.Fatalf("Start with the eviction refused: %v; want an error naming the budget", err)
	}
	t.Logf("Start with a 2s drain timeout: %v", err)

	// A long drain: Start waits while the budget refuses.
	long := *w
	long.DrainTimeout = 2 * time.Minute
	m.Workload = &long
	done := make(chan error, 1)
	logged := len(c.logs.String())
	go func() { done <- c.drv.Start(ctx, m, a) }()
	must(t, c.env.WaitUntil(30*time.Second, "the driver to report the refusing budget", func() (bool, string, error) {
		return strings.Contains(c.logs.String()[logged:], "blocked_by=\"PodDisruptionBudget pool/guarded"), "", nil
	}))
	waited := time.Now().Add(2 * time.Second)
	must(t, c.env.WaitUntil(5*time.Second, "Start to keep waiting for 2s, node cordoned, pod on it", func() (bool, string, error) {
		select {
		case err := <-done:
			return false, "", fmt.Errorf("Start returned while the budget refuses: %v", err)
		default:
		}
		n, err := c.admin.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		p, err := c.admin.CoreV1().Pods("pool").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			return false, "", fmt.Errorf("the guarded pod went: %v", err)
		}
		if !n.Spec.Unschedulable {
			return false, "", fmt.Errorf("node %s not cordoned while drained", m.Name)
		}
		return time.Now().After(waited), "", nil
	}))
	st, err := c.drv.Observe(ctx, []driver.Member{m})
	must(t, err)
	if !st[0].Running || st[0].Version != "1.37.2" || st[0].Detail != "cordoned" {
		t.Errorf("Observe while draining: %+v", st[0])
	}

	_, err = c.env.Kubectl("patch", "pdb", "guarded", "-n", "pool", "--type=merge", "-p", `{"spec":{"minAvailable":0}}`)
	must(t, err)
	t0 := time.Now()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Start did not end within a minute of the budget allowing the eviction")
	}
	t.Logf("Start ended %s after the budget was relaxed", time.Since(t0).Round(time.Millisecond))
	n, err := c.admin.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
	must(t, err)
	if n.Spec.Unschedulable || n.Status.NodeInfo.KubeletVersion != "v1.38.0" {
		t.Errorf("node %s: unschedulable %t, kubelet %s", m.Name, n.Spec.Unschedulable, n.Status.NodeInfo.KubeletVersion)
	}
	st, err = c.drv.Observe(ctx, ms)
	must(t, err)
	for _, s := range st {
		want := "1.37.2"
		if s.Name == m.Name {
			want = "1.38.0"
		}
		if !s.Running || s.Version != want || s.Detail != "" {
			t.Errorf("Observe after the upgrade: %+v, want Running on %s", s, want)
		}
	}
	must(t, c.env.WaitUntil(time.Minute, "the guarded pod Ready on another node", func() (bool, string, error) {
		ps, err := c.admin.CoreV1().Pods("pool").List(ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
		if err != nil {
			return false, "", err
		}
		for _, p := range ps.Items {
			if podReady(&p) && p.Spec.NodeName != m.Name {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d pods", len(ps.Items)), nil
	}))

	// After a crash between the upgrade and the uncordon (here: Stop),
	// Start only uncordons; the upgrade command is not run again.
	must(t, c.drv.Stop(ctx, m))
	st, err = c.drv.Observe(ctx, []driver.Member{m})
	must(t, err)
	if st[0].Detail != "cordoned" {
		t.Fatalf("after Stop: %+v", st[0])
	}
	again := long
	again.Upgrade = []string{"/nonexistent/upgrade"}
	m.Workload = &again
	must(t, c.drv.Start(ctx, m, a))
	n, err = c.admin.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
	must(t, err)
	if n.Spec.Unschedulable {
		t.Errorf("Start left node %s on the right version cordoned", m.Name)
	}
}

// ---------------------------------------------------------------- helpers

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func memberNames(ms []driver.Member) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Name)
	}
	return strings.Join(s, " ")
}

func (c *cluster) discover(t *testing.T, component string, w *driver.Workload) []driver.Member {
	t.Helper()
	ms, err := c.drv.Discover(context.Background(), component, *w)
	must(t, err)
	return ms
}

// daemonSetUp applies manifest, the DaemonSet w names, and waits until
// it has a pod on each of the 5 nodes, all running 1.0.0: its members
// and those versions, by member.
func (c *cluster) daemonSetUp(t *testing.T, manifest string, w *driver.Workload) ([]driver.Member, map[string]string) {
	t.Helper()
	must(t, c.env.Apply(manifest))
	var ms []driver.Member
	must(t, c.env.WaitUntil(time.Minute, "a pod of "+w.Name+" on each of 5 nodes", func() (bool, string, error) {
		var err error
		ms, err = c.drv.Discover(context.Background(), w.Name, *w)
		return len(ms) == 5, memberNames(ms), err
	}))
	want := map[string]string{}
	for i := 0; i < 5; i++ {
		want[fmt.Sprintf("%s.kwok-node-%d", w.Name, i)] = "1.0.0"
	}
	c.waitVersions(t, w, 5, want)
	return ms, want
}

// waitVersions waits until the n members of w the driver discovers are
// all Running on the versions of want.
func (c *cluster) waitVersions(t *testing.T, w *driver.Workload, n int, want map[string]string) {
	t.Helper()
	t0 := time.Now()
	err := c.env.WaitUntil(time.Minute, fmt.Sprintf("%d members Running on %v", n, want), func() (bool, string, error) {
		ms, err := c.drv.Discover(context.Background(), "c", *w)
		if err != nil {
			return false, "", err
		}
		st, err := c.drv.Observe(context.Background(), ms)
		if err != nil {
			return false, "", err
		}
		ok := len(st) == n
		var got []string
		for _, s := range st {
			got = append(got, fmt.Sprintf("%s %s running=%t %s", s.Name, s.Version, s.Running, s.Detail))
			if !s.Running || s.Version != want[s.Name] {
				ok = false
			}
		}
		return ok, strings.Join(got, "; "), nil
	})
	if err != nil {
		out, _ := c.env.Kubectl("get", "pods,replicasets,deployments", "-A", "-o", "wide")
		t.Logf("objects:\n%s", out)
		if w.Namespace != "" {
			out, _ = c.env.Kubectl("get", "pods", "-n", w.Namespace, "-o", "yaml")
			t.Logf("pods of %s:\n%s", w.Namespace, out)
		}
	}
	must(t, err)
	t.Logf("members on %v in %s", want, time.Since(t0).Round(time.Millisecond))
}

func (c *cluster) pods(t *testing.T, ns, sel string) []corev1.Pod {
	t.Helper()
	l, err := c.admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	must(t, err)
	return l.Items
}

func (c *cluster) podUIDs(t *testing.T, ns, sel string) map[string]string {
	out := map[string]string{}
	for _, p := range c.pods(t, ns, sel) {
		out[p.Name] = string(p.UID)
	}
	return out
}

func (c *cluster) podsByNode(t *testing.T, ns, sel string) map[string]string {
	out := map[string]string{}
	for _, p := range c.pods(t, ns, sel) {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = string(p.UID)
		}
	}
	return out
}

// versionCounts counts the live pods on 2.0.0 and on 1.0.0.
func (c *cluster) versionCounts(t *testing.T, ns, sel string) (news, olds int) {
	for _, p := range c.pods(t, ns, sel) {
		if p.DeletionTimestamp != nil {
			continue
		}
		switch podVersion(p.ObjectMeta, p.Spec, "") {
		case "2.0.0":
			news++
		case "1.0.0":
			olds++
		}
	}
	return news, olds
}

// logSink keeps the driver's log for assertions and shows it in the
// test's output.
type logSink struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("driver: %s", bytes.TrimSpace(b))
	return l.buf.Write(b)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// effects is a journal (driver.Journal) in memory, as the engine keeps
// one in the upgrade's record: recording a key again is a no-op.
type effects struct {
	mu   sync.Mutex
	list []driver.Effect
}

func (j *effects) Record(_ context.Context, e driver.Effect) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, x := range j.list {
		if x.Key == e.Key {
			return nil
		}
	}
	j.list = append(j.list, e)
	return nil
}

func (j *effects) Done(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.list = slices.DeleteFunc(j.list, func(e driver.Effect) bool { return e.Key == key })
	return nil
}

func (j *effects) whats() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, e := range j.list {
		out = append(out, e.What)
	}
	return out
}

// undoAll undoes the effects, the last first.
func (j *effects) undoAll(ctx context.Context, d *Driver) error {
	j.mu.Lock()
	list := slices.Clone(j.list)
	j.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		if err := d.Undo(ctx, list[i].Key, list[i].Undo); err != nil {
			return err
		}
	}
	return nil
}
