package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// An in-place update (workload.update: in-place) changes a running
// DaemonSet pod's container image, which the kubelet applies by
// restarting that container: the pod keeps its node, IP and volumes,
// and the controller manager makes no request for it (a recreated pod
// costs it a create, within its client's rate limit: what bounds a
// large DaemonSet's rollout). It is done only where the pod's own
// revision of the template differs from the new one in its containers'
// images alone, as OpenKruise's InPlaceIfPossible; else the pod is
// recreated.

// updateInPlace is what a DaemonSet's workload.update says for in-place.
const updateInPlace = "in-place"

// AnnotationInPlace on a pod records, as JSON (inPlaceFrom), what its
// container ran when ferry changed its image in place: until the
// kubelet has restarted it, the pod still runs that.
const AnnotationInPlace = "ferry.dev/in-place-from"

// The DaemonSet controller's own labels and annotation: the pod's
// template revision, and the template generation it counts a pod
// updated by (k8s.io/kubernetes/pkg/controller/daemon/util).
const (
	labelRevisionHash = appsv1.DefaultDaemonSetUniqueLabelKey // controller-revision-hash
	labelTemplateGen  = "pod-template-generation"
)

// maxRevisionSets bounds the driver's memo of DaemonSets' revisions.
const maxRevisionSets = 64

// inPlaceFrom is a pod's AnnotationInPlace: the version and the
// container (its spec's image, its status) before its image changed in
// place. A new container (ID) or a restart more says the kubelet has
// restarted it; the image the runtime reports may change without one.
type inPlaceFrom struct {
	Container   string `json:"container"`
	Version     string `json:"version"`
	SpecImage   string `json:"specImage"`
	Image       string `json:"image"`
	ContainerID string `json:"containerID,omitempty"`
	Restarts    int32  `json:"restarts"`
}

// inPlaceRecord is the record on p of a change in place of container,
// nil without one; read only. Every observation reads the record of
// every pod changed in place, for the pod's life: each annotation is
// decoded once (records), not at each poll.
func inPlaceRecord(p *corev1.Pod, container string) *inPlaceFrom {
	raw := p.Annotations[AnnotationInPlace]
	if raw == "" {
		return nil
	}
	f := records.get(raw)
	if f == nil || f.Container != container {
		return nil
	}
	return f
}

// records are the decoded AnnotationInPlace values by their text (nil:
// not a record), at most maxRecords of them.
var records = &recordMemo{m: map[string]*inPlaceFrom{}}

const maxRecords = 8192

type recordMemo struct {
	mu sync.Mutex
	m  map[string]*inPlaceFrom
}

func (r *recordMemo) get(raw string) *inPlaceFrom {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.m[raw]; ok {
		return f
	}
	f := &inPlaceFrom{}
	if json.Unmarshal([]byte(raw), f) != nil {
		f = nil
	}
	if len(r.m) >= maxRecords {
		clear(r.m)
	}
	r.m[raw] = f
	return f
}

// pending says whether cs is still the container f recorded: the
// kubelet has not restarted it yet.
func (f *inPlaceFrom) pending(cs *corev1.ContainerStatus) bool {
	return cs.ContainerID == f.ContainerID && cs.RestartCount == f.Restarts && (f.ContainerID != "" || cs.Image == f.Image)
}

// revisions are a DaemonSet's template revisions at one generation:
// each revision's template by its hash, and the current one's hash.
type revisions struct {
	templates map[string]map[string]any
	current   string
}

// dsRevisions lists s's ControllerRevisions once per generation of s
// (a thousand Starts must not list them a thousand times).
func (d *Driver) dsRevisions(ctx context.Context, s *appsv1.DaemonSet) (*revisions, error) {
	key := string(s.UID) + "/" + strconv.FormatInt(s.Generation, 10)
	// A batch's Starts come together: one of them lists, the others
	// wait for its answer.
	d.revsMu.Lock()
	defer d.revsMu.Unlock()
	if r := d.revs[key]; r != nil {
		return r, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: DaemonSet %s/%s: selector: %w", s.Namespace, s.Name, err)
	}
	list, err := d.client.AppsV1().ControllerRevisions(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, apiError(ctx, err, "listing the revisions of DaemonSet %s/%s", s.Namespace, s.Name)
	}
	r := &revisions{templates: map[string]map[string]any{}}
	var top int64 = -1
	for i := range list.Items {
		cr := &list.Items[i]
		if !metav1.IsControlledBy(cr, s) {
			continue
		}
		tmpl, err := revisionTemplate(cr.Data.Raw)
		if err != nil {
			return nil, fmt.Errorf("kubernetes driver: ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		hash := cr.Labels[labelRevisionHash]
		r.templates[hash] = tmpl
		if cr.Revision > top {
			top, r.current = cr.Revision, hash
		}
	}
	if len(d.revs) >= maxRevisionSets {
		clear(d.revs)
	}
	d.revs[key] = r
	return r, nil
}

// revisionTemplate is the pod template a DaemonSet's ControllerRevision
// holds: its data is the patch {"spec":{"template":{...,"$patch":"replace"}}}.
func revisionTemplate(raw []byte) (map[string]any, error) {
	var data struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	if data.Spec.Template == nil {
		return nil, fmt.Errorf("data holds no spec.template")
	}
	delete(data.Spec.Template, "$patch")
	return data.Spec.Template, nil
}

// imagesOnly says whether pod templates from and to (as their
// revisions hold them) differ in their containers' images alone
// (ferry's own annotations aside), and if not, where they first differ.
func imagesOnly(from, to map[string]any) (bool, string) {
	a, b := withoutImages(from), withoutImages(to)
	if where := firstDiff(a, b, ""); where != "" {
		return false, where
	}
	return true, ""
}

// withoutImages is a copy of a template with its containers' images and
// ferry's annotations left out.
func withoutImages(t map[string]any) map[string]any {
	c := runtime.DeepCopyJSON(t)
	if md, ok := c["metadata"].(map[string]any); ok {
		if an, ok := md["annotations"].(map[string]any); ok {
			delete(an, AnnotationVersion)
			delete(an, AnnotationImage)
			if len(an) == 0 {
				delete(md, "annotations")
			}
		}
	}
	if sp, ok := c["spec"].(map[string]any); ok {
		if cs, ok := sp["containers"].([]any); ok {
			for _, x := range cs {
				if m, ok := x.(map[string]any); ok {
					delete(m, "image")
				}
			}
		}
	}
	return c
}

// firstDiff is the path of the first place a and b (decoded JSON)
// differ, "" when they are equal.
func firstDiff(a, b any, path string) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return orRoot(path)
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if d := firstDiff(av[k], bv[k], p); d != "" {
				return d
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return orRoot(path)
		}
		for i := range av {
			if d := firstDiff(av[i], bv[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return orRoot(path)
	}
	return ""
}

// orRoot names the top of a template for firstDiff.
func orRoot(path string) string {
	if path == "" {
		return "the template"
	}
	return path
}

// inPlace says whether pod p of DaemonSet s may take the new template
// in place, and if not, why: its template revision must differ from the
// current one in the containers' images alone.
func inPlace(r *revisions, p *corev1.Pod) (bool, string) {
	hash := p.Labels[labelRevisionHash]
	switch {
	case r.current == "":
		return false, "the DaemonSet has no revision yet"
	case hash == "":
		return false, "the pod carries no " + labelRevisionHash + " label"
	case r.templates[hash] == nil:
		return false, fmt.Sprintf("the pod's template revision %q is not among the DaemonSet's", hash)
	}
	if ok, where := imagesOnly(r.templates[hash], r.templates[r.current]); !ok {
		return false, "the pod's template differs from the new one in more than the images (at " + where + ")"
	}
	return true, ""
}

// templateImages are the containers' names and images of a template
// (decoded JSON), as a pod patch sets them.
func templateImages(t map[string]any) []any {
	spec, _ := t["spec"].(map[string]any)
	cs, _ := spec["containers"].([]any)
	var out []any
	for _, x := range cs {
		if m, ok := x.(map[string]any); ok {
			out = append(out, map[string]any{"name": m["name"], "image": m["image"]})
		}
	}
	return out
}

// updateInPlace changes the images of DaemonSet s's pod p to the new
// template's, in place, if its template differs from the new one in
// them alone: it says whether it did (false: the pod must be
// recreated, and why is logged). The patch carries the pod's
// resourceVersion: a pod changed since it was read (the kubelet wrote
// its status) is read again and the patch made anew, a few times.
func (d *Driver) updateInPlace(ctx context.Context, w driver.Workload, s *appsv1.DaemonSet, p *corev1.Pod, container, version, ref string) (bool, error) {
	r, err := d.dsRevisions(ctx, s)
	if err != nil {
		return false, err
	}
	if ok, why := inPlace(r, p); !ok {
		d.log.Info("recreating the pod: not in place", "pod", p.Namespace+"/"+p.Name, "why", why)
		return false, nil
	}
	d.keepOutput(ctx, p, container, "its container restarted in place with version "+version)
	for try := 1; ; try++ {
		_, err = d.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, strategic, mustJSON(inPlacePatch(s, r, p, container, version, ref)),
			metav1.PatchOptions{FieldManager: "ferry"})
		if !apierrors.IsConflict(err) || try == 3 {
			break
		}
		if p, err = d.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			break
		}
		if ok, _ := inPlace(r, p); !ok || p.DeletionTimestamp != nil {
			return false, nil // changed meanwhile: recreated (or going) instead
		}
	}
	if err != nil {
		return false, apiError(ctx, err, "changing the image of pod %s/%s in place to %s", p.Namespace, p.Name, ref)
	}
	d.log.Info("changed the pod's image in place", "pod", p.Namespace+"/"+p.Name, "version", version, "image", ref)
	// The next observation must see the change: a Start taken again on
	// the cache from before it would patch again at a stale version.
	uid := p.UID
	return true, d.awaitPod(ctx, w, s.Spec.Selector, p, "on "+ref, func(cp *corev1.Pod) bool {
		return cp.UID != uid || cp.Annotations[AnnotationImage] == ref
	})
}

// inPlacePatch is the strategic-merge patch of pod p that changes its
// containers' images to the current revision's, labels it with that
// revision (the DaemonSet controller then counts it updated) and
// records what its container ran. A change made before and not yet
// applied by the kubelet keeps its record (what still runs); a patch
// back to what runs drops it: nothing restarts.
func inPlacePatch(s *appsv1.DaemonSet, r *revisions, p *corev1.Pod, container, version, ref string) map[string]any {
	from := inPlaceRecord(p, container)
	cs := containerStatus(p, container)
	if from == nil || cs == nil || !from.pending(cs) {
		from = &inPlaceFrom{Container: container, Version: podVersion(p.ObjectMeta, p.Spec, container)}
		if c := findContainer(p.Spec, container); c != nil {
			from.SpecImage = c.Image
		}
		if cs != nil {
			from.Image, from.ContainerID, from.Restarts = cs.Image, cs.ContainerID, cs.RestartCount
		}
	}
	var record any // null: the annotation removed
	if from.SpecImage != ref {
		record = string(mustJSON(from))
	}
	lbl := map[string]any{labelRevisionHash: r.current}
	if g := s.Annotations[appsv1.DeprecatedTemplateGeneration]; g != "" {
		lbl[labelTemplateGen] = g
	}
	return map[string]any{
		"metadata": map[string]any{
			"resourceVersion": p.ResourceVersion,
			"labels":          lbl,
			"annotations":     map[string]any{AnnotationVersion: version, AnnotationImage: ref, AnnotationInPlace: record},
		},
		"spec": map[string]any{"containers": templateImages(r.templates[r.current])},
	}
}

// inPlaceStatus corrects a pod's status st for an in-place change of
// its container's image: until the kubelet has restarted the container,
// it still runs the version it ran; after, the restart that change made
// is no crash.
func inPlaceStatus(p *corev1.Pod, container string, st driver.Status) driver.Status {
	f := inPlaceRecord(p, container)
	cs := containerStatus(p, container)
	if f == nil || cs == nil {
		return st
	}
	if f.pending(cs) {
		st.Version = f.Version
		st.Restarts = 0
		note := "its container restarts in place with version " + podVersion(p.ObjectMeta, p.Spec, container)
		if st.Detail == "" {
			st.Detail = note
		} else {
			st.Detail += "; " + note
		}
		return st
	}
	st.Restarts = max(0, int(cs.RestartCount)-int(f.Restarts)-1)
	if r := cs.State.Running; r != nil && st.Running && r.StartedAt.After(st.Since) {
		st.Since = r.StartedAt.Time
	}
	return st
}
