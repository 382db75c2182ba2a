package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Members' output is their pod's container's, read from the API
// server's pods/log (the kubelet's logs, as kubectl logs reads them):
// the current instance, or with previous the container's instance
// before it (kubectl logs --previous), which exists only while the
// kubelet keeps it after a restart. Both go with the pod: so before
// the driver replaces a pod (deletes it, or lets its controller replace
// it), it reads the pod's last output and hands it to the upgrade's
// journal (driver.KeepOutput), where `ferry bundle` finds it later.

// Bounds of what the driver reads of a container's output.
const (
	// MaxLogLines is the most lines Logs returns (the agent's bound).
	MaxLogLines = 10000
	// MaxLogBytes bounds what Logs returns: the last bytes of the lines
	// asked for (the agent keeps 4 MiB of an instance, too).
	MaxLogBytes = 4 << 20
	// maxLogRead bounds what one read transfers, however long the
	// lines asked for are: the kubelet's lines are at most 16 KiB each
	// in the runtime's log, but a line is not bounded.
	maxLogRead = 64 << 20

	// DefaultKeepLines and DefaultKeepBytes bound the output kept of a
	// pod the driver replaces: an event each in the upgrade's record,
	// for each of its container's two instances.
	DefaultKeepLines = 100
	DefaultKeepBytes = 16 << 10
	// DefaultKeepTimeout bounds the reading of a replaced pod's output:
	// the replacement waits no longer for it.
	DefaultKeepTimeout = 5 * time.Second
	// maxKeptPods bounds the pods the driver remembers having kept the
	// output of (each once); past it, it forgets them all.
	maxKeptPods = 100000
)

var _ driver.Logger = (*Driver)(nil)

// keeper is how the driver keeps the output of the pods it replaces.
type keeper struct {
	lines   int // 0: keep none
	bytes   int
	timeout time.Duration

	mu   sync.Mutex
	done map[string]bool // the pod instances whose output was kept
}

func newKeeper() *keeper {
	return &keeper{lines: DefaultKeepLines, bytes: DefaultKeepBytes, timeout: DefaultKeepTimeout, done: map[string]bool{}}
}

// WithKeptOutput sets how much of a replaced pod's output the driver
// keeps (its last lines, at most bytes) and how long it waits for it;
// lines 0 keeps none. Defaults: DefaultKeepLines, DefaultKeepBytes,
// DefaultKeepTimeout.
func WithKeptOutput(lines, bytes int, timeout time.Duration) Option {
	return func(d *Driver) {
		d.keep.lines, d.keep.bytes, d.keep.timeout = max(lines, 0), max(bytes, 1), timeout
	}
}

// first reports whether the output of pod p's container, as it runs
// now, is not kept yet, and marks it kept: once per pod, and once more
// for each instance of a container changed in place.
func (k *keeper) first(p *corev1.Pod, container string) bool {
	key := string(p.UID)
	if cs := containerStatus(p, container); cs != nil {
		key += "/" + cs.ContainerID
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done[key] {
		return false
	}
	if len(k.done) >= maxKeptPods {
		k.done = map[string]bool{}
	}
	k.done[key] = true
	return true
}

// Logs returns the last lines (1 to MaxLogLines, at most MaxLogBytes)
// of the output of member m's container: of its current instance, or of
// the one before it (previous), which exists only once the kubelet has
// restarted the container (otherwise, and for a member without a pod
// now, the error is fs.ErrNotExist). A node (NodePool) has no output of
// its own to read here.
func (d *Driver) Logs(ctx context.Context, m driver.Member, previous bool, lines int) (string, error) {
	if lines < 1 || lines > MaxLogLines {
		return "", fmt.Errorf("kubernetes driver: logs of %s: lines must be between 1 and %d, got %d", m.Name, MaxLogLines, lines)
	}
	if m.Workload == nil {
		return "", fmt.Errorf("kubernetes driver: member %s has no workload", m.Name)
	}
	w := withDefaults(*m.Workload)
	p, err := d.memberPod(ctx, w, m)
	if err != nil {
		return "", err
	}
	c := findContainer(p.Spec, w.Container)
	if c == nil {
		return "", fmt.Errorf("kubernetes driver: pod %s/%s has no container %q", p.Namespace, p.Name, w.Container)
	}
	if previous && !restarted(p, c.Name) {
		return "", fmt.Errorf("kubernetes driver: pod %s/%s's container %s has not restarted: no previous instance: %w",
			p.Namespace, p.Name, c.Name, fs.ErrNotExist)
	}
	out, _, cut, err := d.readLog(ctx, p, c.Name, previous, lines, MaxLogBytes)
	if err != nil {
		return "", err
	}
	if cut > 0 {
		out = fmt.Sprintf("[... %d bytes of the %d lines asked for left out: the driver returns the last %d]\n", cut, lines, MaxLogBytes) + out
	}
	return out, nil
}

// memberPod is the pod of member m now, from the driver's caches; none
// is fs.ErrNotExist.
func (d *Driver) memberPod(ctx context.Context, w driver.Workload, m driver.Member) (*corev1.Pod, error) {
	var p *corev1.Pod
	switch w.Kind {
	case kindStatefulSet:
		s, err := cachedWorkload[appsv1.StatefulSet](ctx, d, w)
		if err != nil {
			return nil, err
		}
		ps, err := d.cachedPods(ctx, w, s.Spec.Selector, "")
		if err != nil {
			return nil, err
		}
		p = podsByName(ownedBy(ps, s.UID))[m.Name]
	case kindDaemonSet:
		s, err := d.getDaemonSet(ctx, w)
		if err != nil {
			return nil, err
		}
		byNode, err := d.daemonPods(ctx, w, s, memberNode(s, m))
		if err != nil {
			return nil, err
		}
		p = nodePod(byNode[memberNode(s, m)])
	case kindDeployment:
		dep, err := cachedWorkload[appsv1.Deployment](ctx, d, w)
		if err != nil {
			return nil, err
		}
		container, err := containerOf(dep.Spec.Template, w)
		if err != nil {
			return nil, err
		}
		slot, err := slotOf(dep, m)
		if err != nil {
			return nil, err
		}
		ps, err := d.cachedPods(ctx, w, dep.Spec.Selector, "")
		if err != nil {
			return nil, err
		}
		if slots := slotPods(ps, container, templateVersion(dep, container)); slot <= len(slots) {
			p = slots[slot-1]
		}
	case kindNodePool:
		return nil, fmt.Errorf("kubernetes driver: member %s is a node of %s: the driver reads pods' output, and a node has none (its kubelet's is in the node's own journal): %w",
			m.Name, workloadString(w), errors.ErrUnsupported)
	default:
		return nil, fmt.Errorf("kubernetes driver: unknown workload kind %q", w.Kind)
	}
	if p == nil {
		return nil, fmt.Errorf("kubernetes driver: member %s has no pod now: %w", m.Name, fs.ErrNotExist)
	}
	return p, nil
}

// restarted reports whether the kubelet has restarted p's container:
// only then is there a previous instance's output to read.
func restarted(p *corev1.Pod, container string) bool {
	cs := containerStatus(p, container)
	return cs != nil && (cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil)
}

// readLog reads the last lines of p's container's output (of its
// previous instance), keeping at most maxBytes of their end: the text,
// how many lines it holds, and how many bytes of the lines were left
// out (at the start, and at a line's end so that it starts whole).
func (d *Driver) readLog(ctx context.Context, p *corev1.Pod, container string, previous bool, lines, maxBytes int) (string, int, int, error) {
	tail, limit := int64(lines), int64(maxLogRead)
	rc, err := d.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, Previous: previous, TailLines: &tail, LimitBytes: &limit,
	}).Stream(ctx)
	which := "output"
	if previous {
		which = "previous instance's output"
	}
	if err != nil {
		if previous && apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "previous terminated container") {
			// The kubelet no longer has it (a restart it has pruned).
			return "", 0, 0, fmt.Errorf("kubernetes driver: pod %s/%s's container %s: %w (%w)", p.Namespace, p.Name, container, err, fs.ErrNotExist)
		}
		return "", 0, 0, apiError(ctx, err, "reading the %s of pod %s/%s's container %s", which, p.Namespace, p.Name, container)
	}
	defer rc.Close()
	var t tailBuffer
	t.max = maxBytes
	if _, err := io.Copy(&t, rc); err != nil {
		return "", 0, 0, apiError(ctx, err, "reading the %s of pod %s/%s's container %s", which, p.Namespace, p.Name, container)
	}
	text, cut := t.text()
	return text, strings.Count(text, "\n"), cut, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max     int
	b       []byte
	dropped int
	edge    byte // the last byte dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > t.max {
		// Drop in steps of at least max, so that a long stream of small
		// writes is copied O(1) times a byte.
		t.edge = t.b[over-1]
		t.b = append(t.b[:0], t.b[over:]...)
		t.dropped += over
	}
	return len(p), nil
}

// text is the last max bytes, from the first whole line among them when
// bytes were dropped in the middle of a line (a single line is kept
// cut), and how many bytes were left out.
func (t *tailBuffer) text() (string, int) {
	b, cut, edge := t.b, t.dropped, t.edge
	if over := len(b) - t.max; over > 0 {
		b, cut, edge = b[over:], cut+over, b[over-1]
	}
	if cut > 0 && edge != '\n' {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b, cut = b[i+1:], cut+i+1
		}
	}
	return string(b), cut
}

// keepOutput reads the output of p's container, and of its previous
// instance if the kubelet restarted it, and hands it to the upgrade's
// journal before p is replaced (why): once p goes, its output goes with
// it. It reads each pod once, within the keeper's time bound, and only
// for a call whose journal keeps output; what it cannot read is kept as
// an error to say, and the replacement goes on. A pod the API server no
// longer has (the cache was behind) is no pod it replaces: nothing kept.
func (d *Driver) keepOutput(ctx context.Context, p *corev1.Pod, container, why string) {
	d.keepOutputBy(ctx, time.Now().Add(d.keep.timeout), p, container, why)
}

// keepOutputBy is keepOutput with its reads done by readBy.
func (d *Driver) keepOutputBy(ctx context.Context, readBy time.Time, p *corev1.Pod, container, why string) {
	// A pod being deleted is someone else's replacement; one that was
	// never scheduled never ran, and has no output to lose.
	if d.keep.lines == 0 || !driver.KeepsOutput(ctx) || p.DeletionTimestamp != nil || p.Spec.NodeName == "" || !d.keep.first(p, container) {
		return
	}
	c := findContainer(p.Spec, container)
	if c == nil {
		return
	}
	inst := fmt.Sprintf("pod %s/%s (uid %s), container %s, version %s, on node %s", p.Namespace, p.Name, p.UID, c.Name,
		orNone(podVersion(p.ObjectMeta, p.Spec, c.Name)), p.Spec.NodeName)
	rctx, cancel := context.WithDeadline(ctx, readBy)
	defer cancel()
	for _, previous := range []bool{false, true} {
		if previous && !restarted(p, c.Name) {
			break
		}
		ko := driver.KeptOutput{Instance: inst, Previous: previous, Why: why}
		if previous {
			ko.Instance += ", restarted " + strconv.Itoa(restarts(p, c.Name)) + " time(s)"
		}
		var cut int
		ko.Output, ko.Lines, cut, ko.Err = d.readLog(rctx, p, c.Name, previous, d.keep.lines, d.keep.bytes)
		ko.Cut = cut > 0
		if apierrors.IsNotFound(ko.Err) {
			// Gone before the driver replaced it (the driver's cache was
			// behind): not a pod it replaces, and nothing left to keep.
			d.log.Info("the pod about to be replaced was gone already; no output to keep", "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
			return
		}
		if errors.Is(ko.Err, context.DeadlineExceeded) && ctx.Err() == nil {
			ko.Err = fmt.Errorf("%w (the driver waits %s for a replaced pod's output)", ko.Err, d.keep.timeout)
		}
		if err := driver.KeepOutput(ctx, ko); err != nil {
			d.log.Warn("the output of a pod about to be replaced was read but not kept", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
		if ko.Err != nil {
			d.log.Warn("could not read the output of a pod about to be replaced", "pod", p.Namespace+"/"+p.Name, "err", ko.Err)
		} else {
			d.log.Info("kept the output of a pod about to be replaced", "pod", p.Namespace+"/"+p.Name, "previous", previous, "lines", ko.Lines)
		}
	}
}

func restarts(p *corev1.Pod, container string) int {
	if cs := containerStatus(p, container); cs != nil {
		return int(cs.RestartCount)
	}
	return 0
}

// keepOutgoing keeps the output of the pods of a Deployment's old
// templates that its rollout removes once n more pods of version are
// available (all of them when all is set): the ReplicaSet controller
// picks which, not ferry, so the driver picks them as the controller's
// ranking (ActivePodsWithRanks) orders them now. A later node for a new
// pod can change the controller's pick: a pod it removes that the driver
// did not pick goes without its output kept.
func (d *Driver) keepOutgoing(ctx context.Context, ps []*corev1.Pod, container, version string, n int, all bool, why string) {
	if d.keep.lines == 0 || !driver.KeepsOutput(ctx) || (n <= 0 && !all) {
		return
	}
	var old []*corev1.Pod
	for _, p := range ps {
		if p.DeletionTimestamp == nil && podVersion(p.ObjectMeta, p.Spec, container) != version {
			old = append(old, p)
		}
	}
	old = removalOrder(old, ps, time.Now())
	if !all && n < len(old) {
		old = old[:n]
	}
	// A few at a time, all within one keeper's bound: the last slot of a
	// large Deployment waits no longer than one pod.
	readBy := time.Now().Add(d.keep.timeout)
	sem := make(chan struct{}, keepReaders)
	var wg sync.WaitGroup
	for _, p := range old {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.keepOutputBy(ctx, readBy, p, container, why)
		}()
	}
	wg.Wait()
}

// keepReaders is how many pods' output keepOutgoing reads at once.
const keepReaders = 8

// removalOrder sorts pods in the order the ReplicaSet controller removes
// them when it scales down (kube-controller-manager's
// ActivePodsWithRanks): unscheduled, then pending, not ready, of lower
// deletion cost, sharing their node with more of the workload's pods
// (all: every pod of the Deployment), ready more recently (in powers of
// two of the time since), restarted more, created more recently.
func removalOrder(pods, all []*corev1.Pod, now time.Time) []*corev1.Pod {
	onNode := map[string]int{}
	for _, p := range all {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			onNode[p.Spec.NodeName]++
		}
	}
	phase := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	logRank := func(t time.Time) int64 {
		if d := now.Sub(t); d > 0 {
			return int64(math.Log2(float64(d)))
		}
		return -1
	}
	cost := func(p *corev1.Pod) int64 {
		c, _ := strconv.ParseInt(p.Annotations["controller.kubernetes.io/pod-deletion-cost"], 10, 32)
		return c
	}
	maxRestarts := func(p *corev1.Pod) int32 {
		var m int32
		for _, cs := range p.Status.ContainerStatuses {
			m = max(m, cs.RestartCount)
		}
		return m
	}
	readySince := func(p *corev1.Pod) time.Time {
		if c := podCondition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
		return time.Time{}
	}
	out := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if phase[a.Status.Phase] != phase[b.Status.Phase] {
			return phase[a.Status.Phase] < phase[b.Status.Phase]
		}
		ra, rb := !readySince(a).IsZero(), !readySince(b).IsZero()
		if ra != rb {
			return !ra
		}
		if ca, cb := cost(a), cost(b); ca != cb {
			return ca < cb
		}
		if na, nb := onNode[a.Spec.NodeName], onNode[b.Spec.NodeName]; na != nb {
			return na > nb
		}
		if ra && rb && !readySince(a).Equal(readySince(b)) {
			if d := logRank(readySince(a)) - logRank(readySince(b)); d != 0 {
				return d < 0
			}
			return a.UID < b.UID
		}
		if ma, mb := maxRestarts(a), maxRestarts(b); ma != mb {
			return ma > mb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			if d := logRank(a.CreationTimestamp.Time) - logRank(b.CreationTimestamp.Time); d != 0 {
				return d < 0
			}
			return a.UID < b.UID
		}
		return false
	})
	return out
}

// keepPartitioned keeps the output of the pod at ordinal ord of a
// StatefulSet whose partition the driver is about to lower to ord: the
// controller replaces it (unless it runs version already).
func (d *Driver) keepPartitioned(ctx context.Context, w driver.Workload, s *appsv1.StatefulSet, container, version string, ord int) {
	if d.keep.lines == 0 || !driver.KeepsOutput(ctx) {
		return
	}
	ps, err := d.cachedPods(ctx, w, s.Spec.Selector, "")
	if err != nil {
		d.log.Warn("could not find the pod about to be replaced, to keep its output", "statefulset", s.Namespace+"/"+s.Name, "err", err)
		return
	}
	p := podsByName(ownedBy(ps, s.UID))[s.Name+"-"+strconv.Itoa(ord)]
	if p != nil && podVersion(p.ObjectMeta, p.Spec, container) != version {
		d.keepOutput(ctx, p, container, "replaced with version "+version+" by the StatefulSet's controller (partition "+strconv.Itoa(ord)+")")
	}
}
