package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

const (
	sumA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sumB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestImageRef(t *testing.T) {
	for _, tc := range []struct {
		image, sum, want, err string
	}{
		{image: "registry/app:2.0.0", sum: sumA, want: "registry/app:2.0.0@sha256:" + sumA},
		{image: "registry/app:2.0.0", sum: "sha256:" + strings.ToUpper(sumA), want: "registry/app:2.0.0@sha256:" + sumA},
		{image: "registry:5000/app", sum: sumA, want: "registry:5000/app@sha256:" + sumA},
		{image: "registry/app:2.0.0@sha256:" + sumA, sum: sumA, want: "registry/app:2.0.0@sha256:" + sumA},
		{image: "registry/app:2.0.0@sha256:" + sumB, sum: sumA, err: "carries digest"},
		{image: "registry/app:2.0.0", sum: "", err: "not 64 hex digits"},
		{image: "registry/app:2.0.0", sum: "abc", err: "not 64 hex digits"},
		{image: "", sum: sumA, err: "no image"},
	} {
		got, err := ImageRef(driver.Artifact{Version: "2.0.0", Image: tc.image, SHA256: tc.sum})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ImageRef(%q, %q) = %q, %v; want an error with %q", tc.image, tc.sum, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ImageRef(%q, %q) = %q, %v; want %q", tc.image, tc.sum, got, err, tc.want)
		}
	}
}

func TestTagVersion(t *testing.T) {
	for image, want := range map[string]string{
		"registry/app:2.0.0":                      "2.0.0",
		"registry/app:v1.2.3":                     "1.2.3",
		"registry/app:1.0.0@sha256:" + sumA:       "1.0.0",
		"registry:5000/app":                       "",
		"registry:5000/app:v3@sha256:" + sumA:     "3",
		"app":                                     "",
		"registry:5000/team/app:2.0.0-rc.1+build": "2.0.0-rc.1+build",
	} {
		if got := TagVersion(image); got != want {
			t.Errorf("TagVersion(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestPodVersion(t *testing.T) {
	spec := func(image string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "side", Image: "proxy:9"}, {Name: "app", Image: image}}}
	}
	ref := "registry/app:latest@sha256:" + sumA
	ann := map[string]string{AnnotationVersion: "2.0.0", AnnotationImage: ref}
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		image     string
		container string
		want      string
	}{
		{"annotation", ann, ref, "app", "2.0.0"},
		{"image changed by hand", ann, "registry/app:v2.1.0", "app", "2.1.0"},
		{"never touched", nil, "registry/app:v1.0.0", "app", "1.0.0"},
		{"first container", nil, "registry/app:v1.0.0", "", "9"},
		{"no such container", nil, "registry/app:v1.0.0", "db", ""},
	} {
		got := podVersion(metav1.ObjectMeta{Annotations: tc.ann}, spec(tc.image), tc.container)
		if got != tc.want {
			t.Errorf("%s: podVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPodStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p := &corev1.Pod{
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "app:1.0.0"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}},
		}}},
	}
	st := podStatus(p, "")
	if st.Running || st.Version != "1.0.0" || !strings.Contains(st.Detail, "ImagePullBackOff") || !strings.Contains(st.Detail, "n1") {
		t.Errorf("pending pod: %+v", st)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if st := podStatus(p, ""); !st.Running || !st.Since.Equal(now.Time) || st.Detail != "" {
		t.Errorf("ready pod: %+v", st)
	}
	p.DeletionTimestamp = &now
	if st := podStatus(p, ""); st.Running || st.Detail != "being deleted on n1" {
		t.Errorf("deleted pod: %+v", st)
	}
}

// TestUnreachable: an API server that does not answer is
// driver.ErrUnreachable, worth retrying: the first Observe waits for
// the cache up to the sync timeout, the next ones say so at once.
func TestUnreachable(t *testing.T) {
	d, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second}, WithCacheSyncTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w := &driver.Workload{Kind: kindStatefulSet, Namespace: "default", Name: "mon"}
	for i := range 2 {
		began := time.Now()
		_, err = d.Observe(context.Background(), []driver.Member{{Name: "mon-0", Workload: w}})
		if !errors.Is(err, driver.ErrUnreachable) {
			t.Fatalf("Observe %d: %v; want driver.ErrUnreachable", i, err)
		}
		if took := time.Since(began); i == 1 && took > 500*time.Millisecond {
			t.Errorf("Observe %d took %s: a cache past its sync timeout must not hold each tick", i, took)
		}
		t.Logf("Observe %d: %v", i, err)
	}
	if n := d.Requests().Total(); n == 0 {
		t.Errorf("no request counted: the informer's list went through the counter or not at all")
	}
}

func TestNewWithoutCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Fatalf("New without kubeconfig: %v", err)
	}
}
