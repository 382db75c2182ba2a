package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// keptJournal is a journal that also keeps output (driver.OutputKeeper),
// as the engine's does in the upgrade's events.
type keptJournal struct {
	effects
	mu   sync.Mutex
	kept []driver.KeptOutput
}

func (j *keptJournal) KeepOutput(_ context.Context, o driver.KeptOutput) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.kept = append(j.kept, o)
	return nil
}

// of is what was kept of pod ns/name.
func (j *keptJournal) of(ns, name string) []driver.KeptOutput {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []driver.KeptOutput
	for _, o := range j.kept {
		if strings.HasPrefix(o.Instance, "pod "+ns+"/"+name+" ") {
			out = append(out, o)
		}
	}
	return out
}

func numbered(format string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf(format, i))
	}
	return out
}

func joinLines(ls []string) string { return strings.Join(ls, "\n") + "\n" }

const soloDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: solo, namespace: lg}
spec:
  replicas: 1
  minReadySeconds: 2
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec:
      containers: [{name: solo, image: "registry.local/solo:1.0.0"}]
`

// testLogs: Logs reads a member's container's output through the API
// server's pods/log (the driver's ServiceAccount may: rbac.yaml), its
// last lines, of the current instance or, once the container restarted,
// of the previous one (fs.ErrNotExist before, and for a member without a
// pod); and a Start or a Stop that replaces a pod keeps the pod's last
// output (and its previous instance's) in the journal first, bounded to
// DefaultKeepLines, read before the pod went (its own uid, no error);
// output that cannot be read within the keeper's bound is said and the
// pod is replaced all the same. kwok serves the output (kubetest's
// SetPodLogs): its pods run no containers.
func testLogs(t *testing.T, c *cluster) {
	ctx := context.Background()
	must(t, c.env.Apply(fmt.Sprintf(statefulSet, "lg", "talk", 2)))
	w := &driver.Workload{Kind: kindStatefulSet, Namespace: "lg", Name: "talk", Container: "talk"}
	c.waitVersions(t, w, 2, map[string]string{"talk-0": "1.0.0", "talk-1": "1.0.0"})
	ms := c.discover(t, "talk", w)
	if got := memberNames(ms); got != "talk-1 talk-0" {
		t.Fatalf("Discover: %s", got)
	}
	talk1, talk0 := ms[0], ms[1]
	lines0 := numbered("talk-0 1.0.0 line %03d", 1, 150)
	must(t, c.env.SetPodLogs("lg", "talk-0", lines0, []string{"talk-0 1.0.0: out of cheese, exiting"}))
	must(t, c.env.SetPodLogs("lg", "talk-1", numbered("talk-1 1.0.0 line %d", 1, 3), nil))

	// The current instance: its last lines.
	out, err := c.drv.Logs(ctx, talk0, false, 10)
	must(t, err)
	if want := joinLines(lines0[140:]); out != want {
		t.Errorf("Logs(talk-0, 10 lines) = %q, want %q", out, want)
	}
	for _, n := range []int{0, MaxLogLines + 1} {
		if _, err := c.drv.Logs(ctx, talk0, false, n); err == nil || !strings.Contains(err.Error(), "lines must be between 1 and") {
			t.Errorf("Logs(%d lines) = %v, want refused", n, err)
		}
	}
	// No previous instance until the container restarts; no output of
	// a member without a pod, nor of a node.
	if _, err := c.drv.Logs(ctx, talk0, true, 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Logs(talk-0, previous) before a restart = %v, want fs.ErrNotExist", err)
	}
	if _, err := c.drv.Logs(ctx, driver.Member{Name: "talk-7", Workload: w}, false, 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Logs(talk-7, no pod) = %v, want fs.ErrNotExist", err)
	}
	node := driver.Member{Name: "kwok-node-0", Workload: &driver.Workload{Kind: kindNodePool, Selector: "type=kwok"}}
	if _, err := c.drv.Logs(ctx, node, false, 10); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Logs(a node) = %v, want errors.ErrUnsupported", err)
	}
	must(t, c.env.MarkRestarted("lg", "talk-0", "talk"))
	must(t, c.env.WaitUntil(30*time.Second, "the previous instance's output of talk-0", func() (bool, string, error) {
		out, err = c.drv.Logs(ctx, talk0, true, 10)
		if errors.Is(err, fs.ErrNotExist) {
			return false, err.Error(), nil // the driver's cache does not show the restart yet
		}
		return err == nil, "", err
	}))
	if want := "talk-0 1.0.0: out of cheese, exiting\n"; out != want {
		t.Errorf("Logs(talk-0, previous) = %q, want %q", out, want)
	}

	// A Start that replaces the pods (a partition: the controller
	// replaces them) keeps their output first.
	before := c.podUIDs(t, "lg", "app=talk")
	j := &keptJournal{}
	jctx := driver.WithJournal(ctx, j)
	a := driver.Artifact{Version: "2.0.0", Image: "registry.local/talk:2.0.0", SHA256: sumA}
	must(t, c.drv.Start(jctx, talk1, a))
	must(t, c.drv.Start(jctx, talk0, a))
	c.waitVersions(t, w, 2, map[string]string{"talk-0": "2.0.0", "talk-1": "2.0.0"})
	after := c.podUIDs(t, "lg", "app=talk")
	k1, k0 := j.of("lg", "talk-1"), j.of("lg", "talk-0")
	if len(k1) != 1 || len(k0) != 2 {
		t.Fatalf("kept of talk-1: %+v; of talk-0: %+v; want 1 and 2 (its previous instance's too)", k1, k0)
	}
	for _, x := range []struct {
		name     string
		k        driver.KeptOutput
		previous bool
		lines    int
		output   string
	}{
		{"talk-1", k1[0], false, 3, joinLines(numbered("talk-1 1.0.0 line %d", 1, 3))},
		{"talk-0", k0[0], false, DefaultKeepLines, joinLines(lines0[150-DefaultKeepLines:])},
		{"talk-0", k0[1], true, 1, "talk-0 1.0.0: out of cheese, exiting\n"},
	} {
		k := x.k
		if k.Err != nil || k.Previous != x.previous || k.Lines != x.lines || k.Output != x.output || k.Cut {
			t.Errorf("kept of %s (previous %t): err %v, previous %t, %d lines, cut %t, output %q; want %d lines %q",
				x.name, x.previous, k.Err, k.Previous, k.Lines, k.Cut, k.Output, x.lines, x.output)
		}
		// Read from the pod that went, before it went.
		if !strings.Contains(k.Instance, "(uid "+before[x.name]+")") || after[x.name] == before[x.name] ||
			!strings.Contains(k.Instance, "container talk, version 1.0.0, on node kwok-node-") || !strings.Contains(k.Why, "2.0.0") {
			t.Errorf("kept of %s: instance %q, why %q; want the pod of uid %s (now %s), version 1.0.0, replaced for 2.0.0",
				x.name, k.Instance, k.Why, before[x.name], after[x.name])
		}
	}
	if !strings.Contains(k0[1].Instance, "restarted 1 time(s)") {
		t.Errorf("kept of talk-0's previous instance: %q does not say it restarted", k0[1].Instance)
	}
	// Start again: nothing replaced, nothing kept again.
	must(t, c.drv.Start(jctx, talk0, a))
	if n := len(j.of("lg", "talk-0")); n != 2 {
		t.Errorf("a Start that replaced nothing kept output again (%d)", n)
	}

	// Output that cannot be read within the bound: said, and the pod is
	// replaced all the same (a driver that waits 1 ns for it, as admin).
	rc, err := clientcmd.BuildConfigFromFlags("", c.env.Kubeconfig)
	must(t, err)
	hasty, err := NewForConfig(rc, WithKeptOutput(DefaultKeepLines, DefaultKeepBytes, time.Nanosecond))
	must(t, err)
	defer hasty.Close()
	j2 := &keptJournal{}
	must(t, hasty.Stop(driver.WithJournal(ctx, j2), talk0))
	must(t, c.env.WaitUntil(time.Minute, "talk-0 replaced", func() (bool, string, error) {
		now := c.podUIDs(t, "lg", "app=talk")["talk-0"]
		return now != "" && now != after["talk-0"], now, nil
	}))
	if k := j2.of("lg", "talk-0"); len(k) != 1 || k[0].Err == nil || !strings.Contains(k[0].Err.Error(), "the driver waits 1ns") {
		t.Errorf("kept of talk-0 by a driver that waits 1ns: %+v; want its error, said", k)
	}

	// A Deployment of one replica (Rook's mons and OSDs): its rollout
	// replaces the one pod, whose output is kept first.
	must(t, c.env.Apply(soloDeployment))
	wd := &driver.Workload{Kind: kindDeployment, Namespace: "lg", Name: "solo"}
	c.waitVersions(t, wd, 1, map[string]string{"solo.1": "1.0.0"})
	old := c.pods(t, "lg", "app=solo")
	if len(old) != 1 {
		t.Fatalf("%d pods of solo, want 1", len(old))
	}
	must(t, c.env.SetPodLogs("lg", old[0].Name, []string{"solo 1.0.0: in quorum"}, nil))
	must(t, c.drv.Start(jctx, c.discover(t, "solo", wd)[0], driver.Artifact{Version: "2.0.0", Image: "registry.local/solo:2.0.0", SHA256: sumA}))
	c.waitVersions(t, wd, 1, map[string]string{"solo.1": "2.0.0"})
	if k := j.of("lg", old[0].Name); len(k) != 1 || k[0].Err != nil || k[0].Output != "solo 1.0.0: in quorum\n" ||
		!strings.Contains(k[0].Instance, string(old[0].UID)) || !strings.Contains(k[0].Why, "rollout to version 2.0.0") {
		t.Errorf("kept of the Deployment's pod %s: %+v", old[0].Name, k)
	}
}

// TestTailBuffer: the last bytes of a stream, from a whole line when
// some were left out, and how many were.
func TestTailBuffer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
		want   string
		cut    int
	}{
		{"fits", 10, []string{"a\n", "b\n"}, "a\nb\n", 0},
		{"exactly", 4, []string{"a\nb\n"}, "a\nb\n", 0},
		{"cut at a line", 6, []string{"one\ntwo\nthree\n"}, "three\n", 8},
		{"cut in a line", 6, []string{"aaaa\nbbbb\ncc\n"}, "cc\n", 10},
		{"one long line", 4, []string{"abcdefgh\n"}, "fgh\n", 5},
		{"many writes", 4, numbered("%d\n", 1, 9), "8\n9\n", 14},
		{"many writes, cut in a line", 5, numbered("%d\n", 1, 9), "8\n9\n", 14},
		{"nothing", 4, nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tailBuffer{max: tc.max}
			for _, s := range tc.writes {
				b.Write([]byte(s))
			}
			got, cut := b.text()
			if got != tc.want || cut != tc.cut {
				t.Errorf("text() = %q, cut %d; want %q, cut %d", got, cut, tc.want, tc.cut)
			}
		})
	}
}

// TestRemovalOrder: the pods of a Deployment's old templates in the
// order the ReplicaSet controller removes them, each rank deciding
// where those before it are equal.
func TestRemovalOrder(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name, node string, phase corev1.PodPhase, readyAgo time.Duration, cost string, restarts int32, age time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		p.Spec.NodeName = node
		p.Status.Phase = phase
		if readyAgo > 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-readyAgo))}}
		}
		if cost != "" {
			p.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": cost}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: restarts}}
		return p
	}
	const h = time.Hour
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"unscheduled first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "", 0, h), pod("b", "", corev1.PodPending, 0, "", 0, h)}, "b a"},
		{"pending before running", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "", 0, h), pod("b", "n2", corev1.PodPending, 0, "", 0, h)}, "b a"},
		{"not ready first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "", 0, h), pod("b", "n2", corev1.PodRunning, 0, "", 0, h)}, "b a"},
		{"lower deletion cost first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "10", 0, h), pod("b", "n2", corev1.PodRunning, h, "-5", 0, h)}, "b a"},
		{"more on its node first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "", 0, h), pod("b", "n2", corev1.PodRunning, h, "", 0, h), pod("c", "n2", corev1.PodRunning, h, "", 0, h)}, "b c a"},
		{"ready more recently first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, 10*h, "", 0, h), pod("b", "n2", corev1.PodRunning, h, "", 0, h)}, "b a"},
		{"same power of two: by uid", []*corev1.Pod{pod("b", "n1", corev1.PodRunning, 70*time.Minute, "", 0, h), pod("a", "n2", corev1.PodRunning, 65*time.Minute, "", 0, h)}, "a b"},
		{"more restarts first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "", 1, h), pod("b", "n2", corev1.PodRunning, h, "", 3, h)}, "b a"},
		{"newer first", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, h, "", 0, 10*h), pod("b", "n2", corev1.PodRunning, h, "", 0, h)}, "b a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range removalOrder(tc.pods, tc.pods, now) {
				got = append(got, p.Name)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("removal order %v, want %s", got, tc.want)
			}
		})
	}
}
