package engine

import (
	"sort"

	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// MemberView is one row of 'ferry members': what the member should run,
// what it runs, and how it is doing (StarlingX's kube-host-upgrade-list).
type MemberView struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	Host      string `json:"host"`
	Address   string `json:"address"`
	Target    string `json:"target_version,omitempty"`
	Running   string `json:"running_version"`
	Status    string `json:"status"` // healthy, unhealthy, down
	Step      string `json:"step,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Members joins an observation with the upgrade record (if any).
func (e *Engine) MembersView(snap Snapshot, u *upgrade.Upgrade) []MemberView {
	out := make([]MemberView, 0, len(e.order))
	for _, n := range e.order {
		info := e.members[n]
		mh := snap.Obs.Members[n]
		v := MemberView{Name: n, Component: info.comp.Name, Host: info.member.Host, Address: info.member.Address,
			Running: mh.Version, Detail: mh.Detail}
		switch {
		case !mh.Running:
			v.Status = "down"
		case mh.Healthy:
			v.Status = "healthy"
		default:
			v.Status = "unhealthy"
		}
		if u != nil {
			if m := u.Members[n]; m != nil {
				v.Target, v.Step = m.Target, string(m.Step)
			}
		}
		out = append(out, v)
	}
	return out
}

// ComponentVersions counts a component's members per running version
// (like 'ceph versions').
type ComponentVersions struct {
	Component string         `json:"component"`
	Versions  map[string]int `json:"versions"`
}

// VersionsView counts members per component per version, in component order.
func (e *Engine) VersionsView(snap Snapshot) []ComponentVersions {
	var out []ComponentVersions
	for _, comp := range e.c.ComponentsInOrder() {
		cv := ComponentVersions{Component: comp.Name, Versions: map[string]int{}}
		for i := range comp.Members {
			v := snap.Statuses[comp.Members[i].Name].Version
			if !snap.Statuses[comp.Members[i].Name].Running {
				v = "down"
			}
			if v == "" {
				v = "unknown"
			}
			cv.Versions[v]++
		}
		out = append(out, cv)
	}
	return out
}

// SortedVersions returns the keys of a version count, in order.
func SortedVersions(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
