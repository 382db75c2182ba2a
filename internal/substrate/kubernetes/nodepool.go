package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/drain"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// nodeVersion is the kubelet version a node reports, without the "v".
func nodeVersion(n *corev1.Node) string {
	return strings.TrimPrefix(n.Status.NodeInfo.KubeletVersion, "v")
}

func nodeReady(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func nodeStatus(n *corev1.Node) driver.Status {
	st := driver.Status{Version: nodeVersion(n)}
	r := nodeReady(n)
	switch {
	case n.DeletionTimestamp != nil:
		st.Detail = "being deleted"
	case r == nil:
		st.Detail = "no Ready condition yet"
	case r.Status != corev1.ConditionTrue:
		st.Detail = "not ready"
		if r.Reason != "" {
			st.Detail += ": " + r.Reason
		}
		if r.Message != "" {
			st.Detail += ": " + r.Message
		}
	default:
		st.Running = true
	}
	if r != nil {
		st.Since = r.LastTransitionTime.Time
	}
	if n.Spec.Unschedulable {
		if st.Detail != "" {
			st.Detail += "; "
		}
		st.Detail += "cordoned"
	}
	return st
}

// discoverNodePool lists the nodes of the selector by name.
func (d *Driver) discoverNodePool(ctx context.Context, w driver.Workload) ([]driver.Member, error) {
	if w.Selector == "" {
		return nil, fmt.Errorf("kubernetes driver: a NodePool needs a node selector (all nodes: say so with a label they share)")
	}
	ns, err := d.cachedNodes(ctx, w)
	if err != nil {
		return nil, err
	}
	ms := make([]driver.Member, 0, len(ns))
	for _, n := range ns {
		m := driver.Member{Name: n.Name, Host: n.Name}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				m.Address = a.Address
				break
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (d *Driver) observeNodePool(ctx context.Context, w driver.Workload, ms []driver.Member) ([]driver.Status, error) {
	ns, err := d.cachedNodes(ctx, w)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*corev1.Node, len(ns))
	for i := range ns {
		byName[ns[i].Name] = &ns[i]
	}
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		n, ok := byName[m.Name]
		if !ok {
			out[i] = driver.Status{Detail: "no node " + m.Name + " matching " + w.Selector}
			continue
		}
		out[i] = nodeStatus(n)
	}
	return out, nil
}

func (d *Driver) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := d.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, apiError(ctx, err, "getting node %s", name)
	}
	return n, nil
}

// startNode upgrades a node: cordon, drain, the workload's Upgrade
// command, wait for the new kubelet version and Ready, uncordon. Each
// step is done again after a crash; a node already on the version and
// Ready is only uncordoned.
func (d *Driver) startNode(ctx context.Context, w driver.Workload, m driver.Member, a driver.Artifact) error {
	n, err := d.getNode(ctx, m.Name)
	if err != nil {
		return err
	}
	upgraded := func(n *corev1.Node) bool {
		r := nodeReady(n)
		return nodeVersion(n) == strings.TrimPrefix(a.Version, "v") && r != nil && r.Status == corev1.ConditionTrue
	}
	if !upgraded(n) {
		if len(w.Upgrade) == 0 {
			return fmt.Errorf("kubernetes driver: %s has no upgrade command for node %s", workloadString(w), m.Name)
		}
		if err := d.cordonDrain(ctx, w, n); err != nil {
			return err
		}
		if err := d.runUpgrade(ctx, w, m.Name, a.Version); err != nil {
			return err
		}
		err := d.waitFor(ctx, 0, fmt.Sprintf("node %s to report kubelet %s and be Ready", m.Name, a.Version),
			func(ctx context.Context) (bool, string, error) {
				n, err = d.getNode(ctx, m.Name)
				if err != nil {
					if errors.Is(err, driver.ErrUnreachable) {
						return false, err.Error(), nil // the API server may be upgraded too
					}
					return false, "", err
				}
				st := nodeStatus(n)
				return upgraded(n), fmt.Sprintf("version %s, %s", st.Version, st.Detail), nil
			})
		if err != nil {
			return err
		}
		d.log.Info("node upgraded", "node", m.Name, "version", a.Version)
	}
	if err := d.cordon(ctx, n, false); err != nil {
		return err
	}
	// The engine observes the node next, from the cache: it must see
	// the uncordon just made.
	if err := d.awaitCache(ctx, "node "+n.Name+" uncordoned", func() (bool, error) {
		ns, err := d.cachedNodes(ctx, w)
		i := slices.IndexFunc(ns, func(c corev1.Node) bool { return c.Name == n.Name })
		return err == nil && i >= 0 && !ns[i].Spec.Unschedulable, err
	}); err != nil {
		return err
	}
	// Uncordoned by its own step: the journal's undo is not owed.
	return driver.JournalFrom(ctx).Done(ctx, cordonKey(n.Name))
}

func (d *Driver) stopNode(ctx context.Context, w driver.Workload, m driver.Member) error {
	n, err := d.getNode(ctx, m.Name)
	if err != nil {
		return err
	}
	return d.cordonDrain(ctx, w, n)
}

func (d *Driver) cordon(ctx context.Context, n *corev1.Node, on bool) error {
	h := &drain.Helper{Ctx: ctx, Client: d.client}
	if err := drain.RunCordonOrUncordon(h, n, on); err != nil {
		what := "uncordoning"
		if on {
			what = "cordoning"
		}
		return apiError(ctx, err, "%s node %s", what, n.Name)
	}
	return nil
}

// cordonDrain cordons the node and evicts its pods (DaemonSets' pods
// stay; emptyDir data is lost, as on any reschedule). Evictions that a
// PodDisruptionBudget refuses are retried until w.DrainTimeout; the
// budgets that refuse are logged and named in the error.
func (d *Driver) cordonDrain(ctx context.Context, w driver.Workload, n *corev1.Node) error {
	if !n.Spec.Unschedulable {
		if err := recordCordon(ctx, n.Name); err != nil {
			return err
		}
		d.log.Info("cordoning node", "node", n.Name)
	}
	if err := d.cordon(ctx, n, true); err != nil {
		return err
	}
	rec := &drainRecorder{d: d, ctx: ctx, node: n.Name, attempts: map[string]int{}, blockers: map[string]string{}}
	h := &drain.Helper{
		Ctx:                  ctx,
		Client:               d.client,
		Force:                false,
		GracePeriodSeconds:   -1,
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   true,
		Timeout:              w.DrainTimeout,
		EvictErrorRetryDelay: d.evictRetry,
		Out:                  rec.writer(false),
		ErrOut:               rec.writer(true),
		OnPodDeletionOrEvictionStarted: func(p *corev1.Pod, eviction bool) {
			rec.started(p)
		},
	}
	began := time.Now()
	if err := drain.RunNodeDrain(h, n.Name); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("kubernetes driver: draining node %s: %w", n.Name, ctx.Err())
		}
		if b := rec.blocked(); b != "" {
			return fmt.Errorf("kubernetes driver: draining node %s (timeout %s): blocked by %s: %w", n.Name, w.DrainTimeout, b, err)
		}
		return fmt.Errorf("kubernetes driver: draining node %s (timeout %s): %w", n.Name, w.DrainTimeout, err)
	}
	d.log.Info("drained node", "node", n.Name, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// drainRecorder turns the drain helper's output into log lines and
// finds which PodDisruptionBudgets refuse evictions: the helper calls
// started again for a pod whose eviction was refused.
type drainRecorder struct {
	d        *Driver
	ctx      context.Context
	node     string
	mu       sync.Mutex
	attempts map[string]int    // pod -> eviction attempts
	blockers map[string]string // pod -> budgets refusing it
}

func (r *drainRecorder) started(p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	r.mu.Lock()
	r.attempts[key]++
	n := r.attempts[key]
	r.mu.Unlock()
	if n < 2 || (n-2)%10 != 0 { // explain the first refusal, then every tenth
		return
	}
	b := r.d.budgetsOf(r.ctx, p)
	r.mu.Lock()
	r.blockers[key] = b
	r.mu.Unlock()
	r.d.log.Warn("drain: eviction refused; retrying until the drain timeout", "node", r.node, "pod", key,
		"attempt", n, "blocked_by", b)
}

func (r *drainRecorder) blocked() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for pod, b := range r.blockers {
		out = append(out, fmt.Sprintf("%s for pod %s", b, pod))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

type logWriter struct {
	r   *drainRecorder
	err bool
}

func (r *drainRecorder) writer(isErr bool) *logWriter { return &logWriter{r: r, err: isErr} }

func (w *logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		// The helper's warning that DaemonSets' pods stay is what a
		// drain of a node does (they are the node's own): not a warning
		// for the operator.
		if w.err && !strings.HasPrefix(line, "WARNING: ignoring DaemonSet-managed Pods") {
			w.r.d.log.Warn("drain: "+line, "node", w.r.node)
		} else {
			w.r.d.log.Info("drain: "+line, "node", w.r.node)
		}
	}
	return len(b), nil
}

// budgetsOf names the PodDisruptionBudgets that select p, with their
// counts: the reason its eviction is refused.
func (d *Driver) budgetsOf(ctx context.Context, p *corev1.Pod) string {
	l, err := d.client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "a PodDisruptionBudget (listing them: " + err.Error() + ")"
	}
	var out []string
	for _, b := range l.Items {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		out = append(out, fmt.Sprintf("PodDisruptionBudget %s/%s (%d healthy, %d needed, %d disruptions allowed)",
			b.Namespace, b.Name, b.Status.CurrentHealthy, b.Status.DesiredHealthy, b.Status.DisruptionsAllowed))
	}
	if len(out) == 0 {
		return "no PodDisruptionBudget selecting it (the API server refused the eviction)"
	}
	return strings.Join(out, ", ")
}

// runUpgrade runs the workload's Upgrade argv for a node: no shell,
// FERRY_NODE and FERRY_VERSION added to ferry's environment, its output
// kept for the error.
func (d *Driver) runUpgrade(ctx context.Context, w driver.Workload, node, version string) error {
	cmd := exec.CommandContext(ctx, w.Upgrade[0], w.Upgrade[1:]...)
	cmd.Env = append(os.Environ(), "FERRY_NODE="+node, "FERRY_VERSION="+version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second // a child that keeps the output open
	began := time.Now()
	d.log.Info("running the node's upgrade", "node", node, "version", version, "argv", w.Upgrade)
	if err := cmd.Run(); err != nil {
		o := strings.TrimSpace(out.String())
		if len(o) > 4096 {
			o = "..." + o[len(o)-4096:]
		}
		return fmt.Errorf("kubernetes driver: upgrade of node %s to %s (%s): %w: %s", node, version, strings.Join(w.Upgrade, " "), err, o)
	}
	d.log.Info("upgrade command done", "node", node, "took", time.Since(began).Round(time.Millisecond))
	return nil
}
