package selfupgrade

import (
	"context"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
)

// AgentBuild is one host's agent in ferry versions.
type AgentBuild struct {
	Host    string `json:"host"`
	Release string `json:"release,omitempty"`
	Build   string `json:"build,omitempty"`
	// Error says why the agent's release is not known (it did not
	// answer; an agent older than the field says none).
	Error string `json:"error,omitempty"`
}

// Builds are ferry's own release and build, and each agent's: what
// ferry versions shows beside the members' versions.
type Builds struct {
	Ferry  buildinfo.Self `json:"ferry"`
	Agents []AgentBuild   `json:"agents,omitempty"`
}

// BuildTimeout bounds the question to one agent in Collect.
const BuildTimeout = 5 * time.Second

// Collect asks each host's agent its release and build when d has
// agents (else Agents is empty): one host that does not answer is
// named in its row, not fatal.
func Collect(ctx context.Context, d any, hosts []string) Builds {
	b := Builds{Ferry: buildinfo.Running()}
	a, ok := d.(Agents)
	if !ok {
		return b
	}
	for _, h := range hosts {
		hctx, cancel := context.WithTimeout(ctx, BuildTimeout)
		rel, build, err := a.AgentRelease(hctx, h)
		cancel()
		ab := AgentBuild{Host: h, Release: rel, Build: build}
		switch {
		case err != nil:
			ab.Error = err.Error()
		case rel == "":
			ab.Error = "the agent does not say its release (older than the field)"
		}
		b.Agents = append(b.Agents, ab)
	}
	return b
}

// HostNames are the description's hosts, in its order: the agents a
// self-upgrade moves, and ferry versions asks.
func HostNames(c *config.Cluster) []string {
	out := make([]string, 0, len(c.Hosts))
	for _, h := range c.Hosts {
		out = append(out, h.Name)
	}
	return out
}
