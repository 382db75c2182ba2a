package engine

import (
	"cmp"
	"context"
	"fmt"
	"sort"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
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
	// Adopted: ferry did not start the member's process, its substrate
	// found it (adopt:); its version is what the member itself said.
	// The first step that restarts it hands it over to the substrate.
	Adopted bool `json:"adopted,omitempty"`
	// HostLabels are the labels of its host (the description's, or a
	// Kubernetes node's): StarlingX's personality.
	HostLabels map[string]string `json:"host_labels,omitempty"`
}

// Members joins an observation with the upgrade record (if any).
func (e *Engine) MembersView(snap Snapshot, u *upgrade.Upgrade) []MemberView {
	out := make([]MemberView, 0, len(e.order))
	for _, n := range e.order {
		info := e.members[n]
		mh := snap.Obs.Members[n]
		v := MemberView{Name: n, Component: info.comp.Name, Host: info.member.Host, Address: info.member.Address,
			Running: mh.Version, Detail: mh.Detail, Adopted: snap.Statuses[n].Adopted, HostLabels: e.c.MemberLabels(info.member)}
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

// ReleaseView is one row of 'ferry releases list': a release of the
// catalog and its state computed from what runs now (StarlingX's
// kube-version-list): active (every member runs it), partial (some do),
// available (ferry can take the cluster there, in one step or a chain),
// unavailable (no path from what runs).
type ReleaseView struct {
	Version string `json:"version"`
	State   string `json:"state"`
	// Target marks the release selected to run (StarlingX's Target):
	// the current upgrade's end, the release it began from once it
	// rolled back, or with no upgrade the release every member runs.
	Target      bool     `json:"target,omitempty"`
	Members     int      `json:"members"` // members running it
	Path        []string `json:"path,omitempty"`
	UpgradeFrom []string `json:"upgrade_from,omitempty"`
	DowngradeTo []string `json:"downgrade_to,omitempty"`
	Migrations  []string `json:"migrations,omitempty"` // the stages it has
	// Load is the state of its artifacts as StarlingX's load-list
	// names it: active (members run it), imported (verified, and an
	// upgrade can take the cluster there), inactive (verified, no
	// path leads there now), error (an artifact missing, or its
	// checksum or signature does not verify: LoadDetail says which),
	// importing (the server checks it now; not yet in the catalog).
	Load       string `json:"load"`
	LoadDetail string `json:"load_detail,omitempty"`
	// Signed names the public key its artifacts are signed with (its
	// file), empty when the release is not signed.
	Signed string `json:"signed,omitempty"`
}

// The load states of ReleaseView.Load.
const (
	LoadActive    = "active"
	LoadImported  = "imported"
	LoadInactive  = "inactive"
	LoadError     = "error"
	LoadImporting = "importing"
)

// loadState is release r's load state (but importing) given its
// computed state, and why when it is error.
func (e *Engine) loadState(ctx context.Context, r *config.Release, state string) (load, detail string) {
	for _, comp := range e.c.ComponentsInOrder() {
		a, err := e.artifact(comp.Name, r.Version)
		if err != nil {
			return LoadError, err.Error()
		}
		if a.Path == "" {
			continue // an image, or a node's kubelet: its substrate checks it
		}
		if err := e.checkLoad(ctx, comp.Name, r.Version, a).Refusal(); err != nil {
			return LoadError, fmt.Sprintf("artifact of %s: %v", comp.Name, err)
		}
	}
	switch state {
	case "active", "partial":
		return LoadActive, ""
	case "available":
		return LoadImported, ""
	}
	return LoadInactive, ""
}

// ReleasesView lists the catalog in version order with each state and
// load state (reading each artifact: a checksum and signature, cached
// while the files do not change).
func (e *Engine) ReleasesView(ctx context.Context, snap Snapshot) []ReleaseView {
	count := map[string]int{}
	total := 0
	var running []string
	for _, n := range e.order {
		st := snap.Statuses[n]
		total++
		if st.Version != "" {
			if count[st.Version] == 0 {
				running = append(running, st.Version)
			}
			count[st.Version]++
		}
	}
	sort.Slice(running, func(i, j int) bool { return config.CompareVersions(running[i], running[j]) < 0 })
	target := ""
	if u, ok, err := e.cfg.Store.Current(); err == nil && ok {
		target = cmp.Or(u.Final, u.To)
		if u.State == upgrade.StateRolledBack {
			target = u.From
		}
	} else if len(running) == 1 && count[running[0]] == total {
		target = running[0]
	}
	rels := append([]config.Release(nil), e.c.Releases...)
	sort.Slice(rels, func(i, j int) bool { return config.CompareVersions(rels[i].Version, rels[j].Version) < 0 })
	var out []ReleaseView
	for _, r := range rels {
		v := ReleaseView{Version: r.Version, Target: r.Version == target, Members: count[r.Version], UpgradeFrom: r.UpgradeFrom, DowngradeTo: r.DowngradeTo}
		m := &r.Migrations
		for _, st := range []struct {
			name string
			n    int
		}{{"expand", len(m.Expand)}, {"migrate", len(m.Migrate)}, {"finalize", len(m.Finalize)}, {"contract", len(m.Contract)}} {
			if st.n > 0 {
				v.Migrations = append(v.Migrations, st.name)
			}
		}
		switch {
		case total > 0 && count[r.Version] == total:
			v.State = "active"
		case count[r.Version] > 0:
			v.State = "partial"
		default:
			if path, err := plan.Path(e.c, running, r.Version); err == nil && len(running) > 0 {
				v.State, v.Path = "available", path
			} else {
				v.State = "unavailable"
			}
		}
		v.Load, v.LoadDetail = e.loadState(ctx, &r, v.State)
		v.Signed = e.c.SigningKeyOf(&r)
		out = append(out, v)
	}
	return out
}
