package health

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMatchJSON(t *testing.T) {
	const doc = `{
		"quorum": true,
		"leader": "kv-2",
		"term": 3,
		"ratio": 0.5,
		"lag": 3.0,
		"index": 9007199254740993,
		"none": null,
		"raft": {"state": "Leader", "peers": {"count": 3}},
		"members": [{"name": "kv-1", "voter": true}, {"name": "kv-2", "voter": false}],
		"tags": ["a", "b"]
	}`
	for _, tc := range []struct {
		name   string
		body   string
		path   string
		equals any
		ok     bool
		detail string
	}{
		{"bool", doc, "quorum", true, true, "quorum = true"},
		{"bool mismatch", doc, "quorum", false, false, "quorum = true, want false"},
		{"string", doc, "leader", "kv-2", true, `leader = "kv-2"`},
		{"string mismatch", doc, "leader", "kv-1", false, `leader = "kv-2", want "kv-1"`},
		{"a string is not a number", doc, "term", "3", false, `term = 3, want "3"`},
		{"nested", doc, "raft.state", "Leader", true, ""},
		{"nested twice", doc, "raft.peers.count", 3, true, ""},
		{"array index", doc, "members.1.name", "kv-2", true, ""},
		{"array index, bool", doc, "members.0.voter", true, true, ""},
		{"int from YAML equals a JSON integer", doc, "term", 3, true, ""},
		{"float64 from the YAML parser equals a JSON integer", doc, "term", 3.0, true, ""},
		{"int64", doc, "term", int64(3), true, ""},
		{"uint", doc, "term", uint(3), true, ""},
		{"int equals a JSON 3.0", doc, "lag", 3, true, ""},
		{"float", doc, "ratio", 0.5, true, ""},
		{"float mismatch", doc, "ratio", 1, false, "ratio = 0.5, want 1"},
		{"int mismatch", doc, "term", 4, false, "term = 3, want 4"},
		{"integers beyond float64 compare exactly", doc, "index", json.Number("9007199254740993"), true, ""},
		{"integers beyond float64, off by one", doc, "index", json.Number("9007199254740992"), false, "want 9007199254740992"},
		{"null", doc, "none", nil, true, "none = null"},
		{"null is not false", doc, "none", false, false, "none = null, want false"},
		{"a list", doc, "tags", []any{"a", "b"}, true, ""},
		{"a Go list", doc, "tags", []string{"a", "b"}, true, ""},
		{"a list of another length", doc, "tags", []any{"a"}, false, `tags = ["a","b"], want ["a"]`},
		{"an object", doc, "raft.peers", map[string]any{"count": 3.0}, true, ""},
		{"an object with another key", doc, "raft.peers", map[string]any{"n": 3}, false, ""},
		{"missing key", doc, "raft.term", 1, false, `raft.term: not in the response (raft has no "term")`},
		{"missing at the top", doc, "healthy", true, false, `healthy: not in the response (the response has no "healthy")`},
		{"index out of range", doc, "members.2.name", "x", false, `members.2.name: not in the response (members is a list of 2, no item "2")`},
		{"index that is not a number", doc, "members.first.name", "x", false, `(members is a list of 2, no item "first")`},
		{"negative index", doc, "members.-1.name", "x", false, "no item"},
		{"path through a scalar", doc, "leader.name", "x", false, `leader.name: not in the response (leader is "kv-2", not an object or a list)`},
		{"empty path is the whole document", `true`, "", true, true, ""},
		{"a top-level array", `[{"ok": 1}]`, "0.ok", 1, true, ""},
		{"not JSON", "OK", "quorum", true, false, "the response is not JSON: invalid character 'O'"},
		{"empty body", "", "quorum", true, false, "the response is not JSON: it is empty"},
		{"trailing garbage", `{"quorum": true} x`, "quorum", true, false, "the response is not JSON"},
		{"two documents", `{"quorum": true}{"quorum": false}`, "quorum", true, false, "more after the first value"},
		{"trailing newline is fine", "{\"quorum\": true}\n", "quorum", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			detail, ok := matchJSON([]byte(tc.body), tc.path, tc.equals)
			if ok != tc.ok {
				t.Errorf("ok = %v, want %v (%s)", ok, tc.ok, detail)
			}
			if !strings.Contains(detail, tc.detail) || detail == "" {
				t.Errorf("detail %q does not say %q", detail, tc.detail)
			}
		})
	}
}
