package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// MaxEvents is how many of the latest events an Upgrade's status keeps;
// the controller's log has them all.
const MaxEvents = 60

// statusStore keeps the engine's record in an Upgrade's status: the
// engine writes it before each action, as it writes the embedded store,
// so that whichever controller leads next resumes from it.
type statusStore struct {
	c   client.Client
	key types.NamespacedName
	// timeout bounds one API call (the engine's store calls take no
	// context).
	timeout time.Duration
}

var _ engine.Store = (*statusStore)(nil)

func (s *statusStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

func (s *statusStore) get(ctx context.Context) (*Upgrade, error) {
	var u Upgrade
	if err := s.c.Get(ctx, s.key, &u); err != nil {
		return nil, fmt.Errorf("upgrade %s: %w", s.key, err)
	}
	return &u, nil
}

// record decodes the status' record, with the operator's latest
// request (spec.action, ordered by the generation) as its intent.
func record(obj *Upgrade) (upgrade.Upgrade, bool, error) {
	var u upgrade.Upgrade
	if len(obj.Status.Record) == 0 {
		return u, false, nil
	}
	if err := json.Unmarshal(obj.Status.Record, &u); err != nil {
		return u, false, fmt.Errorf("upgrade %s/%s: status.record: %w", obj.Namespace, obj.Name, err)
	}
	if a := obj.Spec.Action; a != "" && int(obj.Generation) > u.Intent.Seq {
		u.Intent = upgrade.Intent{Kind: upgrade.IntentKind(a), Seq: int(obj.Generation), Time: time.Now()}
	}
	for _, o := range obj.Spec.Overrides {
		ov := upgrade.Override{Predicate: o.Predicate, Member: o.Member, Effect: o.Effect, Reason: o.Reason,
			By: "the Upgrade's spec.overrides", At: time.Now()}
		if why := upgrade.CheckOverride(&u, ov, strategy.Known, strings.Join(strategy.PredicateNames(), ", ")); why == "" {
			u.Overrides = append(u.Overrides, ov)
		}
	}
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

func (s *statusStore) Get(id string) (upgrade.Upgrade, error) {
	u, ok, err := s.Current()
	if err != nil {
		return u, err
	}
	if !ok || u.ID != id {
		return u, fmt.Errorf("%w: upgrade %s in %s", store.ErrNotFound, id, s.key)
	}
	return u, nil
}

func (s *statusStore) Create(u upgrade.Upgrade) error {
	return s.write(func(obj *Upgrade) error {
		if cur, ok, err := record(obj); err != nil {
			return err
		} else if ok && !cur.State.Terminal() {
			return fmt.Errorf("%w: %s (%s, %s → %s)", store.ErrActive, cur.ID, cur.State, cur.From, cur.To)
		}
		return setRecord(obj, u)
	})
}

func (s *statusStore) SaveWithEvents(u upgrade.Upgrade, evs []store.Event) ([]store.Event, error) {
	var out []store.Event
	err := s.write(func(obj *Upgrade) error {
		if err := setRecord(obj, u); err != nil {
			return err
		}
		out = appendEvents(obj, evs)
		return nil
	})
	return out, err
}

func (s *statusStore) Append(evs ...store.Event) ([]store.Event, error) {
	var out []store.Event
	err := s.write(func(obj *Upgrade) error {
		out = appendEvents(obj, evs)
		return nil
	})
	return out, err
}

// write applies change to the latest Upgrade and updates its status,
// again on a conflict (the operator may edit the spec meanwhile).
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

func appendEvents(obj *Upgrade, evs []store.Event) []store.Event {
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
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	st := &obj.Status
	st.Record = b
	if u.Intent.Seq > 0 {
		st.ObservedGeneration = int64(u.Intent.Seq)
	}
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
func conditionReason(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	if b.Len() == 0 {
		return "Unknown"
	}
	return b.String()
}
