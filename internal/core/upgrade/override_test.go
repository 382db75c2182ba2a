package upgrade

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// TestScopedOverrides: an override applies to its component's members
// and its phase only, ends at its expiry, and a revoke withdraws it;
// the list only grows.
func TestScopedOverrides(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	u := Upgrade{ID: "u", Phase: 1,
		Plan: plan.Plan{Phases: []plan.Phase{{Component: "kv"}, {Component: "api"}}},
		Members: map[string]*Member{
			"kv-1":  {Name: "kv-1", Component: "kv"},
			"api-1": {Name: "api-1", Component: "api"},
		}}
	add := func(o Override) {
		t.Helper()
		o.At = t0
		if why := CheckOverride(&u, o, func(string) bool { return true }, "quorum, max_unavailable"); why != "" {
			t.Fatalf("CheckOverride(%s): %s", o, why)
		}
		u.Overrides = append(u.Overrides, o)
	}
	add(Override{Predicate: "quorum", Component: "api", Until: t0.Add(30 * time.Minute)})
	add(Override{Predicate: "max_unavailable", Phase: 1}) // the phase before: kv's
	for _, tc := range []struct {
		at        time.Duration
		predicate string
		member    string
		want      bool
	}{
		{0, "quorum", "api-1", true},
		{0, "quorum", "kv-1", false},                // another component
		{29 * time.Minute, "quorum", "api-1", true}, // before it expires
		{30 * time.Minute, "quorum", "api-1", false},
		{0, "max_unavailable", "api-1", false}, // phase 1 is not the phase in progress (2)
	} {
		s := stepper{u: u, now: t0.Add(tc.at)}
		if got := s.overridden(tc.predicate, tc.member); got != tc.want {
			t.Errorf("at +%s, %s for %s: overridden %v, want %v", tc.at, tc.predicate, tc.member, got, tc.want)
		}
	}
	if why := CheckOverride(&u, Override{Predicate: "quorum", Revoke: true, At: t0}, func(string) bool { return true }, ""); !strings.Contains(why, "no override in force matches") {
		t.Errorf("a revoke of another scope: %q", why)
	}
	add(Override{Predicate: "quorum", Component: "api", Until: t0.Add(30 * time.Minute), Revoke: true})
	if s := (stepper{u: u, now: t0}); s.overridden("quorum", "api-1") {
		t.Error("quorum still overridden for api-1 after its revoke")
	}
	if n := len(u.Overrides); n != 3 {
		t.Errorf("%d entries, want 3: a revoke is an entry of its own", n)
	}
	if why := CheckOverride(&u, Override{Predicate: "quorum", Component: "db", At: t0}, func(string) bool { return true }, ""); !strings.Contains(why, `component "db" has no member`) {
		t.Errorf("an unknown component: %q", why)
	}
}

// TestOverrideAct: the event of an override says what it switched off,
// by whom and why; a revoke says it was revoked, not switched off (the
// events said "revoked: ... switched off by" before).
func TestOverrideAct(t *testing.T) {
	for _, c := range []struct {
		o    Override
		want string
	}{
		{Override{Predicate: "quorum", Member: "kv-3", By: "ann", Reason: "kv-3 is being replaced"},
			"override: predicate quorum for member kv-3 switched off by ann: kv-3 is being replaced"},
		{Override{Predicate: "ok_to_stop", Component: "kv", By: "bob"},
			"override: predicate ok_to_stop for component kv switched off by bob"},
		{Override{Predicate: "ok_to_stop", Component: "kv", By: "bob", Revoke: true},
			"override: predicate ok_to_stop for component kv revoked by bob"},
	} {
		if got := c.o.Act(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
}
