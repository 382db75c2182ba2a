package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// TestSingleMembers: a component the plan restarts that serves from
// one member is named (Ironic's single conductor); one of two members,
// one already on the target, and one of strategy offline (refused
// without --accept-downtime instead) are not.
func TestSingleMembers(t *testing.T) {
	c, err := config.Parse([]byte(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: conductor
    order: 0
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: conductor-1, host: h1, address: 127.0.0.1:8101}]
  - name: api
    order: 1
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: api-1, host: h1, address: 127.0.0.1:8201}, {name: api-2, host: h1, address: 127.0.0.1:8202}]
  - name: db
    order: 2
    strategy: {type: offline, max_unavailable: 1}
    members: [{name: db-1, host: h1, address: 127.0.0.1:8301}]
  - name: done
    order: 3
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: done-1, host: h1, address: 127.0.0.1:8401}]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compute(c, plan.Observed{Version: map[string]string{"conductor-1": "1.0.0", "api-1": "1.0.0", "api-2": "1.0.0", "db-1": "1.0.0", "done-1": "2.0.0"}}, "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range SingleMembers(c, p) {
		got = append(got, l.Component)
		if !strings.Contains(l.Detail, "conductor-1") || !strings.Contains(l.Detail, "serves nothing") {
			t.Errorf("%s: %q does not name the member and what it means", l.Component, l.Detail)
		}
	}
	if want := []string{"conductor"}; !slices.Equal(got, want) {
		t.Errorf("warned of %v, want %v", got, want)
	}
}
