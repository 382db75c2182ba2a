package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// Hosts is the layout of a hosts stage's phase: which components it
// upgrades, each with the settings its own strategy gives it (the
// machine admits each member on a locked host against them), the
// members to move on each host, and the host budgets. The phase's
// batches are host batches: each names its hosts (Batch.Hosts) and
// every member to move on them, host by host, each host's in the
// components' order.
type Hosts struct {
	// Components are upgraded on each host in this order.
	Components []string `json:"components"`
	// Parts are each component's phase as its strategy makes it: its
	// settings, quorum, skipped members and note (their batches list
	// the members to move, in the strategy's order).
	Parts []Phase `json:"parts"`
	// MaxUnavailable bounds the hosts locked at once;
	// MaxUnavailablePerDomain per failure domain (0: no bound).
	MaxUnavailable          int `json:"max_unavailable"`
	MaxUnavailablePerDomain int `json:"max_unavailable_per_domain,omitempty"`
	// On lists each host's members to move, in the components' order;
	// Domains each host's failure domain.
	On      map[string][]string `json:"on"`
	Domains map[string]string   `json:"domains,omitempty"`
	// LockDeadline bounds a host's lock, retried until then.
	LockDeadline config.Duration `json:"lock_deadline,omitempty"`
	// Strategy orders the hosts (strategy.NextHostsBy): the stage's
	// strategy, "" for the default order.
	Strategy string `json:"strategy,omitempty"`
}

// Part is the phase of component comp within the hosts phase, or nil.
func (h *Hosts) Part(comp string) *Phase {
	for i := range h.Parts {
		if h.Parts[i].Component == comp {
			return &h.Parts[i]
		}
	}
	return nil
}

// hostsOf lays out hosts stage st from the components' phases (as
// phaseOf planned them): every member to move, grouped by its host, the
// hosts in the description's order cut into the batches the host
// budgets let go together. The phase is named after the stage.
func hostsOf(c *config.Cluster, st *config.FlowStage, phases map[string]Phase, down map[string]bool) (Phase, error) {
	h := &Hosts{Components: st.Components, MaxUnavailable: st.MaxUnavailable.Hosts(len(c.StageHosts(st))), MaxUnavailablePerDomain: st.MaxUnavailablePerDomain,
		On: map[string][]string{}, Domains: map[string]string{}, LockDeadline: st.Deadline, Strategy: st.Strategy}
	// A Cluster built in Go may lack the defaults Parse applies.
	ph := Phase{Component: cmp.Or(st.Name, config.DefaultHostsName), Strategy: config.StageHosts, MaxUnavailable: h.MaxUnavailable, Hosts: h,
		Settings: strategy.Settings{MaxUnavailable: h.MaxUnavailable, MaxUnavailablePerDomain: h.MaxUnavailablePerDomain}}
	var notes []string
	moves := c.StageMembers(st)
	for _, name := range st.Components {
		part, ok := phases[name]
		if !ok {
			return Phase{}, fmt.Errorf("plan: the hosts stage %s: no component %q", st.Name, name)
		}
		if st.SelectsHosts() {
			part = partOn(part, moves[name])
		}
		h.Parts = append(h.Parts, part)
		ph.Skipped = append(ph.Skipped, part.Skipped...)
		comp := c.Component(name)
		for _, n := range part.Members() {
			_, m := c.MemberOf(n)
			if m == nil || m.Host == "" {
				return Phase{}, fmt.Errorf("plan: the hosts stage %s: member %s of %s has no host", st.Name, n, comp.Name)
			}
			h.On[m.Host] = append(h.On[m.Host], n)
		}
		if part.Note != "" {
			notes = append(notes, name+": "+part.Note)
		}
	}
	var hosts []strategy.Host
	for i := range c.Hosts {
		hc := &c.Hosts[i]
		ms, ok := h.On[hc.Name]
		if !ok {
			continue
		}
		h.Domains[hc.Name] = hc.Domain
		sh := strategy.Host{Name: hc.Name, Domain: hc.Domain}
		for _, n := range ms {
			if down[n] {
				sh.Down = append(sh.Down, n)
			}
		}
		hosts = append(hosts, sh)
	}
	if len(hosts) < len(h.On) {
		var lost []string
		for n := range h.On {
			if c.Host(n) == nil {
				lost = append(lost, n)
			}
		}
		slices.Sort(lost)
		return Phase{}, fmt.Errorf("plan: the hosts stage %s: host %s of its members is not in the description's hosts", st.Name, strings.Join(lost, ", "))
	}
	batches, note := strategy.ExpectedHostsBy(h.Strategy, h.MaxUnavailable, h.MaxUnavailablePerDomain, hosts)
	for _, b := range batches {
		pb := Batch{Hosts: b}
		for _, hn := range b {
			pb.Members = append(pb.Members, h.On[hn]...)
		}
		ph.Batches = append(ph.Batches, pb)
	}
	ph.Note = strings.Join(append([]string{note}, notes...), "; ")
	return ph, nil
}

// partOn is component phase part cut to members, those a hosts stage
// that selects its hosts moves (a component spanning stages): its
// batches and skipped members on those hosts alone, its settings and
// quorum the component's.
func partOn(part Phase, members []string) Phase {
	out := part
	out.Batches, out.Skipped = nil, nil
	for _, b := range part.Batches {
		var kept []string
		for _, n := range b.Members {
			if slices.Contains(members, n) {
				kept = append(kept, n)
			}
		}
		if len(kept) > 0 {
			out.Batches = append(out.Batches, Batch{Members: kept})
		}
	}
	for _, sk := range part.Skipped {
		if slices.Contains(members, sk.Member) {
			out.Skipped = append(out.Skipped, sk)
		}
	}
	return out
}
