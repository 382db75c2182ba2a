package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/core/window"
)

// TestMeasure: the median of each step per component, over the members
// that moved in a completed upgrade; none of one that did not complete.
func TestMeasure(t *testing.T) {
	c := load(t)
	t0 := Epoch
	mv := func(comp string, drain, stop, start, ready, rejoin time.Duration) *upgrade.Member {
		began := t0
		stopped := began.Add(drain)
		startDone := stopped.Add(stop + start)
		healthy := startDone.Add(ready)
		return &upgrade.Member{Component: comp, Step: upgrade.StepDone, Began: began, Stopped: stopped, StopTook: stop, StartTook: start,
			StartDone: startDone, HealthySince: healthy, Since: healthy.Add(2*time.Second + rejoin)} // kv's soak is 2s
	}
	s := time.Second
	u := upgrade.Upgrade{State: upgrade.StateCompleted, Members: map[string]*upgrade.Member{
		"kv-1":  mv("kv", 1*s, 1*s, 1*s, 1*s, 0),
		"kv-2":  mv("kv", 2*s, 2*s, 3*s, 4*s, s),
		"kv-3":  mv("kv", 9*s, 9*s, 9*s, 9*s, 9*s),
		"api-1": mv("api", s/2, s/2, s/2, s/2, 0),
		"api-2": {Component: "api", Step: upgrade.StepDone, Detail: "already running 2.0.0"}, // no move: not measured
	}}
	got := Measure(u, c)
	if want := (Moves{Drain: 2 * s, Stop: 2 * s, Start: 3 * s, Ready: 4 * s, Rejoin: s, Members: 3}); got["kv"] != want {
		t.Errorf("kv: %+v, want %+v", got["kv"], want)
	}
	if want := (Moves{Drain: s / 2, Stop: s / 2, Start: s / 2, Ready: s / 2, Members: 1}); got["api"] != want {
		t.Errorf("api: %+v, want %+v", got["api"], want)
	}
	u.State = upgrade.StateRolledBack
	if got := Measure(u, c); len(got) != 0 {
		t.Errorf("a rolled-back upgrade measured: %+v", got)
	}
}

// TestEstimateFollowsTheMoves: slower measured moves make a longer
// estimate, by about the added time per batch; a window shorter than the
// upgrade is said in the estimate.
func TestEstimateFollowsTheMoves(t *testing.T) {
	c := load(t)
	moves := func(ready time.Duration) map[string]Moves {
		out := map[string]Moves{}
		for _, comp := range c.Components {
			out[comp.Name] = Moves{Drain: 10 * time.Millisecond, Stop: 100 * time.Millisecond, Start: 200 * time.Millisecond, Ready: ready, Members: len(comp.Members)}
		}
		return out
	}
	fast, err := EstimateUpgrade(context.Background(), EstimateConfig{Cluster: c, To: "2.0.0", Moves: moves(time.Second), Basis: "test"})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := EstimateUpgrade(context.Background(), EstimateConfig{Cluster: c, To: "2.0.0", Moves: moves(11 * time.Second), Basis: "test"})
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	for _, ph := range slow.Phases {
		batches += ph.Batches
	}
	added := slow.Total - fast.Total
	if want := time.Duration(batches) * 10 * time.Second; added < want*9/10 || added > want*11/10 {
		t.Errorf("10 s more to ready in each of %d batches added %s, want about %s", batches, added, want)
	}
	if fast.MostDown.Component["kv"] != 1 || fast.MostDown.Component["api"] != 2 || fast.MostDown.Domain["api/zone-a"] != 1 {
		t.Errorf("most down: %+v", fast.MostDown)
	}
	if len(fast.Hooks) == 0 || !strings.Contains(strings.Join(fast.Hooks, "\n"), "kv pre_stop ×3: POST http://{{.Address}}/step-down") {
		t.Errorf("hooks: %q", fast.Hooks)
	}
	t.Logf("%d batches: %s with 1 s to ready, %s with 11 s", batches, fast.Total, slow.Total)

	ws, errs := window.Parse([]string{"daily"}, "22:00", "22:01", "UTC")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	msg, fits := fit(window.Set{ws}, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), slow.Total)
	if fits || !strings.Contains(msg, "CANNOT FINISH INSIDE A WINDOW") || !strings.Contains(msg, "the longest window (daily 22:00-22:01 UTC) is 1m0s") {
		t.Errorf("a %s upgrade in 1 min windows: %v, %q", slow.Total, fits, msg)
	}
	if msg, fits := fit(window.Set{ws}, time.Date(2026, 11, 26, 22, 0, 30, 0, time.UTC), fast.Total); !fits || !strings.Contains(msg, "not the first: it has 30s left") {
		t.Errorf("a %s upgrade 30 s before the window closes: %v, %q", fast.Total, fits, msg)
	}
}

// BenchmarkEstimate10000 is the estimate of a 10,000-member upgrade
// (testdata/cluster.yaml scaled: kv 10, api 3,330, worker 6,660), what
// `ferry plan` adds to the plan: the issue asks for under 10 s.
func BenchmarkEstimate10000(b *testing.B) {
	n := map[string]int{"kv": 10, "api": 3330, "worker": 6660}
	c, err := ScaleEach(load(b), func(comp *config.Component) int { return n[comp.Name] })
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		est, err := EstimateUpgrade(context.Background(), EstimateConfig{Cluster: c, To: "2.0.0"})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(est.Total.Seconds(), "estimated-s")
	}
}

// TestEstimateParts: the estimate of a flow whose components move in
// parts (StarlingX's control plane around the networking, the
// controllers' kubelets before the workers') runs each part as its own
// phase, named after it, within the part's budget.
func TestEstimateParts(t *testing.T) {
	c, err := config.Parse([]byte(`cluster: t
hosts:
  - {name: c0, agent: 127.0.0.1:7100, labels: {personality: controller}}
  - {name: c1, agent: 127.0.0.2:7100, labels: {personality: controller}}
  - {name: w0, agent: 127.0.0.3:7100, labels: {personality: worker}}
  - {name: w1, agent: 127.0.0.4:7100, labels: {personality: worker}}
  - {name: w2, agent: 127.0.0.5:7100, labels: {personality: worker}}
  - {name: w3, agent: 127.0.0.6:7100, labels: {personality: worker}}
components:
  - name: control-plane
    order: 1
    strategy: {type: one-at-a-time, quorum: 1}
    members: [{name: cp-0, host: c0, address: 127.0.0.1:6443}, {name: cp-1, host: c1, address: 127.0.0.2:6443}]
  - name: kubelet
    order: 2
    strategy: {type: canary, max_batch: 2, max_unavailable: 2}
    members:
      - {name: k-c0, host: c0, address: 127.0.0.1:10250}
      - {name: k-c1, host: c1, address: 127.0.0.2:10250}
      - {name: k-w0, host: w0, address: 127.0.0.3:10250}
      - {name: k-w1, host: w1, address: 127.0.0.4:10250}
      - {name: k-w2, host: w2, address: 127.0.0.5:10250}
      - {name: k-w3, host: w3, address: 127.0.0.6:10250}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
    flow:
      - {stage: phase, component: control-plane, name: first-master, take: 1}
      - {stage: action, name: networking, component: control-plane, calls: [{http: "http://{{.Any}}/networking", method: POST}]}
      - {stage: phase, component: control-plane, name: second-master}
      - {stage: phase, component: kubelet, name: controller-kubelets, host_labels: {personality: controller}, max_unavailable: 1}
      - {stage: phase, component: kubelet, name: worker-kubelets}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	est, err := EstimateUpgrade(context.Background(), EstimateConfig{Cluster: c, To: "2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ph := range est.Phases {
		got = append(got, fmt.Sprintf("%s/%s:%d", ph.Component, ph.Part, ph.Batches))
	}
	if want := []string{"control-plane/first-master:1", "control-plane/second-master:1", "kubelet/controller-kubelets:2", "kubelet/worker-kubelets:3"}; !slices.Equal(got, want) {
		t.Errorf("phases %v, want %v", got, want)
	}
	if est.MostDown.Component["control-plane"] != 1 || est.MostDown.Component["kubelet"] != 2 {
		t.Errorf("most down at once: %+v", est.MostDown.Component)
	}
	t.Logf("estimated %s: %v", est.Total, got)
}
