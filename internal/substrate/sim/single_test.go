package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestSingleMemberWarnedAtStart: an upgrade that restarts a component
// served by one member records a warning event naming it at its start
// (the health query's WARN, engine.SingleMembers), and goes on: a
// warning, not a refusal.
func TestSingleMemberWarnedAtStart(t *testing.T) {
	c, err := config.Parse([]byte(`cluster: single
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: conductor
    strategy: {type: canary, max_unavailable: 1}
    soak: 1s
    health: {member: {http: "http://{{.Address}}/ready"}}
    members: [{name: conductor-1, host: h1, address: 127.0.0.1:8101}]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
`), "single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Cluster: c, To: "2.0.0", Seed: 1, Faults: &Faults{}})
	if err != nil || res.Err != "" {
		t.Fatalf("%v %s", err, res.Err)
	}
	if res.State != upgrade.StateCompleted {
		t.Fatalf("ended %s: %s", res.State, res.Reason)
	}
	warned := 0
	for _, ev := range res.Events {
		if ev.Kind == "warning" {
			warned++
			if !strings.Contains(ev.Message, "conductor has one member (conductor-1)") {
				t.Errorf("the warning does not name the member: %q", ev.Message)
			}
		}
	}
	if warned != 1 {
		t.Errorf("%d warning events, want 1 at the start", warned)
	}
}
