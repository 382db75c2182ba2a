package controller

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// GroupVersion is the API group of the Upgrade resource.
var GroupVersion = schema.GroupVersion{Group: "ferry.dev", Version: "v1alpha1"}

// Upgrade is one upgrade of a cluster on Kubernetes: kubectl apply of
// an Upgrade starts it, its status is the engine's record, so that a
// restarted or failed-over controller resumes from it.
type Upgrade struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              UpgradeSpec   `json:"spec"`
	Status            UpgradeStatus `json:"status,omitempty"`
}

// UpgradeSpec is what the operator asks for.
type UpgradeSpec struct {
	// Description is the cluster description (YAML, substrate
	// kubernetes), as 'ferry validate' checks it.
	Description string `json:"description"`
	// To is the release to upgrade to.
	To string `json:"to"`
	// Action is the operator's request once it runs: pause, resume,
	// abort or finalize, taken in once, when ActionSeq is above the
	// last request's (status.observedActionSeq). Keyed by its own
	// sequence, not by the spec's generation: an edit of the overrides
	// under a standing "resume" is no second resume.
	Action string `json:"action,omitempty"`
	// ActionSeq numbers the operator's requests: each new request
	// gives a number above the last (the CRD requires one with an
	// action).
	ActionSeq int64 `json:"actionSeq,omitempty"`
	// Overrides switch off one admission predicate each (for one member,
	// one component's members, the phase in progress, for a while), or
	// give up one effect's undo, or withdraw one of these (revoke), for
	// the running upgrade: 'ferry upgrade override' for the Upgrade
	// resource. The list only grows, and each entry names in By the
	// user who added it: deploy/crd.yaml's admission policy refuses
	// anything else, so that the record says who, as the API server
	// authenticated them.
	Overrides []OverrideSpec `json:"overrides,omitempty"`
}

// OverrideSpec is one entry of UpgradeSpec.Overrides. The controller
// takes each in once, in order, when it reads the Upgrade: Phase and
// For count from then.
type OverrideSpec struct {
	Predicate string `json:"predicate,omitempty"`
	Member    string `json:"member,omitempty"`
	Effect    string `json:"effect,omitempty"`
	// Component limits it to one component's members; Phase to the
	// phase in progress when it is taken in.
	Component string `json:"component,omitempty"`
	Phase     bool   `json:"phase,omitempty"`
	// For makes it expire that long after it is taken in ("30m").
	For string `json:"for,omitempty"`
	// Revoke withdraws the override in force with the same predicate
	// (or effect) and scope.
	Revoke bool   `json:"revoke,omitempty"`
	Reason string `json:"reason,omitempty"`
	// By is the Kubernetes user who added the entry (kubectl auth
	// whoami): the admission policy refuses a new entry naming anyone
	// but the user making the request.
	By string `json:"by,omitempty"`
}

// UpgradeStatus is the engine's record of the upgrade and what
// 'kubectl get upgrades' shows.
type UpgradeStatus struct {
	State    string `json:"state,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Batch    string `json:"batch,omitempty"`
	Progress string `json:"progress,omitempty"` // members done / members
	Reason   string `json:"reason,omitempty"`
	Waiting  string `json:"waiting,omitempty"`
	// Members is each member's step.
	Members []MemberStatus `json:"members,omitempty"`
	// Conditions: Progressing, Completed, Failed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Events are the last events (MaxEvents), newest last.
	Events []Event `json:"events,omitempty"`
	// EventsHistory says where the events are that Events does not
	// keep: the Upgrade's Kubernetes Events, the controller's log.
	EventsHistory string `json:"eventsHistory,omitempty"`
	// LastSeq is the sequence number of the last event.
	LastSeq uint64 `json:"lastSeq,omitempty"`
	// Record is the engine's whole record (upgrade.Upgrade as JSON):
	// what a controller resumes from.
	Record json.RawMessage `json:"record,omitempty"`
	// ObservedGeneration is the spec generation the record was last
	// written under.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ObservedActionSeq is the sequence of the last request
	// (spec.actionSeq) the record has taken in: a request is new when
	// its sequence is above it.
	ObservedActionSeq int64 `json:"observedActionSeq,omitempty"`
	// Revision counts the engine's saves of Record (store.Revision): a
	// save names the revision it read, and is refused when it moved.
	Revision uint64 `json:"revision,omitempty"`
	// Fence is the claim of the controller whose engine writes Record:
	// its Lease's holder and term (the lease's transitions + 1). A save
	// under another is refused.
	Fence store.Fence `json:"fence,omitzero"`
}

// MemberStatus is one member's progress.
type MemberStatus struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	From      string `json:"from,omitempty"`
	Target    string `json:"target"`
	Step      string `json:"step"`
	Detail    string `json:"detail,omitempty"`
}

// Event is one event of the upgrade.
type Event struct {
	Seq     uint64      `json:"seq"`
	Time    metav1.Time `json:"time"`
	Kind    string      `json:"kind"`
	Member  string      `json:"member,omitempty"`
	Message string      `json:"message"`
}

// UpgradeList is a list of Upgrades.
type UpgradeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Upgrade `json:"items"`
}

// DeepCopyObject copies through JSON: the record is raw JSON already,
// and an Upgrade is copied once per reconcile, not in a hot loop.
func (u *Upgrade) DeepCopyObject() runtime.Object {
	if u == nil {
		return nil
	}
	out := new(Upgrade)
	b, err := json.Marshal(u)
	if err != nil {
		panic(err) // an Upgrade always marshals
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// DeepCopyObject copies the list.
func (l *UpgradeList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &UpgradeList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Upgrade))
	}
	return out
}

// AddToScheme registers Upgrade and UpgradeList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Upgrade{}, &UpgradeList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
