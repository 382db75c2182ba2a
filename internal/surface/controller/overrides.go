package controller

import (
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// takeOverrides adds to record u the entries of spec.overrides it has
// not taken in yet, each as an override by the user its By names
// (which the admission policy of deploy/crd.yaml checked against the
// user who wrote it), at now.
//
// The record's overrides are the spec's entries taken in so far, each
// once: an entry is taken already when the record holds an override
// that is it (the same predicate, scope, reason and by, its phase and
// expiry as taken) and that no earlier entry claimed, so that reading
// the record again before the engine saves it takes nothing twice, and
// an entry written again after a revoke is a new one. An entry the
// record refuses (CheckOverride: an unknown member, the upgrade ended)
// is asked again at the next read, as the spec still holds it.
func takeOverrides(u *upgrade.Upgrade, specs []OverrideSpec, now time.Time) {
	claimed := make([]bool, len(u.Overrides))
	for _, o := range specs {
		taken := false
		for i, x := range u.Overrides[:len(claimed)] {
			if !claimed[i] && o.is(x) {
				claimed[i], taken = true, true
				break
			}
		}
		if taken {
			continue
		}
		ov, ok := o.override(u, now)
		if !ok {
			continue
		}
		if why := upgrade.CheckOverride(u, ov, strategy.Known, strings.Join(strategy.PredicateNames(), ", ")); why != "" {
			continue
		}
		u.Overrides = append(u.Overrides, ov)
	}
}

// override is entry o as the record's override, taken in at now: its
// phase the one in progress, its expiry counted from now. ok is false
// for an entry that cannot be one (a For that is no positive duration,
// or given with a revoke; the CRD's schema refuses those).
func (o OverrideSpec) override(u *upgrade.Upgrade, now time.Time) (upgrade.Override, bool) {
	ov := upgrade.Override{Predicate: o.Predicate, Member: o.Member, Effect: o.Effect, Component: o.Component,
		Revoke: o.Revoke, Reason: o.Reason, By: o.By, At: now}
	if ov.By == "" {
		// Written before the policy was installed: nobody vouches.
		ov.By = "(unknown: a spec.overrides entry without by)"
	}
	if o.Phase {
		ov.Phase, ov.PhaseRollback = u.Phase+1, u.RollingBack()
	}
	if o.For != "" {
		d, err := time.ParseDuration(o.For)
		if err != nil || d <= 0 || o.Revoke {
			return ov, false
		}
		ov.Until = now.Add(d)
	}
	return ov, true
}

// is reports whether record override x is entry o taken in.
func (o OverrideSpec) is(x upgrade.Override) bool {
	by := o.By
	if by == "" {
		by = "(unknown: a spec.overrides entry without by)"
	}
	if o.Predicate != x.Predicate || o.Member != x.Member || o.Effect != x.Effect || o.Component != x.Component ||
		o.Revoke != x.Revoke || o.Reason != x.Reason || by != x.By || o.Phase != (x.Phase > 0) {
		return false
	}
	if o.For == "" {
		return x.Until.IsZero()
	}
	d, err := time.ParseDuration(o.For)
	return err == nil && !x.Until.IsZero() && x.Until.Sub(x.At) == d
}
