package rehearse

import (
	"slices"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/rehearsal"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
)

const description = `cluster: t
hosts:
  - {name: h1, agent: 127.0.0.1:7101}
components:
  - name: kv
    order: 1
    strategy: {type: one-at-a-time, quorum: 2}
    members:
      - {name: kv-1, host: h1, address: 127.0.0.1:8101}
      - {name: kv-2, host: h1, address: 127.0.0.1:8102}
      - {name: kv-3, host: h1, address: 127.0.0.1:8103}
    run: {args: [kv]}
    health:
      member: {http: "http://{{.Address}}/ready"}
  - name: api
    order: 2
    strategy: {type: canary, max_batch: 2, max_unavailable: 2}
    members:
      - {name: api-1, host: h1, address: 127.0.0.1:8201}
      - {name: api-2, host: h1, address: 127.0.0.1:8202}
    run: {args: [api]}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  # the api first: its flow is declared
  - version: 2.0.0
    upgrade_from: [1.0.x]
    flow: [{stage: phase, component: api}, {stage: phase, component: kv}]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
  - version: 2.1.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/a-3, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
`

// TestCopyDescription: the copy lists each component's members in the
// schedule's order and puts a check stage after each stage that moves
// members, into the declared flow or the default one written out; it
// is a valid description, and the rest is the original's.
func TestCopyDescription(t *testing.T) {
	orig, err := config.Parse([]byte(description), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		to     string
		flow   []rehearsal.Stage
		stages []string // the copy's flow: kind/component or kind/name
	}{
		{"2.0.0", rehearsal.FromConfig(orig.Release("2.0.0").Flow),
			[]string{"phase/api", stageCheck + "/rehearse-1", "phase/kv", stageCheck + "/rehearse-2"}},
		{"2.1.0", rehearsal.DefaultFlow([]string{"kv", "api"}),
			[]string{"expand/", "phase/kv", stageCheck + "/rehearse-1", "phase/api", stageCheck + "/rehearse-2", "migrate/", "finalize/", "contract/"}},
	} {
		t.Run(tc.to, func(t *testing.T) {
			in := rehearsal.Input{Seed: 7, Flow: tc.flow, Components: []rehearsal.Component{
				{Name: "kv", Members: []string{"kv-1", "kv-2", "kv-3"}}, {Name: "api", Members: []string{"api-1", "api-2"}}}}
			s, err := rehearsal.Choose(in)
			if err != nil {
				t.Fatal(err)
			}
			s.Order = []rehearsal.Component{{Name: "kv", Members: []string{"kv-3", "kv-1", "kv-2"}}, {Name: "api", Members: []string{"api-2", "api-1"}}}
			out, err := copyDescription([]byte(description), tc.to, tc.flow, s)
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse(out, "t.yaml")
			if err != nil {
				t.Fatalf("the copy is invalid: %v\n%s", err, out)
			}
			for _, want := range []rehearsal.Component{{Name: "kv", Members: []string{"kv-3", "kv-1", "kv-2"}}, {Name: "api", Members: []string{"api-2", "api-1"}}} {
				var got []string
				for _, m := range c.Component(want.Name).Members {
					got = append(got, m.Name)
				}
				if !slices.Equal(got, want.Members) {
					t.Errorf("%s's members %v, want %v", want.Name, got, want.Members)
				}
			}
			var got []string
			for _, st := range c.Release(tc.to).Flow {
				k := st.Stage + "/" + st.Component
				if st.Stage == stageCheck {
					k = st.Stage + "/" + st.Name
					if len(st.Calls) != 1 || st.Calls[0].HTTP != checkpointURL+st.Name {
						t.Errorf("check stage %s calls %+v", st.Name, st.Calls)
					}
				}
				got = append(got, k)
			}
			if !slices.Equal(got, tc.stages) {
				t.Errorf("the copy's flow %v, want %v", got, tc.stages)
			}
			for _, other := range c.Releases {
				if other.Version != tc.to && len(other.Flow) != len(orig.Release(other.Version).Flow) {
					t.Errorf("release %s's flow changed: %v", other.Version, other.Flow)
				}
			}
			if !strings.Contains(string(out), "# the api first: its flow is declared") {
				t.Errorf("the description's comments are not kept:\n%s", out)
			}
		})
	}
	if _, err := copyDescription([]byte(description), "9.9.9", rehearsal.DefaultFlow([]string{"kv"}), rehearsal.Schedule{}); err == nil || !strings.Contains(err.Error(), "9.9.9 is not in the catalog") {
		t.Errorf("a release not in the catalog: %v", err)
	}
}
