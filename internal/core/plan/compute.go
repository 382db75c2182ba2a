package plan

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// The errors Compute wraps; test for them with errors.Is.
var (
	// ErrUnknownRelease: the target version is not in the catalog.
	ErrUnknownRelease = errors.New("plan: unknown release")
	// ErrNoArtifact: the target release has nothing to run for a
	// component.
	ErrNoArtifact = errors.New("plan: no artifact")
	// ErrNotUpgradable: a member runs a version the target release does
	// not upgrade from.
	ErrNotUpgradable = errors.New("plan: cannot upgrade from this version")
	// ErrUnknownStrategy: a component's strategy is not one the planner
	// knows (Validate refuses it first; a Cluster built in Go may not).
	ErrUnknownStrategy = errors.New("plan: unknown strategy")
)

// maxNamed is how many member names a note or an error lists before it
// says "and N more".
const maxNamed = 5

// Compute returns the plan that takes cluster c, observed as obs, to
// version to. See the package documentation for the contract. When the
// upgrade is not possible it returns every reason at once (joined), each
// wrapping one of the Err sentinels.
func Compute(c *config.Cluster, obs Observed, to string) (Plan, error) {
	rel := c.Release(to)
	if rel == nil {
		known := make([]string, 0, len(c.Releases))
		for _, r := range c.Releases {
			known = append(known, r.Version)
		}
		sortVersions(known)
		return Plan{}, fmt.Errorf("%w: %q is not in the catalog of cluster %s (releases: %s)",
			ErrUnknownRelease, to, c.Name, cmp.Or(strings.Join(known, ", "), "none"))
	}
	p := Plan{From: observedVersions(c, obs), To: to, States: maps.Clone(rel.States)}
	from := newUpgradeFrom(c, rel)
	var errs []error
	phases := map[string]Phase{}
	for _, comp := range c.ComponentsInOrder() {
		if _, ok := rel.ArtifactFor(comp.Name); !ok && comp.NeedsArtifact() {
			errs = append(errs, fmt.Errorf("%w: release %s has no artifact for component %s (and no %q entry)",
				ErrNoArtifact, to, comp.Name, config.AnyComponent))
		}
		ph, err := phaseOf(comp, obs, to, from)
		if err != nil {
			errs = append(errs, err)
		}
		phases[comp.Name] = ph
		if len(rel.Flow) == 0 {
			p.Phases = append(p.Phases, ph)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Plan{}, err
	}
	if len(rel.Flow) > 0 {
		if err := p.flow(c, rel, phases, obs, from); err != nil {
			return Plan{}, err
		}
	}
	return p, nil
}

// flow lays out the release's own flow: its stages, a rollout one per
// component, and the phases in the order the flow reaches them.
// Validate has checked the flow; a Cluster built in Go may not have
// been, so a component the flow names and the description lacks is an
// error here, not a panic.
func (p *Plan) flow(c *config.Cluster, rel *config.Release, phases map[string]Phase, obs Observed, from *upgradeFrom) error {
	down := obs.Down
	parts := map[string]map[int]Phase{} // component -> flow index -> its part's phase
	for i := range rel.Flow {
		fs := &rel.Flow[i]
		st := Stage{Kind: fs.Stage, Component: fs.Component, Name: fs.Name, State: fs.State, PointOfNoReturn: fs.PointOfNoReturn}
		switch fs.Stage {
		case config.StageHosts:
			ph, err := hostsOf(c, fs, phases, down)
			if err != nil {
				return err
			}
			p.Phases = append(p.Phases, ph)
			st.Name = ph.Component
		case config.StagePhase:
			ph, ok := phases[fs.Component]
			if !ok {
				return fmt.Errorf("plan: release %s: the flow's phase of %q: no such component", rel.Version, fs.Component)
			}
			if fs.IsPart() {
				if parts[fs.Component] == nil {
					ps, err := partsOf(c, rel, c.Component(fs.Component), ph, obs, from)
					if err != nil {
						return err
					}
					parts[fs.Component] = ps
				}
				ph = parts[fs.Component][i]
			}
			p.Phases = append(p.Phases, ph)
		case config.StageRollout:
			for i, name := range fs.Components {
				comp := c.Component(name)
				if comp == nil {
					return fmt.Errorf("plan: release %s: the flow's rollout of %q: no such component", rel.Version, name)
				}
				ph, err := rolloutOf(comp, rel.Version)
				if err != nil {
					return err
				}
				p.Phases = append(p.Phases, ph)
				// The point of no return is the rollout's beginning: its
				// first component.
				p.Flow = append(p.Flow, Stage{Kind: config.StageRollout, Component: name, State: fs.State, PointOfNoReturn: fs.PointOfNoReturn && i == 0})
			}
			continue
		default:
			if _, ok := config.LookupStageKind(fs.Stage); ok {
				// A registered kind's stage (an action) is named by its
				// Name; its calls are the release's (StageCalls).
				st.Component = ""
			}
		}
		p.Flow = append(p.Flow, st)
	}
	return nil
}

// rolloutOf plans the restart of every member of comp on release to,
// which they run by then: in description order, in the batches its
// strategy expects (at run time, those down go first and the role
// holder last, as in a phase).
func rolloutOf(comp *config.Component, to string) (Phase, error) {
	ph, st, err := strategyOf(comp)
	if err != nil {
		return ph, err
	}
	members := make([]strategy.Member, len(comp.Members))
	for i := range comp.Members {
		m := &comp.Members[i]
		members[i] = strategy.Member{Name: m.Name, Component: comp.Name, Host: m.Host, Domain: m.Domain,
			Healthy: true, Pending: true, Version: to}
	}
	batches, _ := st.Expected(ph.Settings, members)
	for _, b := range batches {
		ph.Batches = append(ph.Batches, Batch{Members: b})
	}
	ph.Rollout = true
	ph.Note = "restarted on " + to + " with the pin moved to " + to
	return ph, nil
}

// strategyOf is the phase of comp as its strategy makes it, before any
// member is placed: its type, budget, settings and quorum. On an
// unknown strategy the phase has its type and budget only.
func strategyOf(comp *config.Component) (Phase, strategy.Strategy, error) {
	s := comp.Strategy
	typ := cmp.Or(s.Type, config.DefaultStrategy)
	maxU := max(1, s.MaxUnavailable) // 0 means 1
	ph := Phase{Component: comp.Name, Strategy: string(typ), MaxUnavailable: maxU}
	st, ok := strategy.Lookup(string(typ))
	if !ok {
		return ph, nil, fmt.Errorf("%w: component %s has strategy %q (known: %s)",
			ErrUnknownStrategy, comp.Name, typ, strings.Join(strategy.Names(), ", "))
	}
	// A Cluster built in Go may lack the defaults Parse applies.
	settings := s.Settings()
	settings.Type, settings.MaxUnavailable = string(typ), maxU
	if settings.MaxBatch < 1 {
		settings.MaxBatch = 0 // Defaults fills a zero field only
		settings.MaxBatch = max(1, st.Defaults(settings).MaxBatch)
	}
	ph.Settings = settings
	ph.Quorum = st.Quorum(settings, len(comp.Members))
	return ph, st, nil
}

// phaseOf plans one component.
func phaseOf(comp *config.Component, obs Observed, to string, from *upgradeFrom) (Phase, error) {
	ph, st, strategyErr := strategyOf(comp)
	maxU := ph.MaxUnavailable

	var (
		downFirst    []string          // down, need the upgrade: they go first
		others       []string          // up, need the upgrade
		toMove       []strategy.Member // both, in description order
		downAtTarget []string          // down, not in the plan: they use the budget
		bad          = map[string][]string{}
		badVersions  []string // keys of bad in order of appearance
	)
	for i := range comp.Members {
		name := comp.Members[i].Name
		v, down := obs.Version[name], obs.Down[name]
		switch {
		case v == to:
			reason := "already at " + to
			if down {
				reason += " (down)"
				downAtTarget = append(downAtTarget, name)
			}
			ph.Skipped = append(ph.Skipped, Skipped{Member: name, Reason: reason})
		case v == "" && down, v != "" && from.allows(v):
			if down {
				downFirst = append(downFirst, name)
			} else {
				others = append(others, name)
			}
			// As the strategy sees it before the upgrade: its health
			// and failure domain known, no role yet.
			m := &comp.Members[i]
			toMove = append(toMove, strategy.Member{Name: name, Component: comp.Name, Host: m.Host, Domain: m.Domain,
				Healthy: !down, Pending: true, Version: v})
		default:
			if _, seen := bad[v]; !seen {
				badVersions = append(badVersions, v)
			}
			bad[v] = append(bad[v], name)
		}
	}

	var errs []error
	for _, v := range badVersions {
		ms := bad[v]
		if v == "" {
			errs = append(errs, fmt.Errorf("%w: %s (component %s) %s running but %s no version: only a member that is down may be installed from nothing",
				ErrNotUpgradable, named(ms), comp.Name, isAre(ms), reportsReport(ms)))
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %s (component %s) %s %s; %s",
			ErrNotUpgradable, named(ms), comp.Name, runRuns(ms), v, from.why(v)))
	}

	budget := maxU - len(downAtTarget)
	var strategyNote string
	if strategyErr != nil {
		errs = append(errs, strategyErr)
	} else {
		expect := ph.Settings
		if budget < 1 || budget < expect.MaxBatch {
			// Members down at the target use the budget for the whole
			// phase: the batches the plan expects are no larger than
			// what is left (the machine waits when nothing is).
			limit := max(1, budget)
			expect = strategy.Settings{Type: expect.Type, MaxBatch: min(expect.MaxBatch, limit), MaxUnavailable: limit}
		}
		var batches [][]string
		batches, strategyNote = st.Expected(expect, toMove)
		for _, b := range batches {
			ph.Batches = append(ph.Batches, Batch{Members: b})
		}
	}

	var notes []string
	if len(downFirst) > 0 {
		notes = append(notes, fmt.Sprintf("%s %s down: upgraded first, replacing a member that is down costs no availability",
			named(downFirst), isAre(downFirst)))
	}
	if len(downAtTarget) > 0 && len(toMove) > 0 {
		n := fmt.Sprintf("%s %s down (already at %s): %d of max_unavailable %d already used",
			named(downAtTarget), isAre(downAtTarget), to, len(downAtTarget), maxU)
		healthy := len(comp.Members) - len(downAtTarget)
		switch {
		case budget < 1 && ph.Settings.MaxBatch > 1:
			n += "; batches of 1, each waits until one of them recovers"
		case budget < 1:
			n += "; each member waits until one of them recovers"
		case ph.Quorum > 0 && len(others) > 0 && healthy-1 < ph.Quorum:
			n += fmt.Sprintf("; stopping a member would leave %d healthy of quorum %d, so each waits until one of them recovers",
				healthy-1, ph.Quorum)
		}
		notes = append(notes, n)
	}
	if strategyNote != "" {
		notes = append(notes, strategyNote)
	}
	ph.Note = strings.Join(notes, "; ")
	return ph, errors.Join(errs...)
}

// upgradeFrom decides whether a member may move from a version to the
// target release, with the verdict for each version remembered: a
// thousand members run only a few versions. Moving up needs the
// target's upgrade_from; moving down needs the running release's
// downgrade_to (which validation keeps to the same MAJOR.MINOR).
type upgradeFrom struct {
	c    *config.Cluster
	to   *config.Release
	seen map[string]bool
}

func newUpgradeFrom(c *config.Cluster, r *config.Release) *upgradeFrom {
	return &upgradeFrom{c: c, to: r, seen: map[string]bool{}}
}

func (u *upgradeFrom) allows(v string) bool {
	if ok, seen := u.seen[v]; seen {
		return ok
	}
	ok := Allowed(u.c, v, u.to.Version)
	u.seen[v] = ok
	return ok
}

// why says why a member on v may not move to the target.
func (u *upgradeFrom) why(v string) string {
	to := u.to.Version
	if config.CompareVersions(to, v) < 0 {
		r := u.c.Release(v)
		switch {
		case r == nil:
			return fmt.Sprintf("%s is not in the catalog, so nothing says it may go back to %s", v, to)
		case len(r.DowngradeTo) == 0:
			return fmt.Sprintf("a downgrade to %s needs release %s to list it in downgrade_to, which is empty (downgrades go only to an earlier patch of the same MAJOR.MINOR)", to, v)
		default:
			return fmt.Sprintf("a downgrade to %s needs release %s to list it in downgrade_to, which is [%s]", to, v, strings.Join(r.DowngradeTo, ", "))
		}
	}
	if len(u.to.UpgradeFrom) == 0 {
		return fmt.Sprintf("release %s upgrades from nothing (its upgrade_from is empty)", to)
	}
	return fmt.Sprintf("release %s upgrades from [%s]", to, strings.Join(u.to.UpgradeFrom, ", "))
}

// FirstFrom is the first release of the catalog that may be upgraded
// to release to in one step, or "": where a cluster that runs nothing
// yet starts when it is to be upgraded to to (a simulation, a
// rehearsal).
func FirstFrom(c *config.Cluster, to string) string {
	for _, r := range c.Releases {
		if r.Version != to && Allowed(c, r.Version, to) {
			return r.Version
		}
	}
	return ""
}

// Allowed reports whether a member running version from may move to
// release to in one step: up when to's upgrade_from matches from, down
// when from's downgrade_to matches to.
func Allowed(c *config.Cluster, from, to string) bool {
	if from == to {
		return true
	}
	target := c.Release(to)
	if target == nil {
		return false
	}
	if config.CompareVersions(to, from) < 0 {
		r := c.Release(from)
		if r == nil {
			return false
		}
		for _, p := range r.DowngradeTo {
			if config.MatchVersion(p, to) {
				return true
			}
		}
		return false
	}
	for _, p := range target.UpgradeFrom {
		if config.MatchVersion(p, from) {
			return true
		}
	}
	return false
}

// observedVersions returns the distinct versions the cluster's members
// run, in version order; unknown ("") is not a version.
func observedVersions(c *config.Cluster, obs Observed) []string {
	seen := map[string]bool{}
	var out []string
	for i := range c.Components {
		for _, m := range c.Components[i].Members {
			if v := obs.Version[m.Name]; v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	sortVersions(out)
	return out
}

var versionRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-(.+))?$`)

// sortVersions orders versions as versions (1.9.0 before 1.10.0, 2.0.0-rc1
// before 2.0.0); strings that are not versions come after, as strings.
func sortVersions(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool { return compareVersions(vs[i], vs[j]) < 0 })
}

func compareVersions(a, b string) int {
	ma, mb := versionRE.FindStringSubmatch(a), versionRE.FindStringSubmatch(b)
	switch {
	case ma == nil && mb == nil:
		return strings.Compare(a, b)
	case ma == nil:
		return 1
	case mb == nil:
		return -1
	}
	for k := 1; k <= 3; k++ {
		// No leading zeros: the longer number is the larger.
		if c := len(ma[k]) - len(mb[k]); c != 0 {
			return c
		}
		if c := strings.Compare(ma[k], mb[k]); c != 0 {
			return c
		}
	}
	switch {
	case ma[4] == mb[4]:
		return 0
	case ma[4] == "": // a release comes after its pre-releases
		return 1
	case mb[4] == "":
		return -1
	}
	return strings.Compare(ma[4], mb[4])
}

// named lists member names, the first few of them when there are many.
func named(ms []string) string {
	if len(ms) <= maxNamed {
		return strings.Join(ms, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ms[:maxNamed], ", "), len(ms)-maxNamed)
}

func isAre(ms []string) string { return plural(ms, "is", "are") }

func runRuns(ms []string) string { return plural(ms, "runs", "run") }

func reportsReport(ms []string) string { return plural(ms, "reports", "report") }

func plural(ms []string, one, many string) string {
	if len(ms) == 1 {
		return one
	}
	return many
}
