package kubernetes

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

func (d *Driver) getDeployment(ctx context.Context, w driver.Workload) (*appsv1.Deployment, error) {
	api := d.client.AppsV1().Deployments(w.Namespace)
	return getWorkload(ctx, w, api.Get, func(ctx context.Context, o metav1.ListOptions) ([]appsv1.Deployment, error) {
		l, err := api.List(ctx, o)
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	})
}

// discoverDeployment lists the replica slots <name>.1 .. <name>.<n>.
func (d *Driver) discoverDeployment(ctx context.Context, w driver.Workload) ([]driver.Member, error) {
	dep, err := cachedWorkload[appsv1.Deployment](ctx, d, w)
	if err != nil {
		return nil, err
	}
	n := replicas(dep.Spec.Replicas)
	ms := make([]driver.Member, 0, n)
	for i := 1; i <= n; i++ {
		ms = append(ms, driver.Member{Name: dep.Name + "." + strconv.Itoa(i)})
	}
	return ms, nil
}

func slotOf(dep *appsv1.Deployment, m driver.Member) (int, error) {
	s, ok := strings.CutPrefix(m.Name, dep.Name+".")
	i, err := strconv.Atoi(s)
	if !ok || err != nil || i < 1 {
		return 0, fmt.Errorf("kubernetes driver: member %s is not a replica slot of Deployment %s/%s (%s.<1..n>)",
			m.Name, dep.Namespace, dep.Name, dep.Name)
	}
	return i, nil
}

// slotPods orders the Deployment's live pods the way slots are filled:
// Ready pods of the template's version, other Ready pods, then the pods
// not Ready (template's version first); by name within each.
func slotPods(ps []*corev1.Pod, container, target string) []*corev1.Pod {
	rank := func(p *corev1.Pod) int {
		r := 0
		if !podReady(p) {
			r += 2
		}
		if podVersion(p.ObjectMeta, p.Spec, container) != target {
			r++
		}
		return r
	}
	var out []*corev1.Pod
	for _, p := range ps {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// templateVersion is the version the Deployment's template runs.
func templateVersion(dep *appsv1.Deployment, container string) string {
	return podVersion(dep.Spec.Template.ObjectMeta, dep.Spec.Template.Spec, container)
}

func (d *Driver) observeDeployment(ctx context.Context, w driver.Workload, ms []driver.Member) ([]driver.Status, error) {
	dep, err := cachedWorkload[appsv1.Deployment](ctx, d, w)
	if err != nil {
		return nil, err
	}
	container, err := containerOf(dep.Spec.Template, w)
	if err != nil {
		return nil, err
	}
	ps, err := d.cachedPods(ctx, w, dep.Spec.Selector, "")
	if err != nil {
		return nil, err
	}
	slots := slotPods(ps, container, templateVersion(dep, container))
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		s, err := slotOf(dep, m)
		if err != nil {
			return nil, err
		}
		if s > len(slots) {
			out[i] = driver.Status{Detail: fmt.Sprintf("no pod for slot %d (%d pods)", s, len(slots))}
			continue
		}
		out[i] = podStatus(slots[s-1], container)
	}
	return out, nil
}

// newPods counts the live pods that run version.
func newPods(ps map[string]*corev1.Pod, container, version string) int {
	n := 0
	for _, p := range ps {
		if p.DeletionTimestamp == nil && podVersion(p.ObjectMeta, p.Spec, container) == version {
			n++
		}
	}
	return n
}

// rollingPatch is the strategy under which a gated rollout never has
// fewer Ready pods than replicas, and makes one new pod at a time.
var rollingPatch = map[string]any{"type": "RollingUpdate",
	"rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0}}

func isRollingOneByOne(s appsv1.DeploymentStrategy) bool {
	r := s.RollingUpdate
	return s.Type == appsv1.RollingUpdateDeploymentStrategyType && r != nil &&
		r.MaxSurge != nil && *r.MaxSurge == intstr.FromInt32(1) &&
		r.MaxUnavailable != nil && (*r.MaxUnavailable == intstr.FromInt32(0) || *r.MaxUnavailable == intstr.FromString("0%"))
}

// deploymentMember is what Start and Stop of slot member m start from:
// the Deployment, its container, m's slot number and the pods.
func (d *Driver) deploymentMember(ctx context.Context, w driver.Workload, m driver.Member) (*appsv1.Deployment, string, int, []*corev1.Pod, error) {
	dep, err := d.getDeployment(ctx, w)
	if err != nil {
		return nil, "", 0, nil, err
	}
	container, err := containerOf(dep.Spec.Template, w)
	if err != nil {
		return nil, "", 0, nil, err
	}
	slot, err := slotOf(dep, m)
	if err != nil {
		return nil, "", 0, nil, err
	}
	ps, err := d.listPods(ctx, w, dep.Spec.Selector)
	if err != nil {
		return nil, "", 0, nil, err
	}
	return dep, container, slot, ps, nil
}

// startDeployment lets the Deployment's rollout to ref run until slot
// pods run version, then pauses it: the gate between batches. It waits
// for those pods itself, within the action's deadline, so that nothing
// of the gate outlives the call (a crash cannot leave a goroutine's
// pause undone or never done). The pause, and the strategy ferry sets
// for a gated rollout, are journaled before they are made; the last
// slot resumes the rollout.
func (d *Driver) startDeployment(ctx context.Context, w driver.Workload, m driver.Member, version, ref string) error {
	dep, container, slot, ps, err := d.deploymentMember(ctx, w, m)
	if err != nil {
		return err
	}
	have := newPods(podsByName(ps), container, version)
	last := slot >= replicas(dep.Spec.Replicas)
	d.keepOutgoing(ctx, ps, container, version, slot-have, last, "replaced by the rollout to version "+version)
	key := dep.Namespace + "/" + dep.Name
	// The slots of one batch start together: the rollout is gated at
	// the highest slot of the Starts in progress, never below.
	leave := d.enterRollout(key, slot, last)
	defer leave()
	unlock := d.lockRollout(key)
	target, anyLast := d.rolloutTarget(key)
	spec := map[string]any{}
	if !templateCurrent(dep.Spec.Template, container, version, ref) {
		spec["template"] = templatePatch(container, version, ref)
	}
	if !isRollingOneByOne(dep.Spec.Strategy) {
		if err := recordStrategy(ctx, kindDeployment, dep.Namespace, dep.Name, dep.Spec.Strategy, string(dep.Spec.Strategy.Type),
			string(appsv1.RollingUpdateDeploymentStrategyType), "maxSurge 1, maxUnavailable 0: the rollout is gated one pod at a time"); err != nil {
			return err
		}
		spec["strategy"] = rollingPatch
		d.log.Info("set the strategy to RollingUpdate maxSurge 1 maxUnavailable 0, so that the rollout can be gated one pod at a time",
			"deployment", key)
	}
	if !last {
		if err := recordPause(ctx, dep.Namespace, dep.Name); err != nil {
			return err
		}
	}
	pause := !anyLast && have >= target
	if dep.Spec.Paused != pause {
		spec["paused"] = pause
	}
	if len(spec) > 0 {
		_, err = d.client.AppsV1().Deployments(dep.Namespace).Patch(ctx, dep.Name, strategic,
			mustJSON(map[string]any{"spec": spec}), metav1.PatchOptions{FieldManager: "ferry"})
		if err != nil {
			unlock()
			return apiError(ctx, err, "setting the image of %s to %s", workloadString(w), ref)
		}
		d.log.Info("let the rollout run", "deployment", key, "version", version, "slot", slot,
			"gate_at", target, "pods_on_version", have, "paused", pause)
	}
	unlock()
	if last {
		// The rollout runs to its end: its pause is no longer owed.
		return driver.JournalFrom(ctx).Done(ctx, pauseKey(dep.Namespace, dep.Name))
	}
	if have >= slot {
		return nil
	}
	return d.gate(ctx, w, dep, container, version, slot)
}

// rollout is what the Starts in progress on one Deployment want of its
// gate: the slots they start, whether one is its last.
type rollout struct {
	mu    sync.Mutex // held while deciding and patching the pause
	slots map[int]int
	last  int
}

func (d *Driver) enterRollout(key string, slot int, last bool) (leave func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.rollouts[key]
	if r == nil {
		r = &rollout{slots: map[int]int{}}
		d.rollouts[key] = r
	}
	r.slots[slot]++
	if last {
		r.last++
	}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if r.slots[slot]--; r.slots[slot] == 0 {
			delete(r.slots, slot)
		}
		if last {
			r.last--
		}
		if len(r.slots) == 0 && d.rollouts[key] == r {
			delete(d.rollouts, key)
		}
	}
}

func (d *Driver) lockRollout(key string) (unlock func()) {
	d.mu.Lock()
	r := d.rollouts[key]
	d.mu.Unlock()
	r.mu.Lock()
	return r.mu.Unlock
}

// rolloutTarget is the slot the gate holds at: the highest of the
// Starts in progress; and whether one of them is the last slot (then
// the rollout runs to its end).
func (d *Driver) rolloutTarget(key string) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.rollouts[key]
	target := 0
	for s := range r.slots {
		target = max(target, s)
	}
	return target, r.last > 0
}

// gate waits until slot pods of version exist, watching the
// Deployment's pods, then pauses its rollout. It reacts to the pods'
// creation, not their readiness: the controller creates the next pod
// only once this one is Ready, which leaves the gate a pod's start-up
// time to pause.
func (d *Driver) gate(ctx context.Context, w driver.Workload, dep *appsv1.Deployment, container, version string, slot int) error {
	log := d.log.With("deployment", dep.Namespace+"/"+dep.Name, "version", version, "slot", slot)
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return fmt.Errorf("kubernetes driver: %s: bad selector: %w", workloadString(w), err)
	}
	api := d.client.CoreV1().Pods(dep.Namespace)
	reached := func(pods map[string]*corev1.Pod) bool { return newPods(pods, container, version) >= slot }
	for ctx.Err() == nil {
		l, err := api.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			log.Warn("rollout gate: listing pods", "err", err)
			sleep(ctx, d.poll)
			continue
		}
		pods := podsByName(pointers(l.Items))
		done := reached(pods)
		if !done {
			wi, err := api.Watch(ctx, metav1.ListOptions{LabelSelector: sel.String(), ResourceVersion: l.ResourceVersion})
			if err != nil {
				log.Warn("rollout gate: watching pods", "err", err)
				sleep(ctx, d.poll)
				continue
			}
			for ev := range wi.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					break // an error event: list again
				}
				if ev.Type == watch.Deleted {
					delete(pods, p.Name)
				} else {
					pods[p.Name] = p
				}
				if done = reached(pods); done {
					break
				}
			}
			wi.Stop()
		}
		if !done {
			continue
		}
		key := dep.Namespace + "/" + dep.Name
		unlock := d.lockRollout(key)
		target, anyLast := d.rolloutTarget(key)
		if anyLast || newPods(pods, container, version) < target {
			// A Start of a higher slot (or the last) in the same batch
			// holds the gate further on.
			unlock()
			return nil
		}
		for ctx.Err() == nil {
			_, err := d.client.AppsV1().Deployments(dep.Namespace).Patch(ctx, dep.Name, types.MergePatchType,
				[]byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{FieldManager: "ferry"})
			if err == nil {
				unlock()
				log.Info("paused the rollout at its gate", "pods_on_version", target)
				return nil
			}
			log.Warn("rollout gate: pausing", "err", err)
			sleep(ctx, d.poll)
		}
		unlock()
	}
	return fmt.Errorf("kubernetes driver: %s: the rollout's gate at %d pods of %s: %w (the rollout runs on unpaused until ferry's next step)",
		workloadString(w), slot, version, ctx.Err())
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// stopDeployment deletes the pod in the member's slot; the ReplicaSet
// replaces it.
func (d *Driver) stopDeployment(ctx context.Context, w driver.Workload, m driver.Member) error {
	dep, container, slot, ps, err := d.deploymentMember(ctx, w, m)
	if err != nil {
		return err
	}
	slots := slotPods(ps, container, templateVersion(dep, container))
	if slot > len(slots) {
		return nil
	}
	d.keepOutput(ctx, slots[slot-1], container, "stopped (its controller starts it again)")
	return d.deletePod(ctx, slots[slot-1], "stop")
}
