package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	krecord "k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// MaxEvents is how many of the latest events an Upgrade's status keeps;
// Kubernetes Events (for as long as the API server keeps them) and the
// controller's log have them all.
const MaxEvents = 60

// statusStore keeps the engine's record in an Upgrade's status: the
// engine writes it before each action, as it writes the embedded store,
// so that whichever controller leads next resumes from it. It keeps
// store.Records' contract: status.revision counts the engine's saves,
// status.fence names the controller whose engine writes, and each save
// checks both and writes under the resourceVersion it read them at, so
// that a write of anyone in between (another controller's, or the
// operator's edit of the spec) makes the apiserver refuse it and the
// checks are made again on what is there now: a conflict is re-decided,
// never re-applied blind.
type statusStore struct {
	c client.Client
	// r reads from the apiserver itself: a cached read could be older
	// than the controller's own last write.
	r   client.Reader
	key types.NamespacedName
	// timeout bounds one API call (the engine's store calls take no
	// context).
	timeout time.Duration
	// lease is the leader election's Lease and this replica's identity
	// in it; without one (no leader election) a fence is the next term
	// of the status' own.
	lease *leaseHolder
	// events, when set, receives each event saved as a Kubernetes Event
	// on the Upgrade: the status keeps the last MaxEvents.
	events krecord.EventRecorder
}

// leaseHolder names the leader election's Lease and who this replica
// is in it.
type leaseHolder struct {
	key      types.NamespacedName
	identity string
}

var _ engine.Store = (*statusStore)(nil)

func (s *statusStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

func (s *statusStore) get(ctx context.Context) (*Upgrade, error) {
	var u Upgrade
	if err := s.r.Get(ctx, s.key, &u); err != nil {
		return nil, fmt.Errorf("upgrade %s: %w", s.key, err)
	}
	return &u, nil
}

// record decodes the status' record, with the operator's latest
// request (spec.action) as its intent when its sequence
// (spec.actionSeq) is above the last one taken in: a request is taken
// in once, whatever else of the spec changes after it.
func record(obj *Upgrade) (upgrade.Upgrade, bool, error) {
	if len(obj.Status.Record) == 0 {
		return upgrade.Upgrade{}, false, nil
	}
	u, err := upgrade.Decode(obj.Status.Record)
	if err != nil {
		return u, false, fmt.Errorf("upgrade %s/%s: status.record: %w", obj.Namespace, obj.Name, err)
	}
	if a := obj.Spec.Action; a != "" && obj.Spec.ActionSeq > int64(u.Intent.Seq) {
		u.Intent = upgrade.Intent{Kind: upgrade.IntentKind(a), Seq: int(obj.Spec.ActionSeq), Time: time.Now()}
	}
	takeOverrides(&u, obj.Spec.Overrides, time.Now())
	return u, true, nil
}

func (s *statusStore) Current() (upgrade.Upgrade, bool, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	obj, err := s.get(ctx)
	if err != nil {
		return upgrade.Upgrade{}, false, err
	}
	return record(obj)
}

// Fence claims the status for this replica: with leader election, the
// term of the Lease it holds (refused if it does not hold it, or if the
// status holds a later claim already); without, the status' next term.
func (s *statusStore) Fence() (store.Fence, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var f store.Fence
	if s.lease != nil {
		var err error
		if f, err = s.leased(ctx, store.Fence{Holder: s.lease.identity}); err != nil {
			return f, err
		}
	}
	err := s.write(func(obj *Upgrade) error {
		cur := obj.Status.Fence
		if s.lease == nil {
			f = store.Fence{Holder: "the controller", Term: cur.Term + 1}
		} else if cur.Term > f.Term || (cur.Term == f.Term && cur != f) {
			return &store.FencedError{Upgrade: s.key.String(), Yours: f, Current: cur, Why: "the status holds a later claim"}
		}
		obj.Status.Fence = f
		return nil
	})
	return f, err
}

// leased is the fence of the Lease, which this replica must hold now,
// unexpired: else a *store.FencedError for the writer holding yours.
func (s *statusStore) leased(ctx context.Context, yours store.Fence) (store.Fence, error) {
	var l coordinationv1.Lease
	if err := s.r.Get(ctx, s.lease.key, &l); err != nil {
		return store.Fence{}, fmt.Errorf("lease %s: %w", s.lease.key, err)
	}
	f := store.Fence{Holder: ptr.Deref(l.Spec.HolderIdentity, ""), Term: uint64(ptr.Deref(l.Spec.LeaseTransitions, 0)) + 1}
	refuse := func(why string) (store.Fence, error) {
		return f, &store.FencedError{Upgrade: s.key.String(), Yours: yours, Current: f, Why: why}
	}
	if f.Holder != s.lease.identity {
		return refuse(fmt.Sprintf("lease %s is held by %q", s.lease.key, f.Holder))
	}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
		end := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		if time.Now().After(end) {
			return refuse(fmt.Sprintf("lease %s expired at %s", s.lease.key, end.UTC().Format(time.RFC3339Nano)))
		}
	}
	return f, nil
}

// Read returns the status' record and its revision.
func (s *statusStore) Read(id string) (upgrade.Upgrade, store.Revision, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	obj, err := s.get(ctx)
	if err != nil {
		return upgrade.Upgrade{}, 0, err
	}
	u, ok, err := record(obj)
	if err != nil {
		return u, 0, err
	}
	if !ok || (id != "" && u.ID != id) {
		return u, 0, fmt.Errorf("%w: upgrade %q in %s", store.ErrNotFound, id, s.key)
	}
	return u, store.Revision(obj.Status.Revision), nil
}

func (s *statusStore) CreateAt(u upgrade.Upgrade, f store.Fence) (store.Revision, error) {
	err := s.fenced(u.ID, f, func(obj *Upgrade) error {
		if cur, ok, err := record(obj); err != nil {
			return err
		} else if ok && !cur.State.Terminal() {
			return fmt.Errorf("%w: %s (%s, %s → %s)", store.ErrActive, cur.ID, cur.State, cur.From, cur.To)
		}
		obj.Status.Revision = 1
		return setRecord(obj, u)
	})
	if err != nil {
		return 0, err
	}
	return 1, nil
}

func (s *statusStore) SaveAt(u upgrade.Upgrade, at store.Revision, f store.Fence, evs []store.Event) (store.Revision, []store.Event, error) {
	var out []store.Event
	var saved *Upgrade
	err := s.fenced(u.ID, f, func(obj *Upgrade) error {
		if cur := store.Revision(obj.Status.Revision); cur != at {
			return &store.ConflictError{Upgrade: u.ID, Read: at, Stored: cur}
		}
		obj.Status.Revision = uint64(at) + 1
		if err := setRecord(obj, u); err != nil {
			return err
		}
		out, saved = s.appendEvents(obj, evs), obj
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	emit(s.events, saved, out)
	return at + 1, out, nil
}

// fenced is write for a record's save under fence f: the Lease checked
// first (still this replica's, not expired), then, on the object the
// update is conditional on, the status' claim.
func (s *statusStore) fenced(id string, f store.Fence, change func(*Upgrade) error) error {
	if s.lease != nil {
		ctx, cancel := s.ctx()
		l, err := s.leased(ctx, f)
		cancel()
		if err != nil {
			return err
		}
		if l != f {
			return &store.FencedError{Upgrade: id, Yours: f, Current: l, Why: fmt.Sprintf("lease %s was taken again since", s.lease.key)}
		}
	}
	return s.write(func(obj *Upgrade) error {
		if cur := obj.Status.Fence; f.Term == 0 || cur != f {
			return &store.FencedError{Upgrade: id, Yours: f, Current: cur}
		}
		return change(obj)
	})
}

// Append records events of no save under fence f, checked as a save's
// is (fenced): a replica whose lease ended or went to another appends
// nothing.
func (s *statusStore) Append(f store.Fence, evs ...store.Event) ([]store.Event, error) {
	return s.appendBy(func(change func(*Upgrade) error) error { return s.fenced(s.key.String(), f, change) }, evs)
}

// Note appends events of the controller's own steps before a run (ferry
// first): under the resourceVersion read, as those steps' status writes
// are, not under a fence, which only an engine's run claims.
func (s *statusStore) Note(evs ...store.Event) ([]store.Event, error) {
	return s.appendBy(s.write, evs)
}

// appendBy appends evs to the status through write (fenced or not) and,
// once written, emits them as Kubernetes Events.
func (s *statusStore) appendBy(write func(change func(*Upgrade) error) error, evs []store.Event) ([]store.Event, error) {
	var out []store.Event
	var saved *Upgrade
	err := write(func(obj *Upgrade) error {
		out, saved = s.appendEvents(obj, evs), obj
		return nil
	})
	if err != nil {
		return nil, err
	}
	emit(s.events, saved, out)
	return out, nil
}

// write applies change to the latest Upgrade and updates its status
// under the resourceVersion it read: on a conflict (the operator edited
// the spec, or another writer wrote), change is asked again on what is
// there now, and may refuse.
func (s *statusStore) write(change func(*Upgrade) error) error {
	ctx, cancel := s.ctx()
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := s.get(ctx)
		if err != nil {
			return err
		}
		if err := change(obj); err != nil {
			return err
		}
		if err := s.c.Status().Update(ctx, obj); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("upgrade %s: status: %w", s.key, err)
		}
		return nil
	})
}

// appendEvents numbers evs and keeps the last MaxEvents in the status
// (which says where the rest are, when they go to Kubernetes Events
// too).
func (s *statusStore) appendEvents(obj *Upgrade, evs []store.Event) []store.Event {
	if s.events != nil {
		obj.Status.EventsHistory = eventsHistory(obj)
	}
	out := make([]store.Event, len(evs))
	for i, ev := range evs {
		obj.Status.LastSeq++
		ev.Seq = obj.Status.LastSeq
		out[i] = ev
		obj.Status.Events = append(obj.Status.Events, Event{Seq: ev.Seq, Time: metav1.NewTime(ev.Time), Kind: ev.Kind,
			Member: ev.Member, Message: ev.Message})
	}
	if n := len(obj.Status.Events); n > MaxEvents {
		obj.Status.Events = append([]Event(nil), obj.Status.Events[n-MaxEvents:]...)
	}
	return out
}

// setRecord writes the record and the summary that 'kubectl get
// upgrades' shows.
func setRecord(obj *Upgrade, u upgrade.Upgrade) error {
	b, err := upgrade.Encode(u)
	if err != nil {
		return err
	}
	st := &obj.Status
	st.Record = b
	st.ObservedGeneration = obj.Generation
	st.ObservedActionSeq = int64(u.Intent.Seq)
	st.State, st.Reason, st.Waiting = u.State.String(), u.Reason, u.Waiting
	st.Phase, st.Batch = "", ""
	if n := len(u.Plan.Phases); n > 0 && u.Phase < n {
		ph := u.Plan.Phases[u.Phase]
		st.Phase = fmt.Sprintf("%d/%d %s", u.Phase+1, n, ph.Component)
		n, of := u.BatchOf()
		st.Batch = fmt.Sprintf("%d/%d", n, of)
	}
	done := 0
	st.Members = st.Members[:0]
	for _, ph := range u.Plan.Phases {
		for _, name := range ph.Members() {
			m := u.Members[name]
			if m == nil {
				continue
			}
			if m.Step == upgrade.StepDone {
				done++
			}
			st.Members = append(st.Members, MemberStatus{Name: m.Name, Component: m.Component, From: m.From, Target: m.Target,
				Step: string(m.Step), Detail: m.Detail})
		}
	}
	st.Progress = fmt.Sprintf("%d/%d", done, len(u.Members))
	now := metav1.Now()
	cond := func(t string, on bool, reason, msg string) {
		status := metav1.ConditionFalse
		if on {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg,
			LastTransitionTime: now, ObservedGeneration: obj.Generation})
	}
	state := conditionReason(u.State.String())
	cond("Progressing", !u.State.Terminal() && u.State != upgrade.StatePaused, state, u.Waiting)
	cond("Completed", u.State == upgrade.StateCompleted, state, "")
	cond("Failed", u.State.Terminal() && u.State != upgrade.StateCompleted, state, u.Reason)
	return nil
}

// conditionReason turns a state (rolling-back) into a condition reason
// (RollingBack), which must be CamelCase.
func conditionReason(s string) string { return camelCase(s, "Unknown") }

// camelCase joins the words of s (split at '-', '_' and ' ') each with
// its first letter upper-case, or is orElse when s has none: what
// Kubernetes asks of a condition's or an Event's reason.
func camelCase(s, orElse string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	if b.Len() == 0 {
		return orElse
	}
	return b.String()
}
