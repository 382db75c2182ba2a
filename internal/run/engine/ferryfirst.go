package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// Ferry first, as the upgrade's first step: a release that asks for a
// newer ferry than the agents run (its requires_ferry, or a ferry
// binary of its own) has the agents moved onto it before any member
// moves (upgrade.FerryFirst, the action ActFerry): selfupgrade's loop,
// one host at a time, each agent re-executing itself with its members
// running on. The preflight says beforehand what it will do, or why it
// cannot ("ferry's agents understand release V").

// ferryAsks reports whether release r asks for ferry first.
func ferryAsks(r *config.Release) bool {
	return r != nil && (r.RequiresFerry != "" || r.Ferry.Path != "")
}

// agents is the driver's agents, when its substrate runs them.
func (e *Engine) agents() (selfupgrade.Agents, bool) {
	a, ok := e.cfg.Driver.(selfupgrade.Agents)
	return a, ok
}

// self is the ferry binary that runs this engine: what agents older
// than a release's requires_ferry re-execute on when the release names
// no binary of its own.
func (e *Engine) self() (string, error) {
	if e.cfg.Self != "" {
		return e.cfg.Self, nil
	}
	return os.Executable()
}

// ferryPlan is what ferry first does for one release: which agents
// move, onto which binary.
type ferryPlan struct {
	release  string
	requires string
	// named: the release names the binary (else it is this ferry's).
	named bool
	bin   selfupgrade.Binary
	// hosts are every host's agent and the release it runs, in the
	// description's order; older those that move.
	hosts []selfupgrade.AgentBuild
	older []string
}

// planFerry asks every agent its release and decides which move to the
// ferry release to asks for, checking the binary they would move to
// (its sha256 and signature, then its release): an error says why it
// cannot be done, before anything is. A release that asks for nothing,
// or a substrate without agents whose release names no binary, needs
// nothing.
func (e *Engine) planFerry(ctx context.Context, to string) (ferryPlan, error) {
	r := e.c.Release(to)
	p := ferryPlan{release: to}
	if !ferryAsks(r) {
		return p, nil
	}
	p.requires, p.named = r.RequiresFerry, r.Ferry.Path != ""
	a, ok := e.agents()
	if !ok {
		if p.named {
			return p, fmt.Errorf("release %s names a ferry binary for ferry's agents (ferry.path), and substrate %s runs no agents", to, e.c.Substrate)
		}
		return p, nil // this ferry understands the release (FerryUnderstands); nothing else runs ferry
	}
	for _, h := range selfupgrade.HostNames(e.c) {
		hctx, cancel := context.WithTimeout(ctx, selfupgrade.BuildTimeout)
		rel, build, err := a.AgentRelease(hctx, h)
		cancel()
		if err != nil {
			return p, fmt.Errorf("host %s's agent does not say its release: %w", h, err)
		}
		p.hosts = append(p.hosts, selfupgrade.AgentBuild{Host: h, Release: rel, Build: build})
	}
	older := func(floor string) {
		p.older = nil
		for _, h := range p.hosts {
			if h.Release == "" || config.CompareVersions(h.Release, floor) < 0 {
				p.older = append(p.older, h.Host)
			}
		}
	}
	if p.named {
		bin, err := e.ferryBinary(ctx, r)
		if err != nil {
			return p, err
		}
		if p.requires != "" && config.CompareVersions(bin.Release, p.requires) < 0 {
			return p, fmt.Errorf("release %s names ferry binary %s, which is ferry %s, older than its requires_ferry %s", to, bin.Path, bin.Release, p.requires)
		}
		p.bin = bin
		older(bin.Release)
		return p, nil
	}
	if older(p.requires); len(p.older) == 0 {
		return p, nil
	}
	path, err := e.self()
	if err != nil {
		return p, fmt.Errorf("the agents of %s run a ferry older than %s, which release %s requires, and this ferry's own binary cannot be found to move them to: %w; name one in the release (ferry: {path, sha256}) or run ferry self-upgrade",
			strings.Join(p.older, ", "), p.requires, to, err)
	}
	sum, err := checksum.File(path)
	if err != nil {
		return p, fmt.Errorf("this ferry's own binary %s, which the agents would move to: %w", path, err)
	}
	bin, err := selfupgrade.CheckBinary(ctx, path, sum)
	if err != nil {
		return p, fmt.Errorf("this ferry's own binary, which the agents would move to: %w", err)
	}
	if config.CompareVersions(bin.Release, p.requires) < 0 {
		return p, fmt.Errorf("this ferry's own binary %s is ferry %s now, older than %s, which release %s requires (was it replaced since ferry %s started?); name the ferry binary in the release (ferry: {path, sha256})",
			path, bin.Release, p.requires, to, buildinfo.Release())
	}
	p.bin = bin
	return p, nil
}

// ferryBinary is release r's ferry binary, checked: its sha256 and,
// for a signed release, its signature (as a member's load), then the
// release it says it is.
func (e *Engine) ferryBinary(ctx context.Context, r *config.Release) (selfupgrade.Binary, error) {
	l := loadCheck{Path: e.c.ResolvePath(r.Ferry.Path), Want: r.Ferry.SHA256}
	if key := e.c.SigningKeyOf(r); key != "" {
		l.Signed, l.KeyPath, l.SigPath = true, e.c.ResolvePath(key), e.c.ResolvePath(r.Ferry.Signature)
	}
	l = e.loads.check(ctx, l)
	if err := l.Refusal(); err != nil {
		return selfupgrade.Binary{}, fmt.Errorf("release %s's ferry binary: %w", r.Version, err)
	}
	bin, err := selfupgrade.CheckBinary(ctx, l.Path, l.Sum)
	if err != nil {
		return bin, fmt.Errorf("release %s's ferry binary: %w", r.Version, err)
	}
	return bin, nil
}

// ferryCheck is the preflight's check of ferry first for release to:
// what it will do, or why it cannot.
func (e *Engine) ferryCheck(ctx context.Context, to string) (name string, ok bool, detail string) {
	name = "ferry's agents understand release " + to
	p, err := e.planFerry(ctx, to)
	switch {
	case err != nil:
		return name, false, err.Error()
	case len(p.hosts) == 0:
		return name, true, "no agents: this ferry understands it"
	case len(p.older) == 0:
		return name, true, fmt.Sprintf("every agent on ferry %s or later: %s", ferryFloor(p), agentReleases(p.hosts))
	}
	return name, true, fmt.Sprintf("the agents of %s (%s) are re-executed on ferry %s (%s) as the upgrade's first step, one host at a time, their members running on",
		strings.Join(p.older, ", "), agentReleases(p.hosts), p.bin.Release, p.bin.Path)
}

// ferryFloor is the release every agent must run at least.
func ferryFloor(p ferryPlan) string {
	if p.named {
		return p.bin.Release
	}
	return p.requires
}

func agentReleases(hs []selfupgrade.AgentBuild) string {
	var out []string
	for _, h := range hs {
		rel := h.Release
		if rel == "" {
			rel = "a ferry older than the release field"
		}
		out = append(out, h.Host+" "+rel)
	}
	return strings.Join(out, ", ")
}

// ferryStep is the record's ferry first step for an upgrade to to, nil
// when it has none: on a substrate with agents, a release that asks.
func (e *Engine) ferryStep(to string) *upgrade.FerryFirst {
	r := e.c.Release(to)
	if _, ok := e.agents(); !ok || !ferryAsks(r) {
		return nil
	}
	return &upgrade.FerryFirst{Requires: r.RequiresFerry, Binary: r.Ferry.Path}
}

// ferryTimeout bounds the ActFerry action: each agent its wait for the
// new release, its upload and the question of its release.
func (e *Engine) ferryTimeout() time.Duration {
	return time.Duration(max(len(e.c.Hosts), 1))*(selfupgrade.DefaultWait+driverOpMargin+buildinfo.AskTimeout) + actionMargin
}

// ferryFirst is the ActFerry action of upgrade u: the agents older than
// what release a.Version asks for re-executed on the ferry binary, one
// host at a time, each waited for on the new release; an event says
// each host's as it is done. An agent on the release already is left,
// so a step lost with its process is simply taken again.
func (e *Engine) ferryFirst(ctx context.Context, u upgrade.Upgrade, a upgrade.Action) (string, error) {
	p, err := e.planFerry(ctx, a.Version)
	if err != nil {
		return "", err
	}
	if len(p.older) == 0 {
		return fmt.Sprintf("every agent on ferry %s or later already (%s)", ferryFloor(p), agentReleases(p.hosts)), nil
	}
	ag, _ := e.agents()
	rep, err := selfupgrade.UpgradeAgents(ctx, selfupgrade.Config{Binary: p.bin, Hosts: p.older, Agents: ag,
		Progress: func(r selfupgrade.HostResult) {
			msg := fmt.Sprintf("ferry first: host %s's agent on ferry %s already", r.Host, r.To)
			if !r.Skipped {
				msg = fmt.Sprintf("ferry first: host %s's agent %s → %s in %s (build %s), its members running on", r.Host, orDash(r.From), r.To,
					r.Took.Round(time.Millisecond), r.Build)
			}
			if err := actionEvent(ctx, store.Event{Kind: "ferry", Message: msg}); err != nil {
				e.cfg.Logger.Warn("ferry first: the event of a host's agent not recorded", "host", r.Host, "err", err)
			}
		}})
	if err != nil {
		return "", err
	}
	var moved []string
	for _, r := range rep.Agents {
		if !r.Skipped {
			moved = append(moved, fmt.Sprintf("%s %s → %s", r.Host, orDash(r.From), r.To))
		}
	}
	return fmt.Sprintf("%d agent(s) on ferry %s (%s): %s", len(moved), p.bin.Release, p.bin.Path, strings.Join(moved, ", ")), nil
}
