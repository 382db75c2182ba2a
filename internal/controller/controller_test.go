package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

	"github.com/ferry-upgrade/ferry/internal/controller"
	"github.com/ferry-upgrade/ferry/internal/kubetest"
)

// ferryBin is the ferry binary the tests run as the controller: a
// process of its own, so that a test can kill it.
var ferryBin string

func TestMain(m *testing.M) {
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
      mon: {image: "registry.local/mon:1.0.0", sha256: %[2]s}
      osd: {image: "registry.local/osd:1.0.0", sha256: %[2]s}
      web: {image: "registry.local/web:1.0.0", sha256: %[2]s}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    artifacts:
      mon: {image: "registry.local/mon:2.0.0", sha256: %[3]s}
      osd: {image: "registry.local/osd:2.0.0", sha256: %[3]s}
      web: {image: "registry.local/web:2.0.0", sha256: %[3]s}
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

func startController(t *testing.T, env *kubetest.Env, name string) *controllerProc {
	t.Helper()
	p := &controllerProc{out: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(ferryBin, "controller", "--kubeconfig", env.Kubeconfig, "--namespace", "ferry-system",
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
	mu       sync.Mutex
	maxDown  map[string]int
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
	o := &observer{maxDown: map[string]int{}}
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

func (o *observer) observe(pods map[string]corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rounds++
	want := map[string]int{"mon": 3, "osd": 20, "web": 4}
	readyN := map[string]int{}
	monNew := 0
	for _, pod := range pods {
		p := &pod
		app := p.Labels["app"]
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
		if down := n - readyN[app]; down > o.maxDown[app] {
			o.maxDown[app] = down
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
	env := kubetest.Start(t, kubetest.Options{Nodes: 20})
	crd, err := os.ReadFile("../../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(string(crd)); err != nil {
		t.Fatal(err)
	}
	if err := env.Apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: ferry-system}\n" + "---\n" + workloads); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl("wait", "--for=condition=established", "crd/upgrades.ferry.dev", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	err = env.WaitUntil(2*time.Minute, "27 pods Ready", func() (bool, string, error) {
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

	obs := observe(t, env)
	first := startController(t, env, "controller-a")
	began := time.Now()
	if err := env.Apply(upgradeResource("storage-2", description("1s"), "2.0.0")); err != nil {
		t.Fatal(err)
	}
	// Kill the leader once the DaemonSet is part-way.
	err = env.WaitUntil(3*time.Minute, "the osd phase part-way", func() (bool, string, error) {
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

	second := startController(t, env, "controller-b")
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
		t.Errorf("more pods down than the strategies allow: %v", obs.maxDown)
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
