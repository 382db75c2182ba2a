package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// flowLine renders a plan's stages one word each (a rollout's with its
// component, * for the point of no return).
func flowLine(p Plan) string {
	var out []string
	for _, st := range p.Stages() {
		w := st.Kind
		if st.Component != "" || st.Name != "" {
			w += ":" + st.Component + st.Name
		}
		if st.PointOfNoReturn {
			w += "*"
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}

// TestComputeFlow: a release's flow orders the phases and stages as it
// says; a rollout is a phase per component of every member, none
// skipped for running the target, its point of no return on its first;
// without a flow the default order stands, finalize the point of no
// return.
func TestComputeFlow(t *testing.T) {
	stage := func(kind, comp string) config.FlowStage { return config.FlowStage{Stage: kind, Component: comp} }
	ironic := []config.FlowStage{stage("expand", ""), stage("phase", "kv"), stage("phase", "api"),
		{Stage: "action", Name: "notify", Component: "kv"},
		{Stage: "rollout", Components: []string{"kv", "api"}, PointOfNoReturn: true}, stage("migrate", "")}
	for _, tc := range []struct {
		name    string
		flow    []config.FlowStage
		except  map[string]string
		summary []string
		flow1   string
	}{
		{name: "no flow: the default order", summary: []string{"kv one-at-a-time mu=1 q=2: [kv-1] [kv-2] [kv-3]", "api canary mu=2: [api-1] [api-2]"},
			flow1: "expand phase:kv phase:api migrate finalize* contract"},
		{name: "the flow orders the phases", flow: []config.FlowStage{stage("phase", "api"), stage("phase", "kv")},
			summary: []string{"api canary mu=2: [api-1] [api-2]", "kv one-at-a-time mu=1 q=2: [kv-1] [kv-2] [kv-3]"},
			flow1:   "phase:api phase:kv"},
		{name: "Ironic's: a rollout per component, every member, a member on the target not skipped", flow: ironic,
			except: map[string]string{"kv-2": "2.0.0"},
			summary: []string{"kv one-at-a-time mu=1 q=2: [kv-1] [kv-3] | skip kv-2", "api canary mu=2: [api-1] [api-2]",
				"kv one-at-a-time mu=1 q=2: [kv-1] [kv-2] [kv-3]", "api canary mu=2: [api-1] [api-2]"},
			flow1: "expand phase:kv phase:api action:notify rollout:kv* rollout:api migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(kv3, comp("api", 2, canary(2, 2), 2))
			c.Releases[1].Flow = tc.flow
			p, err := Compute(c, world(c, "1.0.0", tc.except), "2.0.0")
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(p); !reflect.DeepEqual(got, tc.summary) {
				t.Errorf("phases:\n  got  %q\n  want %q", got, tc.summary)
			}
			if got := flowLine(p); got != tc.flow1 {
				t.Errorf("flow:\n  got  %s\n  want %s", got, tc.flow1)
			}
			for i, ph := range p.Phases {
				st := Stage{Kind: config.StagePhase, Component: ph.Component}
				if ph.Rollout {
					st.Kind = config.StageRollout
				}
				if got := p.PhaseOf(st); got != i {
					t.Errorf("PhaseOf(%+v) = %d, want %d", st, got, i)
				}
			}
		})
	}
}

// TestComputeFlowUnknownComponent: a Cluster built in Go, never
// validated, whose flow names a component it lacks, is an error, not a
// panic.
func TestComputeFlowUnknownComponent(t *testing.T) {
	c := cluster(kv3)
	c.Releases[1].Flow = []config.FlowStage{{Stage: "phase", Component: "kv"}, {Stage: "rollout", Components: []string{"nope"}}}
	if _, err := Compute(c, world(c, "1.0.0", nil), "2.0.0"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("err = %v, want the unknown component named", err)
	}
}
