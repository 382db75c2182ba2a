package process

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// AgentVersion returns the build of the host's agent, as its GET
// /v1/health says to a caller with its token; "" from an agent older
// than the field. A troubleshooting bundle names every build involved.
func (d *Driver) AgentVersion(ctx context.Context, host string) (string, error) {
	h, err := d.host(host)
	if err != nil {
		return "", err
	}
	var hb wire.Health
	if err := d.call(ctx, h, d.requestTimeout, http.MethodGet, "/v1/health", nil, &hb); err != nil {
		return "", fmt.Errorf("process driver: version: %w", err)
	}
	return hb.Version, nil
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
