package kubernetes

import (
	"context"
	"fmt"
	"strconv"

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

// discoverStatefulSet lists the pods name-0 .. name-(replicas-1), by
// ordinal, with the node and IP of those that exist.
func (d *Driver) discoverStatefulSet(ctx context.Context, w driver.Workload) ([]driver.Member, error) {
	s, err := d.getStatefulSet(ctx, w)
	if err != nil {
		return nil, err
	}
	ps, err := d.listPods(ctx, w, s.Spec.Selector)
	if err != nil {
		return nil, err
	}
	byName := podsByName(ownedBy(ps, s.UID))
	start := 0
	if s.Spec.Ordinals != nil {
		start = int(s.Spec.Ordinals.Start)
	}
	var ms []driver.Member
	for i := start; i < start+replicas(s.Spec.Replicas); i++ {
		m := driver.Member{Name: s.Name + "-" + strconv.Itoa(i)}
		if p, ok := byName[m.Name]; ok {
			m.Host, m.Address = p.Spec.NodeName, p.Status.PodIP
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func podsByName(ps []corev1.Pod) map[string]*corev1.Pod {
	m := make(map[string]*corev1.Pod, len(ps))
	for i := range ps {
		m[ps[i].Name] = &ps[i]
	}
	return m
}

func (d *Driver) observeStatefulSet(ctx context.Context, w driver.Workload, ms []driver.Member) ([]driver.Status, error) {
	s, err := d.getStatefulSet(ctx, w)
	if err != nil {
		return nil, err
	}
	container, err := containerOf(s.Spec.Template, w)
	if err != nil {
		return nil, err
	}
	ps, err := d.listPods(ctx, w, s.Spec.Selector)
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

// startStatefulSet writes ref into the template (with the strategy
// OnDelete), waits for the controller to take the template in, and
// deletes the member's pod if it runs another version: the controller
// recreates it from the new template.
func (d *Driver) startStatefulSet(ctx context.Context, w driver.Workload, m driver.Member, version, ref string) error {
	s, err := d.getStatefulSet(ctx, w)
	if err != nil {
		return err
	}
	container, err := containerOf(s.Spec.Template, w)
	if err != nil {
		return err
	}
	onDelete := s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
	if !onDelete || !templateCurrent(s.Spec.Template, container, version, ref) {
		spec := map[string]any{"template": templatePatch(container, version, ref), "updateStrategy": onDeletePatch}
		if !onDelete {
			if err := recordStrategy(ctx, kindStatefulSet, s.Namespace, s.Name, s.Spec.UpdateStrategy, string(s.Spec.UpdateStrategy.Type), "OnDelete",
				"ferry picks the order of the pods"); err != nil {
				return err
			}
			d.log.Info("set the update strategy to OnDelete, so that ferry picks the order of the pods",
				"statefulset", s.Namespace+"/"+s.Name, "was", string(s.Spec.UpdateStrategy.Type))
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
	if err := d.waitObserved(ctx, w, s.Generation, func(ctx context.Context) (int64, error) {
		s, err := d.client.AppsV1().StatefulSets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return s.Status.ObservedGeneration, nil
	}); err != nil {
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
	return d.deletePod(ctx, p, "replace it with version "+version)
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
	return d.deletePod(ctx, p, "stop")
}
