package plan

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// TestComputeParts: a component moved in parts (named phase stages)
// has a phase per part, in the flow's order, each named after its part:
// the parts that select by host take theirs first, then those that take
// a count take the first of the plan's order still to move, then the
// rest; a part's budget bounds its batches; a member on the target is
// skipped by the part that would move it, and a member still to move
// that no part takes is an error naming it.
func TestComputeParts(t *testing.T) {
	labels := func(personality string) map[string]string { return map[string]string{"personality": personality} }
	part := func(name string, take int, hosts []string, l map[string]string) config.FlowStage {
		return config.FlowStage{Stage: config.StagePhase, Component: "kubelet", Name: name, Take: take, Hosts: hosts, HostLabels: l}
	}
	budget := func(st config.FlowStage, n int) config.FlowStage {
		st.MaxUnavailable = config.HostBudget{Count: n}
		return st
	}
	net := config.FlowStage{Stage: "action", Name: "networking", Component: "kubelet"}
	for _, tc := range []struct {
		name    string
		flow    []config.FlowStage
		except  map[string]string
		down    []string
		summary []string
		flow1   string
		err     string
	}{
		{name: "StarlingX's control plane: the first, the networking, the rest",
			flow:    []config.FlowStage{part("first-master", 1, nil, nil), net, part("second-master", 0, nil, nil)},
			summary: []string{"kubelet/first-master canary mu=2: [c-0]", "kubelet/second-master canary mu=2: [c-1] [w-0 w-1] [w-2 w-3]"},
			flow1:   "phase:kubelet/first-master action:networking phase:kubelet/second-master"},
		{name: "the first to move: a member on the target is no part of a count",
			flow:   []config.FlowStage{part("first-master", 1, nil, nil), part("second-master", 0, nil, nil)},
			except: map[string]string{"c-0": "2.0.0"},
			summary: []string{"kubelet/first-master canary mu=2: [c-1]",
				"kubelet/second-master canary mu=2: [w-0] [w-1 w-2] [w-3] | skip c-0"},
			flow1: "phase:kubelet/first-master phase:kubelet/second-master"},
		{name: "controllers by label one at a time, then the workers two at a time",
			flow:    []config.FlowStage{budget(part("controllers", 0, nil, labels("controller")), 1), part("workers", 0, nil, nil)},
			summary: []string{"kubelet/controllers canary mu=1: [c-0] [c-1]", "kubelet/workers canary mu=2: [w-0] [w-1 w-2] [w-3]"},
			flow1:   "phase:kubelet/controllers phase:kubelet/workers"},
		{name: "a member down goes first in its part",
			flow:    []config.FlowStage{budget(part("controllers", 0, nil, labels("controller")), 1), part("workers", 0, nil, nil)},
			down:    []string{"w-2"},
			summary: []string{"kubelet/controllers canary mu=1: [c-0] [c-1]", "kubelet/workers canary mu=2: [w-2] [w-0 w-1] [w-3]"},
			flow1:   "phase:kubelet/controllers phase:kubelet/workers"},
		{name: "by host name and by label, no rest: every member taken",
			flow:    []config.FlowStage{part("c0", 0, []string{"node-c0"}, nil), part("c1", 0, []string{"node-c1"}, nil), part("workers", 0, nil, labels("worker"))},
			summary: []string{"kubelet/c0 canary mu=2: [c-0]", "kubelet/c1 canary mu=2: [c-1]", "kubelet/workers canary mu=2: [w-0] [w-1 w-2] [w-3]"},
			flow1:   "phase:kubelet/c0 phase:kubelet/c1 phase:kubelet/workers"},
		{name: "a member no part takes",
			flow: []config.FlowStage{part("controllers", 0, nil, labels("controller")), part("two", 2, nil, nil)},
			err:  "plan: release 2.0.0: w-2 (on node-w2), w-3 (on node-w3) of kubelet taken by no part"},
		{name: "a member two parts take",
			flow: []config.FlowStage{part("controllers", 0, nil, labels("controller")), part("c1", 0, []string{"node-c1"}, nil), part("rest", 0, nil, nil)},
			err:  "plan: release 2.0.0: member c-1 of kubelet (on node-c1) is taken by two parts, controllers and c1: select its host in one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubelet := comp("kubelet", 1, canary(2, 2), 0)
			for _, n := range []string{"c-0", "c-1", "w-0", "w-1", "w-2", "w-3"} {
				l := labels(map[bool]string{true: "controller", false: "worker"}[n[0] == 'c'])
				kubelet.Members = append(kubelet.Members, config.Member{Name: n, Host: "node-" + strings.ReplaceAll(n, "-", ""), Labels: l})
			}
			c := cluster(kubelet)
			c.Releases[1].Flow = tc.flow
			p, err := Compute(c, world(c, "1.0.0", tc.except, tc.down...), "2.0.0")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := summary(p)
			for i, ph := range p.Phases {
				got[i] = strings.Replace(got[i], ph.Component, ph.Component+"/"+ph.Part, 1)
				if at := p.PhaseOf(Stage{Kind: config.StagePhase, Component: ph.Component, Name: ph.Part}); at != i {
					t.Errorf("PhaseOf(part %s) = %d, want %d", ph.Part, at, i)
				}
				if ph.Name() != ph.Part {
					t.Errorf("phase %d's Name() = %q, want its part's %q", i, ph.Name(), ph.Part)
				}
			}
			if !reflect.DeepEqual(got, tc.summary) {
				t.Errorf("phases:\n  got  %q\n  want %q", got, tc.summary)
			}
			var words []string
			for _, st := range p.Stages() {
				w := st.Kind + ":" + st.Component
				if st.Kind == config.StagePhase {
					w += "/" + st.Name
				} else {
					w = st.Kind + ":" + st.Name
				}
				words = append(words, w)
			}
			if got := strings.Join(words, " "); got != tc.flow1 {
				t.Errorf("flow:\n  got  %s\n  want %s", got, tc.flow1)
			}
			if p.PhaseOf(Stage{Kind: config.StagePhase, Component: "kubelet"}) != -1 {
				t.Error("PhaseOf(the whole kubelet phase) found one: the component has parts only")
			}
		})
	}
}

// TestPartsProperties: whatever the members, their labels, what they
// run and which are down, a component moved in parts (a count first,
// then its controllers by label with a budget of its own, then the
// rest) has every member in exactly one part, moved or skipped; a
// count's part moves at most its count, none on the target; the
// label's part only members with the label; no batch above its part's
// budget.
func TestPartsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 20).Draw(t, "members")
		take := rapid.IntRange(1, 4).Draw(t, "take")
		budget := rapid.IntRange(1, 3).Draw(t, "controllers' budget")
		kubelet := comp("kubelet", 1, canary(rapid.IntRange(1, 4).Draw(t, "max_batch"), rapid.IntRange(1, 4).Draw(t, "max_unavailable")), 0)
		obs := Observed{Version: map[string]string{}, Down: map[string]bool{}}
		personality := map[string]string{}
		for i := range n {
			name := fmt.Sprintf("k-%d", i)
			p := rapid.SampledFrom([]string{"controller", "worker"}).Draw(t, "personality")
			personality[name] = p
			kubelet.Members = append(kubelet.Members, config.Member{Name: name, Host: "node-" + name, Labels: map[string]string{"personality": p}})
			obs.Version[name] = rapid.SampledFrom([]string{"1.0.0", "1.0.0", "2.0.0"}).Draw(t, "version")
			obs.Down[name] = rapid.Float64Range(0, 1).Draw(t, "down") < 0.15
		}
		c := cluster(kubelet)
		c.Releases[1].Flow = []config.FlowStage{
			{Stage: config.StagePhase, Component: "kubelet", Name: "first", Take: take},
			{Stage: config.StagePhase, Component: "kubelet", Name: "controllers", HostLabels: map[string]string{"personality": "controller"}, MaxUnavailable: config.HostBudget{Count: budget}},
			{Stage: config.StagePhase, Component: "kubelet", Name: "rest"},
		}
		p, err := Compute(c, obs, "2.0.0")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Phases) != 3 {
			t.Fatalf("%d phases, want one per part", len(p.Phases))
		}
		seen := map[string]string{}
		for _, ph := range p.Phases {
			limit := max(1, ph.MaxUnavailable)
			var moved []string
			for _, b := range ph.Batches {
				if len(b.Members) > limit {
					t.Fatalf("part %s: a batch of %d above its budget %d", ph.Part, len(b.Members), limit)
				}
				moved = append(moved, b.Members...)
			}
			for _, m := range moved {
				if obs.Version[m] == "2.0.0" {
					t.Fatalf("part %s moves %s, on the target", ph.Part, m)
				}
			}
			for _, m := range append(moved, skippedNames(ph)...) {
				if other, dup := seen[m]; dup {
					t.Fatalf("%s in parts %s and %s", m, other, ph.Part)
				}
				seen[m] = ph.Part
				if ph.Part == "controllers" && personality[m] != "controller" {
					t.Fatalf("part controllers has %s, a %s", m, personality[m])
				}
			}
			switch ph.Part {
			case "first":
				if len(moved) > take || len(ph.Skipped) > 0 {
					t.Fatalf("part first moves %d (take %d), skips %d", len(moved), take, len(ph.Skipped))
				}
			case "controllers":
				if ph.MaxUnavailable != budget {
					t.Fatalf("part controllers' budget %d, want %d", ph.MaxUnavailable, budget)
				}
			}
		}
		if len(seen) != n {
			t.Fatalf("%d of %d members in a part", len(seen), n)
		}
	})
}

func skippedNames(ph Phase) []string {
	var out []string
	for _, s := range ph.Skipped {
		out = append(out, s.Member)
	}
	return out
}
