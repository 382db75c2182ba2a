package kubernetes

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Workload kinds (config.Kind*, repeated so that drivers do not import
// the description's package).
const (
	kindStatefulSet = "StatefulSet"
	kindDaemonSet   = "DaemonSet"
	kindDeployment  = "Deployment"
	kindNodePool    = "NodePool"
)

// kindDeploymentPerWorkload is how the driver tells a component whose
// members are Deployments (per: workload) from one whose members are a
// Deployment's replica slots.
const kindDeploymentPerWorkload = kindDeployment + " per workload"

// memberKind is what w's members are: its kind, or
// kindDeploymentPerWorkload.
func memberKind(w driver.Workload) string {
	switch {
	case w.Per == "":
		return w.Kind
	case w.Per == perWorkload && w.Kind == kindDeployment:
		return kindDeploymentPerWorkload
	}
	return w.Kind + " per " + w.Per
}

func unknownKind(w driver.Workload) error {
	if w.Per != "" {
		return fmt.Errorf("kubernetes driver: %s: per %q applies to Deployments only (per: %s)", workloadString(w), w.Per, perWorkload)
	}
	return fmt.Errorf("kubernetes driver: unknown workload kind %q", w.Kind)
}

func withDefaults(w driver.Workload) driver.Workload {
	if w.Namespace == "" && w.Kind != kindNodePool {
		w.Namespace = metav1.NamespaceDefault
	}
	if w.DrainTimeout <= 0 {
		w.DrainTimeout = DefaultDrainTimeout
	}
	return w
}

func workloadKey(w driver.Workload) string {
	return w.Kind + "\x00" + w.Namespace + "\x00" + w.Name + "\x00" + w.Selector + "\x00" + w.Per
}

func workloadString(w driver.Workload) string {
	if w.Kind == kindNodePool {
		return "NodePool " + w.Selector
	}
	if w.Name != "" {
		return w.Kind + " " + w.Namespace + "/" + w.Name
	}
	if w.Per == perWorkload {
		return w.Kind + "s in " + w.Namespace + " selected by " + w.Selector
	}
	return w.Kind + " in " + w.Namespace + " selected by " + w.Selector
}

// ImageRef is the image reference the driver writes for a: the image
// pinned to the artifact's digest, so that the kubelet verifies it. An
// image that carries a digest already must carry this one.
func ImageRef(a driver.Artifact) (string, error) {
	if a.Image == "" {
		return "", fmt.Errorf("version %s has no image", a.Version)
	}
	sum := strings.ToLower(strings.TrimPrefix(a.SHA256, "sha256:"))
	if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
		return "", fmt.Errorf("version %s: sha256 %q is not 64 hex digits: the image is pulled by digest, so that it is verified before use", a.Version, a.SHA256)
	}
	if i := strings.LastIndexByte(a.Image, '@'); i >= 0 {
		if got := strings.ToLower(a.Image[i+1:]); got != "sha256:"+sum {
			return "", fmt.Errorf("version %s: image %s carries digest %s, not the artifact's sha256:%s", a.Version, a.Image, got, sum)
		}
		return a.Image, nil
	}
	return a.Image + "@sha256:" + sum, nil
}

// TagVersion is the version an image reference names by its tag: the
// tag without a leading "v" ("" without a tag).
func TagVersion(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.ContainsRune(image[i+1:], '/') { // registry:port/app
		return ""
	}
	return strings.TrimPrefix(image[i+1:], "v")
}

// podVersion is the version a pod's container runs: its ferry
// annotations while they match the container's image, else its tag.
func podVersion(meta metav1.ObjectMeta, spec corev1.PodSpec, container string) string {
	c := findContainer(spec, container)
	if c == nil {
		return ""
	}
	if v := meta.Annotations[AnnotationVersion]; v != "" {
		if img := meta.Annotations[AnnotationImage]; img == "" || img == c.Image {
			return v
		}
	}
	return TagVersion(c.Image)
}

// containerStatus is the status of p's container name (its first
// container's for ""), nil if the kubelet reported none.
func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	if c := findContainer(p.Spec, name); c != nil {
		name = c.Name
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func findContainer(spec corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if name == "" || spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

func containerOf(tmpl corev1.PodTemplateSpec, w driver.Workload) (string, error) {
	c := findContainer(tmpl.Spec, w.Container)
	if c == nil {
		if w.Container == "" {
			return "", fmt.Errorf("kubernetes driver: %s: pod template has no container", workloadString(w))
		}
		return "", fmt.Errorf("kubernetes driver: %s: pod template has no container %q", workloadString(w), w.Container)
	}
	return c.Name, nil
}

// templateCurrent says whether tmpl already runs ref for version.
func templateCurrent(tmpl corev1.PodTemplateSpec, container, version, ref string) bool {
	c := findContainer(tmpl.Spec, container)
	return c != nil && c.Image == ref && tmpl.Annotations[AnnotationVersion] == version &&
		tmpl.Annotations[AnnotationImage] == ref
}

// templatePatch is the strategic-merge patch of a workload's spec that
// sets the container's image and the ferry annotations (containers
// merge by name, so the other containers are left alone).
func templatePatch(container, version, ref string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationVersion: version, AnnotationImage: ref}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": container, "image": ref}}},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return b
}

var strategic = types.StrategicMergePatchType

// podStatus is a pod's driver.Status (without the name).
func podStatus(p *corev1.Pod, container string) driver.Status {
	st := driver.Status{Version: podVersion(p.ObjectMeta, p.Spec, container)}
	if p.Status.StartTime != nil {
		st.Since = p.Status.StartTime.Time
	}
	if cs := containerStatus(p, container); cs != nil {
		st.Restarts = int(cs.RestartCount) // the kubelet's restarts: a crash loop shows here
	}
	ready := podCondition(p, corev1.PodReady)
	switch {
	case p.DeletionTimestamp != nil:
		st.Detail = "being deleted"
	case p.Status.Phase != corev1.PodRunning:
		st.Detail = "phase " + strings.ToLower(string(p.Status.Phase))
	case ready == nil || ready.Status != corev1.ConditionTrue:
		st.Detail = "not ready"
		if ready != nil && ready.Message != "" {
			st.Detail += ": " + ready.Message
		}
	default:
		st.Running = true
		st.Since = ready.LastTransitionTime.Time
	}
	if !st.Running {
		if why := waitingReason(p); why != "" {
			st.Detail += " (" + why + ")"
		}
		if p.Spec.NodeName != "" {
			st.Detail += " on " + p.Spec.NodeName
		}
	}
	return inPlaceStatus(p, container, st)
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodReady)
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && c != nil && c.Status == corev1.ConditionTrue
}

// waitingReason names why a pod's containers do not run
// (ImagePullBackOff, CrashLoopBackOff...) or why it is not scheduled.
func waitingReason(p *corev1.Pod) string {
	var rs []string
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			r := cs.Name + ": " + w.Reason
			if w.Message != "" {
				r += ": " + w.Message
			}
			rs = append(rs, r)
		}
		if t := cs.State.Terminated; t != nil && t.Reason != "" && !cs.Ready {
			rs = append(rs, fmt.Sprintf("%s: %s (exit %d)", cs.Name, t.Reason, t.ExitCode))
		}
	}
	if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status != corev1.ConditionTrue && c.Reason != "" {
		r := c.Reason
		if c.Message != "" {
			r += ": " + c.Message
		}
		rs = append(rs, r)
	}
	return strings.Join(rs, "; ")
}

// listPods lists the pods of sel in w's namespace, sorted by name,
// from the API server: for a Deployment's gate, which must not act on
// a cache behind its own patch (observations read cachedPods).
func (d *Driver) listPods(ctx context.Context, w driver.Workload, sel *metav1.LabelSelector) ([]*corev1.Pod, error) {
	s, err := podSelector(w, sel)
	if err != nil {
		return nil, err
	}
	opts := metav1.ListOptions{LabelSelector: s}
	l, err := d.client.CoreV1().Pods(w.Namespace).List(ctx, opts)
	if err != nil {
		return nil, apiError(ctx, err, "listing the pods of %s", workloadString(w))
	}
	ps := pointers(l.Items)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps, nil
}

// podSelector is a workload's pod selector as a string; an empty one
// (every pod of the namespace) is refused.
func podSelector(w driver.Workload, sel *metav1.LabelSelector) (string, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "", fmt.Errorf("kubernetes driver: %s: bad pod selector: %w", workloadString(w), err)
	}
	if s.Empty() {
		return "", fmt.Errorf("kubernetes driver: %s: empty pod selector", workloadString(w))
	}
	return s.String(), nil
}

// ownedBy keeps the pods whose controller is uid (filtering ps in
// place).
func ownedBy(ps []*corev1.Pod, uid types.UID) []*corev1.Pod {
	return slices.DeleteFunc(ps, func(p *corev1.Pod) bool {
		ref := metav1.GetControllerOf(p)
		return ref == nil || ref.UID != uid
	})
}

// pointers is the pods of a list, by pointer: pods are large, and a
// DaemonSet has thousands.
func pointers(items []corev1.Pod) []*corev1.Pod {
	ps := make([]*corev1.Pod, len(items))
	for i := range items {
		ps[i] = &items[i]
	}
	return ps
}

// deletePod deletes a pod (that very one: UID precondition), gracefully.
// A pod gone already is not an error.
func (d *Driver) deletePod(ctx context.Context, p *corev1.Pod, why string) error {
	uid := p.UID
	err := d.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return apiError(ctx, err, "deleting pod %s/%s", p.Namespace, p.Name)
	}
	d.log.Info("deleted pod", "pod", p.Namespace+"/"+p.Name, "why", why)
	return nil
}

// selectOne finds the one object of a workload named by selector.
func selectOne(w driver.Workload, names []string) (string, error) {
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", fmt.Errorf("kubernetes driver: no %s in namespace %s matches selector %q", w.Kind, w.Namespace, w.Selector)
	}
	return "", fmt.Errorf("kubernetes driver: selector %q matches %d %ss in namespace %s (%s): it must match one",
		w.Selector, len(names), w.Kind, w.Namespace, strings.Join(names, ", "))
}

func parseSelector(w driver.Workload) (string, error) {
	s, err := labels.Parse(w.Selector)
	if err != nil {
		return "", fmt.Errorf("kubernetes driver: %s: bad selector: %w", workloadString(w), err)
	}
	return s.String(), nil
}

// waitFor polls cond every d.poll until it reports true, cond fails,
// ctx ends or timeout (if > 0) passes.
func (d *Driver) waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(d.poll)
	defer t.Stop()
	for {
		ok, detail, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes driver: waiting for %s (last: %s): %w", what, detail, ctx.Err())
		case <-t.C:
		}
	}
}

// getWorkload finds the object w names: by name, or the one its
// selector matches (more or fewer is an error naming them).
func getWorkload[T any, P interface {
	*T
	GetName() string
}](ctx context.Context, w driver.Workload, get func(context.Context, string, metav1.GetOptions) (P, error),
	list func(context.Context, metav1.ListOptions) ([]T, error)) (P, error) {
	if w.Name != "" {
		o, err := get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return nil, apiError(ctx, err, "getting %s", workloadString(w))
		}
		return o, nil
	}
	sel, err := parseSelector(w)
	if err != nil {
		return nil, err
	}
	items, err := list(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, apiError(ctx, err, "listing %s", workloadString(w))
	}
	names := make([]string, len(items))
	for i := range items {
		names[i] = P(&items[i]).GetName()
	}
	if _, err := selectOne(w, names); err != nil {
		return nil, err
	}
	return P(&items[0]), nil
}
