package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/substrate/process"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// A sample cluster on several hosts (ClusterOptions.Hosts): each host
// has an agent of its own on loopback, the members are spread over
// them, and the load balancer's maintenance mode locks a host (its
// backends out of rotation) for a hosts stage.

// prePhase is the api component's pre_phase hook of the one-host
// sample: a flag for the phase's duration.
const prePhase = `      # A flag for the phase's duration (as Ceph's noout for the OSDs):
      # set before the first api member moves, unset after the last.
      pre_phase:
        - {http: "http://127.0.0.1:${LBADMIN}/admin/flags/maintenance-api", method: PUT,
           undo: {http: "http://127.0.0.1:${LBADMIN}/admin/flags/maintenance-api", method: DELETE}}
`

// placeOnHosts fills the description's host placeholders: the hosts
// block, each member's host, and with more than one host the hosts'
// lock, unlock and capacity calls (the balancer's maintenance mode;
// capacity: backends left on at least capacity hosts) in place of the
// api's pre_phase hook.
func placeOnHosts(vars map[string]string, hosts, capacity int) {
	host := func(i int) string { return fmt.Sprintf("host-%d", (i-1)%hosts+1) }
	for i := 1; i <= 4; i++ {
		vars[fmt.Sprintf("API%dHOST", i)] = host(i)
		if i <= 3 {
			vars[fmt.Sprintf("KV%dHOST", i)] = host(i)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  - {name: host-1, agent: \"127.0.0.1:%s\", token_file: agent/token}", vars["AGENT"])
	for i := 2; i <= hosts; i++ {
		fmt.Fprintf(&b, "\n  - {name: host-%d, agent: \"127.0.0.1:%s\", token_file: agent-%d/token}", i, vars[fmt.Sprintf("AGENT%d", i)], i)
	}
	vars["HOSTS"], vars["HOSTDEFAULTS"] = b.String(), ""
	if hosts == 1 {
		// (Placeholders are filled in once: its own are filled here.)
		vars["PREPHASE"] = strings.ReplaceAll(prePhase, "${LBADMIN}", vars["LBADMIN"])
		return
	}
	admin := "http://127.0.0.1:" + vars["LBADMIN"]
	vars["PREPHASE"] = ""
	vars["HOSTDEFAULTS"] = fmt.Sprintf(`
# Each host is locked before a hosts stage upgrades what runs on it: its
# api backends leave the balancer's rotation together (its maintenance
# mode), once the backends left are enough for the load.
host_defaults:
  lock: [{http: "%[1]s/admin/hosts/{{.Host}}/lock?timeout=10s", method: POST, timeout: 15s}]
  unlock: [{http: "%[1]s/admin/hosts/{{.Host}}/unlock", method: POST}]
  capacity: {http: "%[1]s/admin/hosts/{{.Host}}/capacity?min_hosts=%[2]d", timeout: 1s}`, admin, max(1, capacity))
}

// startOtherAgents starts the agents of host-2 … host-N, each in its
// own directory (agent-N), and returns them as the driver's hosts.
func (cl *Cluster) startOtherAgents(ctx context.Context, vars map[string]string, hosts int) ([]process.Host, error) {
	var out []process.Host
	for i := 2; i <= hosts; i++ {
		dir := filepath.Join(cl.Dir, fmt.Sprintf("agent-%d", i))
		addr := "127.0.0.1:" + vars[fmt.Sprintf("AGENT%d", i)]
		stop, err := startAgent(ctx, cl.self, addr, dir)
		if err != nil {
			return nil, err
		}
		cl.stopOthers = append(cl.stopOthers, stop)
		tok, err := bearer.Read(filepath.Join(dir, "token"))
		if err != nil {
			return nil, err
		}
		out = append(out, process.Host{Name: fmt.Sprintf("host-%d", i), Addr: addr, Token: tok})
	}
	return out, nil
}
