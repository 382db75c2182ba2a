package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
	"github.com/ferry-upgrade/ferry/internal/surface/controller"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// ferryBin is the ferry binary the tests run as the controller: a
// process of its own, so that a test can kill it.
var ferryBin string

func TestMain(m *testing.M) {
	// The tests' node upgrade command (ferry runs no shell): "upgrade-node
	// KUBECTL KUBECONFIG" sets the kubelet version of $FERRY_NODE to
	// v$FERRY_VERSION, as a node's upgrade would.
	if len(os.Args) == 4 && os.Args[1] == "upgrade-node" {
		out, err := exec.Command(os.Args[2], "--kubeconfig="+os.Args[3], "patch", "node", os.Getenv("FERRY_NODE"),
			"--subresource=status", "--type=merge",
			"-p", `{"status":{"nodeInfo":{"kubeletVersion":"v`+os.Getenv("FERRY_VERSION")+`"}}}`).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "upgrade-node: %v: %s", err, out)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := func() int {
		if os.Getenv(kubetest.EnvVar) != "1" {
			return m.Run() // every test skips, saying why
		}
		dir, err := os.MkdirTemp("", "ferry-controller-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ferryBin = filepath.Join(dir, "ferry")
		if out, err := exec.Command("go", "build", "-o", ferryBin, "github.com/ferry-upgrade/ferry/cmd/ferry").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build ferry: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

const sha1 = "1111111111111111111111111111111111111111111111111111111111111111"
const sha2 = "2222222222222222222222222222222222222222222222222222222222222222"

// workloads are the cluster being upgraded: a StatefulSet of three
// (quorum members), a DaemonSet on every node, a Deployment of four.
const workloads = `apiVersion: v1
kind: Namespace
metadata: {name: storage}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: mon, namespace: storage}
spec:
  replicas: 3
  serviceName: mon
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: mon}}
  template:
    metadata: {labels: {app: mon}}
    spec:
      containers: [{name: mon, image: "registry.local/mon:1.0.0"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: osd, namespace: storage}
spec:
  selector: {matchLabels: {app: osd}}
  template:
    metadata: {labels: {app: osd}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: osd, image: "registry.local/osd:1.0.0"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: storage}
spec:
  replicas: 4
  minReadySeconds: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "registry.local/web:1.0.0"}]
`

// description is the cluster description the Upgrade carries.
func description(soak string) string {
	return fmt.Sprintf(`cluster: storage
substrate: kubernetes
components:
  - name: mon
    order: 1
    workload: {kind: StatefulSet, namespace: storage, name: mon}
    strategy: {type: one-at-a-time}
    soak: %[1]s
  - name: osd
    order: 2
    workload: {kind: DaemonSet, namespace: storage, name: osd}
    strategy: {type: canary, max_unavailable: 4}
    soak: %[1]s
  - name: web
    order: 3
    workload: {kind: Deployment, namespace: storage, name: web}
    strategy: {type: canary, max_unavailable: 2}
    soak: %[1]s
releases:
  - version: 1.0.0
    artifacts:
      mon: {image: "registry.local/mon:1.0.0", sha256: "%[2]s"}
      osd: {image: "registry.local/osd:1.0.0", sha256: "%[2]s"}
      web: {image: "registry.local/web:1.0.0", sha256: "%[2]s"}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    artifacts:
      mon: {image: "registry.local/mon:2.0.0", sha256: "%[3]s"}
      osd: {image: "registry.local/osd:2.0.0", sha256: "%[3]s"}
      web: {image: "registry.local/web:2.0.0", sha256: "%[3]s"}
`, soak, sha1, sha2)
}

func upgradeResource(name, desc, to string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "ferry.dev/v1alpha1", "kind": "Upgrade",
		"metadata": map[string]any{"name": name, "namespace": "ferry-system"},
		"spec":     map[string]any{"description": desc, "to": to},
	})
	return string(b)
}

// controllerProc is one 'ferry controller' process.
type controllerProc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func startController(t *testing.T, kubeconfig string, name string) *controllerProc {
	t.Helper()
	p := &controllerProc{out: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(ferryBin, "controller", "--kubeconfig", kubeconfig, "--namespace", "ferry-system",
		"--leader-elect", "--lease-duration", "4s", "-v")
	p.cmd.Env = append(os.Environ(), "HOSTNAME="+name)
	w := lockedWriter{p.mu, p.out}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("controller %s output:\n%s", name, p.output())
		}
	})
	return p
}

func (p *controllerProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *controllerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func getUpgrade(t *testing.T, env *kubetest.Env, name string) controller.Upgrade {
	t.Helper()
	out, err := env.Kubectl("get", "upgrade", name, "-n", "ferry-system", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var u controller.Upgrade
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// observer polls the pods of the namespace and keeps the most of each
// app's pods not Ready at once, and the pods' UIDs, so that a test can
// tell which were replaced.
type observer struct {
	mu      sync.Mutex
	maxDown map[string]int
	// worst is, per app, the pods not Ready at the moment of its
	// maxDown (name, node, phase, Ready condition): what a failure shows.
	worst    map[string]string
	rounds   int
	firstOSD time.Time // the first osd pod on 2.0.0
	lastMon  time.Time // the last mon pod to reach 2.0.0
	stop     func()
}

func observe(t *testing.T, env *kubetest.Env) *observer {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := &observer{maxDown: map[string]int{}, worst: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	o.stop = func() { cancel(); <-done }
	// A watch sees every transition of every pod (a poll would miss a
	// pod that kwok replaces within milliseconds).
	go func() {
		defer close(done)
		pods := map[string]corev1.Pod{}
		for ctx.Err() == nil {
			list, err := cs.CoreV1().Pods("storage").List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			clear(pods)
			for _, p := range list.Items {
				pods[p.Name] = p
			}
			o.observe(pods)
			w, err := cs.CoreV1().Pods("storage").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(pods, p.Name)
				} else {
					pods[p.Name] = *p
				}
				o.observe(pods)
			}
			w.Stop()
		}
	}()
	return o
}

func ready(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// notReady says which pods of app are not Ready, where and why.
func notReady(pods map[string]corev1.Pod, app string) string {
	var out []string
	for _, pod := range pods {
		p := &pod
		if p.Labels["app"] != app || ready(p) {
			continue
		}
		why := string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				why += fmt.Sprintf(" Ready=%s %s %s", c.Status, c.Reason, c.Message)
			}
		}
		if p.DeletionTimestamp != nil {
			why += " deleting"
		}
		out = append(out, fmt.Sprintf("%s on %s (%s, %s)", p.Name, p.Spec.NodeName, p.Annotations["ferry.dev/version"], why))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

func (o *observer) observe(pods map[string]corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rounds++
	want := map[string]int{"mon": 3, "osd": 20, "web": 4}
	readyN := map[string]int{}
	present := map[string]bool{}
	monNew := 0
	for _, pod := range pods {
		p := &pod
		app := p.Labels["app"]
		present[app] = true
		if ready(p) {
			readyN[app]++
		}
		v := p.Annotations["ferry.dev/version"]
		if app == "osd" && v == "2.0.0" && o.firstOSD.IsZero() {
			o.firstOSD = time.Now()
		}
		if app == "mon" && v == "2.0.0" && ready(p) {
			monNew++
		}
	}
	if monNew == 3 && o.lastMon.IsZero() {
		o.lastMon = time.Now()
	}
	for app, n := range want {
		if !present[app] {
			continue // not in this test
		}
		if down := n - readyN[app]; down > o.maxDown[app] {
			o.maxDown[app] = down
			o.worst[app] = notReady(pods, app)
		}
	}
}

// TestUpgradeResource applies an Upgrade of a StatefulSet (one pod at a
// time), a DaemonSet on 20 nodes (canary batches 1, 2, 4, ..., at most
// 4 down) and a Deployment (gated, 2 at a time): the controller drives
// it, 'kubectl get upgrades' shows its progress; the controller is
// killed in the middle of the DaemonSet and a second one, after the
// first's lease expires, takes the upgrade up from the status and
// completes it without replacing again the pods already upgraded.
func TestUpgradeResource(t *testing.T) {
	env, sa := storageCluster(t)
	obs := observe(t, env)
	first := startController(t, sa, "controller-a")
	began := time.Now()
	if err := env.Apply(upgradeResource("storage-2", description("1s"), "2.0.0")); err != nil {
		t.Fatal(err)
	}
	// Kill the leader once the DaemonSet is part-way.
	err := env.WaitUntil(3*time.Minute, "the osd phase part-way", func() (bool, string, error) {
		u := getUpgrade(t, env, "storage-2")
		done := 0
		for _, m := range u.Status.Members {
			if m.Component == "osd" && m.Step == "done" {
				done++
			}
		}
		return done >= 3, fmt.Sprintf("state %s phase %s batch %s progress %s", u.Status.State, u.Status.Phase, u.Status.Batch, u.Status.Progress), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := getUpgrade(t, env, "storage-2")
	columns, _ := env.Kubectl("get", "upgrades", "-n", "ferry-system")
	t.Logf("kubectl get upgrades, before the kill:\n%s", columns)
	if !strings.Contains(columns, "STATE") || !strings.Contains(columns, "PROGRESS") || !strings.Contains(columns, "upgrading-osd") {
		t.Errorf("kubectl get upgrades does not show the progress columns")
	}
	uids := podUIDs(t, env)
	first.kill()
	killed := time.Now()
	t.Logf("killed the controller at %s after %s (progress %s)", killed.Format(time.TimeOnly), killed.Sub(began).Round(time.Millisecond), before.Status.Progress)

	second := startController(t, sa, "controller-b")
	// The first controller is dead. Its last event is the last one
	// saved under its fence: the status is read until the second
	// controller's claim replaces the fence (a save the first had sent
	// just before the kill lands meanwhile, the lease taking 3 s or more
	// to pass). The events after it are the second controller's.
	seqAtKill := before.Status.LastSeq
	err = env.WaitUntil(time.Minute, "the second controller's claim", func() (bool, string, error) {
		u := getUpgrade(t, env, "storage-2")
		if u.Status.Fence.Holder != before.Status.Fence.Holder {
			return true, "", nil
		}
		seqAtKill = u.Status.LastSeq
		return false, fmt.Sprintf("fence %s, last seq %d", u.Status.Fence.Holder, seqAtKill), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = env.WaitUntil(4*time.Minute, "the upgrade completed", func() (bool, string, error) {
		u := getUpgrade(t, env, "storage-2")
		if u.Status.State == "failed" || u.Status.State == "rolled-back" {
			return false, "", fmt.Errorf("ended %s: %s", u.Status.State, u.Status.Reason)
		}
		return u.Status.State == "completed", fmt.Sprintf("state %s progress %s waiting %s", u.Status.State, u.Status.Progress, u.Status.Waiting), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	obs.stop()
	after := getUpgrade(t, env, "storage-2")
	t.Logf("completed %s after the start (%s after the kill); observer: %d rounds, most pods not Ready at once (a watch of every pod) %v",
		time.Since(began).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), obs.rounds, obs.maxDown)
	if !strings.Contains(second.output(), "controller: starting") {
		t.Errorf("the second controller did not say it started:\n%s", second.output())
	}
	if obs.maxDown["mon"] > 1 || obs.maxDown["osd"] > 4 || obs.maxDown["web"] > 2 {
		t.Errorf("more pods down than the strategies allow: %v; at the worst moment: %v", obs.maxDown, obs.worst)
	}
	if !obs.firstOSD.IsZero() && obs.firstOSD.Before(obs.lastMon) {
		t.Errorf("an osd pod moved (%s) before the last mon was Ready on 2.0.0 (%s): two components at once", obs.firstOSD, obs.lastMon)
	}
	// Pods done before the kill were not replaced again.
	now := podUIDs(t, env)
	for _, m := range before.Status.Members {
		if m.Step != "done" || m.Component == "web" {
			continue
		}
		pod := m.Name
		if m.Component == "osd" {
			pod = "osd@" + strings.TrimPrefix(m.Name, "osd.")
		}
		if uids[pod] == "" || now[pod] != uids[pod] {
			t.Errorf("member %s, done before the kill, was replaced again after it (%s → %s)", m.Name, uids[pod], now[pod])
		}
	}
	for _, m := range after.Status.Members {
		if m.Step != "done" {
			t.Errorf("member %s: %s", m.Name, m.Step)
		}
	}
	images, _ := env.Kubectl("get", "pods", "-n", "storage", "-o", "jsonpath={range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}")
	for _, line := range strings.Fields(images) {
		if !strings.Contains(line, ":2.0.0@sha256:"+sha2) {
			t.Errorf("a pod runs %s, want the 2.0.0 image pinned by its digest", line)
		}
	}
	// What ferry changed in the workloads for their phases (a strategy
	// it picks the order under, a rollout paused between batches) was
	// journaled before it was changed and is undone at the phase's end,
	// although the controller that changed the DaemonSet's was killed.
	for _, c := range []struct{ what, args, want string }{
		{"the StatefulSet's update strategy", "statefulset/mon -o jsonpath={.spec.updateStrategy.type}", "RollingUpdate"},
		{"the DaemonSet's update strategy", "daemonset/osd -o jsonpath={.spec.updateStrategy.type}", "RollingUpdate"},
		{"the Deployment's strategy", "deployment/web -o jsonpath={.spec.strategy.rollingUpdate.maxSurge}/{.spec.strategy.rollingUpdate.maxUnavailable}", "25%/25%"},
		{"the Deployment's pause", "deployment/web -o jsonpath={.spec.paused}", ""},
	} {
		if got, err := env.Kubectl(append([]string{"get", "-n", "storage"}, strings.Fields(c.args)...)...); err != nil || got != c.want {
			t.Errorf("%s after the upgrade: %q (%v), want %q as it was", c.what, got, err, c.want)
		}
	}
	// Every event went to Kubernetes Events on the Upgrade too (the
	// status keeps the last MaxEvents and says where the rest are),
	// the StatefulSet's partition among them. The recorder sends
	// asynchronously: what the first controller had not sent when it
	// was SIGKILLed is lost (the README says so), and how much that is
	// depends on the machine's load (12 events at load 40), so the
	// whole count is reported, not bounded. The second controller,
	// alive, must have sent every one of its events: they are those
	// stamped after the kill (it takes the 4 s lease at least 3 s
	// after the kill; an Event's time has whole seconds, so those
	// stamped past killed+2s are its own).
	var evs corev1.EventList
	counted, countedSecond := 0, 0
	secondSaved := int(after.Status.LastSeq - seqAtKill)
	err = env.WaitUntil(time.Minute, "the second controller's events as Kubernetes Events", func() (bool, string, error) {
		out, err := env.Kubectl("get", "events", "-n", "ferry-system", "-o", "json",
			"--field-selector", "involvedObject.kind=Upgrade,involvedObject.name=storage-2")
		if err != nil {
			return false, "", err
		}
		evs = corev1.EventList{}
		if err := json.Unmarshal([]byte(out), &evs); err != nil {
			return false, "", err
		}
		counted, countedSecond = 0, 0
		for _, e := range evs.Items {
			n := int(max(e.Count, 1))
			counted += n
			if e.FirstTimestamp.Time.After(killed.Add(2 * time.Second)) {
				countedSecond += n
			}
		}
		return countedSecond >= secondSaved, fmt.Sprintf("%d of the second controller's %d events", countedSecond, secondSaved), nil
	})
	if err != nil {
		t.Error(err)
	}
	partition := false
	for _, e := range evs.Items {
		partition = partition || strings.Contains(e.Message, "StatefulSet storage/mon: update strategy RollingUpdate → RollingUpdate partition")
	}
	t.Logf("%d Kubernetes Events on the Upgrade, %d with their repeats (status keeps %d, last seq %d; %d saved by the first controller, %d of them not sent when it was killed; the second's %d of %d); status.eventsHistory: %s",
		len(evs.Items), counted, len(after.Status.Events), after.Status.LastSeq, seqAtKill, int(seqAtKill)-(counted-countedSecond), countedSecond, secondSaved, after.Status.EventsHistory)
	if !partition {
		t.Errorf("no event says the mon StatefulSet was rolled with a partition")
	}
	if len(evs.Items) <= controller.MaxEvents {
		t.Errorf("%d Kubernetes Events: no more than the status keeps (%d)", len(evs.Items), controller.MaxEvents)
	}
	if !strings.Contains(after.Status.EventsHistory, "kubectl get events -n ferry-system") {
		t.Errorf("status.eventsHistory %q does not say where the rest of the events are", after.Status.EventsHistory)
	}
	if len(after.Status.Record) > 0 {
		var rec struct {
			Effects []json.RawMessage `json:"effects"`
		}
		if err := json.Unmarshal(after.Status.Record, &rec); err != nil || len(rec.Effects) > 0 {
			t.Errorf("the record still owes undos: %s (%v)", after.Status.Record, err)
		}
	}
}

// storageCluster is a control plane of 20 nodes with the controller's
// resources installed and the workloads' 27 pods Ready: the
// environment and the controller's kubeconfig.
func storageCluster(t *testing.T) (*kubetest.Env, string) {
	env := kubetest.Start(t, kubetest.Options{Nodes: 20})
	sa := install(t, env)
	if err := env.Apply(workloads); err != nil {
		t.Fatal(err)
	}
	err := env.WaitUntil(2*time.Minute, "27 pods Ready", func() (bool, string, error) {
		out, err := env.Kubectl("get", "pods", "-n", "storage", "--no-headers")
		if err != nil {
			return false, "", err
		}
		n := strings.Count(out, " 1/1 ")
		return n == 27, fmt.Sprintf("%d Ready", n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return env, sa
}

// podUIDs maps each mon pod (by name) and each osd pod (osd@node) to its
// UID.
func podUIDs(t *testing.T, env *kubetest.Env) map[string]string {
	t.Helper()
	out, err := env.Kubectl("get", "pods", "-n", "storage", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, p := range list.Items {
		switch p.Labels["app"] {
		case "mon":
			m[p.Name] = string(p.UID)
		case "osd":
			m["osd@"+p.Spec.NodeName] = string(p.UID)
		}
	}
	return m
}

// install applies the CRD and the controller's RBAC (deploy/, without
// its Deployment: the tests run the controller as a process) and
// returns a kubeconfig for the controller's ServiceAccount: the
// controllers of the tests run with no more than what deploy/ grants.
func install(t *testing.T, env *kubetest.Env) string {
	t.Helper()
	crd, err := os.ReadFile("../../../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := os.ReadFile("../../../deploy/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, d := range strings.Split(string(ctl), "\n---\n") {
		if !strings.Contains(d, "kind: Deployment") {
			docs = append(docs, d)
		}
	}
	all := string(crd) + "\n---\n" +
		strings.Join(docs, "\n---\n") + "\n---\n" + kubernetes.RBAC
	if err := env.Apply(all); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl("wait", "--for=condition=established", "crd/upgrades.ferry.dev", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	as := "--as=system:serviceaccount:ferry-system:ferry-controller"
	for _, check := range [][]string{{"update", "statefulsets"}, {"delete", "upgrades.ferry.dev"}, {"get", "secrets"}} {
		if out, _ := env.Kubectl(append([]string{"auth", "can-i", as}, check...)...); strings.TrimSpace(out) != "no" {
			t.Fatalf("the controller's ServiceAccount may %v: more than deploy/ means to grant", check)
		}
	}
	token, err := env.Kubectl("create", "token", "ferry-controller", "-n", "ferry-system", "--duration=2h")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Token, ai.TokenFile, ai.ClientCertificateData, ai.ClientKeyData = strings.TrimSpace(token), "", nil, nil
	}
	path := filepath.Join(t.TempDir(), "controller.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadImageRollsBack applies an Upgrade whose StatefulSet image never
// becomes Ready (kwok's stand-in for a bad release): the first pod
// misses its deadline, the controller rolls it back, and every pod
// runs 1.0.0 again, never more than one down.
func TestBadImageRollsBack(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{Nodes: 3})
	sa := install(t, env)
	startMons(t, env)
	desc := monDescription + fmt.Sprintf(`  - version: 1.0.0
    artifacts: {mon: {image: "registry.local/mon:1.0.0", sha256: "%s"}}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    artifacts: {mon: {image: "registry.local/mon:2.0.0-never-ready", sha256: "%s"}}
`, sha1, sha2)
	obs := observe(t, env)
	startController(t, sa, "controller-a")
	began := time.Now()
	if err := env.Apply(upgradeResource("bad", desc, "2.0.0")); err != nil {
		t.Fatal(err)
	}
	var u controller.Upgrade
	if err := env.WaitUntil(3*time.Minute, "the upgrade rolled back", func() (bool, string, error) {
		u = getUpgrade(t, env, "bad")
		if u.Status.State == "completed" {
			return false, "", fmt.Errorf("a release that never gets Ready completed")
		}
		return u.Status.State == "rolled-back", fmt.Sprintf("state %s waiting %s", u.Status.State, u.Status.Waiting), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(time.Minute, "3 mon pods Ready on 1.0.0", func() (bool, string, error) {
		out, err := env.Kubectl("get", "pods", "-n", "storage", "-l", "app=mon", "-o",
			"jsonpath={range .items[*]}{.spec.containers[0].image} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}")
		// mon-0 comes back pinned by digest; the others were never touched.
		good := strings.Count(out, ":1.0.0@sha256:"+sha1+" True") + strings.Count(out, ":1.0.0 True")
		return good == 3 && !strings.Contains(out, "never-ready"), out, err
	}); err != nil {
		t.Fatal(err)
	}
	obs.stop()
	t.Logf("rolled back in %s: %s; most pods not Ready at once %v", time.Since(began).Round(time.Millisecond), u.Status.Reason, obs.maxDown)
	if obs.maxDown["mon"] > 1 {
		t.Errorf("%d mon pods down at once; one at a time allows 1: %s", obs.maxDown["mon"], obs.worst["mon"])
	}
	if !strings.Contains(u.Status.Reason, "mon-") {
		t.Errorf("the reason does not name the member: %q", u.Status.Reason)
	}
	// ferry set the StatefulSet's update strategy to OnDelete for the
	// phase, journaled with the strategy as it was: the rollback's end
	// put it back.
	if got, err := env.Kubectl("get", "statefulset", "mon", "-n", "storage", "-o", "jsonpath={.spec.updateStrategy.type}"); err != nil || got != "RollingUpdate" {
		t.Errorf("the StatefulSet's update strategy after the rollback: %q (%v), want RollingUpdate as it was", got, err)
	}
}

// TestNodePoolFromOutside drives a node pool from outside the cluster
// with the CLI and a kubeconfig: each node is cordoned, drained through
// the Eviction API (ferry waits while a PodDisruptionBudget refuses,
// and says so), upgraded by the pool's command and uncordoned.
func TestNodePoolFromOutside(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{Nodes: 3})
	for i := 0; i < 3; i++ {
		node := fmt.Sprintf("kwok-node-%d", i)
		if _, err := env.Kubectl("label", "node", node, "pool=workers"); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Kubectl("patch", "node", node, "--subresource=status", "--type=merge",
			"-p", `{"status":{"nodeInfo":{"kubeletVersion":"v1.37.2"}}}`); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Apply(`apiVersion: v1
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
      tolerations: [{operator: Exists}]
      containers: [{name: app, image: "registry.local/app:1.0.0"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: pool}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: guarded}}
`); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(time.Minute, "the guarded pod Ready", func() (bool, string, error) {
		out, err := env.Kubectl("get", "pdb", "guarded", "-n", "pool", "-o", "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}")
		return out == "1/0", out, err
	}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	desc := filepath.Join(dir, "cluster.yaml")
	up, _ := json.Marshal([]string{self, "upgrade-node", filepath.Join(env.BinDir, "kubectl"), env.Kubeconfig})
	if err := os.WriteFile(desc, []byte(fmt.Sprintf(`cluster: nodes
substrate: kubernetes
kubernetes: {kubeconfig: %q}
components:
  - name: workers
    order: 1
    workload: {kind: NodePool, selector: pool=workers, upgrade: %s, drain_timeout: 2m}
    strategy: {type: one-at-a-time, quorum: 1}
    deadline: 3m
releases:
  - version: 1.37.2
  - version: 1.38.0
    upgrade_from: [1.37.x]
`, env.Kubeconfig, up)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "ferry")
	// start runs 'ferry upgrade start' and returns once ferry waits on
	// the budget, the node of the guarded pod cordoned.
	start := func() (text func() string, done chan error, kill func()) {
		cmd := exec.Command(ferryBin, "-f", desc, "--data-dir", data, "upgrade", "start", "--to", "1.38.0", "-v")
		var out lockedWriter = lockedWriter{&sync.Mutex{}, &bytes.Buffer{}}
		cmd.Stdout, cmd.Stderr = out, out
		text = func() string { out.mu.Lock(); defer out.mu.Unlock(); return out.b.String() }
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done = make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		kill = func() { _ = cmd.Process.Kill() }
		if err := env.WaitUntil(2*time.Minute, "ferry waiting on the PodDisruptionBudget", func() (bool, string, error) {
			select {
			case err := <-done:
				return false, "", fmt.Errorf("ferry exited (%v) before the budget was relaxed:\n%s", err, text())
			default:
			}
			return strings.Contains(text(), "PodDisruptionBudget pool/guarded"), "", nil
		}); err != nil {
			kill()
			t.Fatal(err)
		}
		waiting, _ := env.Kubectl("get", "nodes", "-l", "pool=workers")
		t.Logf("ferry waits on the budget; nodes:\n%s", waiting)
		if !strings.Contains(waiting, "SchedulingDisabled") {
			t.Errorf("no node cordoned while ferry waits on the budget")
		}
		return text, done, kill
	}

	// An abort while a node is cordoned and its drain waits on the
	// budget: the rollback uncordons it (the cordon was journaled with
	// its undo before it was made), and no node is left cordoned.
	text, done, kill := start()
	if out, err := exec.Command(ferryBin, "-f", desc, "--data-dir", data, "upgrade", "abort", "-q").CombinedOutput(); err != nil {
		kill()
		t.Fatalf("ferry upgrade abort: %v\n%s", err, out)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(text(), "state:    rolled-back") {
			t.Fatalf("the aborted upgrade: %v (want exit 4, rolled-back)\n%s", err, text())
		}
	case <-time.After(3 * time.Minute):
		kill()
		t.Fatalf("ferry did not end within 3 minutes after the abort:\n%s", text())
	}
	if nodes, _ := env.Kubectl("get", "nodes", "-l", "pool=workers", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); strings.Contains(nodes, "true") {
		t.Fatalf("a node is still cordoned after the rollback:\n%s", nodes)
	}
	evs, _ := exec.Command(ferryBin, "-f", desc, "--data-dir", data, "events").CombinedOutput()
	if !strings.Contains(string(evs), "cordoned") || !strings.Contains(string(evs), "undone") {
		t.Errorf("the events do not show the cordon journaled and undone:\n%s", evs)
	}
	t.Logf("aborted while draining: rolled back, every node schedulable")

	// ferry SIGKILLed while a node is cordoned, then an abort: the
	// process that takes the upgrade over rolls back and undoes the
	// cordon from the journal, though the node never left 1.37.2 (so
	// no step of its own would uncordon it).
	_, done, kill = start()
	kill()
	<-done
	out, err := exec.Command(ferryBin, "-f", desc, "--data-dir", data, "upgrade", "abort", "-q").CombinedOutput()
	// (An abort that ends rolled-back did what it was asked: exit 0. A
	// rollback ran a part of the plan: no pace against its bound.)
	if err != nil || !strings.Contains(string(out), "state:    rolled-back") || strings.Contains(string(out), "pace:") {
		t.Fatalf("ferry upgrade abort after a SIGKILL: %v (want exit 0, rolled-back, no pace)\n%s", err, out)
	}
	if nodes, _ := env.Kubectl("get", "nodes", "-l", "pool=workers", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); strings.Contains(nodes, "true") {
		t.Fatalf("a node is still cordoned after the SIGKILL and the rollback:\n%s", nodes)
	}
	t.Logf("SIGKILLed while draining, then aborted: rolled back, every node schedulable")

	text, done, kill = start()
	defer kill()
	if _, err := env.Kubectl("patch", "pdb", "guarded", "-n", "pool", "--type=merge", "-p", `{"spec":{"minAvailable":0}}`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ferry upgrade start: %v\n%s", err, text())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("ferry did not end within 3 minutes after the budget was relaxed:\n%s", text())
	}
	if !strings.Contains(text(), "state:    completed") || !strings.Contains(text(), "pace:") {
		t.Fatalf("ferry upgrade start (want completed, with its pace):\n%s", text())
	}
	nodes, _ := env.Kubectl("get", "nodes", "-l", "pool=workers", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}")
	if strings.Count(nodes, "v1.38.0 \n") != 3 {
		t.Errorf("nodes (kubelet version, unschedulable):\n%s", nodes)
	}
	t.Logf("every node on v1.38.0 and schedulable again")
}

// startMons applies the mon StatefulSet alone (the first of workloads)
// and waits for its three pods to be Ready.
func startMons(t *testing.T, env *kubetest.Env) {
	t.Helper()
	if err := env.Apply(strings.SplitN(workloads, "---\napiVersion: apps/v1\nkind: DaemonSet", 2)[0]); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(2*time.Minute, "3 mon pods Ready", func() (bool, string, error) {
		out, err := env.Kubectl("get", "pods", "-n", "storage", "-l", "app=mon", "--no-headers")
		n := strings.Count(out, " 1/1 ")
		return n == 3, fmt.Sprintf("%d Ready", n), err
	}); err != nil {
		t.Fatal(err)
	}
}

// monDescription is a description of the mon StatefulSet alone, one at
// a time with a short deadline; its releases follow.
const monDescription = `cluster: storage
substrate: kubernetes
components:
  - name: mon
    order: 1
    workload: {kind: StatefulSet, namespace: storage, name: mon}
    strategy: {type: one-at-a-time}
    soak: 1s
    deadline: 8s
releases:
`

// TestNothingToDo asks for the release every member runs: the
// controller says so once, as completed with reason NothingToDo, and
// touches nothing (before, it reported the preflight as failed).
func TestNothingToDo(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{Nodes: 1})
	sa := install(t, env)
	startMons(t, env)
	before := podUIDs(t, env)
	desc := monDescription + fmt.Sprintf(`  - version: 1.0.0
    artifacts: {mon: {image: "registry.local/mon:1.0.0", sha256: "%s"}}
`, sha1)
	startController(t, sa, "controller-a")
	if err := env.Apply(upgradeResource("same", desc, "1.0.0")); err != nil {
		t.Fatal(err)
	}
	var u controller.Upgrade
	if err := env.WaitUntil(2*time.Minute, "the upgrade said nothing to do", func() (bool, string, error) {
		u = getUpgrade(t, env, "same")
		if u.Status.State == "refused" {
			return false, "", fmt.Errorf("refused: %s", u.Status.Reason)
		}
		return u.Status.State == "completed", fmt.Sprintf("state %q reason %q", u.Status.State, u.Status.Reason), nil
	}); err != nil {
		t.Fatal(err)
	}
	var cond *metav1.Condition
	for i := range u.Status.Conditions {
		if u.Status.Conditions[i].Type == "Completed" {
			cond = &u.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "NothingToDo" {
		t.Errorf("Completed condition %+v, want True with reason NothingToDo", cond)
	}
	if !strings.Contains(u.Status.Reason, "nothing to do") {
		t.Errorf("reason %q does not say there is nothing to do", u.Status.Reason)
	}
	if after := podUIDs(t, env); !maps.Equal(before, after) {
		t.Errorf("pods replaced although nothing was to do: %v, then %v", before, after)
	}
	if got, err := env.Kubectl("get", "statefulset", "mon", "-n", "storage", "-o", "jsonpath={.spec.updateStrategy.type}"); err != nil || got != "RollingUpdate" {
		t.Errorf("the StatefulSet's update strategy: %q (%v), want RollingUpdate untouched", got, err)
	}
}
