package kubernetes

import (
	"context"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// getDaemonSet is the DaemonSet w names, from the driver's cache: a
// DaemonSet's members are a thousand nodes, and each Start must not
// cost a request to read what the watch already brought. A cache a
// little behind the driver's own patch makes it patch again, the same.
func (d *Driver) getDaemonSet(ctx context.Context, w driver.Workload) (*appsv1.DaemonSet, error) {
	return cachedWorkload[appsv1.DaemonSet](ctx, d, w)
}

// daemonPods groups a DaemonSet's pods by node: of every node, or of
// node alone (one member's Start and Stop, which must not list a
// thousand pods each).
func (d *Driver) daemonPods(ctx context.Context, w driver.Workload, s *appsv1.DaemonSet, node string) (map[string][]*corev1.Pod, error) {
	ps, err := d.cachedPods(ctx, w, s.Spec.Selector, node)
	if err != nil {
		return nil, err
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range ownedBy(ps, s.UID) {
		if n := p.Spec.NodeName; n != "" {
			byNode[n] = append(byNode[n], p)
		}
	}
	return byNode, nil
}

// nodePod is the pod of a node that counts: one not being deleted if
// there is one.
func nodePod(ps []*corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	for _, p := range ps {
		if out == nil || (out.DeletionTimestamp != nil && p.DeletionTimestamp == nil) {
			out = p
		}
	}
	return out
}

// discoverDaemonSet lists one member per node that runs a pod of the
// DaemonSet, by node name.
func (d *Driver) discoverDaemonSet(ctx context.Context, w driver.Workload) ([]driver.Member, error) {
	s, err := d.getDaemonSet(ctx, w)
	if err != nil {
		return nil, err
	}
	byNode, err := d.daemonPods(ctx, w, s, "")
	if err != nil {
		return nil, err
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	ms := make([]driver.Member, 0, len(nodes))
	for _, n := range nodes {
		ms = append(ms, driver.Member{Name: s.Name + "." + n, Host: n, Address: nodePod(byNode[n]).Status.PodIP})
	}
	return ms, nil
}

// memberNode is the node of a DaemonSet member: its Host, or the part
// of its name after "<daemonset>.".
func memberNode(s *appsv1.DaemonSet, m driver.Member) string {
	if m.Host != "" {
		return m.Host
	}
	return strings.TrimPrefix(m.Name, s.Name+".")
}

func (d *Driver) observeDaemonSet(ctx context.Context, w driver.Workload, ms []driver.Member) ([]driver.Status, error) {
	s, err := d.getDaemonSet(ctx, w)
	if err != nil {
		return nil, err
	}
	container, err := containerOf(s.Spec.Template, w)
	if err != nil {
		return nil, err
	}
	byNode, err := d.daemonPods(ctx, w, s, "")
	if err != nil {
		return nil, err
	}
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		p := nodePod(byNode[memberNode(s, m)])
		if p == nil {
			out[i] = driver.Status{Detail: "no pod on node " + memberNode(s, m)}
			continue
		}
		out[i] = podStatus(p, container)
	}
	return out, nil
}

// startDaemonSet is startStatefulSet for the pod of one node.
func (d *Driver) startDaemonSet(ctx context.Context, w driver.Workload, m driver.Member, version, ref string) error {
	s, err := d.getDaemonSet(ctx, w)
	if err != nil {
		return err
	}
	container, err := containerOf(s.Spec.Template, w)
	if err != nil {
		return err
	}
	onDelete := s.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType
	if !onDelete || !templateCurrent(s.Spec.Template, container, version, ref) {
		spec := map[string]any{"template": templatePatch(container, version, ref), "updateStrategy": onDeletePatch}
		if !onDelete {
			if err := recordStrategy(ctx, kindDaemonSet, s.Namespace, s.Name, s.Spec.UpdateStrategy, string(s.Spec.UpdateStrategy.Type), "OnDelete",
				"ferry picks the order of the nodes"); err != nil {
				return err
			}
			d.log.Info("set the update strategy to OnDelete, so that ferry picks the order of the nodes",
				"daemonset", s.Namespace+"/"+s.Name, "was", string(s.Spec.UpdateStrategy.Type))
		}
		s, err = d.client.AppsV1().DaemonSets(s.Namespace).Patch(ctx, s.Name, strategic,
			mustJSON(map[string]any{"spec": spec}), metav1.PatchOptions{FieldManager: "ferry"})
		if err != nil {
			return apiError(ctx, err, "setting the image of %s to %s", workloadString(w), ref)
		}
		d.log.Info("set the pod template's image", "daemonset", s.Namespace+"/"+s.Name, "version", version, "image", ref)
	}
	if err := d.waitObserved(ctx, w, s.Generation, func(ctx context.Context) (int64, error) {
		s, err := d.getDaemonSet(ctx, w)
		if err != nil {
			return 0, err
		}
		return s.Status.ObservedGeneration, nil
	}); err != nil {
		return err
	}
	node := memberNode(s, m)
	byNode, err := d.daemonPods(ctx, w, s, node)
	if err != nil {
		return err
	}
	for _, p := range byNode[node] {
		if p.DeletionTimestamp == nil && podVersion(p.ObjectMeta, p.Spec, container) == version {
			return nil
		}
	}
	for _, p := range byNode[node] {
		if p.DeletionTimestamp != nil {
			continue
		}
		if w.Update == updateInPlace {
			if done, err := d.updateInPlace(ctx, w, s, p, container, version, ref); done || err != nil {
				return err
			}
		}
		d.keepOutput(ctx, p, container, "replaced with version "+version)
		if err := d.deletePod(ctx, p, "replace it with version "+version); err != nil {
			return err
		}
		if err := d.awaitGoing(ctx, w, s, p); err != nil {
			return err
		}
	}
	return nil
}

// awaitGoing waits until the driver's cache shows pod p, which it has
// just deleted, being deleted or gone: an observation after the start
// must not find it as it was, which would take the start again on a
// stale view and delete the pod a second time.
func (d *Driver) awaitGoing(ctx context.Context, w driver.Workload, s *appsv1.DaemonSet, p *corev1.Pod) error {
	uid := p.UID
	return d.awaitPod(ctx, w, s.Spec.Selector, p, "being deleted", func(cp *corev1.Pod) bool {
		return cp.UID != uid || cp.DeletionTimestamp != nil
	})
}

// awaitPod waits until the driver's cache of w's pods (sel) shows pod p
// gone or as done says: after a write of p the next observation must
// see.
func (d *Driver) awaitPod(ctx context.Context, w driver.Workload, sel *metav1.LabelSelector, p *corev1.Pod, what string, done func(*corev1.Pod) bool) error {
	st, err := d.podStore(ctx, w, sel)
	if err != nil {
		return err
	}
	key := p.Namespace + "/" + p.Name
	return d.awaitCache(ctx, "pod "+key+" "+what, func() (bool, error) {
		o, ok, err := st.GetByKey(key)
		if err != nil || !ok {
			return true, err
		}
		cp, _ := o.(*corev1.Pod)
		return cp == nil || done(cp), nil
	})
}

func (d *Driver) stopDaemonSet(ctx context.Context, w driver.Workload, m driver.Member) error {
	s, err := d.getDaemonSet(ctx, w)
	if err != nil {
		return err
	}
	byNode, err := d.daemonPods(ctx, w, s, memberNode(s, m))
	if err != nil {
		return err
	}
	for _, p := range byNode[memberNode(s, m)] {
		if p.DeletionTimestamp == nil {
			d.keepOutput(ctx, p, w.Container, "stopped (its controller starts it again)")
			if err := d.deletePod(ctx, p, "stop"); err != nil {
				return err
			}
		}
	}
	return nil
}
