package engine

import (
	"slices"
	"strings"
)

// HostView is one row of 'ferry members --by-host', StarlingX's
// kube-host-upgrade-list: a host, the version each component runs on
// it (a host's control plane and its kubelet are two components whose
// members share it), the target, and what moves on it now.
type HostView struct {
	Host   string            `json:"host"`
	Labels map[string]string `json:"labels,omitempty"`
	// Target is the version its members move to in the upgrade (those
	// of one host may differ while parts of a flow go on: each
	// member's, joined).
	Target string `json:"target_version,omitempty"`
	// Versions are, by component, the versions its members on the
	// host run ("down" for one that does not run; a component with no
	// member on the host is absent: N/A).
	Versions map[string]string `json:"versions"`
	// Status says which of its members is on its way, and where:
	// "kubelet starting".
	Status string `json:"status,omitempty"`
}

// HostsView groups member rows by host, in the order the hosts first
// appear, each component's versions on it; a member with no host is
// a host of its own name.
func HostsView(rows []MemberView) []HostView {
	var out []HostView
	at := map[string]int{}
	type acc struct{ versions, targets map[string][]string }
	var accs []acc
	add := func(list map[string][]string, k, v string) {
		if v != "" && !slices.Contains(list[k], v) {
			list[k] = append(list[k], v)
		}
	}
	for _, r := range rows {
		host := r.Host
		if host == "" {
			host = r.Name
		}
		i, ok := at[host]
		if !ok {
			i = len(out)
			at[host] = i
			out = append(out, HostView{Host: host, Labels: r.HostLabels, Versions: map[string]string{}})
			accs = append(accs, acc{versions: map[string][]string{}, targets: map[string][]string{}})
		}
		v := r.Running
		if r.Status == "down" || v == "" {
			v = "down"
		}
		add(accs[i].versions, r.Component, v)
		add(accs[i].targets, "", r.Target)
		if r.Step != "" && r.Step != "pending" && r.Step != "done" {
			st := r.Component + " " + r.Step
			if out[i].Status != "" {
				st = out[i].Status + ", " + st
			}
			out[i].Status = st
		}
	}
	for i := range out {
		for comp, vs := range accs[i].versions {
			out[i].Versions[comp] = strings.Join(vs, ", ")
		}
		out[i].Target = strings.Join(accs[i].targets[""], ", ")
	}
	return out
}
