package config

import (
	"cmp"
	"slices"
	"strings"
)

// A component's phase may move a part of its members (StarlingX's
// Kubernetes upgrade: the first controller's control plane, then the
// networking, then the second's), so that a component spans several
// phase stages of a flow. Each such phase is named (its states are
// upgrading-NAME and upgraded-NAME, so that a record names the stage
// it is in) and takes its part by host (hosts:, host_labels:), by
// count (take:, the first of the plan's order still to move), or is
// the rest: the members no other part takes.

// IsPart reports whether phase stage st is a named part of its
// component's members rather than the whole component's phase.
func (st *FlowStage) IsPart() bool {
	return st.Stage == StagePhase && (st.Name != "" || st.Take > 0 || st.SelectsHosts())
}

// TakesRest reports whether phase stage st moves the rest of its
// component's members: it selects none by host or count.
func (st *FlowStage) TakesRest() bool { return st.Take == 0 && !st.SelectsHosts() }

// MemberLabels are the labels member m is selected by: its host's as
// the description gives them, or, when the host is not described (a
// Kubernetes node), the labels its substrate found on it.
func (c *Cluster) MemberLabels(m *Member) map[string]string {
	if h := c.Host(m.Host); h != nil {
		return h.Labels
	}
	return m.Labels
}

// SelectsMember reports whether phase stage st selects member m by
// its host: by the host's name, or by every one of its host_labels.
// A stage that selects no hosts selects no member this way.
func (c *Cluster) SelectsMember(st *FlowStage, m *Member) bool {
	if !st.SelectsHosts() {
		return false
	}
	if slices.Contains(st.Hosts, m.Host) {
		return true
	}
	if len(st.HostLabels) == 0 {
		return false
	}
	labels := c.MemberLabels(m)
	for k, v := range st.HostLabels {
		if val, ok := labels[k]; !ok || val != v {
			return false
		}
	}
	return true
}

// PhaseStages are the phase stages of release r's flow that move
// component comp, in the flow's order (one, or its parts).
func (r *Release) PhaseStages(comp string) []*FlowStage {
	var out []*FlowStage
	for i := range r.Flow {
		if st := &r.Flow[i]; st.Stage == StagePhase && st.Component == comp {
			out = append(out, st)
		}
	}
	return out
}

// phasePart checks phase stage st, a part of its component (its name,
// selection and budget), at spath: its name is a state's
// (upgrading-NAME), so it is no component's, no hosts stage's and no
// other part's; it takes by host or by count, not both.
func (v *validator) phasePart(st *FlowStage, spath string, sat func(string) int, at func(string) int, rel string, names map[string]string) {
	switch {
	case st.Name == "":
		v.add(sat("stage"), spath+".name", "a phase that moves a part of %s (take:, hosts: or host_labels:) must be named: its states are upgrading-NAME and upgraded-NAME", st.Component)
	case !isIdent(st.Name):
		v.add(sat("name"), spath+".name", "%q is not a name: letters, digits, _ and -, starting with a letter", st.Name)
	case v.c.Component(st.Name) != nil:
		v.add(sat("name"), spath+".name", "%s is a component's name too: the part's state upgrading-%s would be that component's phase's; name the part otherwise", st.Name, st.Name)
	default:
		if first, dup := names[st.Name]; dup {
			v.add(sat("name"), spath+".name", "%s names another stage too (%s): its state upgrading-%s would be both's; name each its own", st.Name, first, st.Name)
		} else {
			names[st.Name] = spath
		}
	}
	if st.Take < 0 {
		v.add(sat("take"), spath+".take", "must not be negative (got %d): the number of members the part moves", st.Take)
	}
	if st.Take > 0 && st.SelectsHosts() {
		key := cmp.Or(map[bool]string{true: "hosts"}[len(st.Hosts) > 0], "host_labels")
		v.add(sat(key), spath+"."+key, "a part takes its members by count (take) or by host (%s), not both", key)
	}
	if st.MaxUnavailable.Count < 0 {
		v.add(sat("max_unavailable"), spath+".max_unavailable", "must not be negative (got %d; 0 means the component's strategy's)", st.MaxUnavailable.Count)
	}
	// Hosts and labels are checked against the description's hosts when
	// it has them; members found at run time (Kubernetes' nodes) are
	// checked by the plan, which names a member no part moves.
	if len(v.c.Hosts) == 0 {
		return
	}
	for j, name := range st.Hosts {
		if v.c.Host(name) == nil {
			v.add(at(index(rel+".hosts", j)), index(spath+".hosts", j), "no host %q%s", name, knownList(hostNames(v.c)))
		}
	}
	if comp := v.c.Component(st.Component); comp != nil && st.SelectsHosts() && len(comp.Members) > 0 &&
		!slices.ContainsFunc(comp.Members, func(m Member) bool { return v.c.SelectsMember(st, &m) }) {
		key := cmp.Or(map[bool]string{true: "host_labels"}[len(st.HostLabels) > 0], "hosts")
		v.add(sat(key), spath+"."+key, "no member of %s is on the hosts it selects: the part would move nothing", st.Component)
	}
}

// phaseParts checks the parts of each component moved by parts in
// release r's flow: at most one that moves the rest, and, when the
// members are listed and no part takes a count, each moved by one
// part.
func (v *validator) phaseParts(r *Release, fpath string, at func(string) int) {
	for _, comp := range v.c.ComponentsInOrder() {
		parts := r.PhaseStages(comp.Name)
		if len(parts) == 0 || slices.ContainsFunc(parts, func(st *FlowStage) bool { return !st.IsPart() }) {
			continue // a whole phase (a second one is refused by flow)
		}
		var rest []int // flow indexes of the parts that move the rest
		for i := range r.Flow {
			if st := &r.Flow[i]; st.Stage == StagePhase && st.Component == comp.Name && st.TakesRest() {
				rest = append(rest, i)
			}
		}
		if len(rest) > 1 {
			v.add(at(index("flow", rest[1])), index(fpath, rest[1]),
				"a second part of %s that moves the rest (also %s): give it take:, hosts: or host_labels:", comp.Name, index(fpath, rest[0]))
		}
		taking := slices.ContainsFunc(parts, func(st *FlowStage) bool { return st.Take > 0 })
		if len(rest) > 0 || taking || len(comp.Members) == 0 {
			continue
		}
		var left []string
		for i := range comp.Members {
			m := &comp.Members[i]
			by := 0
			for _, st := range parts {
				if v.c.SelectsMember(st, m) {
					by++
				}
			}
			switch by {
			case 0:
				left = append(left, m.Name+" (on "+cmp.Or(m.Host, "no host")+")")
			case 1:
			default:
				v.add(at("flow"), fpath, "member %s of %s is taken by %d parts: select its host in one", m.Name, comp.Name, by)
			}
		}
		if len(left) > 0 {
			v.add(at("flow"), fpath, "component %s: %s moved by no part: no phase of %s selects their hosts, and none moves the rest", comp.Name, strings.Join(left, ", "), comp.Name)
		}
	}
}
