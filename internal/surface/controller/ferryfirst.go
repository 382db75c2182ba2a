package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Ferry first on Kubernetes (Rook's seed: the operator is upgraded
// first, and never lets a cluster run newer than itself). Before a
// controller drives an Upgrade it compares its own release with the
// release's requires_ferry, read alone from the description
// (config.ReadFerryNeed: a description a newer ferry wrote may not
// parse here). Too old, it moves nothing of the cluster: if the
// release (ferry.image) or the Upgrade (spec.ferryImage) names the
// ferry image, pinned by digest, it moves its own Deployment to it,
// journaled with its undo in status.ferry before the patch, and waits
// for the replica on the new release, which takes the lease and the
// Upgrade up; if the rollout does not progress (the Deployment's
// ProgressDeadlineExceeded), it puts the image back and says so.
// Without an image, the condition FerryUnderstands says what is needed,
// naming both versions, and the Upgrade waits for a newer controller.

// FerryCondition is the Upgrade's condition that says whether the
// controller understands the release (its requires_ferry).
const FerryCondition = "FerryUnderstands"

// rolloutPoll is how often a controller that moved its own Deployment
// looks at the rollout while it waits for its successor.
const rolloutPoll = time.Second

// pinnedImageRE is an image pinned by its digest, as spec.ferryImage
// must be (the CRD says the same).
var pinnedImageRE = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

// FerryStatus is the controller's own release and, when a release
// requires a newer one, its move to it.
type FerryStatus struct {
	// Controller is the release of the controller that last took the
	// Upgrade up, Build its build.
	Controller string `json:"controller,omitempty"`
	Build      string `json:"build,omitempty"`
	// Requires is the release's requires_ferry.
	Requires string `json:"requires,omitempty"`
	// Image is the ferry image the controller's Deployment was moved
	// to, Deployment that Deployment (namespace/name).
	Image      string `json:"image,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	// Effects journals the change of the controller's Deployment with
	// its undo, before it is made: open until a controller that meets
	// Requires takes the Upgrade up (the change is kept), or until the
	// rollout fails (it is undone).
	Effects   effect.Journal `json:"effects,omitempty"`
	EffectSeq int            `json:"effectSeq,omitempty"`
}

// deploymentImage is the undo of a Deployment's container image
// change: what Image was before ferry Set it.
type deploymentImage struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Container string `json:"container"`
	Image     string `json:"image"`
	Set       string `json:"set"`
}

// ferryFirst decides, before anything else of an Upgrade, whether this
// controller may drive it: true when it must not (it waits for its
// successor, or for the operator), with the status saying why.
func (r *Reconciler) ferryFirst(ctx context.Context, st *statusStore, obj *Upgrade) (bool, error) {
	need, err := config.ReadFerryNeed([]byte(obj.Spec.Description), obj.Spec.To)
	if err != nil {
		return false, nil // the description's parse says what is wrong, in full
	}
	running := buildinfo.Release()
	if need.Requires == "" || config.CompareVersions(running, need.Requires) >= 0 {
		return false, r.ferryMet(st, obj, need)
	}
	image := obj.Spec.FerryImage
	switch {
	case image != "" && !pinnedImageRE.MatchString(image):
		return true, refuse(st, "InvalidSpec", fmt.Errorf("spec.ferryImage %q: want an image pinned by its digest (NAME@sha256:64 hex digits)", image))
	case image == "":
		image = need.Ferry.PinnedImage()
	}
	too := fmt.Sprintf("release %s requires ferry %s; this controller is ferry %s", need.Release, need.Requires, running)
	if image == "" {
		return true, r.ferryWait(st, "NeedsNewerController", too+": it moves nothing of the cluster until a controller on ferry "+need.Requires+
			" or later takes the upgrade up: name the ferry image, pinned by digest (the release's ferry: {image, sha256}, or spec.ferryImage), "+
			"and the controller moves its own Deployment first; or upgrade it yourself (kubectl set image deployment/NAME ferry=IMAGE@sha256:DIGEST)", need, "")
	}
	return true, r.moveSelf(ctx, st, obj, need, image, too)
}

// ferryMet is the status of a controller that meets the release: its
// own release and build; a move of its Deployment still open is kept
// (the controller it made runs); the condition true.
func (r *Reconciler) ferryMet(st *statusStore, obj *Upgrade, need config.FerryNeed) error {
	self := buildinfo.Running()
	fs := obj.Status.Ferry
	cond := meta.FindStatusCondition(obj.Status.Conditions, FerryCondition)
	msg := fmt.Sprintf("ferry %s, %s required", self.Release, need.Requires)
	if fs != nil && fs.Controller == self.Release && fs.Build == self.Build.String() && len(fs.Effects) == 0 &&
		(need.Requires == "" || (cond != nil && cond.Status == metav1.ConditionTrue && cond.Message == msg)) {
		return nil
	}
	var kept []store.Event
	err := st.write(func(o *Upgrade) error {
		kept = nil
		f := ferryStatus(o)
		f.Controller, f.Build = self.Release, self.Build.String()
		for _, e := range f.Effects {
			kept = append(kept, store.Event{Kind: "ferry", Time: time.Now(), Message: fmt.Sprintf(
				"ferry first: this controller runs ferry %s: %s kept; the upgrade goes on", self.Release, e.What)})
		}
		f.Effects = nil
		if need.Requires != "" {
			f.Requires = need.Requires
			setCondition(o, metav1.ConditionTrue, "ControllerUnderstands", msg)
		}
		return nil
	})
	if err == nil && len(kept) > 0 {
		_, err = st.Note(kept...)
	}
	return err
}

// ferryWait says, once, that the Upgrade waits for a newer controller:
// the condition false with reason and why, the status' state
// ferry-first, an event.
func (r *Reconciler) ferryWait(st *statusStore, reason, why string, need config.FerryNeed, image string) error {
	changed := false
	err := st.write(func(o *Upgrade) error {
		changed = false
		f := ferryStatus(o)
		self := buildinfo.Running()
		f.Controller, f.Build, f.Requires = self.Release, self.Build.String(), need.Requires
		if image != "" {
			f.Image = image
		}
		if c := meta.FindStatusCondition(o.Status.Conditions, FerryCondition); c == nil || c.Reason != reason || c.Message != why {
			changed = true
		}
		setCondition(o, metav1.ConditionFalse, reason, why)
		if len(o.Status.Record) == 0 {
			o.Status.State = "ferry-first"
		}
		o.Status.Waiting = why
		return nil
	})
	if err == nil && changed {
		_, err = st.Note(store.Event{Kind: "ferry", Time: time.Now(), Message: "ferry first: " + why})
	}
	return err
}

// moveSelf moves the controller's own Deployment to image (journaled
// with its undo first), then waits for the replica on the new release
// to take the Upgrade up: this process is then stopped by the rollout
// (ctx ends). A rollout that does not progress is undone.
func (r *Reconciler) moveSelf(ctx context.Context, st *statusStore, obj *Upgrade, need config.FerryNeed, image, too string) error {
	if r.Deployment.Name == "" {
		return r.ferryWait(st, "NoDeployment", too+": this controller does not know its own Deployment (ferry controller --deployment): "+
			"upgrade it yourself to "+image, need, image)
	}
	var dep appsv1.Deployment
	if err := r.reader().Get(ctx, r.Deployment, &dep); err != nil {
		if apierrors.IsNotFound(err) {
			return r.ferryWait(st, "DeploymentNotFound", fmt.Sprintf("%s: its Deployment %s (ferry controller --deployment) was not found: upgrade the controller yourself to %s",
				too, r.Deployment, image), need, image)
		}
		return err
	}
	i, err := ferryContainer(&dep.Spec.Template.Spec)
	if err != nil {
		return r.ferryWait(st, "DeploymentNotFound", fmt.Sprintf("%s: Deployment %s: %v", too, r.Deployment, err), need, image)
	}
	c := dep.Spec.Template.Spec.Containers[i]
	if c.Image != image {
		undo := deploymentImage{Namespace: r.Deployment.Namespace, Name: r.Deployment.Name, Container: c.Name, Image: c.Image, Set: image}
		what := fmt.Sprintf("Deployment %s: container %s image %s → %s (ferry %s → %s, required by release %s)",
			r.Deployment, c.Name, c.Image, image, buildinfo.Release(), need.Requires, need.Release)
		if err := r.journalMove(st, need, undo, what, too); err != nil {
			return err
		}
		// A replica that lost its lease patches nothing.
		if st.lease != nil {
			lctx, cancel := st.ctx()
			_, err := st.leased(lctx, store.Fence{Holder: st.lease.identity})
			cancel()
			if err != nil {
				return err
			}
		}
		if err := r.setImage(ctx, undo, i, c.Image, image); err != nil {
			return err
		}
		if _, err := st.Note(store.Event{Kind: "ferry", Time: time.Now(), Message: fmt.Sprintf(
			"ferry first: %s: its %s, journaled with its undo; no member moves until the controller on ferry %s takes the upgrade up",
			too, what, need.Requires)}); err != nil {
			return err
		}
		r.Logger.Info("controller: ferry first: moved the controller's own Deployment; waiting for the new replica", "deployment", r.Deployment,
			"image", image, "requires", need.Requires, "release", buildinfo.Release())
	}
	return r.awaitSuccessor(ctx, st, need, image, too)
}

// journalMove records the Deployment's change and its undo in the
// status before it is made (once: the same change journaled again is
// the one owed), with the condition saying the controller upgrades.
func (r *Reconciler) journalMove(st *statusStore, need config.FerryNeed, undo deploymentImage, what, too string) error {
	b, err := json.Marshal(undo)
	if err != nil {
		return err
	}
	why := fmt.Sprintf("%s: the controller's own Deployment %s is moved to %s first; the replica on the new release takes the upgrade up", too, r.Deployment, undo.Set)
	return st.write(func(o *Upgrade) error {
		f := ferryStatus(o)
		self := buildinfo.Running()
		f.Controller, f.Build, f.Requires, f.Image, f.Deployment = self.Release, self.Build.String(), need.Requires, undo.Set, r.Deployment.String()
		f.Effects.Open(effect.Effect{Key: moveKey(undo), Scope: effect.Upgrade(), What: what,
			UndoWhat: fmt.Sprintf("container %s image back to %s", undo.Container, undo.Image), Undo: effect.Undo{Driver: b}}, &f.EffectSeq, time.Now())
		setCondition(o, metav1.ConditionFalse, "ControllerUpgrading", why)
		if len(o.Status.Record) == 0 {
			o.Status.State = "ferry-first"
		}
		o.Status.Waiting = why
		return nil
	})
}

func moveKey(d deploymentImage) string {
	return fmt.Sprintf("deployment %s/%s container %s image %s", d.Namespace, d.Name, d.Container, d.Set)
}

// awaitSuccessor waits, without moving anything, for the rollout of
// the controller's Deployment to image to replace this process (ctx
// ends). Should the image change under it, or the rollout not
// progress, it stops waiting: the Upgrade is refused, saying why, and
// a rollout that failed is undone.
func (r *Reconciler) awaitSuccessor(ctx context.Context, st *statusStore, need config.FerryNeed, image, too string) error {
	t := time.NewTicker(rolloutPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var dep appsv1.Deployment
		if err := r.reader().Get(ctx, r.Deployment, &dep); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.Logger.Warn("controller: ferry first: reading the controller's Deployment", "deployment", r.Deployment, "err", err)
			continue
		}
		i, err := ferryContainer(&dep.Spec.Template.Spec)
		if err != nil {
			return refuse(st, "ControllerUpgradeFailed", fmt.Errorf("%s: Deployment %s: %w", too, r.Deployment, err))
		}
		if cur := dep.Spec.Template.Spec.Containers[i].Image; cur != image {
			// Someone else changed it (an operator's rollback): theirs
			// to keep, not ferry's to undo.
			msg := fmt.Sprintf("%s: the controller's Deployment %s runs %s now, not %s as ferry set it: changed by someone else, left as it is; the upgrade did not start (a new spec tries again)",
				too, r.Deployment, cur, image)
			if err := r.closeMoves(st, msg); err != nil {
				return err
			}
			return refuse(st, "ControllerImageChanged", errors.New(msg))
		}
		if why := stalled(&dep); why != "" {
			return r.undoMove(ctx, st, i, image, too, why)
		}
	}
}

// stalled says why the Deployment's rollout of its current generation
// cannot progress ("" while it may): Kubernetes' own verdict,
// ProgressDeadlineExceeded (spec.progressDeadlineSeconds).
func stalled(d *appsv1.Deployment) string {
	if d.Status.ObservedGeneration < d.Generation {
		return ""
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return fmt.Sprintf("%s (%s)", c.Reason, c.Message)
		}
	}
	return ""
}

// undoMove puts the Deployment's image back as the journal says, closes
// the journal's entry, and refuses the Upgrade: the controller on the
// new release never came up, nothing of the cluster moved.
func (r *Reconciler) undoMove(ctx context.Context, st *statusStore, i int, image, too, why string) error {
	obj, err := st.get(ctx)
	if err != nil {
		return err
	}
	f := obj.Status.Ferry
	if f == nil {
		return nil
	}
	for _, e := range f.Effects {
		var u deploymentImage
		if err := json.Unmarshal(e.Undo.Driver, &u); err != nil || u.Set != image {
			continue
		}
		if err := r.setImage(ctx, u, i, image, u.Image); err != nil {
			return fmt.Errorf("controller: ferry first: undo %s: %w", e.ID, err)
		}
	}
	msg := fmt.Sprintf("%s: the rollout of the controller's Deployment %s to %s did not progress: %s; its image was put back, nothing of the cluster moved; the upgrade did not start (a new spec tries again)",
		too, r.Deployment, image, why)
	if err := r.closeMoves(st, msg); err != nil {
		return err
	}
	return refuse(st, "ControllerUpgradeFailed", errors.New(msg))
}

// closeMoves closes the journal's moves of the Deployment, said by an
// event.
func (r *Reconciler) closeMoves(st *statusStore, msg string) error {
	if err := st.write(func(o *Upgrade) error {
		if o.Status.Ferry != nil {
			o.Status.Ferry.Effects = nil
		}
		return nil
	}); err != nil {
		return err
	}
	_, err := st.Note(store.Event{Kind: "ferry", Time: time.Now(), Message: "ferry first: " + msg})
	return err
}

// setImage changes the image of container i of the Deployment from
// old to image, only if it is old still (a JSON patch's test): a
// change made meanwhile by someone else is not overwritten.
func (r *Reconciler) setImage(ctx context.Context, d deploymentImage, i int, old, image string) error {
	path := fmt.Sprintf("/spec/template/spec/containers/%d/image", i)
	patch, err := json.Marshal([]map[string]string{{"op": "test", "path": path, "value": old}, {"op": "replace", "path": path, "value": image}})
	if err != nil {
		return err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name}}
	if err := r.Client.Patch(ctx, dep, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("controller: ferry first: Deployment %s/%s: container %s image %s → %s: %w", d.Namespace, d.Name, d.Container, old, image, err)
	}
	return nil
}

// ferryContainer is the index of ferry's container in a pod template:
// the one named ferry, or the only one.
func ferryContainer(p *corev1.PodSpec) (int, error) {
	for i, c := range p.Containers {
		if c.Name == "ferry" {
			return i, nil
		}
	}
	if len(p.Containers) == 1 {
		return 0, nil
	}
	return 0, fmt.Errorf("no container named ferry among its %d", len(p.Containers))
}

// ferryStatus is o's status.ferry, made if it has none.
func ferryStatus(o *Upgrade) *FerryStatus {
	if o.Status.Ferry == nil {
		o.Status.Ferry = &FerryStatus{}
	}
	return o.Status.Ferry
}

func setCondition(o *Upgrade, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: FerryCondition, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: o.Generation})
}

// refuse ends an Upgrade before it began: state refused, the Failed
// condition with reason and err; a new spec tries again.
func refuse(st *statusStore, reason string, err error) error {
	werr := st.write(func(o *Upgrade) error {
		o.Status.State, o.Status.Reason = "refused", err.Error()
		o.Status.ObservedGeneration = o.Generation
		meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue,
			Reason: reason, Message: err.Error(), ObservedGeneration: o.Generation})
		return nil
	})
	return errors.Join(err, werr)
}

// reader reads from the apiserver itself (the controller's cache
// watches Upgrades only).
func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}
