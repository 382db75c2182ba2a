package engine

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// kubeHosts is StarlingX's Kubernetes cluster as two components whose
// members share hosts: a control plane on the two controllers, a
// kubelet on every host.
const kubeHosts = `cluster: t
hosts:
  - {name: controller-0, agent: 127.0.0.1:7101, labels: {personality: controller}}
  - {name: controller-1, agent: 127.0.0.2:7101, labels: {personality: controller}}
  - {name: compute-0, agent: 127.0.0.3:7101, labels: {personality: worker}}
components:
  - name: control-plane
    strategy: {type: one-at-a-time, quorum: 1}
    members:
      - {name: cp-0, host: controller-0, address: 127.0.0.1:6443}
      - {name: cp-1, host: controller-1, address: 127.0.0.2:6443}
  - name: kubelet
    order: 1
    strategy: {type: canary, max_unavailable: 1}
    members:
      - {name: k-0, host: controller-0, address: 127.0.0.1:10250}
      - {name: k-1, host: controller-1, address: 127.0.0.2:10250}
      - {name: k-2, host: compute-0, address: 127.0.0.3:10250}
releases:
  - version: 1.37.2
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  - version: 1.38.0
    upgrade_from: [1.37.x]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
  - version: 1.39.0
    upgrade_from: [1.38.x]
    artifacts: {"*": {path: bin/a-3, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2e}}
`

// kubeSnapshot observes every member running its version in vs.
func kubeSnapshot(vs map[string]string) Snapshot {
	snap := Snapshot{Time: time.Now(), Statuses: map[string]driver.Status{}, Obs: upgrade.Observation{Members: map[string]upgrade.MemberHealth{}}}
	for n, v := range vs {
		snap.Statuses[n] = driver.Status{Name: n, Running: true, Version: v}
		snap.Obs.Members[n] = upgrade.MemberHealth{Running: true, Healthy: true, Version: v}
	}
	return snap
}

// TestHostsView: the members' rows grouped by host, StarlingX's
// kube-host-upgrade-list: each host's version of each component (none
// where it runs no member of it: a worker's control plane), its target
// and what moves on it, its labels.
func TestHostsView(t *testing.T) {
	c, err := config.Parse([]byte(kubeHosts), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Cluster: c, Driver: process.New(nil), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	snap := kubeSnapshot(map[string]string{"cp-0": "1.38.0", "cp-1": "1.38.0", "k-0": "1.38.0", "k-1": "1.37.2", "k-2": "1.37.2"})
	u := &upgrade.Upgrade{Members: map[string]*upgrade.Member{}}
	for _, n := range []string{"cp-0", "cp-1", "k-0", "k-1", "k-2"} {
		u.Members[n] = &upgrade.Member{Name: n, Target: "1.38.0", Step: upgrade.StepDone}
	}
	u.Members["k-1"].Step, u.Members["k-2"].Step = upgrade.StepStarting, upgrade.StepPending
	got := HostsView(e.MembersView(snap, u))
	want := []HostView{
		{Host: "controller-0", Labels: map[string]string{"personality": "controller"}, Target: "1.38.0",
			Versions: map[string]string{"control-plane": "1.38.0", "kubelet": "1.38.0"}},
		{Host: "controller-1", Labels: map[string]string{"personality": "controller"}, Target: "1.38.0",
			Versions: map[string]string{"control-plane": "1.38.0", "kubelet": "1.37.2"}, Status: "kubelet starting"},
		{Host: "compute-0", Labels: map[string]string{"personality": "worker"}, Target: "1.38.0",
			Versions: map[string]string{"kubelet": "1.37.2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hosts view:\n got  %+v\n want %+v", got, want)
	}
	// A member down shows as such.
	snap.Statuses["k-2"] = driver.Status{Name: "k-2", Version: "1.37.2"}
	snap.Obs.Members["k-2"] = upgrade.MemberHealth{Version: "1.37.2"}
	if got := HostsView(e.MembersView(snap, nil)); got[2].Versions["kubelet"] != "down" || got[2].Target != "" {
		t.Errorf("compute-0 with its kubelet down and no upgrade: %+v", got[2])
	}
}

// TestReleasesStates: kube-version-list's states computed from what
// runs, and its target: active where every member runs the release,
// partial where some do (the control planes moved, the kubelets not
// yet), available with the path to it; the target the release every
// member runs before any upgrade, then the upgrade's end, then, rolled
// back, the release it began from.
func TestReleasesStates(t *testing.T) {
	c, err := config.Parse([]byte(kubeHosts), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Cluster: c, Driver: process.New(nil), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		state  string
		target bool
	}
	check := func(when string, snap Snapshot, want map[string]row) {
		t.Helper()
		for _, rv := range e.ReleasesView(context.Background(), snap) {
			if w := want[rv.Version]; rv.State != w.state || rv.Target != w.target {
				t.Errorf("%s: %s is %s, target %v; want %s, target %v", when, rv.Version, rv.State, rv.Target, w.state, w.target)
			}
		}
	}
	all := func(v string) map[string]string {
		return map[string]string{"cp-0": v, "cp-1": v, "k-0": v, "k-1": v, "k-2": v}
	}
	check("before any upgrade", kubeSnapshot(all("1.37.2")),
		map[string]row{"1.37.2": {"active", true}, "1.38.0": {"available", false}, "1.39.0": {"available", false}})
	u := upgrade.Upgrade{ID: "u1", From: "1.37.2", To: "1.38.0", State: upgrade.Upgrading("kubelets"), Members: map[string]*upgrade.Member{}}
	if err := st.Create(u); err != nil {
		t.Fatal(err)
	}
	mixed := map[string]string{"cp-0": "1.38.0", "cp-1": "1.38.0", "k-0": "1.38.0", "k-1": "1.37.2", "k-2": "1.37.2"}
	check("the control planes and one kubelet moved", kubeSnapshot(mixed),
		map[string]row{"1.37.2": {"partial", false}, "1.38.0": {"partial", true}, "1.39.0": {"available", false}})
	u.State = upgrade.StateRolledBack
	if err := st.Save(u); err != nil {
		t.Fatal(err)
	}
	check("rolled back", kubeSnapshot(all("1.37.2")),
		map[string]row{"1.37.2": {"active", true}, "1.38.0": {"available", false}, "1.39.0": {"available", false}})
}
