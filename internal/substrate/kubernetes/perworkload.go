package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// A component of many workloads: Rook runs one Deployment per mon, per
// manager and per OSD, each with one pod pinned to its node. With
// per: workload, each Deployment the selector matches is one member,
// named after it; its own controller replaces its pod when ferry writes
// the new image into its template, under the Deployment's own strategy
// (Recreate for an OSD: a new OSD process must not start while the old
// one holds the disk).

// perWorkload is config.PerWorkload (repeated, as the kinds are).
const perWorkload = "workload"

// AnnotationStoppedReplicas is written on a Deployment that is one
// member (per: workload) while ferry has it stopped: its replicas as
// they were, which its Start puts back with the new template.
const AnnotationStoppedReplicas = "ferry.dev/stopped-replicas"

// one is w as the one Deployment name of it, for what names it.
func one(w driver.Workload, name string) driver.Workload {
	w.Name, w.Selector, w.Per = name, "", ""
	return w
}

// deploymentsByName is the Deployments w's selector matches, from the
// driver's cache, by name.
func (d *Driver) deploymentsByName(ctx context.Context, w driver.Workload) (map[string]*appsv1.Deployment, error) {
	deps, err := cachedObjects[appsv1.Deployment](ctx, d, w)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*appsv1.Deployment, len(deps))
	for _, dep := range deps {
		out[dep.Name] = dep
	}
	return out, nil
}

// deploymentPods is a Deployment's pods, from the cache of its pod
// selector: those whose controller is one of its ReplicaSets
// (<deployment>-<pod-template-hash>), so that two Deployments whose
// selectors overlap never share a pod.
func (d *Driver) deploymentPods(ctx context.Context, w driver.Workload, dep *appsv1.Deployment) ([]*corev1.Pod, error) {
	ps, err := d.cachedPods(ctx, w, dep.Spec.Selector, "")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ps, func(p *corev1.Pod) bool {
		ref := metav1.GetControllerOf(p)
		return ref == nil || ref.Kind != "ReplicaSet" || ref.Name != dep.Name+"-"+p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}), nil
}

// rankPods orders a member's live pods (those not being deleted) by
// how they count for it: Ready pods of the template's version, then
// those not Ready, then the other versions' (Ready first); by name
// within each.
func rankPods(ps []*corev1.Pod, container, target string) []*corev1.Pod {
	rank := func(p *corev1.Pod) int {
		r := 0
		if podVersion(p.ObjectMeta, p.Spec, container) != target {
			r += 2
		}
		if !podReady(p) {
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

// discoverPerWorkload lists one member per Deployment w's selector
// matches, by name: its host is its pod's node (or, with no pod now,
// the node its template is pinned to by kubernetes.io/hostname, as
// Rook pins its mons and OSDs), its address the pod's IP.
func (d *Driver) discoverPerWorkload(ctx context.Context, w driver.Workload) ([]driver.Member, error) {
	deps, err := cachedObjects[appsv1.Deployment](ctx, d, w)
	if err != nil {
		return nil, err
	}
	ms := make([]driver.Member, 0, len(deps))
	for _, dep := range deps {
		m := driver.Member{Name: dep.Name}
		ps, err := d.deploymentPods(ctx, w, dep)
		if err != nil {
			return nil, err
		}
		container, err := containerOf(dep.Spec.Template, one(w, dep.Name))
		if err != nil {
			return nil, err
		}
		if live := rankPods(ps, container, templateVersion(dep, container)); len(live) > 0 {
			m.Host, m.Address = live[0].Spec.NodeName, live[0].Status.PodIP
		}
		if m.Host == "" {
			m.Host = dep.Spec.Template.Spec.NodeSelector[corev1.LabelHostname]
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (d *Driver) observePerWorkload(ctx context.Context, w driver.Workload, ms []driver.Member) ([]driver.Status, error) {
	deps, err := d.deploymentsByName(ctx, w)
	if err != nil {
		return nil, err
	}
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		dep, ok := deps[m.Name]
		if !ok {
			// Deleted (or relabelled) since it was found: down, as a
			// DaemonSet's member is whose node went.
			out[i] = driver.Status{Detail: fmt.Sprintf("no Deployment %s/%s matches %q", w.Namespace, m.Name, w.Selector)}
			continue
		}
		container, err := containerOf(dep.Spec.Template, one(w, dep.Name))
		if err != nil {
			return nil, err
		}
		ps, err := d.deploymentPods(ctx, w, dep)
		if err != nil {
			return nil, err
		}
		out[i] = deploymentStatus(dep, container, ps)
	}
	return out, nil
}

// deploymentStatus is a one-member Deployment's status: Running once
// as many pods as it has replicas are Ready on its template's version
// (since the last of them became Ready); while its controller rolls a
// new template out, down, with what it waits for.
func deploymentStatus(dep *appsv1.Deployment, container string, ps []*corev1.Pod) driver.Status {
	target := templateVersion(dep, container)
	want := replicas(dep.Spec.Replicas)
	if want == 0 {
		st := driver.Status{Version: target, Detail: "scaled to 0 replicas"}
		if n := dep.Annotations[AnnotationStoppedReplicas]; n != "" {
			st.Detail = "stopped by ferry: scaled to 0 replicas, " + n + " again at its start"
		}
		return st
	}
	live := rankPods(ps, container, target)
	ready := 0
	for _, p := range live {
		if podReady(p) && podVersion(p.ObjectMeta, p.Spec, container) == target {
			ready++
		}
	}
	if ready >= want {
		st := podStatus(live[0], container)
		for _, p := range live[1:want] {
			s := podStatus(p, container)
			st.Restarts += s.Restarts
			if s.Since.After(st.Since) {
				st.Since = s.Since
			}
		}
		return st
	}
	rolling := fmt.Sprintf("%d of %d pods Ready on %s", ready, want, orNone(target))
	if dep.Spec.Paused {
		rolling += ", its rollout paused (spec.paused)"
	}
	if len(live) == 0 {
		return driver.Status{Version: target, Detail: rolling + ": no pod (its controller creates one)"}
	}
	st := podStatus(live[0], container)
	st.Running = false
	if st.Detail == "" {
		// A pod of another version serves while the new one is made.
		st.Detail = fmt.Sprintf("runs %s on %s", orNone(st.Version), live[0].Spec.NodeName)
	}
	st.Detail = rolling + ": " + st.Detail
	return st
}

// startPerWorkload writes ref into the member's Deployment's template
// (and, if ferry stopped it, its replicas back), then lets its
// controller replace its pod under its own strategy. It returns once
// the driver's cache shows the change, so that the next observation
// sees the rollout, not the old pod as the member's current state.
func (d *Driver) startPerWorkload(ctx context.Context, w driver.Workload, m driver.Member, version, ref string) error {
	api := d.client.AppsV1().Deployments(w.Namespace)
	dep, err := api.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes driver: member %s: Deployment %s/%s not found (deleted since ferry found it)", m.Name, w.Namespace, m.Name)
	}
	if err != nil {
		return apiError(ctx, err, "getting Deployment %s/%s", w.Namespace, m.Name)
	}
	container, err := containerOf(dep.Spec.Template, one(w, dep.Name))
	if err != nil {
		return err
	}
	if dep.Spec.Paused {
		return fmt.Errorf("kubernetes driver: member %s: Deployment %s/%s is paused (spec.paused): its controller would not roll the new image out; resume it (kubectl rollout resume)",
			m.Name, dep.Namespace, dep.Name)
	}
	spec := map[string]any{}
	patch := map[string]any{"spec": spec}
	if !templateCurrent(dep.Spec.Template, container, version, ref) {
		spec["template"] = templatePatch(container, version, ref)
	}
	saved, stopped := dep.Annotations[AnnotationStoppedReplicas]
	if stopped {
		patch["metadata"] = map[string]any{"annotations": map[string]any{AnnotationStoppedReplicas: nil}}
		if n, err := strconv.Atoi(saved); err == nil && n > 0 && replicas(dep.Spec.Replicas) == 0 {
			spec["replicas"] = n
		}
	}
	if len(spec) == 0 && !stopped {
		return nil // its controller rolls it out, or has
	}
	dep, err = api.Patch(ctx, dep.Name, strategic, mustJSON(patch), metav1.PatchOptions{FieldManager: "ferry"})
	if err != nil {
		return apiError(ctx, err, "setting the image of Deployment %s/%s to %s", w.Namespace, m.Name, ref)
	}
	d.log.Info("set the pod template's image: its controller replaces the pod under its own strategy", "deployment", dep.Namespace+"/"+dep.Name,
		"strategy", string(dep.Spec.Strategy.Type), "version", version, "image", ref, "replicas", replicas(dep.Spec.Replicas))
	if stopped {
		// Scaled back with the new template: the stop is no longer owed.
		if err := driver.JournalFrom(ctx).Done(ctx, replicasKey(dep.Namespace, dep.Name)); err != nil {
			return err
		}
	}
	return d.awaitDeployment(ctx, w, dep)
}

// stopPerWorkload stops the member's Deployment by scaling it to 0
// replicas (its pods stopped gracefully by its controller, none made
// again), journaled first with its undo (its replicas back), the
// replicas kept in an annotation for its Start: a stopped member stays
// down until it is started on its target, so that its pod is replaced
// once, not restarted on the old image first.
func (d *Driver) stopPerWorkload(ctx context.Context, w driver.Workload, m driver.Member) error {
	api := d.client.AppsV1().Deployments(w.Namespace)
	dep, err := api.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiError(ctx, err, "getting Deployment %s/%s", w.Namespace, m.Name)
	}
	n := replicas(dep.Spec.Replicas)
	if n == 0 {
		return nil
	}
	if err := recordReplicas(ctx, dep.Namespace, dep.Name, n); err != nil {
		return err
	}
	dep, err = api.Patch(ctx, dep.Name, strategic, mustJSON(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationStoppedReplicas: strconv.Itoa(n)}},
		"spec":     map[string]any{"replicas": 0},
	}), metav1.PatchOptions{FieldManager: "ferry"})
	if err != nil {
		return apiError(ctx, err, "scaling Deployment %s/%s to 0", w.Namespace, m.Name)
	}
	d.log.Info("stopped the member: scaled its Deployment to 0 replicas", "deployment", dep.Namespace+"/"+dep.Name, "was", n)
	return d.awaitDeployment(ctx, w, dep)
}

// awaitDeployment waits until the cache of w's Deployments holds dep's
// generation (or a later one) of it.
func (d *Driver) awaitDeployment(ctx context.Context, w driver.Workload, dep *appsv1.Deployment) error {
	return d.awaitCache(ctx, fmt.Sprintf("generation %d of Deployment %s/%s", dep.Generation, dep.Namespace, dep.Name), func() (bool, error) {
		deps, err := d.deploymentsByName(ctx, w)
		if err != nil {
			return false, err
		}
		c, ok := deps[dep.Name]
		// Relabelled out of the selector by someone: nothing to wait for.
		return !ok || c.Generation >= dep.Generation, nil
	})
}

// restoreReplicas is the undo of a stop: the Deployment's replicas as
// they were, unless it was scaled since (or started: Start scales it
// back itself).
func (d *Driver) restoreReplicas(ctx context.Context, u undo) error {
	api := d.client.AppsV1().Deployments(u.Namespace)
	dep, err := api.Get(ctx, u.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiError(ctx, err, "getting Deployment %s/%s", u.Namespace, u.Name)
	}
	_, marked := dep.Annotations[AnnotationStoppedReplicas]
	if replicas(dep.Spec.Replicas) != 0 || !marked {
		if marked {
			d.log.Info("not restoring the replicas: scaled since ferry stopped it", "deployment", u.Namespace+"/"+u.Name,
				"now", replicas(dep.Spec.Replicas))
		}
		return nil
	}
	_, err = api.Patch(ctx, u.Name, strategic, mustJSON(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationStoppedReplicas: nil}},
		"spec":     map[string]any{"replicas": u.Replicas},
	}), metav1.PatchOptions{FieldManager: "ferry"})
	if err != nil {
		return apiError(ctx, err, "scaling Deployment %s/%s back to %d", u.Namespace, u.Name, u.Replicas)
	}
	d.log.Info("scaled the Deployment back (the undo of its stop)", "deployment", u.Namespace+"/"+u.Name, "replicas", u.Replicas)
	return nil
}
