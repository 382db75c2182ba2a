package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// AgentVersion returns the build of the host's agent, as its GET
// /v1/health says to a caller with its token; "" from an agent older
// than the field. A troubleshooting bundle names every build involved.
func (d *Driver) AgentVersion(ctx context.Context, host string) (string, error) {
	hb, err := d.agentHealth(ctx, host)
	return hb.Version, err
}

// AgentRelease returns the ferry release of the host's agent and its
// build, as its GET /v1/health says to a caller with its token (both
// "" from an agent older than the fields): what ferry versions shows
// and ferry self-upgrade waits on.
func (d *Driver) AgentRelease(ctx context.Context, host string) (release, build string, err error) {
	hb, err := d.agentHealth(ctx, host)
	return hb.Release, hb.Version, err
}

func (d *Driver) agentHealth(ctx context.Context, host string) (wire.Health, error) {
	h, err := d.host(host)
	if err != nil {
		return wire.Health{}, err
	}
	var hb wire.Health
	if err := d.call(ctx, h, d.requestTimeout, http.MethodGet, "/v1/health", nil, &hb); err != nil {
		return wire.Health{}, fmt.Errorf("process driver: version: %w", err)
	}
	return hb, nil
}

// ReexecAgent puts the ferry binary at path (its sha256 sum, release
// release) in the host's agent's store, uploaded like a member's
// artifact when the agent lacks it, and asks the agent to re-execute
// itself on it (POST /v1/agent/reexec). It returns once the agent
// accepted; the agent then answers again on the new binary with the
// same pid, its members running on (AgentRelease says when).
func (d *Driver) ReexecAgent(ctx context.Context, host, path, sum, release string) error {
	h, err := d.host(host)
	if err != nil {
		return err
	}
	a := driver.Artifact{Version: "ferry " + release, Path: path, SHA256: sum}
	if err := d.ensureStored(ctx, h, a); err != nil {
		return fmt.Errorf("process driver: the ferry binary to host %s's agent: %w", host, err)
	}
	var acc wire.ReexecAccepted
	req := wire.ReexecRequest{SHA256: strings.ToLower(sum), Release: release}
	// The agent asks the binary its release first (buildinfo.AskTimeout).
	if err := d.call(ctx, h, d.requestTimeout+buildinfo.AskTimeout, http.MethodPost, "/v1/agent/reexec", req, &acc); err != nil {
		if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w (the agent cannot re-execute itself: it is older than this ferry; restart it on the new binary)", err)
		}
		return fmt.Errorf("process driver: re-exec of host %s's agent: %w", host, err)
	}
	return nil
}

// Secrets returns the tokens the driver presents to the agents, sorted:
// values that whatever ferry writes out for others to read (a
// troubleshooting bundle) must never contain. They stay in memory.
func (d *Driver) Secrets() []string {
	var out []string
	for _, h := range d.hosts {
		if h.Token != "" {
			out = append(out, h.Token)
		}
	}
	sort.Strings(out)
	return out
}
