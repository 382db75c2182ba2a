package sim

import (
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// Scale returns a copy of description c in which every component has k
// members, to see a large cluster: member i is a copy of the
// described member i mod n (n described), named after it ("api-1",
// then "api-1-2", "api-1-3" …), on the matching copy of its host (a
// host "h1" gains "h1-2", "h1-3" … in the same failure domain), so that
// each host carries as many members as described and the domains
// spread over the copies. Its budgets grow with it, so that the same
// share of it may be down at once: max_unavailable, max_batch,
// max_unavailable_per_domain and a quorum that is set are multiplied by
// k/n (at least 1); max_unavailable_per_host stays, as each host
// carries what it did. c is not changed.
func Scale(c *config.Cluster, k int) (*config.Cluster, error) {
	return ScaleEach(c, func(*config.Component) int { return k })
}

// ScaleEach is Scale with a number of members for each component.
func ScaleEach(c *config.Cluster, count func(*config.Component) int) (*config.Cluster, error) {
	out := *c
	out.Components = make([]config.Component, len(c.Components))
	hosts := map[string]config.Host{}
	for _, h := range c.Hosts {
		hosts[h.Name] = h
	}
	out.Hosts = append([]config.Host(nil), c.Hosts...)
	added := map[string]bool{}
	names := map[string]bool{}
	for _, comp := range c.Components {
		for _, m := range comp.Members {
			names[m.Name] = true
		}
	}
	for ci, comp := range c.Components {
		n, k := len(comp.Members), count(&c.Components[ci])
		if k <= 0 {
			return nil, fmt.Errorf("sim: %s: members per component must be at least 1, not %d", comp.Name, k)
		}
		if n == 0 {
			out.Components[ci] = comp
			continue
		}
		members := make([]config.Member, 0, k)
		for i := range k {
			m := comp.Members[i%n]
			if r := i / n; r > 0 {
				m.Name = fmt.Sprintf("%s-%d", m.Name, r+1)
				if names[m.Name] {
					return nil, fmt.Errorf("sim: scaling %s: the name %s is taken already", comp.Name, m.Name)
				}
				names[m.Name] = true
				if h, ok := hosts[m.Host]; ok {
					copyName := fmt.Sprintf("%s-%d", h.Name, r+1)
					if !added[copyName] {
						if _, exists := hosts[copyName]; exists {
							return nil, fmt.Errorf("sim: scaling hosts: the name %s is taken already", copyName)
						}
						added[copyName] = true
						hc := h
						hc.Name = copyName
						out.Hosts = append(out.Hosts, hc)
					}
					m.Host = copyName
				}
			}
			members = append(members, m)
		}
		comp.Members = members
		grow := func(v int) int {
			if v == 0 {
				return 0
			}
			return max(1, int(float64(v)*float64(k)/float64(n)+0.5))
		}
		s := &comp.Strategy
		s.MaxUnavailable, s.MaxBatch = grow(s.MaxUnavailable), grow(s.MaxBatch)
		s.MaxUnavailablePerDomain, s.Quorum = grow(s.MaxUnavailablePerDomain), grow(s.Quorum)
		out.Components[ci] = comp
	}
	return &out, nil
}
