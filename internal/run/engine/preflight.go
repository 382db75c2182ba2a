package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
)

// Check is one preflight check and its verdict, like one line of
// StarlingX's health-query-upgrade.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Warning marks a check that passes but says something the
	// operator should know before starting (a component that serves
	// from one member): it does not refuse the start.
	Warning bool `json:"warning,omitempty"`
	// health marks a member's health or a component's cluster gate:
	// what may pass a moment later (HealthOnly).
	health bool
}

// Preflight is the list of checks run before an upgrade may start.
type Preflight struct {
	To     string  `json:"to,omitempty"`
	Checks []Check `json:"checks"`
	// Plan is the plan the checks were made for (when one could be made).
	Plan    *plan.Plan `json:"-"`
	planErr error
	snap    Snapshot
}

// OK reports whether every check passed.
func (p Preflight) OK() bool {
	for _, c := range p.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Failed lists the checks that did not pass.
func (p Preflight) Failed() []Check {
	var out []Check
	for _, c := range p.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// HealthOnly names the failed checks when every one of them is a
// member's health or a component's cluster gate, which may pass a
// moment later (a member between two elections of its own); nil when
// any other check failed, or none did.
func (p Preflight) HealthOnly() []string {
	var names []string
	for _, c := range p.Failed() {
		if !c.health {
			return nil
		}
		names = append(names, c.Name)
	}
	return names
}

// healthChecks are an observation's checks of every member's health
// (members in order) and every component's cluster gate, each marked
// health (HealthOnly).
func healthChecks(members []string, comps []*config.Component, obs upgrade.Observation) []Check {
	var out []Check
	for _, n := range members {
		mh := obs.Members[n]
		out = append(out, Check{Name: "member " + n + " healthy", OK: mh.Healthy, Detail: fmt.Sprintf("%s: %s", orDash(mh.Version), orDash(mh.Detail)), health: true})
	}
	for _, comp := range comps {
		if g, ok := obs.Gates[comp.Name]; ok {
			out = append(out, Check{Name: "cluster gate " + comp.Name, OK: g.Healthy, Detail: orDash(g.Detail), health: true})
		}
	}
	return out
}

// ErrPreflight is returned by Begin when the cluster is not fit to be
// upgraded; the error's text lists every failed check.
var ErrPreflight = errors.New("preflight failed")

// PreflightError carries the failed preflight.
type PreflightError struct{ Preflight Preflight }

func (e *PreflightError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: the cluster is not fit to upgrade, nothing was changed:", ErrPreflight)
	for _, c := range e.Preflight.Failed() {
		fmt.Fprintf(&b, "\n  FAIL  %s: %s", c.Name, c.Detail)
	}
	return b.String()
}

func (e *PreflightError) Unwrap() error { return ErrPreflight }

// lockHolders is a store that can say who holds its engine lock
// (store.Store: the data directory's flock).
type lockHolders interface{ EngineLockHolders() []string }

// RunPreflight checks that an upgrade to version to may start: no other
// upgrade in progress, no other ferry process holding the engine lock,
// every host answering, every member running healthy, every cluster
// gate green, every alarm of the description quiet, the target in the
// catalog and reachable from what runs, and the artifacts of the target
// (and of the running release, which a rollback needs) present with the
// right checksums and, for a signed release, signatures that verify
// with its key. With to empty it checks the cluster's health alone. It
// is StarlingX's health-query-upgrade: `ferry health --to` prints it,
// `ferry upgrade start` refuses on it.
func (e *Engine) RunPreflight(ctx context.Context, to string) Preflight {
	pf := Preflight{To: to}
	add := func(name string, ok bool, detail string) {
		pf.Checks = append(pf.Checks, Check{Name: name, OK: ok, Detail: detail})
	}
	if cur, ok, err := e.cfg.Store.Current(); err != nil {
		add("no upgrade in progress", false, err.Error())
	} else if ok && !cur.State.Terminal() {
		add("no upgrade in progress", false, fmt.Sprintf("upgrade %s is %s (%s → %s)", cur.ID, cur.State, cur.From, cur.To))
	} else {
		add("no upgrade in progress", true, "none")
	}
	if lp, ok := e.cfg.Store.(lockHolders); ok {
		if h := lp.EngineLockHolders(); len(h) > 0 {
			add("engine lock free", false, "held by "+strings.Join(h, ", ")+": another ferry process drives this data directory")
		} else {
			add("engine lock free", true, "no other ferry process holds it")
		}
	}
	snap, err := e.Observe(ctx)
	if err != nil {
		add("hosts answer", false, err.Error())
		return pf
	}
	pf.snap = snap
	add("hosts answer", true, fmt.Sprintf("%d member(s) observed", len(snap.Statuses)))
	pf.Checks = append(pf.Checks, healthChecks(e.order, e.c.ComponentsInOrder(), snap.Obs)...)
	for _, a := range e.c.Alarms {
		r := e.prober.Do(ctx, a.Call, config.TemplateData{Version: to})
		add("alarm "+a.Name, r.OK, orDash(r.Detail))
	}
	running := map[string]bool{}
	for _, v := range snap.Versions() {
		if v != "" {
			running[v] = true
		}
	}
	versions := sortedKeys(running)
	if to != "" {
		if e.c.Release(to) == nil {
			add("release "+to+" in the catalog", false, "not found; known: "+strings.Join(e.releaseNames(), ", "))
		} else {
			add("release "+to+" in the catalog", true, "found")
			if req := e.c.Release(to).RequiresFerry; req != "" {
				add(FerryUnderstands(to, req))
			}
			if ferryAsks(e.c.Release(to)) {
				add(e.ferryCheck(ctx, to))
			}
			p, err := plan.ComputePath(e.c, plan.Observed{Version: snap.Versions(), Down: snap.Down()}, to)
			if err != nil {
				pf.planErr = err
				add("upgrade path to "+to, false, err.Error())
			} else {
				pf.Plan = &p
				detail := fmt.Sprintf("from %s: %d phase(s)", strings.Join(p.From, ", "), len(p.Phases))
				if len(p.Path) > 1 {
					detail = fmt.Sprintf("from %s through %s: %d consecutive upgrades", strings.Join(p.From, ", "), strings.Join(p.Path, " → "), len(p.Path))
				}
				add("upgrade path to "+to, true, detail)
				for _, w := range SingleMembers(e.c, p) {
					pf.Checks = append(pf.Checks, Check{Name: "component " + w.Component + " keeps serving", OK: true, Warning: true, Detail: w.Detail})
				}
				versions = append(versions, p.Path...)
			}
			versions = append(versions, to)
			targets := []string{to}
			if pf.Plan != nil && len(pf.Plan.Path) > 1 {
				targets = pf.Plan.Path
			}
			for _, v := range targets {
				for i := range e.c.Applications {
					add(e.applicationSupports(ctx, &e.c.Applications[i], v))
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, v := range versions {
		if seen[v] {
			continue
		}
		seen[v] = true
		if e.c.Release(v) == nil {
			add("release "+v+" in the catalog", false, "members run it but the catalog does not list it: a rollback to it would have no artifact")
			continue
		}
		for _, comp := range e.c.ComponentsInOrder() {
			a, err := e.artifact(comp.Name, v)
			name := fmt.Sprintf("artifact of %s %s", comp.Name, v)
			switch {
			case err != nil:
				add(name, false, err.Error())
			case !comp.NeedsArtifact():
				add(name, true, "the kubelet version of its nodes, upgraded by its upgrade command")
			case a.Path == "":
				add(name, true, "image "+a.Image+" (pulled and checked by its substrate)")
			default:
				lc := e.checkLoad(ctx, comp.Name, v, a)
				add(name, lc.SumOK(), lc.SumDetail())
				if lc.Signed {
					add(fmt.Sprintf("signature of %s %s", comp.Name, v), lc.SigOK(), lc.SigDetail())
				}
			}
		}
	}
	return pf
}

func (e *Engine) releaseNames() []string {
	var out []string
	for _, r := range e.c.Releases {
		out = append(out, r.Version)
	}
	sort.Strings(out)
	return out
}

// ErrLocked is returned when a cluster description other than the one
// an upgrade began with is used while that upgrade has not ended.
var ErrLocked = errors.New("cluster locked by an upgrade in progress")

// CheckLock refuses description c for upgrade u while u runs, unless c
// is the very description u began with.
func CheckLock(u upgrade.Upgrade, digest, file string) error {
	if u.State.Terminal() || u.Description == "" || digest == u.Description {
		return nil
	}
	return fmt.Errorf("%w: %s changed since upgrade %s began (sha256 %.12s…, now %.12s…); nothing changes in the cluster until the upgrade ends: put the original description back, or let the upgrade end (ferry upgrade abort rolls it back)",
		ErrLocked, file, u.ID, u.Description, digest)
}

// FerryUnderstands is the preflight's check that this ferry is at least
// the release release to requires (requires_ferry): its name, verdict
// and detail.
func FerryUnderstands(to, requires string) (string, bool, string) {
	name := "ferry understands release " + to
	have := buildinfo.Release()
	if config.CompareVersions(have, requires) < 0 {
		return name, false, fmt.Sprintf("release %s requires ferry %s or later; this is ferry %s: upgrade ferry first", to, requires, have)
	}
	return name, true, fmt.Sprintf("ferry %s, %s required", have, requires)
}

// Lone is a component that plan moves and that serves from one member:
// while that member restarts, the component serves nothing.
type Lone struct {
	Component string
	Detail    string
}

// SingleMembers lists the components that plan p restarts and that
// have a single member (a strategy that takes them down on purpose,
// offline, is refused without --accept-downtime instead): Ironic's
// rolling upgrade asks for at least two conductors and two API
// services, and the operator is warned before starting, not refused.
func SingleMembers(c *config.Cluster, p plan.Plan) []Lone {
	var out []Lone
	seen := map[string]bool{}
	for _, ph := range p.Phases {
		comp := c.Component(ph.Component)
		if comp == nil || seen[comp.Name] || len(comp.Members) != 1 || len(ph.Members()) == 0 || Downtime(c, plan.Plan{Phases: []plan.Phase{ph}}) != "" {
			continue
		}
		seen[comp.Name] = true
		out = append(out, Lone{Component: comp.Name, Detail: fmt.Sprintf("%s has one member (%s): while it restarts, %s serves nothing; a zero-downtime upgrade needs a second member (Ironic's asks for two conductors and two API services)",
			comp.Name, comp.Members[0].Name, comp.Name)})
	}
	return out
}

// applicationSupports is the health query's check that application a
// supports release v (StarlingX's kube-upgrade-start refuses a
// Kubernetes version an installed application does not support): its
// list names v, and its check, asked with v, passes.
func (e *Engine) applicationSupports(ctx context.Context, a *config.Application, v string) (string, bool, string) {
	name := "application " + a.Name + " supports " + v
	if !a.SupportsRelease(v) {
		return name, false, fmt.Sprintf("%s supports %s, not %s: upgrade the application to a release that supports %s first", a.Name, a.SupportsText(), v, v)
	}
	detail := "supports " + a.SupportsText()
	if a.Check != nil {
		r := e.prober.Do(ctx, *a.Check, config.TemplateData{Version: v})
		if !r.OK {
			return name, false, fmt.Sprintf("%s says no: %s", a.Name, orDash(r.Detail))
		}
		detail = orDash(r.Detail)
		if len(a.Supports) > 0 {
			detail = "supports " + a.SupportsText() + "; " + detail
		}
	}
	return name, true, detail
}
