package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// onHosts places comp's members on hosts h1, h2, h3 in turn.
func onHosts(c config.Component) config.Component {
	for i := range c.Members {
		c.Members[i].Host = []string{"h1", "h2", "h3"}[i%3]
	}
	return c
}

// TestComputeHosts: a hosts stage is one phase, named after the stage,
// whose batches are host batches (each host's members in the stage's
// components' order, the budgets' hosts at once, per domain, a host
// with a member down first); each component keeps the settings its
// strategy gives it (a part), members on the target are skipped, and
// a host left with nothing to move is not locked.
func TestComputeHosts(t *testing.T) {
	zone := func(z string) map[string]string { return map[string]string{"zone": z} }
	hosts := []config.Host{{Name: "h1", Domain: "z1", Labels: zone("z1")}, {Name: "h2", Domain: "z1", Labels: zone("z1")}, {Name: "h3", Domain: "z2", Labels: zone("z2")}}
	for _, tc := range []struct {
		name    string
		stage   config.FlowStage
		except  map[string]string
		down    []string
		batches []string
		skipped []string
	}{
		{name: "one host at a time", stage: config.FlowStage{Stage: "hosts", Name: "hosts", Components: []string{"kv", "api"}},
			batches: []string{"h1: kv-1 api-1 api-4", "h2: kv-2 api-2 api-5", "h3: kv-3 api-3 api-6"}},
		{name: "api before kv, two at a time, one per domain", stage: config.FlowStage{Stage: "hosts", Name: "workers", Components: []string{"api", "kv"}, MaxUnavailable: config.HostBudget{Count: 2}, MaxUnavailablePerDomain: 1},
			batches: []string{"h1 h3: api-1 api-4 kv-1 api-3 api-6 kv-3", "h2: api-2 api-5 kv-2"}},
		{name: "the stage's hosts alone (a component spanning stages)", stage: config.FlowStage{Stage: "hosts", Name: "h13", Components: []string{"kv", "api"}, Hosts: []string{"h1", "h3"}},
			except:  map[string]string{"api-6": "2.0.0"},
			batches: []string{"h1: kv-1 api-1 api-4", "h3: kv-3 api-3"}, skipped: []string{"api-6"}},
		{name: "a share of the stage's hosts", stage: config.FlowStage{Stage: "hosts", Name: "z1", Components: []string{"kv", "api"}, HostLabels: map[string]string{"zone": "z1"}, MaxUnavailable: config.HostBudget{Percent: 100}},
			batches: []string{"h1 h2: kv-1 api-1 api-4 kv-2 api-2 api-5"}},
		{name: "a member down: its host first", stage: config.FlowStage{Stage: "hosts", Name: "hosts", Components: []string{"kv", "api"}},
			down: []string{"api-5"}, batches: []string{"h2: kv-2 api-5 api-2", "h1: kv-1 api-1 api-4", "h3: kv-3 api-3 api-6"}},
		{name: "members on the target skipped, a host with none left not locked", stage: config.FlowStage{Stage: "hosts", Name: "hosts", Components: []string{"kv", "api"}},
			except:  map[string]string{"kv-3": "2.0.0", "api-3": "2.0.0", "api-6": "2.0.0"},
			batches: []string{"h1: kv-1 api-1 api-4", "h2: kv-2 api-2 api-5"}, skipped: []string{"kv-3", "api-3", "api-6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(onHosts(kv3), onHosts(comp("api", 2, canary(2, 2), 6)))
			c.Hosts = hosts
			c.Releases[1].Flow = []config.FlowStage{tc.stage}
			p, err := Compute(c, world(c, "1.0.0", tc.except, tc.down...), "2.0.0")
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Phases) != 1 || p.Phases[0].Hosts == nil {
				t.Fatalf("phases %q, want one hosts phase", summary(p))
			}
			ph := p.Phases[0]
			var got, skipped []string
			for _, b := range ph.Batches {
				got = append(got, strings.Join(b.Hosts, " ")+": "+strings.Join(b.Members, " "))
			}
			for _, s := range ph.Skipped {
				skipped = append(skipped, s.Member)
			}
			if !reflect.DeepEqual(got, tc.batches) || !reflect.DeepEqual(skipped, tc.skipped) {
				t.Errorf("batches %q skipped %q, want %q skipped %q", got, skipped, tc.batches, tc.skipped)
			}
			if ph.Component != tc.stage.Name || p.PhaseOf(Stage{Kind: config.StageHosts, Name: tc.stage.Name}) != 0 {
				t.Errorf("the phase is %q (PhaseOf %d), want the stage's name %q", ph.Component, p.PhaseOf(Stage{Kind: config.StageHosts, Name: tc.stage.Name}), tc.stage.Name)
			}
			if kv := ph.Hosts.Part("kv"); kv == nil || kv.Quorum != 2 || kv.Settings.MaxUnavailable != 1 {
				t.Errorf("kv's part %+v, want its own strategy's settings (quorum 2, max_unavailable 1)", kv)
			}
		})
	}
	// A Cluster built in Go, its stage unnamed: the default name.
	c := cluster(onHosts(kv3), onHosts(comp("api", 2, canary(2, 2), 6)))
	c.Hosts = hosts
	c.Releases[1].Flow = []config.FlowStage{{Stage: "hosts", Components: []string{"kv", "api"}}}
	p, err := Compute(c, world(c, "1.0.0", nil), "2.0.0")
	if err != nil || p.Phases[0].Component != config.DefaultHostsName || p.PhaseOf(p.Flow[0]) != 0 {
		t.Fatalf("unnamed stage: %v, phase %q, flow %+v", err, p.Phases[0].Component, p.Flow)
	}
}
