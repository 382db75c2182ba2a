package engine

import (
	"slices"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestPreflightHealthOnly: a preflight refused for members' health or
// cluster gates alone names them (a rehearsal asks again, as such a
// check may pass a moment later); one refused for anything else, or
// not refused, names nothing. The health checks are marked where
// RunPreflight makes them (healthChecks).
func TestPreflightHealthOnly(t *testing.T) {
	comps := []*config.Component{{Name: "kv"}, {Name: "api"}}
	obs := func(kv2, gate bool) upgrade.Observation {
		return upgrade.Observation{
			Members: map[string]upgrade.MemberHealth{
				"kv-1": {Healthy: true, Version: "1.0.0"},
				"kv-2": {Healthy: kv2, Version: "1.0.0", Detail: "no known leader"},
			},
			Gates: map[string]upgrade.Gate{"kv": {Healthy: gate}},
		}
	}
	other := func(ok bool) Check { return Check{Name: "release 2.0.0 in the catalog", OK: ok} }
	for _, tc := range []struct {
		name  string
		obs   upgrade.Observation
		extra []Check
		want  []string
	}{
		{"all pass", obs(true, true), []Check{other(true)}, nil},
		{"a member unhealthy", obs(false, true), []Check{other(true)}, []string{"member kv-2 healthy"}},
		{"a member and its gate", obs(false, false), nil, []string{"member kv-2 healthy", "cluster gate kv"}},
		{"a gate alone", obs(true, false), nil, []string{"cluster gate kv"}},
		{"health and another check", obs(false, true), []Check{other(false)}, nil},
		{"another check alone", obs(true, true), []Check{other(false)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pf := Preflight{Checks: append(healthChecks([]string{"kv-1", "kv-2"}, comps, tc.obs), tc.extra...)}
			if got := pf.HealthOnly(); !slices.Equal(got, tc.want) {
				t.Errorf("HealthOnly() = %q, want %q (failed: %+v)", got, tc.want, pf.Failed())
			}
		})
	}
}
