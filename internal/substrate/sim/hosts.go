package sim

import (
	"fmt"
	"slices"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/health"
)

// A simulated description's hosts stages: the sim answers a host's
// lock, unlock and capacity calls itself (the capacity call says yes),
// keeps which hosts are locked, and checks, at every lock, that no more
// hosts are locked at once than the stage's max_unavailable, nor more
// in one failure domain than its max_unavailable_per_domain.

// The calls of a host.
const (
	callLock     = "sim:lock"
	callUnlock   = "sim:unlock"
	callCapacity = "sim:capacity"
)

// InvHosts is the hosts stages' invariant.
const InvHosts = "hosts locked at once (a hosts stage's max_unavailable, per domain)"

// hosts is the world's side of hosts stages.
type hosts struct {
	locked map[string]bool
	// limit and perDomain are each host's stage's budgets, domain its
	// failure domain; together, for each component, the components a
	// hosts stage moves with it.
	limit, perDomain map[string]int
	domain           map[string]string
	together         map[string]map[string]bool
}

// newHosts reads the hosts stages of the release to.
func newHosts(c *config.Cluster, to string) hosts {
	h := hosts{locked: map[string]bool{}, limit: map[string]int{}, perDomain: map[string]int{}, domain: map[string]string{},
		together: map[string]map[string]bool{}}
	r := c.Release(to)
	if r == nil {
		return h
	}
	for _, st := range r.HostsStages() {
		for _, comp := range st.Components {
			if h.together[comp] == nil {
				h.together[comp] = map[string]bool{} // a component spanning stages: moves with any of theirs
			}
			for _, other := range st.Components {
				h.together[comp][other] = true
			}
		}
		on := c.StageHosts(st)
		limit := st.MaxUnavailable.Hosts(len(on))
		for _, hn := range on {
			h.limit[hn], h.perDomain[hn] = limit, st.MaxUnavailablePerDomain
		}
	}
	for _, hc := range c.Hosts {
		h.domain[hc.Name] = hc.Domain
	}
	return h
}

// hostCall answers a host's call; w.mu is held.
func (w *World) hostCall(kind, host string) health.Result {
	h := &w.hosts
	switch kind {
	case callLock:
		if h.locked == nil {
			h.locked = map[string]bool{}
		}
		h.locked[host] = true
		n, inDomain := 0, 0
		for o := range h.locked {
			n++
			if d := h.domain[host]; d != "" && h.domain[o] == d {
				inDomain++
			}
		}
		now := w.clock.Now()
		w.inv.check(InvHosts, n <= h.limit[host], now, "host %s locked with %d hosts locked, max_unavailable %d", host, n, h.limit[host])
		if p := h.perDomain[host]; p > 0 {
			w.inv.check(InvHosts, inDomain <= p, now, "host %s locked with %d hosts of domain %s locked, max_unavailable_per_domain %d", host, inDomain, h.domain[host], p)
		}
		return health.Result{OK: true, Detail: "sim: " + host + " locked"}
	case callUnlock:
		delete(h.locked, host)
		return health.Result{OK: true, Detail: "sim: " + host + " unlocked"}
	}
	return health.Result{OK: true, Detail: fmt.Sprintf("sim: the hosts left can take %s's load", host)}
}

// movesWith reports whether components a and b move together in a
// hosts stage.
func (h *hosts) movesWith(a, b string) bool { return h.together[a][b] }

// isHostCall reports whether kind is a host's call.
func isHostCall(kind string) bool {
	return slices.Contains([]string{callLock, callUnlock, callCapacity}, kind)
}

// rewriteHosts is the hosts of a simulated description: their calls
// the sim's.
func rewriteHosts(c *config.Cluster, sim func(kind string, call config.Call) config.Call) {
	calls := func(kind string, cs []config.Call) []config.Call {
		out := make([]config.Call, len(cs))
		for i, cl := range cs {
			out[i] = sim(kind, cl)
		}
		return out
	}
	hc := func(in config.HostCalls) config.HostCalls {
		out := config.HostCalls{Lock: calls(callLock, in.Lock), Unlock: calls(callUnlock, in.Unlock)}
		if in.Capacity != nil {
			cp := sim(callCapacity, *in.Capacity)
			out.Capacity = &cp
		}
		return out
	}
	hs := make([]config.Host, len(c.Hosts))
	for i, h := range c.Hosts {
		h.HostCalls = hc(h.HostCalls)
		hs[i] = h
	}
	c.Hosts = hs
	c.HostDefaults = hc(c.HostDefaults)
}
