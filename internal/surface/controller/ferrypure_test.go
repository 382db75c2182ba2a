package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestStalled: a rollout is stuck only on Kubernetes' own verdict for
// the generation it observed, never on a condition left from an older
// one.
func TestStalled(t *testing.T) {
	progressing := func(status corev1.ConditionStatus, reason string) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason, Message: "m"}}
	}
	for _, c := range []struct {
		name          string
		gen, observed int64
		conds         []appsv1.DeploymentCondition
		stuck         bool
	}{
		{"progressing", 2, 2, progressing(corev1.ConditionTrue, "ReplicaSetUpdated"), false},
		{"deadline exceeded", 2, 2, progressing(corev1.ConditionFalse, "ProgressDeadlineExceeded"), true},
		{"deadline of the generation before", 3, 2, progressing(corev1.ConditionFalse, "ProgressDeadlineExceeded"), false},
		{"no condition yet", 2, 2, nil, false},
		{"available condition false", 2, 2, []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}}, false},
	} {
		d := &appsv1.Deployment{}
		d.Generation, d.Status.ObservedGeneration, d.Status.Conditions = c.gen, c.observed, c.conds
		if why := stalled(d); (why != "") != c.stuck || (c.stuck && !strings.Contains(why, "ProgressDeadlineExceeded")) {
			t.Errorf("%s: stalled %q, want stuck %v", c.name, why, c.stuck)
		}
	}
}

// TestFerryContainer: the container named ferry, or the only one.
func TestFerryContainer(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  int
		err   bool
	}{
		{[]string{"ferry"}, 0, false},
		{[]string{"sidecar", "ferry"}, 1, false},
		{[]string{"controller"}, 0, false},
		{[]string{"a", "b"}, 0, true},
		{nil, 0, true},
	} {
		var p corev1.PodSpec
		for _, n := range c.names {
			p.Containers = append(p.Containers, corev1.Container{Name: n})
		}
		i, err := ferryContainer(&p)
		if (err != nil) != c.err || (err == nil && i != c.want) {
			t.Errorf("%v: %d, %v; want %d (error %v)", c.names, i, err, c.want, c.err)
		}
	}
}

// TestPinnedImage: spec.ferryImage must be pinned by its digest, as
// the CRD's pattern says.
func TestPinnedImage(t *testing.T) {
	d := strings.Repeat("ab", 32)
	for img, ok := range map[string]bool{
		"ghcr.io/ferry-upgrade/ferry:1.3.0@sha256:" + d: true,
		"ferry@sha256:" + d:                             true,
		"ghcr.io/ferry-upgrade/ferry:1.3.0":             false,
		"ferry@sha256:" + strings.ToUpper(d):            false,
		"ferry@sha256:" + d[:60]:                        false,
		"a b@sha256:" + d:                               false,
		"@sha256:" + d:                                  false,
	} {
		if pinnedImageRE.MatchString(img) != ok {
			t.Errorf("%q: pinned %v, want %v", img, !ok, ok)
		}
	}
}
