package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// ErrNoPath: no chain of releases in the catalog leads from what runs
// to the target.
var ErrNoPath = errors.New("plan: no upgrade path")

// Path returns the shortest chain of releases that takes a cluster
// running the given versions to version to, each step allowed by the
// catalog (see Allowed): [to] when one step does it, [1.1.0, 1.2.0]
// when 1.2.0 upgrades only from 1.1.x. The first step must be allowed
// from every running version. Like StarlingX, ferry does not skip: a
// chain is run as consecutive complete upgrades.
func Path(c *config.Cluster, running []string, to string) ([]string, error) {
	if c.Release(to) == nil {
		return nil, fmt.Errorf("%w: %q is not in the catalog", ErrUnknownRelease, to)
	}
	versions := make([]string, 0, len(c.Releases))
	for _, r := range c.Releases {
		versions = append(versions, r.Version)
	}
	sortVersions(versions)
	fromAll := func(w string) bool {
		for _, v := range running {
			if !Allowed(c, v, w) {
				return false
			}
		}
		return true
	}
	// Breadth first from every possible first step, in version order, so
	// that the shortest chain wins and ties go to the lower versions.
	prev := map[string]string{}
	var queue []string
	for _, w := range versions {
		if fromAll(w) && !(len(running) == 1 && running[0] == w) {
			prev[w] = ""
			queue = append(queue, w)
		}
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if u == to {
			var path []string
			for x := to; x != ""; x = prev[x] {
				path = append(path, x)
			}
			slices.Reverse(path)
			return path, nil
		}
		for _, w := range versions {
			if _, seen := prev[w]; !seen && w != u && Allowed(c, u, w) {
				prev[w] = u
				queue = append(queue, w)
			}
		}
	}
	var reach []string
	for _, w := range versions {
		if _, ok := prev[w]; ok {
			reach = append(reach, w)
		}
	}
	target := c.Release(to)
	how := "its upgrade_from is empty"
	if len(target.UpgradeFrom) > 0 {
		how = "it upgrades from [" + strings.Join(target.UpgradeFrom, ", ") + "]"
	}
	// A target older than everything that runs is a downgrade: what
	// refuses it is the running releases' downgrade_to.
	if len(running) > 0 && !slices.ContainsFunc(running, func(v string) bool { return config.CompareVersions(to, v) >= 0 }) {
		from := newUpgradeFrom(c, target)
		var whys []string
		for _, v := range running {
			whys = append(whys, from.why(v))
		}
		how = strings.Join(whys, "; ")
	}
	return nil, fmt.Errorf("%w from %s to %s: %s, and no chain of releases in the catalog leads there; from %s ferry can reach: %s",
		ErrNoPath, strings.Join(running, ", "), to, how, strings.Join(running, ", "), cmp.Or(strings.Join(reach, ", "), "none"))
}

// ComputePath is Compute, except that a target more than one step away
// is planned as the first step of the chain that reaches it (Path).
func ComputePath(c *config.Cluster, obs Observed, to string) (Plan, error) {
	p, err := Compute(c, obs, to)
	if err == nil || !errors.Is(err, ErrNotUpgradable) {
		return p, err
	}
	path, perr := Path(c, observedVersions(c, obs), to)
	if perr != nil {
		return Plan{}, perr
	}
	if len(path) < 2 {
		return Plan{}, err
	}
	p, err = Compute(c, obs, path[0])
	if err != nil {
		return Plan{}, err
	}
	p.Path = path
	return p, nil
}
