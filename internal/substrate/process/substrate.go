package process

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// Name is the substrate's name in a description (and the default:
// a description that names no substrate runs on local processes).
const Name = "process"

// Capabilities is what the process substrate can do: its agents start
// and stop members from nothing (so a cluster can be brought up and
// down), adopt processes they did not start, and keep members' output.
var Capabilities = substrate.Can(substrate.StartStop, substrate.ClusterUp, substrate.Adopt, substrate.Output)

func init() {
	substrate.Register(substrate.Substrate{
		Name: Name,
		Can:  Capabilities,
		Rules: config.SubstrateRules{
			Default: true,
			Runs:    config.ArtifactBinary,
			Reads:   []config.Field{config.FieldRunFiles},
			Host:    checkHost,
		},
		New: newFromDescription,
	})
}

// checkHost checks a host's agent: every host has one, and ferry
// speaks to an agent beyond loopback only over TLS.
func checkHost(n config.Node, h *config.Host) {
	switch {
	case h.Agent == "":
		n.Add("agent", "must be set for the process substrate: the host:port of the host's ferry agent")
	case n.Said("agent"): // its form is refused already
	case h.TLS == nil && !loopbackHostPort(h.Agent):
		n.Add("agent",
			"%s is beyond loopback, where ferry speaks to an agent only over TLS (its token runs programs on the host): add tls: {fingerprint: \"sha256:…\"} to host %s (the agent prints its certificate's fingerprint at start and writes it to its DIR/tls/fingerprint), or tls: {ca_file: PATH}",
			h.Agent, h.Name)
	}
}

// loopbackHostPort reports whether the host of a valid host:port is a
// loopback address (localhost, 127.0.0.0/8, ::1, an IPv4-mapped form),
// without any lookup: only there may ferry speak to an agent without
// TLS.
func loopbackHostPort(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// maxPEM bounds a CA file (tls.ca_file of a host): a bundle is some KiB.
const maxPEM = 1 << 20

// newFromDescription builds the driver for a description's hosts,
// reading each agent's token file and CA file.
func newFromDescription(c *config.Cluster, _ substrate.Options) (driver.Driver, error) {
	var hosts []Host
	for _, h := range c.Hosts {
		tok := ""
		if h.TokenFile != "" {
			t, err := bearer.Read(c.ResolvePath(h.TokenFile))
			if err != nil {
				return nil, fmt.Errorf("host %s: token_file: %w", h.Name, err)
			}
			tok = t
		}
		ph := Host{Name: h.Name, Addr: h.Agent, Token: tok}
		if h.TLS != nil {
			ph.Fingerprint = h.TLS.Fingerprint
			if h.TLS.CAFile != "" {
				ca, err := safefile.Read(c.ResolvePath(h.TLS.CAFile), maxPEM, safefile.DefaultTimeout)
				if err != nil {
					return nil, fmt.Errorf("host %s: tls.ca_file: %w", h.Name, err)
				}
				if _, err := tlspin.WithCA(ca); err != nil {
					return nil, fmt.Errorf("host %s: tls.ca_file %s: %w", h.Name, h.TLS.CAFile, err)
				}
				ph.CA = ca
			}
		}
		hosts = append(hosts, ph)
	}
	return New(hosts), nil
}
