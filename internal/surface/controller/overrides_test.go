package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// running is a record of an upgrade of mon-0..2 in its first phase,
// owing the undo of effect e1 when owed.
func running(owed bool) upgrade.Upgrade {
	p := plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Phases: []plan.Phase{{Component: "mon", Strategy: strategy.OneAtATime, MaxUnavailable: 1,
		Batches: []plan.Batch{{Members: []string{"mon-2"}}, {Members: []string{"mon-1"}}, {Members: []string{"mon-0"}}}}}}
	u := upgrade.New("u1", p, map[string]string{"mon-0": "1.0.0", "mon-1": "1.0.0", "mon-2": "1.0.0"}, nil, time.Unix(1e9, 0))
	u.State = upgrade.Upgrading("mon")
	if owed {
		u.Effects = effect.Journal{{ID: "e1", Key: "k1", Scope: effect.Member("mon-2"), What: "a change", State: effect.StateFailed}}
	}
	return u
}

// readAndSave is a controller's read of the Upgrade (record(), which
// takes spec.overrides in) and its engine's save of what it read.
func readAndSave(t *testing.T, obj *Upgrade) upgrade.Upgrade {
	t.Helper()
	u, ok, err := record(obj)
	if err != nil || !ok {
		t.Fatalf("record: %v %v", ok, err)
	}
	if err := setRecord(obj, u); err != nil {
		t.Fatal(err)
	}
	return u
}

func summary(u upgrade.Upgrade) string {
	var out []string
	for _, o := range u.Overrides {
		until := o.Until
		o.Until = time.Time{}
		s := o.String() + " by " + o.By
		if !until.IsZero() {
			s += fmt.Sprintf(" for %s", until.Sub(o.At))
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// TestTakeOverrides: spec.overrides entries become the record's
// overrides once each, however often the Upgrade is read, with the
// user their by names, their scope (component, the phase in progress
// when taken, an expiry counted from then) and revokes as entries of
// their own; an entry written again after a revoke is a new one; one
// the record refuses (an effect owing no undo yet) is taken once it can
// be, and takes nothing twice then.
func TestTakeOverrides(t *testing.T) {
	cases := []struct {
		name  string
		owed  bool
		specs []OverrideSpec
		want  string
	}{
		{"one, read thrice", false, []OverrideSpec{{Predicate: "quorum", Member: "mon-1", By: "alice"}},
			"predicate quorum for member mon-1 by alice"},
		{"scoped and expiring", false, []OverrideSpec{{Predicate: "quorum", Component: "mon", Phase: true, For: "30m", By: "alice", Reason: "mon-0's disk"}},
			"predicate quorum for component mon in phase 1 of the plan by alice for 30m0s"},
		{"revoked, then again", false, []OverrideSpec{
			{Predicate: "quorum", Component: "mon", For: "30m", By: "alice"},
			{Predicate: "quorum", Component: "mon", Revoke: true, By: "bob"},
			{Predicate: "quorum", Component: "mon", For: "30m", By: "alice"}},
			"predicate quorum for component mon by alice for 30m0s; revoked: predicate quorum for component mon by bob; " +
				"predicate quorum for component mon by alice for 30m0s"},
		{"an effect owing no undo yet", false, []OverrideSpec{{Effect: "e1", By: "alice"}, {Predicate: "quorum", For: "1h", By: "bob"}},
			"predicate quorum for every member by bob for 1h0m0s"},
		{"no by: written before the policy", false, []OverrideSpec{{Predicate: "gate", Member: "mon-2"}},
			"predicate gate for member mon-2 by (unknown: a spec.overrides entry without by)"},
		{"a for that is no duration", false, []OverrideSpec{{Predicate: "gate", For: "soon", By: "alice"}}, ""},
		{"a for with a revoke", false, []OverrideSpec{{Predicate: "gate", For: "1m", Revoke: true, By: "alice"}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := upgrade.Encode(running(c.owed))
			if err != nil {
				t.Fatal(err)
			}
			obj := &Upgrade{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "ns"}, Spec: UpgradeSpec{Overrides: c.specs}, Status: UpgradeStatus{Record: rec}}
			var u upgrade.Upgrade
			for range 3 {
				u = readAndSave(t, obj) // nothing is taken twice
			}
			if got := summary(u); got != c.want {
				t.Errorf("overrides:\n  %s\nwant\n  %s", got, c.want)
			}
		})
	}

	// The effect comes to owe its undo: its entry is taken then, and the
	// entry after it, taken before, is not taken again.
	rec, _ := upgrade.Encode(running(false))
	obj := &Upgrade{Spec: UpgradeSpec{Overrides: []OverrideSpec{{Effect: "e1", By: "alice"}, {Predicate: "quorum", For: "1h", By: "bob"}}},
		Status: UpgradeStatus{Record: rec}}
	readAndSave(t, obj)
	u, _, _ := record(obj)
	u.Effects = running(true).Effects
	if err := setRecord(obj, u); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		u = readAndSave(t, obj)
	}
	if got, want := summary(u), "predicate quorum for every member by bob for 1h0m0s; the undo of effect e1 by alice"; got != want {
		t.Errorf("after the effect owed its undo:\n  %s\nwant\n  %s", got, want)
	}
}
