package kubernetes

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// template is a revision's pod template as a DaemonSet's
// ControllerRevision holds it, with edit applied to its JSON.
func template(t *testing.T, edit func(string) string) map[string]any {
	t.Helper()
	raw := `{"spec":{"template":{"$patch":"replace",
		"metadata":{"labels":{"app":"probe"},"annotations":{"ferry.dev/version":"1.0.0","ferry.dev/image":"r/probe:1@sha256:aa","team":"x"}},
		"spec":{"initContainers":[{"name":"init","image":"r/init:1"}],
		        "containers":[{"name":"probe","image":"r/probe:1@sha256:aa","env":[{"name":"A","value":"1"}]},{"name":"side","image":"r/side:1"}]}}}}`
	if edit != nil {
		raw = edit(raw)
	}
	m, err := revisionTemplate([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestImagesOnly: a pod goes in place only when its revision and the
// new one differ in their containers' images (and ferry's annotations)
// alone; else the first place they differ is named.
func TestImagesOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(string) string
		where string // "": in place
	}{
		{"the same", nil, ""},
		{"ferry's image and annotations", func(s string) string {
			return strings.ReplaceAll(strings.ReplaceAll(s, "r/probe:1@sha256:aa", "r/probe:2@sha256:bb"), `"ferry.dev/version":"1.0.0"`, `"ferry.dev/version":"2.0.0"`)
		}, ""},
		{"another container's image", func(s string) string { return strings.Replace(s, "r/side:1", "r/side:2", 1) }, ""},
		{"ferry's annotations first set", func(s string) string {
			return strings.Replace(s, `"ferry.dev/version":"1.0.0","ferry.dev/image":"r/probe:1@sha256:aa",`, "", 1)
		}, ""},
		{"an env", func(s string) string { return strings.Replace(s, `"value":"1"`, `"value":"2"`, 1) }, "spec.containers[0].env[0].value"},
		{"an init container's image", func(s string) string { return strings.Replace(s, "r/init:1", "r/init:2", 1) }, "spec.initContainers[0].image"},
		{"another annotation", func(s string) string { return strings.Replace(s, `"team":"x"`, `"team":"y"`, 1) }, "metadata.annotations.team"},
		{"a label", func(s string) string { return strings.Replace(s, `"app":"probe"}`, `"app":"probe","tier":"a"}`, 1) }, "metadata.labels.tier"},
		{"a container more", func(s string) string {
			return strings.Replace(s, `{"name":"side","image":"r/side:1"}`, `{"name":"side","image":"r/side:1"},{"name":"x","image":"r/x"}`, 1)
		}, "spec.containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, where := imagesOnly(template(t, nil), template(t, tc.edit))
			if ok != (tc.where == "") || where != tc.where {
				t.Errorf("imagesOnly = %t, %q; want %t, %q", ok, where, tc.where == "", tc.where)
			}
		})
	}
	if _, err := revisionTemplate([]byte(`{"spec":{}}`)); err == nil || !strings.Contains(err.Error(), "no spec.template") {
		t.Errorf("a revision without a template: %v", err)
	}
}

// TestInPlaceStatus: a pod whose image ferry changed in place runs its
// old version until its container's status changes (the kubelet
// restarted it); after, that one restart is no crash, and it is
// running since the container started.
func TestInPlaceStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	from, _ := json.Marshal(inPlaceFrom{Container: "probe", Version: "1.0.0", Image: "r/probe:1", ImageID: "id1", Restarts: 3})
	pod := func(image, id string, restarts int32, started time.Time, ann bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-x",
			Annotations: map[string]string{AnnotationVersion: "2.0.0", AnnotationImage: "r/probe:2"}}}
		if ann {
			p.Annotations[AnnotationInPlace] = string(from)
		}
		p.Spec.Containers = []corev1.Container{{Name: "probe", Image: "r/probe:2"}}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "probe", Image: image, ImageID: id, RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
		return p
	}
	for _, tc := range []struct {
		name     string
		p        *corev1.Pod
		version  string
		restarts int
		since    time.Time
		detail   string
	}{
		{"not yet restarted", pod("r/probe:1", "id1", 3, t0, true), "1.0.0", 0, t0, "its container restarts in place with version 2.0.0"},
		{"restarted (the kubelet: image, id and count)", pod("docker.io/r/probe:2", "id2", 4, t0.Add(time.Minute), true), "2.0.0", 0, t0.Add(time.Minute), ""},
		{"restarted (kwok: the image only)", pod("r/probe:2", "", 1, t0.Add(time.Minute), true), "2.0.0", 0, t0.Add(time.Minute), ""},
		{"crashed twice since", pod("r/probe:2", "id2", 6, t0.Add(time.Minute), true), "2.0.0", 2, t0.Add(time.Minute), ""},
		{"never in place", pod("r/probe:2", "id2", 6, t0.Add(time.Minute), false), "2.0.0", 6, t0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := podStatus(tc.p, "probe")
			if st.Version != tc.version || st.Restarts != tc.restarts || !st.Since.Equal(tc.since) || st.Detail != tc.detail || !st.Running {
				t.Errorf("status %+v; want version %s, %d restarts, since %s, detail %q, running", st, tc.version, tc.restarts, tc.since, tc.detail)
			}
		})
	}
}

// TestUpdateRules: update: in-place is a DaemonSet's; anything else is
// refused, naming the field, its line and why.
func TestUpdateRules(t *testing.T) {
	base := strings.Replace(perBase, "kind: Deployment, namespace: rook-ceph, selector: app=rook-ceph-osd, per: workload, container: osd",
		"kind: DaemonSet, namespace: rook-ceph, name: osd, update: in-place", 1)
	c, err := config.Parse([]byte(base), "t.yaml")
	if err != nil {
		t.Fatalf("the base: %v", err)
	}
	if w := c.Components[0].Workload; w.Update != config.UpdateInPlace {
		t.Fatalf("workload %+v", w)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown value", "update: in-place", "update: rolling",
			`t.yaml:5: components[0].workload.update: unknown value "rolling"; known: in-place (a DaemonSet's pod takes its image where it runs), or leave it out (recreated)`},
		{"a StatefulSet", "kind: DaemonSet", "kind: StatefulSet",
			"t.yaml:5: components[0].workload.update: update: in-place applies to a DaemonSet: a StatefulSet's pods are recreated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(strings.Replace(base, tc.old, tc.new, 1)), "t.yaml")
			if err == nil || err.Error() != tc.want {
				t.Errorf("got:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}
