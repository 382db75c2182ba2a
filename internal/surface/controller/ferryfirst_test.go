package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/surface/controller"
	"github.com/ferry-upgrade/ferry/internal/testenv/ferrybuild"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

const ferryDigest = "3333333333333333333333333333333333333333333333333333333333333333"

// startControllerOf is startController with another ferry binary.
func startControllerOf(t *testing.T, bin, kubeconfig, name string) *controllerProc {
	t.Helper()
	p := &controllerProc{out: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--namespace", "ferry-system",
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

// controllerDeployment is deploy/controller.yaml's Deployment with one
// replica on image, and a progress deadline of 15s (Kubernetes' own
// verdict that a rollout is stuck, which the controller waits on).
func controllerDeployment(t *testing.T, image string) string {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range strings.Split(string(b), "\n---\n") {
		if !strings.Contains(d, "kind: Deployment") {
			continue
		}
		for _, r := range [][2]string{{"replicas: 2", "replicas: 1\n  progressDeadlineSeconds: 15"}, {"image: ghcr.io/ferry-upgrade/ferry:latest", "image: " + image}} {
			if !strings.Contains(d, r[0]) {
				t.Fatalf("deploy/controller.yaml's Deployment has no %q", r[0])
			}
			d = strings.Replace(d, r[0], r[1], 1)
		}
		return d
	}
	t.Fatal("deploy/controller.yaml has no Deployment")
	return ""
}

// kubelet plays the kubelet for the controller's Deployment: kwok's
// pods run no containers, so when the Deployment's image changes from
// the one it had (from) to one that becomes Ready, it starts the
// controller the new image would run (start: a real 'ferry controller'
// process of the newer release) and then stops the old one (stopOld),
// as the Deployment's rollout would (a new pod first, then the old one
// terminated). An image that never becomes Ready (kwok's never-ready)
// starts nothing.
type kubelet struct {
	mu      sync.Mutex
	changed time.Time // when the image changed to a runnable one
	started time.Time // when the new controller process started
	stopped time.Time // when the old one exited
	images  []string  // every image the Deployment had, in order
	next    interface{ output() string }
	cancel  func()
	done    chan struct{}
}

func playKubelet(t *testing.T, env *kubetest.Env, from string, start func() interface{ output() string }, stopOld func()) *kubelet {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{images: []string{from}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for ctx.Err() == nil {
			d, err := cs.AppsV1().Deployments("ferry-system").Get(ctx, "ferry-controller", metav1.GetOptions{})
			if err == nil {
				img := d.Spec.Template.Spec.Containers[0].Image
				k.mu.Lock()
				if k.images[len(k.images)-1] != img {
					k.images = append(k.images, img)
				}
				runnable := img != from && !strings.Contains(img, "never-ready") && k.next == nil
				if runnable {
					k.changed = time.Now()
				}
				k.mu.Unlock()
				if runnable {
					next := start()
					k.mu.Lock()
					k.next, k.started = next, time.Now()
					k.mu.Unlock()
					stopOld()
					k.mu.Lock()
					k.stopped = time.Now()
					k.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return k
}

func (k *kubelet) stop() { k.cancel(); <-k.done }

// ferryDescription is the mon StatefulSet's description with release
// 2.0.0 requiring ferry 99.0.0, and the lines extra in that release.
func ferryDescription(extra string) string {
	// monDescription's, with a deadline a loaded machine meets.
	return strings.Replace(monDescription, "deadline: 8s", "deadline: 1m", 1) + fmt.Sprintf(`  - version: 1.0.0
    artifacts: {mon: {image: "registry.local/mon:1.0.0", sha256: "%s"}}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    requires_ferry: 99.0.0
%s    artifacts: {mon: {image: "registry.local/mon:2.0.0", sha256: "%s"}}
`, sha1, extra, sha2)
}

// collectEvents keeps every event of the Upgrade's status, by seq,
// read every 200ms (the status keeps the last 60).
type collected struct {
	mu     sync.Mutex
	events map[uint64]controller.Event
	stop   func()
}

func collectEvents(t *testing.T, env *kubetest.Env, name string) *collected {
	c := &collected{events: map[uint64]controller.Event{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if out, err := env.Kubectl("get", "upgrade", name, "-n", "ferry-system", "-o", "json"); err == nil {
				var u controller.Upgrade
				if json.Unmarshal([]byte(out), &u) == nil {
					c.mu.Lock()
					for _, ev := range u.Status.Events {
						c.events[ev.Seq] = ev
					}
					c.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return c
}

func (c *collected) list() []controller.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []controller.Event
	for _, ev := range c.events {
		out = append(out, ev)
	}
	slices.SortFunc(out, func(a, b controller.Event) int { return int(a.Seq) - int(b.Seq) })
	return out
}

func condition(u controller.Upgrade, typ string) *metav1.Condition {
	for i := range u.Status.Conditions {
		if u.Status.Conditions[i].Type == typ {
			return &u.Status.Conditions[i]
		}
	}
	return nil
}

func deploymentImage(t *testing.T, env *kubetest.Env) string {
	t.Helper()
	img, err := env.Kubectl("get", "deployment", "ferry-controller", "-n", "ferry-system", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestControllerFirst: an Upgrade whose release requires ferry 99.0.0,
// driven by the controller of this tree (ferry 0.9.0), which runs from
// its Deployment (deploy/controller.yaml, one replica). Without an
// image to run, the controller moves nothing and its status says what
// is needed, naming both versions. Given an image (spec.ferryImage)
// whose rollout never becomes Ready, it moves its Deployment, sees the
// rollout stall (ProgressDeadlineExceeded) and puts the image back,
// the Upgrade refused, nothing of the cluster moved; the operator
// putting the image back while it waits is left as it is, the Upgrade
// refused. Given the
// release's ferry image, it moves its Deployment to it, pinned by
// digest; the test, playing the kubelet (kwok's pods run no
// containers), starts the controller that image would run (a ferry
// linked as 99.0.0) and stops the old one; the new controller takes
// the lease and the Upgrade up and completes it. No mon pod was
// replaced before the Deployment moved, and the events show the
// controller first, then the members.
func TestControllerFirst(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{Nodes: 3})
	sa := install(t, env)
	startMons(t, env)
	next, err := ferrybuild.Build(t.TempDir(), "99.0.0")
	if err != nil {
		t.Fatal(err)
	}
	const oldImage = "registry.local/ferry:0.9.0"
	if err := env.Apply(controllerDeployment(t, oldImage)); err != nil {
		t.Fatal(err)
	}
	uids := podUIDs(t, env)
	obs := watchMons(t, env, uids)
	old := startController(t, sa, "controller-a")
	k := playKubelet(t, env, oldImage, func() interface{ output() string } { return startControllerOf(t, next.Path, sa, "controller-b") },
		func() { _ = old.cmd.Process.Signal(syscall.SIGTERM); <-old.done })
	defer k.stop()
	evs := collectEvents(t, env, "storage-2")
	defer evs.stop()
	untouched := func(when string) {
		t.Helper()
		if now := podUIDs(t, env); !slices.Equal(sortedValues(now), sortedValues(uids)) {
			t.Errorf("%s: mon pods replaced: %v, then %v", when, uids, now)
		}
		if got, _ := env.Kubectl("get", "statefulset", "mon", "-n", "storage", "-o", "jsonpath={.spec.updateStrategy.type}"); got != "RollingUpdate" {
			t.Errorf("%s: the StatefulSet's update strategy is %q: the old controller changed it", when, got)
		}
	}

	// No image named: the old controller waits, saying what is needed.
	if err := env.Apply(upgradeResource("storage-2", ferryDescription(""), "2.0.0")); err != nil {
		t.Fatal(err)
	}
	var u controller.Upgrade
	if err := env.WaitUntil(2*time.Minute, "the condition FerryUnderstands false", func() (bool, string, error) {
		u = getUpgrade(t, env, "storage-2")
		c := condition(u, controller.FerryCondition)
		return c != nil && c.Status == metav1.ConditionFalse, fmt.Sprintf("state %q conditions %+v", u.Status.State, u.Status.Conditions), nil
	}); err != nil {
		t.Fatal(err)
	}
	c := condition(u, controller.FerryCondition)
	t.Logf("no image named: state %s; %s=%s %s: %s", u.Status.State, c.Type, c.Status, c.Reason, c.Message)
	if c.Reason != "NeedsNewerController" || !strings.Contains(c.Message, "requires ferry 99.0.0; this controller is ferry "+buildinfo.Release()) {
		t.Errorf("the condition does not say what is needed, naming both versions: %+v", c)
	}
	if u.Status.Ferry == nil || u.Status.Ferry.Controller != buildinfo.Release() || u.Status.Ferry.Requires != "99.0.0" {
		t.Errorf("status.ferry %+v: want the controller's release %s and the 99.0.0 required", u.Status.Ferry, buildinfo.Release())
	}
	if out, err := env.Kubectl("patch", "upgrade", "storage-2", "-n", "ferry-system", "--type=merge", "-p", `{"spec":{"ferryImage":"registry.local/ferry:99.0.0"}}`); err == nil {
		t.Errorf("the API server took a ferry image not pinned by digest: %s", out)
	}
	untouched("waiting for a newer controller")

	// An image whose rollout never becomes Ready: put back.
	stuck := "registry.local/ferry:99.0.0-never-ready@sha256:" + ferryDigest
	if _, err := env.Kubectl("patch", "upgrade", "storage-2", "-n", "ferry-system", "--type=merge", "-p", `{"spec":{"ferryImage":"`+stuck+`"}}`); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := env.WaitUntil(3*time.Minute, "the stuck rollout undone", func() (bool, string, error) {
		u = getUpgrade(t, env, "storage-2")
		f := condition(u, "Failed")
		return f != nil && f.Status == metav1.ConditionTrue && f.Reason == "ControllerUpgradeFailed", fmt.Sprintf("state %q waiting %q", u.Status.State, u.Status.Waiting), nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a stuck rollout, %s after the spec named its image: %s", time.Since(began).Round(time.Millisecond), u.Status.Reason)
	if img := deploymentImage(t, env); img != oldImage {
		t.Errorf("the Deployment's image after the undo: %q, want %q back", img, oldImage)
	}
	if u.Status.Ferry == nil || len(u.Status.Ferry.Effects) != 0 {
		t.Errorf("status.ferry after the undo: %+v, want no effect owed", u.Status.Ferry)
	}
	k.mu.Lock()
	if len(k.images) < 3 || k.images[1] != stuck {
		t.Errorf("the Deployment's images: %v, want %s, then %s, then %s back", k.images, oldImage, stuck, oldImage)
	}
	k.mu.Unlock()
	untouched("after the stuck rollout")

	// The operator puts the image back while the controller waits on
	// its move: theirs to keep, not undone, the Upgrade refused.
	stuck2 := "registry.local/ferry:99.0.0-never-ready-2@sha256:" + ferryDigest
	if _, err := env.Kubectl("patch", "upgrade", "storage-2", "-n", "ferry-system", "--type=merge", "-p", `{"spec":{"ferryImage":"`+stuck2+`"}}`); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(2*time.Minute, "the Deployment moved to "+stuck2, func() (bool, string, error) {
		img := deploymentImage(t, env)
		return img == stuck2, img, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl("set", "image", "deployment/ferry-controller", "-n", "ferry-system", "ferry="+oldImage); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(2*time.Minute, "the Upgrade refused: the image changed", func() (bool, string, error) {
		u = getUpgrade(t, env, "storage-2")
		f := condition(u, "Failed")
		return f != nil && f.Status == metav1.ConditionTrue && f.Reason == "ControllerImageChanged", fmt.Sprintf("state %q waiting %q", u.Status.State, u.Status.Waiting), nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the operator's change: %s", u.Status.Reason)
	if img := deploymentImage(t, env); img != oldImage {
		t.Errorf("the Deployment's image: %q, want the operator's %q left as it is", img, oldImage)
	}
	if u.Status.Ferry == nil || len(u.Status.Ferry.Effects) != 0 {
		t.Errorf("status.ferry after the operator's change: %+v, want no effect owed", u.Status.Ferry)
	}
	untouched("after the operator's change")

	// The release names its image: the controller moves itself first.
	desc := ferryDescription(fmt.Sprintf("    ferry: {image: \"registry.local/ferry:99.0.0\", sha256: \"%s\"}\n", ferryDigest))
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"ferryImage": nil, "description": desc}})
	if _, err := env.Kubectl("patch", "upgrade", "storage-2", "-n", "ferry-system", "--type=merge", "-p", string(patch)); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	if err := env.WaitUntil(4*time.Minute, "the upgrade completed", func() (bool, string, error) {
		u = getUpgrade(t, env, "storage-2")
		if u.Status.State == "failed" || u.Status.State == "rolled-back" {
			return false, "", fmt.Errorf("ended %s: %s", u.Status.State, u.Status.Reason)
		}
		return u.Status.State == "completed", fmt.Sprintf("state %q waiting %q progress %s", u.Status.State, u.Status.Waiting, u.Status.Progress), nil
	}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	obs.stop()
	k.mu.Lock()
	changed, started, stopped, next2 := k.changed, k.started, k.stopped, k.next
	k.mu.Unlock()
	t.Logf("completed %s after the release named its image: the Deployment moved after %s, the 99.0.0 controller started after %s, the old one stopped after %s",
		took.Round(time.Millisecond), changed.Sub(began).Round(time.Millisecond), started.Sub(began).Round(time.Millisecond), stopped.Sub(began).Round(time.Millisecond))
	if img := deploymentImage(t, env); img != "registry.local/ferry:99.0.0@sha256:"+ferryDigest {
		t.Errorf("the Deployment's image: %q, want the release's, pinned by its digest", img)
	}
	if next2 == nil || !strings.Contains(next2.output(), "controller: starting") {
		t.Fatalf("the 99.0.0 controller did not start")
	}
	if !strings.Contains(old.output(), "moved the controller's own Deployment") {
		t.Errorf("the old controller does not say it moved its Deployment:\n%s", old.output())
	}
	if f := u.Status.Ferry; f == nil || f.Controller != "99.0.0" || len(f.Effects) != 0 || f.Image != "registry.local/ferry:99.0.0@sha256:"+ferryDigest {
		t.Errorf("status.ferry %+v: want controller 99.0.0, its image, no effect owed", f)
	}
	if c := condition(u, controller.FerryCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition %s: %+v, want true", controller.FerryCondition, c)
	}
	images, _ := env.Kubectl("get", "pods", "-n", "storage", "-l", "app=mon", "-o", "jsonpath={range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}")
	if strings.Count(images, ":2.0.0@sha256:"+sha2) != 3 {
		t.Errorf("mon pods' images:\n%s", images)
	}
	// The order, seen by the test: the Deployment moved and the old
	// controller stopped before the first mon pod was replaced.
	first := obs.firstChange()
	t.Logf("first mon pod replaced %s after the release named its image", first.Sub(began).Round(time.Millisecond))
	if first.IsZero() || first.Before(stopped) {
		t.Errorf("a mon pod was replaced at %s, before the old controller stopped (%s)", first.Format(time.StampMilli), stopped.Format(time.StampMilli))
	}
	// And said by the events: the controller's move first, then the
	// members.
	all := evs.list()
	moved, kept, firstMember := uint64(0), uint64(0), uint64(0)
	for _, ev := range all {
		switch {
		case ev.Kind == "ferry" && strings.Contains(ev.Message, "99.0.0@sha256:"+ferryDigest) && strings.Contains(ev.Message, "journaled with its undo"):
			moved = ev.Seq
		case ev.Kind == "ferry" && strings.Contains(ev.Message, "kept"):
			kept = ev.Seq
		case ev.Member != "" && firstMember == 0:
			firstMember = ev.Seq
		}
		if ev.Kind == "ferry" {
			t.Logf("event %d %s: %s", ev.Seq, ev.Kind, ev.Message)
		}
	}
	t.Logf("events: the Deployment moved at %d, the move kept by the new controller at %d, the first member's at %d (of %d)", moved, kept, firstMember, len(all))
	if moved == 0 || kept == 0 || firstMember == 0 || moved > kept || kept > firstMember {
		t.Errorf("the events do not show the controller first, then the members")
	}
}

// monWatch notes when a mon pod first changed: deleted, or replaced
// by one of another UID.
type monWatch struct {
	mu    sync.Mutex
	first time.Time
	stop  func()
}

func watchMons(t *testing.T, env *kubetest.Env, uids map[string]string) *monWatch {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &monWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := cs.CoreV1().Pods("storage").List(ctx, metav1.ListOptions{LabelSelector: "app=mon"})
			if err == nil {
				changed := len(list.Items) != len(uids)
				for _, p := range list.Items {
					changed = changed || p.DeletionTimestamp != nil || uids[p.Name] != string(p.UID)
				}
				w.mu.Lock()
				if changed && w.first.IsZero() {
					w.first = time.Now()
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *monWatch) firstChange() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
