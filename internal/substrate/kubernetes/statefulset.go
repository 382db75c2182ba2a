package kubernetes

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

func (d *Driver) getStatefulSet(ctx context.Context, w driver.Workload) (*appsv1.StatefulSet, error) {
	api := d.client.AppsV1().StatefulSets(w.Namespace)
	return getWorkload(ctx, w, api.Get, func(ctx context.Context, o metav1.ListOptions) ([]appsv1.StatefulSet, error) {
		l, err := api.List(ctx, o)
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	})
}

func replicas(r *int32) int {
	if r == nil {
		return 1
	}
	return int(*r)
}

// discoverStatefulSet lists the pods name-(replicas-1) .. name-0,
// highest ordinal first (the order Kubernetes' own rolling update takes,
// which lets ferry roll them with a partition), with the node and IP of
// those that exist.
func (d *Driver) discoverStatefulSet(ctx context.Context, w driver.Workload) ([]driver.Member, error) {
	s, err := cachedWorkload[appsv1.StatefulSet](ctx, d, w)
	if err != nil {
		return nil, err
	}
	ps, err := d.cachedPods(ctx, w, s.Spec.Selector, "")
	if err != nil {
		return nil, err
	}
	byName := podsByName(ownedBy(ps, s.UID))
	start, end := ordinals(s)
	var ms []driver.Member
	for i := end - 1; i >= start; i-- {
		m := driver.Member{Name: s.Name + "-" + strconv.Itoa(i)}
		if p, ok := byName[m.Name]; ok {
			m.Host, m.Address = p.Spec.NodeName, p.Status.PodIP
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// ordinals is the range [start, end) of a StatefulSet's ordinals.
func ordinals(s *appsv1.StatefulSet) (start, end int) {
	if s.Spec.Ordinals != nil {
		start = int(s.Spec.Ordinals.Start)
	}
	return start, start + replicas(s.Spec.Replicas)
}

func podsByName(ps []*corev1.Pod) map[string]*corev1.Pod {
	m := make(map[string]*corev1.Pod, len(ps))
	for _, p := range ps {
		m[p.Name] = p
	}
	return m
}

func (d *Driver) observeStatefulSet(ctx context.Context, w driver.Workload, ms []driver.Member) ([]driver.Status, error) {
	s, err := cachedWorkload[appsv1.StatefulSet](ctx, d, w)
	if err != nil {
		return nil, err
	}
	container, err := containerOf(s.Spec.Template, w)
	if err != nil {
		return nil, err
	}
	ps, err := d.cachedPods(ctx, w, s.Spec.Selector, "")
	if err != nil {
		return nil, err
	}
	byName := podsByName(ownedBy(ps, s.UID))
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		p, ok := byName[m.Name]
		if !ok {
			out[i] = driver.Status{Detail: "no pod"}
			continue
		}
		out[i] = podStatus(p, container)
	}
	return out, nil
}

// onDeletePatch sets the update strategy OnDelete: the controller then
// replaces no pod by itself, and ferry deletes them in its own order.
// (A RollingUpdate's parameters must go with it.)
var onDeletePatch = map[string]any{"type": "OnDelete", "rollingUpdate": nil}

// How ferry rolls a StatefulSet (the Set of its strategy's journaled
// change, which its undo compares with what it finds).
const (
	// setPartition: RollingUpdate with a partition at the lowest
	// ordinal ferry has moved, so Kubernetes replaces exactly those
	// pods, and a pod below the partition that is recreated (deleted
	// by hand, evicted) comes back on the old template.
	setPartition = "RollingUpdate partition"
	// setOnDelete: ferry deletes each pod itself, in any order; a pod
	// recreated meanwhile takes the new template.
	setOnDelete = "OnDelete"
)

// ordinalOf is the ordinal of StatefulSet member m (<name>-<ordinal>).
func ordinalOf(s *appsv1.StatefulSet, m driver.Member) (int, error) {
	o, ok := strings.CutPrefix(m.Name, s.Name+"-")
	i, err := strconv.Atoi(o)
	if !ok || err != nil || i < 0 {
		return 0, fmt.Errorf("kubernetes driver: member %s is not a pod of StatefulSet %s/%s (%s-<ordinal>)", m.Name, s.Namespace, s.Name, s.Name)
	}
	return i, nil
}

// partitionOf is the partition of a StatefulSet's RollingUpdate, and
// whether it has that strategy.
func partitionOf(s *appsv1.StatefulSet) (int, bool) {
	if s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType && s.Spec.UpdateStrategy.Type != "" {
		return 0, false
	}
	if r := s.Spec.UpdateStrategy.RollingUpdate; r != nil && r.Partition != nil {
		return int(*r.Partition), true
	}
	return 0, true
}

// descendingFrom says whether every pod above ordinal ord already runs
// version or is being started now: then a partition at ord moves no
// pod ferry has not chosen.
func (d *Driver) descendingFrom(ctx context.Context, w driver.Workload, s *appsv1.StatefulSet, container, version string, ord int) (bool, error) {
	ps, err := d.cachedPods(ctx, w, s.Spec.Selector, "")
	if err != nil {
		return false, err
	}
	byName := podsByName(ownedBy(ps, s.UID))
	_, end := ordinals(s)
	d.mu.Lock() // the Starts in progress (rollout.slots) change under it
	defer d.mu.Unlock()
	var starting map[int]int
	if r := d.rollouts[statefulSetKey(s)]; r != nil {
		starting = r.slots
	}
	for i := ord + 1; i < end; i++ {
		p, ok := byName[s.Name+"-"+strconv.Itoa(i)]
		if starting[i] == 0 && (!ok || podVersion(p.ObjectMeta, p.Spec, container) != version) {
			return false, nil
		}
	}
	return true, nil
}

func statefulSetKey(s *appsv1.StatefulSet) string { return "StatefulSet/" + s.Namespace + "/" + s.Name }

// startStatefulSet moves one pod to ref. A StatefulSet that Kubernetes
// rolls itself (RollingUpdate) is moved with a partition while ferry
// takes its pods highest ordinal first (its members' default order):
// the template and a partition at m's ordinal are written together, and
// Kubernetes replaces m's pod; nothing it recreates below the partition
// takes the new template before its turn. A Start out of that order
// (or an OnDelete StatefulSet) sets OnDelete instead, says so, and
// deletes the pod itself once the controller has taken the template in.
func (d *Driver) startStatefulSet(ctx context.Context, w driver.Workload, m driver.Member, version, ref string) error {
	s, err := d.getStatefulSet(ctx, w)
	if err != nil {
		return err
	}
	container, err := containerOf(s.Spec.Template, w)
	if err != nil {
		return err
	}
	ord, err := ordinalOf(s, m)
	if err != nil {
		return err
	}
	leave := d.enterRollout(statefulSetKey(s), ord, false)
	defer leave()
	current := templateCurrent(s.Spec.Template, container, version, ref)
	partition, rolling := partitionOf(s)
	if rolling && current && partition <= ord {
		return nil // Kubernetes replaces it (or has): it is above the partition
	}
	// Partition while Kubernetes rolls it and ferry's order allows:
	// from the start of the phase, or while ferry's partition holds.
	if rolling {
		descending, err := d.descendingFrom(ctx, w, s, container, version, ord)
		if err != nil {
			return err
		}
		if descending {
			return d.startPartitioned(ctx, w, s, container, version, ref, ord, current)
		}
	}
	onDelete := s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
	if !onDelete || !current {
		spec := map[string]any{"template": templatePatch(container, version, ref), "updateStrategy": onDeletePatch}
		if !onDelete {
			wasType := string(s.Spec.UpdateStrategy.Type)
			why := "ferry's order is not highest ordinal first: ferry deletes the pods itself, and a pod recreated meanwhile takes the new template"
			if current {
				// ferry's own partition given up mid-phase: its journaled
				// change (setPartition, recorded first) stays, and its
				// undo accepts OnDelete.
				why = fmt.Sprintf("member %s moved out of the descending order: %s", m.Name, why)
			}
			if err := recordStrategy(ctx, kindStatefulSet, s.Namespace, s.Name, s.Spec.UpdateStrategy, wasType, setOnDelete, why); err != nil {
				return err
			}
			d.log.Info("set the update strategy to OnDelete", "statefulset", s.Namespace+"/"+s.Name, "was", wasType, "why", why)
		}
		s, err = d.client.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, strategic,
			mustJSON(map[string]any{"spec": spec}), metav1.PatchOptions{FieldManager: "ferry"})
		if err != nil {
			return apiError(ctx, err, "setting the image of %s to %s", workloadString(w), ref)
		}
		d.log.Info("set the pod template's image", "statefulset", s.Namespace+"/"+s.Name, "version", version, "image", ref)
	}
	// Until the controller has seen the new template, a pod deleted now
	// could come back on the old one.
	if err := d.waitStatefulSet(ctx, w, s); err != nil {
		return err
	}
	p, err := d.client.CoreV1().Pods(s.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the controller creates it from the new template
	}
	if err != nil {
		return apiError(ctx, err, "getting pod %s/%s", s.Namespace, m.Name)
	}
	if p.DeletionTimestamp != nil || podVersion(p.ObjectMeta, p.Spec, container) == version {
		return nil
	}
	d.keepOutput(ctx, p, container, "replaced with version "+version)
	return d.deletePod(ctx, p, "replace it with version "+version)
}

// startPartitioned lowers the partition of a RollingUpdate StatefulSet
// to ord (with the template, at the phase's first Start): the
// controller then replaces the pods from ord up that do not run the new
// revision, which are m's alone.
func (d *Driver) startPartitioned(ctx context.Context, w driver.Workload, s *appsv1.StatefulSet, container, version, ref string, ord int, current bool) error {
	spec := map[string]any{"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"partition": ord}}}
	d.keepPartitioned(ctx, w, s, container, version, ord)
	if !current {
		if err := recordStrategy(ctx, kindStatefulSet, s.Namespace, s.Name, s.Spec.UpdateStrategy, string(s.Spec.UpdateStrategy.Type), setPartition,
			"ferry takes the pods highest ordinal first: Kubernetes replaces the pods from the partition up, and a pod recreated below it keeps the old template"); err != nil {
			return err
		}
		spec["template"] = templatePatch(container, version, ref)
	}
	s, err := d.client.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, strategic,
		mustJSON(map[string]any{"spec": spec}), metav1.PatchOptions{FieldManager: "ferry"})
	if err != nil {
		return apiError(ctx, err, "setting the partition of %s to %d (version %s)", workloadString(w), ord, version)
	}
	d.log.Info("set the rolling update's partition", "statefulset", s.Namespace+"/"+s.Name, "partition", ord, "version", version, "image", ref)
	return d.waitStatefulSet(ctx, w, s)
}

// waitStatefulSet waits until the StatefulSet's controller has seen
// s's generation.
func (d *Driver) waitStatefulSet(ctx context.Context, w driver.Workload, s *appsv1.StatefulSet) error {
	return d.waitObserved(ctx, w, s.Generation, func(ctx context.Context) (int64, error) {
		s, err := d.client.AppsV1().StatefulSets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return s.Status.ObservedGeneration, nil
	})
}

// waitObserved waits until a controller reports (status.observedGeneration)
// that it has seen generation gen of its object.
func (d *Driver) waitObserved(ctx context.Context, w driver.Workload, gen int64, observed func(context.Context) (int64, error)) error {
	return d.waitFor(ctx, d.syncTimeout, fmt.Sprintf("the controller of %s to see generation %d", workloadString(w), gen),
		func(ctx context.Context) (bool, string, error) {
			g, err := observed(ctx)
			if err != nil {
				return false, "", apiError(ctx, err, "getting %s", workloadString(w))
			}
			return g >= gen, fmt.Sprintf("observed generation %d", g), nil
		})
}

func (d *Driver) stopStatefulSet(ctx context.Context, w driver.Workload, m driver.Member) error {
	p, err := d.client.CoreV1().Pods(w.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiError(ctx, err, "getting pod %s/%s", w.Namespace, m.Name)
	}
	if p.DeletionTimestamp != nil {
		return nil
	}
	d.keepOutput(ctx, p, w.Container, "stopped (its controller starts it again)")
	return d.deletePod(ctx, p, "stop")
}
