package config

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// An endpoint is a host:port the description says something listens
// on: a host's agent, a member's address, or a member's peer var (see
// peerVars). Two of them may not be the same place: ferry would probe,
// drain and restart one member believing it another, or a member
// would never start because its port is taken.
type endpoint struct {
	path  string // hosts[0].agent, components[1].members[0].address
	line  int
	value string // as written
	// name is the host's or the member's, for messages.
	name  string
	agent bool
	// machine is the host the endpoint is on ("" when unknown); owner
	// the member it belongs to ("" for an agent): a member's peer var
	// may share its own address (one port for both, as some stores do).
	machine, owner string
	port           int
	// keys are the normalised addresses it stands for: an IP address
	// as netip writes it, IPv4-mapped IPv6 unmapped; localhost both
	// loopback addresses; a name in lower case, prefixed "name:".
	keys []string
	// wildcard: 0.0.0.0 or ::, every address of its machine.
	wildcard bool
	// note explains a normalisation, for messages.
	note string
}

// newEndpoint normalises s, a valid host:port, without any lookup:
// the description is checked without I/O.
func newEndpoint(s string) (endpoint, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return endpoint{}, false
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return endpoint{}, false
	}
	e := endpoint{value: s, port: p}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	switch addr, err := netip.ParseAddr(h); {
	case h == "":
		return endpoint{}, false
	case h == "localhost":
		e.keys = []string{"127.0.0.1", "::1"}
		e.note = "localhost is the loopback address, 127.0.0.1 and ::1"
	case err == nil:
		if addr.Is4In6() {
			addr = addr.Unmap()
			e.note = "an IPv4-mapped IPv6 address is its IPv4 address, " + addr.String()
		}
		e.keys = []string{addr.String()}
		if addr.IsUnspecified() {
			e.wildcard = true
		}
	default:
		e.keys = []string{"name:" + h}
	}
	return e, true
}

// peerVarRE finds the vars a template reads for each member of a
// .Members range: {{range $m := .Members}}{{$m.Vars.raft}}{{end}}.
var (
	membersRangeRE = regexp.MustCompile(`\{\{-?\s*range\b[^}]*\.Members\b`)
	varRefRE       = regexp.MustCompile(`\.Vars\.([A-Za-z_][A-Za-z0-9_]*)`)
)

// peerVars are the vars of a component that say where each member
// listens besides its address: those its run lists for every member
// of a .Members range (the sample's --peers kv-1=127.0.0.1:9101=...),
// which is how a member learns its peers' raft addresses. Other vars
// are not taken as endpoints: a var may well name another member or a
// shared service (a join address, a database), the same for every
// member, and refusing that would be wrong.
func peerVars(comp *Component) map[string]bool {
	var out map[string]bool
	scan := func(s string) {
		loc := membersRangeRE.FindStringIndex(s)
		if loc == nil {
			return
		}
		for _, m := range varRefRE.FindAllStringSubmatch(s[loc[1]:], -1) {
			if out == nil {
				out = map[string]bool{}
			}
			out[m[1]] = true
		}
	}
	for _, a := range comp.Run.Args {
		scan(a)
	}
	for _, e := range comp.Run.Env {
		scan(e)
	}
	return out
}

// addresses refuses two endpoints that are the same place: equal once
// normalised (localhost and 127.0.0.1, [::ffff:127.0.0.1] and
// 127.0.0.1, names in any case), or a wildcard (0.0.0.0, ::) and any
// endpoint of the same port on the same host. Each problem names the
// endpoint, and the one it clashes with by path and line.
func (v *validator) addresses() {
	c := v.c
	var all []endpoint
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Agent == "" || checkHostPort(h.Agent) != nil {
			continue
		}
		e, ok := newEndpoint(h.Agent)
		if !ok {
			continue
		}
		line := h.pos.at("agent", c.pos.at(index("hosts", i)))
		e.path, e.line, e.agent, e.machine, e.name = index("hosts", i)+".agent", line, true, h.Name, h.Name
		all = append(all, e)
	}
	for i := range c.Components {
		comp := &c.Components[i]
		cpath := index("components", i)
		peers := peerVars(comp)
		for j := range comp.Members {
			m := &comp.Members[j]
			mpath := index(cpath+".members", j)
			mline := m.pos.at("", comp.pos.at(index("members", j), comp.pos.line))
			add := func(rel, value string, line int) {
				if value == "" || IsTemplate(value) || checkHostPort(value) != nil {
					return
				}
				e, ok := newEndpoint(value)
				if !ok {
					return
				}
				e.path, e.line, e.machine, e.owner, e.name = mpath+"."+rel, line, m.Host, mpath, m.Name
				all = append(all, e)
			}
			add("address", m.Address, m.pos.at("address", mline))
			for _, k := range sortedKeys(m.Vars) {
				if peers[k] {
					add(join("vars", k), m.Vars[k], m.pos.at(join("vars", k), mline))
				}
			}
		}
	}

	type at struct {
		port int
		s    string // a normalised address, or a machine
	}
	byKey := map[at]int{}    // the first endpoint of each address
	onHost := map[at]int{}   // the first endpoint of each port on a machine
	wildcard := map[at]int{} // the first wildcard of each port on a machine
	for i, e := range all {
		clash := -1
		for _, k := range e.keys {
			if j, ok := byKey[at{e.port, k}]; ok && (e.owner == "" || all[j].owner != e.owner) {
				clash = j
				break
			}
		}
		hp := at{e.port, e.machine}
		if clash < 0 && e.machine != "" {
			if j, ok := onHost[hp]; ok && e.wildcard && (e.owner == "" || all[j].owner != e.owner) {
				clash = j
			} else if j, ok := wildcard[hp]; ok && (e.owner == "" || all[j].owner != e.owner) {
				clash = j
			}
		}
		if clash >= 0 {
			v.add(e.line, e.path, "%s", clashReason(all[clash], e))
		}
		for _, k := range e.keys {
			if _, ok := byKey[at{e.port, k}]; !ok {
				byKey[at{e.port, k}] = i
			}
		}
		if e.machine != "" {
			if _, ok := onHost[hp]; !ok {
				onHost[hp] = i
			}
			if _, ok := wildcard[hp]; !ok && e.wildcard {
				wildcard[hp] = i
			}
		}
	}
}

// what names an endpoint for messages: "the agent of hosts[0] (h1,
// line 3)", "the address of components[1].members[0] (api-1, line 9)".
func (e endpoint) what() string {
	switch {
	case e.agent:
		return fmt.Sprintf("the agent of %s (%s, line %d)", strings.TrimSuffix(e.path, ".agent"), e.name, e.line)
	case strings.HasSuffix(e.path, ".address"):
		return fmt.Sprintf("the address of %s (%s, line %d)", e.owner, e.name, e.line)
	}
	return fmt.Sprintf("%s of %s (%s, line %d)", e.path[len(e.owner)+1:], e.owner, e.name, e.line)
}

// clashReason says why b, found after a, is refused.
func clashReason(a, b endpoint) string {
	var why string
	switch {
	case a.value == b.value:
		why = fmt.Sprintf("%s is also %s", b.value, a.what())
	case b.wildcard && !sameKeys(a, b):
		why = fmt.Sprintf("%s listens on every address of host %s, so also on %s, %s", b.value, b.machine, a.value, a.what())
	case a.wildcard && !sameKeys(a, b):
		why = fmt.Sprintf("%s is on host %s, where %s, %s, listens on every address", b.value, b.machine, a.value, a.what())
	default:
		var notes []string
		for _, n := range []string{b.note, a.note} {
			if n != "" && (len(notes) == 0 || notes[0] != n) {
				notes = append(notes, n)
			}
		}
		note := ""
		if len(notes) > 0 {
			note = " (" + strings.Join(notes, "; ") + ")"
		}
		why = fmt.Sprintf("%s is the same address as %s%s, %s", b.value, a.value, note, a.what())
	}
	switch {
	case a.agent && b.agent:
		return why + ": two hosts cannot share one agent (it would run the members of both on one machine); give each host its own agent"
	case a.agent || b.agent:
		return why + ": an agent listens there, and a member cannot; give the member another host:port"
	}
	return why + ": one host:port can be listened on by one process only, and ferry would probe one member for the other; give each its own host:port"
}

func sameKeys(a, b endpoint) bool {
	for _, x := range a.keys {
		for _, y := range b.keys {
			if x == y {
				return true
			}
		}
	}
	return false
}
