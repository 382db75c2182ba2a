// Package selfupgrade is "ferry first": before ferry moves a cluster to
// a release that requires a newer ferry, ferry and its agents are
// upgraded, and never does a cluster run newer than the ferry that
// drives it. A new ferry binary is checked (its sha256, then asked its
// release, which must be newer than the running ferry's), then each
// host's agent, one at a time, re-executes itself on it: its members
// never stop (the new agent adopts them), and the next host waits
// until the agent before answers on the new release.
//
// It knows agents through Agents (the process driver has them), and
// the store only to hold its engine lock and refuse while an upgrade
// of the cluster has not ended: ferry's and a member's moves never
// overlap.
package selfupgrade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// Agents is a driver whose substrate runs a ferry agent per host.
type Agents interface {
	// AgentRelease is the host's agent's ferry release and build
	// ("" from an agent older than the field).
	AgentRelease(ctx context.Context, host string) (release, build string, err error)
	// ReexecAgent puts the binary in the agent's store and has the
	// agent re-execute itself on it; it returns once the agent
	// accepted.
	ReexecAgent(ctx context.Context, host, path, sum, release string) error
}

// Store is what a self-upgrade reads of ferry's store: the current
// upgrade, which must have ended. The caller holds the store's engine
// lock throughout, so that none starts meanwhile.
type Store interface {
	Current() (upgrade.Upgrade, bool, error)
}

// Binary is a new ferry binary, checked.
type Binary struct {
	Path    string         `json:"path"`
	SHA256  string         `json:"sha256"`
	Release string         `json:"release"`
	Build   buildinfo.Info `json:"build"`
}

// ErrRefused marks a refusal made before anything changed.
var ErrRefused = errors.New("self-upgrade refused")

// ErrBusy marks a refusal because an upgrade of the cluster has not
// ended, or another ferry process holds the engine lock.
var ErrBusy = errors.New("the cluster is busy")

// Busy is a refusal because of ErrBusy: an upgrade that has not
// ended, or the engine lock held elsewhere.
func Busy(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", ErrRefused, ErrBusy, fmt.Sprintf(format, args...))
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Check verifies the binary at path before anything uses it: its
// sha256 must be sum, and asked `PATH version -o json` it must say a
// release newer than running (this ferry's). A downgrade or the same
// release is refused, naming both.
func Check(ctx context.Context, path, sum, running string) (Binary, error) {
	b, err := CheckBinary(ctx, path, sum)
	if err != nil {
		return b, err
	}
	switch c := config.CompareVersions(b.Release, running); {
	case c == 0:
		return Binary{}, refused("the new ferry binary %s is release %s, the release this ferry is already: nothing to upgrade", path, b.Release)
	case c < 0:
		return Binary{}, refused("the new ferry binary %s is release %s, older than this ferry's %s: a downgrade is refused", path, b.Release, running)
	}
	return b, nil
}

// CheckBinary verifies the ferry binary at path before anything uses
// it, whatever its release: its sha256 must be sum, and asked `PATH
// version -o json` it must say which ferry release it is. An upgrade
// that moves the agents first (the release's requires_ferry) compares
// the release itself.
func CheckBinary(ctx context.Context, path, sum string) (Binary, error) {
	sum = strings.ToLower(strings.TrimSpace(sum))
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return Binary{}, refused("--sha256 %q: want the binary's 64 hex digits (sha256sum prints them)", sum)
	}
	got, err := checksum.File(path)
	if err != nil {
		return Binary{}, refused("the new ferry binary %s: %v", path, err)
	}
	if got != sum {
		return Binary{}, refused("the new ferry binary %s has sha256 %s, not %s: not used", path, got, sum)
	}
	self, err := buildinfo.Of(ctx, path)
	if err != nil {
		return Binary{}, refused("%v", err)
	}
	return Binary{Path: path, SHA256: sum, Release: self.Release, Build: self.Build}, nil
}

// DefaultWait bounds how long one agent has to answer on the new
// release after it accepted to re-execute itself.
const DefaultWait = 60 * time.Second

// Config is one self-upgrade of the agents.
type Config struct {
	Binary Binary
	// Hosts are the hosts whose agents are upgraded, in this order.
	Hosts  []string
	Agents Agents
	// Store, if set, must have no upgrade in progress; the caller
	// holds its engine lock.
	Store Store
	// Wait bounds each agent's return (0: DefaultWait); Poll is how
	// often it is asked (0: 100ms).
	Wait, Poll time.Duration
	// Progress, if set, is told of each host once it is done.
	Progress func(HostResult)
}

// HostResult is one host's agent, upgraded (or already on the release).
type HostResult struct {
	Host string `json:"host"`
	// From and To are the agent's release before and after ("" from
	// an agent older than the field); Build its build after.
	From  string `json:"from"`
	To    string `json:"to"`
	Build string `json:"build,omitempty"`
	// Skipped is set when the agent was on the release already.
	Skipped bool `json:"skipped,omitempty"`
	// Handover is set on the server that answered the request: it
	// re-executes itself after its answer (a leader resigns its
	// election first, so that an upgraded standby leads).
	Handover bool `json:"handover,omitempty"`
	// Took is from the request to the agent's first answer on the new
	// release.
	Took time.Duration `json:"took_ns"`
}

// Report is what a self-upgrade did.
type Report struct {
	Release string       `json:"release"`
	Agents  []HostResult `json:"agents"`
	// Servers are the server replicas (Request.Servers), each by its
	// URL: the standbys re-executed and waited for, then the server
	// that answers, which re-executes once it has (Handover).
	Servers []HostResult `json:"servers,omitempty"`
}

// UpgradeAgents upgrades each host's agent to the binary, one host at
// a time. Before it changes anything it holds the store's engine lock,
// refuses while an upgrade has not ended, and asks every agent its
// release: a host that does not answer, or whose agent is newer than
// the binary (a downgrade), is refused by name. An agent on the release
// already is skipped. Each agent must answer on the new release within
// Wait before the next host is touched; the report says what was done
// when an error stops it.
func UpgradeAgents(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{Release: cfg.Binary.Release}
	if cfg.Agents == nil {
		return rep, refused("this substrate runs no ferry agents")
	}
	if cfg.Store != nil {
		if u, ok, err := cfg.Store.Current(); err != nil {
			return rep, refused("reading the current upgrade: %v", err)
		} else if ok && !u.State.Terminal() {
			return rep, Busy("upgrade %s is %s (%s → %s): ferry upgrades itself between upgrades of the cluster; finish or abort it first", u.ID, u.State, u.From, u.To)
		}
	}
	before := make([]string, len(cfg.Hosts))
	for i, h := range cfg.Hosts {
		rel, _, err := cfg.Agents.AgentRelease(ctx, h)
		if err != nil {
			return rep, refused("host %s's agent: %v", h, err)
		}
		if rel != "" && config.CompareVersions(rel, cfg.Binary.Release) > 0 {
			return rep, refused("host %s's agent is ferry %s, newer than %s: a downgrade is refused", h, rel, cfg.Binary.Release)
		}
		before[i] = rel
	}
	wait, poll := cmp.Or(cfg.Wait, DefaultWait), cmp.Or(cfg.Poll, 100*time.Millisecond)
	for i, h := range cfg.Hosts {
		r := HostResult{Host: h, From: before[i], To: cfg.Binary.Release}
		if before[i] == cfg.Binary.Release {
			r.Skipped = true
		} else {
			start := time.Now()
			if err := cfg.Agents.ReexecAgent(ctx, h, cfg.Binary.Path, cfg.Binary.SHA256, cfg.Binary.Release); err != nil {
				return rep, fmt.Errorf("host %s: %w", h, err)
			}
			build, err := waitRelease(ctx, cfg.Agents, h, cfg.Binary.Release, wait, poll)
			if err != nil {
				return rep, fmt.Errorf("host %s: %w", h, err)
			}
			r.Build, r.Took = build, time.Since(start)
		}
		rep.Agents = append(rep.Agents, r)
		if cfg.Progress != nil {
			cfg.Progress(r)
		}
	}
	return rep, nil
}

// waitRelease asks the host's agent its release every poll until it
// says release or wait passes; between its programs it does not
// answer, which is not an error until then.
func waitRelease(ctx context.Context, a Agents, host, release string, wait, poll time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	last := "no answer yet"
	for {
		rel, build, err := a.AgentRelease(ctx, host)
		switch {
		case err == nil && rel == release:
			return build, nil
		case err == nil:
			last = fmt.Sprintf("it says release %q", rel)
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the agent did not answer on release %s within %s (last: %s); its members keep running", release, wait, last)
		case <-t.C:
		}
	}
}

// Upgraded counts the agents re-executed (not skipped).
func (r Report) Upgraded() int {
	n := 0
	for _, a := range r.Agents {
		if !a.Skipped {
			n++
		}
	}
	return n
}

// Request is a self-upgrade as the CLI and the server's API
// (POST /v1/self-upgrade) take it.
type Request struct {
	// Binary is the new ferry binary's path (on the server's host when
	// sent to a server), SHA256 its sum.
	Binary string `json:"binary"`
	SHA256 string `json:"sha256"`
	// WaitMS bounds each agent's return (0: DefaultWait).
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Servers asks a server to upgrade the server replicas too, after
	// the agents: the standbys one at a time, then itself.
	Servers bool `json:"servers,omitempty"`
}

// Run checks the request's binary against this ferry's release and
// upgrades the agents of hosts (d must have agents), refusing while
// st's current upgrade has not ended: what ferry self-upgrade and the
// server's API both do, each holding its engine lock.
func Run(ctx context.Context, req Request, d any, hosts []string, st Store, progress func(HostResult)) (Report, Binary, error) {
	a, ok := d.(Agents)
	if !ok {
		return Report{}, Binary{}, refused("this substrate has no ferry agents to upgrade (only the process substrate runs them)")
	}
	if req.WaitMS < 0 {
		return Report{}, Binary{}, refused("wait %dms: want a duration above 0", req.WaitMS)
	}
	bin, err := Check(ctx, req.Binary, req.SHA256, buildinfo.Release())
	if err != nil {
		return Report{}, Binary{}, err
	}
	rep, err := UpgradeAgents(ctx, Config{Binary: bin, Hosts: hosts, Agents: a, Store: st,
		Wait: time.Duration(req.WaitMS) * time.Millisecond, Progress: progress})
	return rep, bin, err
}
