package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

func catalog() *config.Cluster {
	art := map[string]config.Artifact{"*": {Path: "a", SHA256: strings.Repeat("a", 64)}}
	c := &config.Cluster{Name: "t", Components: []config.Component{{Name: "kv", Order: 1,
		Strategy: config.Strategy{Type: typeCanary, MaxBatch: 1, MaxUnavailable: 1},
		Members:  []config.Member{{Name: "kv-1"}, {Name: "kv-2"}}}}}
	c.Releases = []config.Release{
		{Version: "1.0.0", Artifacts: art},
		{Version: "1.1.0", UpgradeFrom: []string{"1.0.x"}, Artifacts: art},
		{Version: "1.2.0", UpgradeFrom: []string{"1.1.x"}, Artifacts: art},
		{Version: "1.2.1", UpgradeFrom: []string{"1.2.x"}, DowngradeTo: []string{"1.2.0"}, Artifacts: art},
		{Version: "3.0.0", UpgradeFrom: []string{"2.x"}, Artifacts: art},
	}
	return c
}

// TestPath: the catalog's paths, skips and downgrades (StarlingX: only
// N to N+1, downgrades only to listed patch versions).
func TestPath(t *testing.T) {
	cases := []struct {
		name    string
		running []string
		to      string
		want    []string
		err     string
	}{
		{"one step", []string{"1.0.0"}, "1.1.0", []string{"1.1.0"}, ""},
		{"a chain through the release in between", []string{"1.0.0"}, "1.2.0", []string{"1.1.0", "1.2.0"}, ""},
		{"a chain from a mixed cluster", []string{"1.0.0", "1.1.0"}, "1.2.0", []string{"1.1.0", "1.2.0"}, ""},
		{"a skip with no path is refused, the path that works named", []string{"1.0.0"}, "3.0.0", nil,
			"no upgrade path from 1.0.0 to 3.0.0: it upgrades from [2.x], and no chain of releases in the catalog leads there; from 1.0.0 ferry can reach: 1.1.0, 1.2.0, 1.2.1"},
		{"a patch downgrade listed in downgrade_to", []string{"1.2.1"}, "1.2.0", []string{"1.2.0"}, ""},
		{"a downgrade across minor versions is refused, saying why", []string{"1.2.0"}, "1.1.0", nil,
			"no upgrade path from 1.2.0 to 1.1.0: a downgrade to 1.1.0 needs release 1.2.0 to list it in downgrade_to, which is empty (downgrades go only to an earlier patch of the same MAJOR.MINOR), and no chain"},
		{"past the patch it may go back to", []string{"1.2.1"}, "1.1.0", nil,
			"no upgrade path from 1.2.1 to 1.1.0: a downgrade to 1.1.0 needs release 1.2.1 to list it in downgrade_to, which is [1.2.0], and no chain of releases in the catalog leads there; from 1.2.1 ferry can reach: 1.2.0"},
		{"no chain of downgrades either", []string{"1.2.1"}, "1.0.0", nil, "from 1.2.1 ferry can reach: 1.2.0"},
		{"an unknown target", []string{"1.0.0"}, "9.9.9", nil, `"9.9.9" is not in the catalog`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Path(catalog(), tc.running, tc.to)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Path = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestComputeRefusesADowngradeNotListed(t *testing.T) {
	c := catalog()
	obs := Observed{Version: map[string]string{"kv-1": "1.2.0", "kv-2": "1.2.0"}}
	_, err := Compute(c, obs, "1.1.0")
	if !errors.Is(err, ErrNotUpgradable) || !strings.Contains(err.Error(), "a downgrade to 1.1.0 needs release 1.2.0 to list it in downgrade_to, which is empty") {
		t.Fatalf("err = %v", err)
	}
	obs = Observed{Version: map[string]string{"kv-1": "1.2.1", "kv-2": "1.2.1"}}
	if p, err := Compute(c, obs, "1.2.0"); err != nil || len(p.Phases[0].Batches) != 2 {
		t.Fatalf("patch downgrade: %+v, %v", p, err)
	}
}

// TestFirstFrom: where a cluster that runs nothing starts for a
// target: the first release of the catalog that may go there in one
// step; none for a release nothing leads to.
func TestFirstFrom(t *testing.T) {
	for to, want := range map[string]string{"1.1.0": "1.0.0", "1.2.0": "1.1.0", "1.2.1": "1.2.0", "1.0.0": "", "3.0.0": "", "9.9.9": ""} {
		if got := FirstFrom(catalog(), to); got != want {
			t.Errorf("FirstFrom(%s) = %q, want %q", to, got, want)
		}
	}
}
