package plan

import (
	"fmt"
	"slices"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// partsOf divides component comp's phase whole among the phase stages
// of release rel's flow that move it (named parts: StarlingX's first
// and second control plane), by the stage's index in the flow: first
// the parts that select their members by host, then those that take a
// count (the first members of whole's order not taken yet, in the
// flow's order), then the part that takes the rest. Each part is
// planned as a phase of its own members, with the part's budget when
// it sets one; its quorum is the whole component's. A member still to
// move that no part takes is an error naming it; one already on the
// target that no part takes is listed as skipped by the last part.
func partsOf(c *config.Cluster, rel *config.Release, comp *config.Component, whole Phase, obs Observed, from *upgradeFrom) (map[int]Phase, error) {
	var idx []int
	rest := -1
	for i := range rel.Flow {
		if st := &rel.Flow[i]; st.Stage == config.StagePhase && st.Component == comp.Name {
			idx = append(idx, i)
			if st.TakesRest() && rest < 0 {
				rest = i
			}
		}
	}
	owner := make(map[string]int, len(comp.Members)) // member -> the flow index of its part
	for _, i := range idx {
		st := &rel.Flow[i]
		for j := range comp.Members {
			m := &comp.Members[j]
			if !c.SelectsMember(st, m) {
				continue
			}
			if first, dup := owner[m.Name]; dup {
				return nil, fmt.Errorf("plan: release %s: member %s of %s (on %s) is taken by two parts, %s and %s: select its host in one",
					rel.Version, m.Name, comp.Name, m.Host, rel.Flow[first].Name, st.Name)
			}
			owner[m.Name] = i
		}
	}
	order := whole.Members()
	for _, i := range idx {
		n := rel.Flow[i].Take
		for _, name := range order {
			if n <= 0 {
				break
			}
			if _, taken := owner[name]; !taken {
				owner[name] = i
				n--
			}
		}
	}
	var left []string
	for j := range comp.Members {
		name := comp.Members[j].Name
		if _, ok := owner[name]; ok {
			continue
		}
		switch {
		case rest >= 0:
			owner[name] = rest
		case slices.Contains(order, name):
			left = append(left, name+" (on "+comp.Members[j].Host+")")
		default:
			owner[name] = idx[len(idx)-1] // on the target already: listed as skipped
		}
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("plan: release %s: %s of %s taken by no part: no phase of %s selects their hosts, and none moves the rest",
			rel.Version, named(left), comp.Name, comp.Name)
	}
	out := make(map[int]Phase, len(idx))
	for _, i := range idx {
		st := &rel.Flow[i]
		sub := *comp
		sub.Members = nil
		for _, m := range comp.Members {
			if owner[m.Name] == i {
				sub.Members = append(sub.Members, m)
			}
		}
		if !st.MaxUnavailable.IsZero() {
			n := st.MaxUnavailable.Hosts(len(sub.Members))
			sub.Strategy.MaxUnavailable = n
			if sub.Strategy.MaxBatch > n {
				sub.Strategy.MaxBatch = n
			}
		}
		ph, err := phaseOf(&sub, obs, rel.Version, from)
		if err != nil {
			return nil, err
		}
		ph.Part, ph.Quorum = st.Name, whole.Quorum
		out[i] = ph
	}
	return out, nil
}
