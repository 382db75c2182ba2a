package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// osdDeployment is one OSD's Deployment as Rook makes it: one replica,
// Recreate, its pod pinned to its node.
const osdDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: osd-%[1]d, namespace: rook, labels: {app: osd}}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: osd-pod, osd: "%[1]d"}}
  template:
    metadata: {labels: {app: osd-pod, osd: "%[1]d"}}
    spec:
      nodeSelector: {kubernetes.io/hostname: kwok-node-%[1]d}
      containers: [{name: osd, image: "registry.local/ceph:1.0.0"}]
`

// decoy is a Deployment the selector does not match whose pods osd-0's
// pod selector matches too (on another node): not osd-0's pods.
const decoy = `apiVersion: apps/v1
kind: Deployment
metadata: {name: decoy, namespace: rook, labels: {app: decoy}}
spec:
  replicas: 1
  selector: {matchLabels: {app: osd-pod, decoy: "yes"}}
  template:
    metadata: {labels: {app: osd-pod, osd: "0", decoy: "yes"}}
    spec:
      nodeSelector: {kubernetes.io/hostname: kwok-node-4}
      containers: [{name: osd, image: "registry.local/ceph:1.0.0"}]
`

// testPerWorkload: a component whose members are Deployments (per:
// workload), one OSD each. Discover names them after their
// Deployments, on their pods' nodes and zones; Stop scales one to 0
// (journaled) and Start scales it back on the new image, so that its
// pod is replaced once; Start alone lets the Deployment's own
// controller replace the pod under its own strategy (Recreate, left
// as it is); the undo of a stop scales it back; a paused Deployment is
// refused, saying why; a Deployment deleted mid-upgrade is a member
// down, one created is found by the next Discover.
func testPerWorkload(t *testing.T, c *cluster) {
	ctx := context.Background()
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
	manifest := "apiVersion: v1\nkind: Namespace\nmetadata: {name: rook}\n---\n" + decoy
	for i := 0; i < 3; i++ {
		manifest += "---\n" + fmt.Sprintf(osdDeployment, i)
	}
	must(t, c.env.Apply(manifest))
	w := &driver.Workload{Kind: kindDeployment, Namespace: "rook", Selector: "app=osd", Container: "osd", Per: perWorkload}
	old := map[string]string{"osd-0": "1.0.0", "osd-1": "1.0.0", "osd-2": "1.0.0"}
	c.waitVersions(t, w, 3, old)
	ms := c.discover(t, "osd", w)
	if got := memberNames(ms); got != "osd-0 osd-1 osd-2" {
		t.Fatalf("Discover: %s, want one member per Deployment, by name", got)
	}
	for i, m := range ms {
		if m.Host != fmt.Sprintf("kwok-node-%d", i) || m.Domain != zones[i] || m.Address == "" || m.Component != "osd" {
			t.Errorf("Discover: %+v; want host kwok-node-%d (its pod's node, not the decoy's), domain %q, an address", m, i, zones[i])
		}
	}

	bad := *w
	bad.Container = "nope"
	if _, err := c.drv.Discover(ctx, "osd", bad); err == nil || !strings.Contains(err.Error(), `Deployment rook/osd-0: pod template has no container "nope"`) {
		t.Errorf("Discover with a container the templates lack: %v; want the Deployment named", err)
	}

	// Stop, then Start: the pod goes, and comes back once, on 2.0.0.
	j := &effects{}
	jctx := driver.WithJournal(ctx, j)
	created := c.watchCreated(t, "rook", "osd=1")
	must(t, c.drv.Stop(jctx, ms[1]))
	if got := j.whats(); len(got) != 1 || got[0] != "Deployment rook/osd-1 scaled from 1 to 0 replicas: the member stopped for its move (its start scales it back)" {
		t.Errorf("journal after Stop: %q", got)
	}
	st, err := c.drv.Observe(ctx, ms[1:2])
	must(t, err)
	if st[0].Running || st[0].Detail != "stopped by ferry: scaled to 0 replicas, 1 again at its start" {
		t.Errorf("Observe after Stop: %+v", st[0])
	}
	must(t, c.env.WaitUntil(time.Minute, "osd-1's pod gone", func() (bool, string, error) {
		n := len(c.pods(t, "rook", "osd=1"))
		return n == 0, fmt.Sprintf("%d pods", n), nil
	}))
	must(t, c.drv.Stop(jctx, ms[1])) // stopped already: nothing to do
	before := c.podUIDs(t, "rook", "app=osd-pod")
	a := driver.Artifact{Version: "2.0.0", Image: "registry.local/ceph:2.0.0", SHA256: sumA}
	must(t, c.drv.Start(jctx, ms[1], a))
	if got := j.whats(); len(got) != 0 {
		t.Errorf("journal after Start: %q; the stop is no longer owed once Start scaled it back", got)
	}
	c.waitVersions(t, w, 3, map[string]string{"osd-0": "1.0.0", "osd-1": "2.0.0", "osd-2": "1.0.0"})
	if got := created(); len(got) != 1 || !strings.HasSuffix(got[0], " 2.0.0") {
		t.Errorf("pods of osd-1 created since its stop: %q; want one, on 2.0.0", got)
	}
	dep, err := c.admin.AppsV1().Deployments("rook").Get(ctx, "osd-1", metav1.GetOptions{})
	must(t, err)
	if dep.Spec.Strategy.Type != "Recreate" || *dep.Spec.Replicas != 1 || dep.Annotations[AnnotationStoppedReplicas] != "" {
		t.Errorf("osd-1 after Start: strategy %s, replicas %d, annotations %v; want Recreate as it was, 1, no ferry.dev/stopped-replicas",
			dep.Spec.Strategy.Type, *dep.Spec.Replicas, dep.Annotations)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "registry.local/ceph:2.0.0@sha256:"+sumA {
		t.Errorf("osd-1's template runs %s, want the image pinned to its digest", img)
	}
	after := c.podUIDs(t, "rook", "app=osd-pod")
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("pod %s replaced by osd-1's Start", name)
		}
	}

	// Start alone: the Deployment's controller replaces the pod
	// (Recreate); a second Start changes nothing.
	must(t, c.drv.Start(ctx, ms[0], a))
	c.waitVersions(t, w, 3, map[string]string{"osd-0": "2.0.0", "osd-1": "2.0.0", "osd-2": "1.0.0"})
	uids := c.podUIDs(t, "rook", "osd=0,!decoy")
	must(t, c.drv.Start(ctx, ms[0], a))
	if again := c.podUIDs(t, "rook", "osd=0,!decoy"); fmt.Sprint(again) != fmt.Sprint(uids) {
		t.Errorf("a second Start replaced osd-0's pod: %v → %v", uids, again)
	}

	// The undo of a stop (an abort before its start): scaled back, on
	// the template it has.
	j = &effects{}
	must(t, c.drv.Stop(driver.WithJournal(ctx, j), ms[2]))
	must(t, j.undoAll(ctx, c.drv))
	c.waitVersions(t, w, 3, map[string]string{"osd-0": "2.0.0", "osd-1": "2.0.0", "osd-2": "1.0.0"})
	must(t, j.undoAll(ctx, c.drv)) // idempotent

	// A paused Deployment: its controller would not roll it out.
	_, err = c.env.Kubectl("-n", "rook", "rollout", "pause", "deployment/osd-2")
	must(t, err)
	err = c.drv.Start(ctx, ms[2], a)
	if err == nil || !strings.Contains(err.Error(), "Deployment rook/osd-2 is paused (spec.paused)") {
		t.Errorf("Start of a paused Deployment: %v", err)
	}
	_, err = c.env.Kubectl("-n", "rook", "rollout", "resume", "deployment/osd-2")
	must(t, err)

	// Mid-upgrade, osd-2's Deployment is deleted and osd-3's created.
	must(t, c.admin.AppsV1().Deployments("rook").Delete(ctx, "osd-2", metav1.DeleteOptions{}))
	must(t, c.env.Apply(fmt.Sprintf(osdDeployment, 3)))
	must(t, c.env.WaitUntil(time.Minute, "osd-2 seen gone", func() (bool, string, error) {
		st, err := c.drv.Observe(ctx, ms)
		if err != nil {
			return false, "", err
		}
		return !st[2].Running && st[2].Detail == `no Deployment rook/osd-2 matches "app=osd"`, st[2].Detail, nil
	}))
	must(t, c.drv.Stop(ctx, ms[2])) // gone: stopped
	if err := c.drv.Start(ctx, ms[2], a); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Start of a deleted Deployment: %v", err)
	}
	c.waitVersions(t, w, 3, map[string]string{"osd-0": "2.0.0", "osd-1": "2.0.0", "osd-3": "1.0.0"})
	if m := c.discover(t, "osd", w)[2]; m.Name != "osd-3" || m.Host != "kwok-node-3" || m.Domain != "b" {
		t.Errorf("Discover after osd-3 was created: %+v", m)
	}
}

// watchCreated watches the pods of sel in ns from now on and returns a
// function that lists those created since ("NAME VERSION"), in order.
func (c *cluster) watchCreated(t *testing.T, ns, sel string) func() []string {
	t.Helper()
	l, err := c.admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	wi, err := c.admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: l.ResourceVersion})
	must(t, err)
	var mu sync.Mutex
	var created []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				mu.Lock()
				created = append(created, p.Name+" "+podVersion(p.ObjectMeta, p.Spec, ""))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); wi.Stop(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), created...)
	}
}
