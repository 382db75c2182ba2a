package kubernetes

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// perBase is a description whose osd component is a Deployment per
// OSD, as Rook runs them.
const perBase = `cluster: rook
substrate: kubernetes
components:
  - name: osd
    workload: {kind: Deployment, namespace: rook-ceph, selector: app=rook-ceph-osd, per: workload, container: osd}
releases:
  - version: 1.0.0
    artifacts:
      osd: {image: "registry.local/ceph:1.0.0", sha256: "0000000000000000000000000000000000000000000000000000000000000001"}
`

// TestPerWorkloadRules: per: workload is for Deployments found by a
// selector; anything else is refused, naming the field, its line and
// why.
func TestPerWorkloadRules(t *testing.T) {
	c, err := config.Parse([]byte(perBase), "t.yaml")
	if err != nil {
		t.Fatalf("the base: %v", err)
	}
	if w := c.Components[0].Workload; w.Per != config.PerWorkload || w.Namespace != "rook-ceph" {
		t.Fatalf("workload %+v", w)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown value", "per: workload", "per: pod",
			`t.yaml:5: components[0].workload.per: unknown value "pod"; known: workload (each Deployment the selector matches is one member)`},
		{"a StatefulSet", "kind: Deployment", "kind: StatefulSet",
			"t.yaml:5: components[0].workload.per: per: workload applies to Deployments (one Deployment per daemon, as Rook runs its mons and OSDs); a StatefulSet's members are its pods"},
		{"a DaemonSet", "kind: Deployment", "kind: DaemonSet",
			"t.yaml:5: components[0].workload.per: per: workload applies to Deployments (one Deployment per daemon, as Rook runs its mons and OSDs); a DaemonSet's members are its nodes"},
		{"a NodePool", "kind: Deployment, namespace: rook-ceph, selector: app=rook-ceph-osd, per: workload, container: osd",
			"kind: NodePool, selector: pool=a, per: workload",
			"t.yaml:5: components[0].workload.per: a NodePool's members are its nodes: per does not apply"},
		{"by name", "selector: app=rook-ceph-osd", "name: rook-ceph-osd-0",
			"t.yaml:5: components[0].workload.selector: must be set with per: workload: the label selector of the Deployments, each one member"},
		{"name and selector", "selector: app=rook-ceph-osd", "name: rook-ceph-osd-0, selector: app=rook-ceph-osd",
			"t.yaml:5: components[0].workload.name: per: workload selects Deployments by selector: name one with a selector that matches it alone, or leave per out\n" +
				"t.yaml:5: components[0].workload.selector: name and selector are exclusive: name the Deployment, or select it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(perBase, tc.old) != 1 {
				t.Fatalf("edit %q: not found once", tc.old)
			}
			_, err := config.Parse([]byte(strings.Replace(perBase, tc.old, tc.new, 1)), "t.yaml")
			if err == nil || err.Error() != tc.want {
				t.Errorf("got:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

// TestDeploymentStatus: a Deployment that is one member is Running once
// its replicas are Ready on its template's version, and down, saying
// what it waits for, while its controller rolls a new template out or
// while ferry has it stopped.
func TestDeploymentStatus(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	dep := func(version string, n int32, paused bool, ann map[string]string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "osd-3", Annotations: ann}}
		d.Spec.Replicas = &n
		d.Spec.Paused = paused
		d.Spec.Template.Annotations = map[string]string{AnnotationVersion: version}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "osd", Image: "ceph:" + version}}
		return d
	}
	pod := func(name, version string, ready bool, at time.Duration, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationVersion: version}}}
		p.Spec.NodeName = "node-3"
		p.Spec.Containers = []corev1.Container{{Name: "osd", Image: "ceph:" + version}}
		p.Status.Phase = corev1.PodRunning
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(t0.Add(at))}}
		if deleting {
			now := metav1.NewTime(t0)
			p.DeletionTimestamp = &now
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		dep     *appsv1.Deployment
		pods    []*corev1.Pod
		running bool
		version string
		detail  string
		since   time.Duration
	}{
		{"ready on its template", dep("1.0.0", 1, false, nil), []*corev1.Pod{pod("a", "1.0.0", true, 5*time.Second, false)},
			true, "1.0.0", "", 5 * time.Second},
		{"new template, the old pod still serving", dep("2.0.0", 1, false, nil), []*corev1.Pod{pod("a", "1.0.0", true, 0, false)},
			false, "1.0.0", "0 of 1 pods Ready on 2.0.0: runs 1.0.0 on node-3", 0},
		{"paused with a new template", dep("2.0.0", 1, true, nil), []*corev1.Pod{pod("a", "1.0.0", true, 0, false)},
			false, "1.0.0", "0 of 1 pods Ready on 2.0.0, its rollout paused (spec.paused): runs 1.0.0 on node-3", 0},
		{"Recreate: the old pod going, none yet", dep("2.0.0", 1, false, nil), []*corev1.Pod{pod("a", "1.0.0", true, 0, true)},
			false, "2.0.0", "0 of 1 pods Ready on 2.0.0: no pod (its controller creates one)", 0},
		{"the new pod not Ready", dep("2.0.0", 1, false, nil), []*corev1.Pod{pod("a", "1.0.0", true, 0, false), pod("b", "2.0.0", false, 0, false)},
			false, "2.0.0", "0 of 1 pods Ready on 2.0.0: not ready on node-3", 0},
		{"the new pod Ready, the old one not gone yet", dep("2.0.0", 1, false, nil), []*corev1.Pod{pod("a", "1.0.0", true, 0, false), pod("b", "2.0.0", true, 7*time.Second, false)},
			true, "2.0.0", "", 7 * time.Second},
		{"two replicas: whole since the last", dep("2.0.0", 2, false, nil), []*corev1.Pod{pod("a", "2.0.0", true, 3*time.Second, false), pod("b", "2.0.0", true, 9*time.Second, false)},
			true, "2.0.0", "", 9 * time.Second},
		{"two replicas, one Ready", dep("2.0.0", 2, false, nil), []*corev1.Pod{pod("a", "2.0.0", true, 3*time.Second, false)},
			false, "2.0.0", "1 of 2 pods Ready on 2.0.0: runs 2.0.0 on node-3", 3 * time.Second},
		{"stopped by ferry", dep("1.0.0", 0, false, map[string]string{AnnotationStoppedReplicas: "1"}), nil,
			false, "1.0.0", "stopped by ferry: scaled to 0 replicas, 1 again at its start", 0},
		{"scaled to 0 by someone", dep("1.0.0", 0, false, nil), nil,
			false, "1.0.0", "scaled to 0 replicas", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := deploymentStatus(tc.dep, "osd", tc.pods)
			if st.Running != tc.running || st.Version != tc.version || st.Detail != tc.detail {
				t.Errorf("got running %t version %q detail %q; want %t %q %q", st.Running, st.Version, st.Detail, tc.running, tc.version, tc.detail)
			}
			if tc.running && !st.Since.Equal(t0.Add(tc.since)) {
				t.Errorf("since %s, want %s", st.Since, t0.Add(tc.since))
			}
		})
	}
}
