package agent

import (
	"encoding/json"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// TestHealthVersion: GET /v1/health tells the agent's build to a
// caller with the token (a troubleshooting bundle names it), and
// nothing but ok to one without.
func TestHealthVersion(t *testing.T) {
	a := startAgent(t, t.TempDir())
	for _, c := range []struct {
		token string
		want  string
	}{{a.token, agentBuild}, {"", ""}, {"not-the-token-but-long-enough", ""}} {
		code, body := a.callToken("GET", "/v1/health", nil, c.token)
		var h wire.Health
		if code != 200 || json.Unmarshal(body, &h) != nil || !h.OK {
			t.Fatalf("health with token %q: %d %s", c.token, code, body)
		}
		if h.Version != c.want {
			t.Errorf("health with token %q: version %q, want %q", c.token, h.Version, c.want)
		}
	}
	if agentBuild == "" {
		t.Error("the agent's build version is empty")
	}
}
