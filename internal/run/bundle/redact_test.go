package bundle

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// TestDescriptionRedaction: each kind of secret a description may
// carry is gone from the redacted description, what is no secret stays,
// the path of each redacted value is listed, and the secret values are
// returned to be scrubbed from the rest of the bundle.
func TestDescriptionRedaction(t *testing.T) {
	for _, c := range []struct {
		name string
		yaml string
		gone []string // values that must not be in the output
		kept []string // values that must stay
		// paths are redacted paths that must be listed; known are
		// values that must be returned for scrubbing.
		paths []string
		known []string
	}{
		{
			name:  "header values, header names kept",
			yaml:  `hooks: {pre_stop: [{http: "http://lb/drain", headers: {Authorization: "Bearer abcdef0123456789", X-Trace: "plain-value"}}]}`,
			gone:  []string{"abcdef0123456789", "plain-value"},
			kept:  []string{"Authorization", "X-Trace", "http://lb/drain"},
			paths: []string{"hooks.pre_stop[0].headers.Authorization", "hooks.pre_stop[0].headers.X-Trace"},
			known: []string{"Bearer abcdef0123456789", "abcdef0123456789", "plain-value"},
		},
		{
			name:  "a call's body",
			yaml:  `health: {member: {http: "http://x/login", method: POST, body: '{"user": "ops", "password": "hunter2hunter2"}'}}`,
			gone:  []string{"hunter2hunter2", `"user"`},
			kept:  []string{"http://x/login", "POST"},
			paths: []string{"health.member.body"},
		},
		{
			name:  "a traffic request's body template",
			yaml:  `traffic: {requests: [{name: put, method: PUT, path: "/v1/kv/{{.Key}}", body: "{{.Value}}"}]}`,
			gone:  []string{"{{.Value}}"},
			kept:  []string{"/v1/kv/{{.Key}}", "put"},
			paths: []string{"traffic.requests[0].body"},
		},
		{
			name:  "vars whose name says secret, the others kept",
			yaml:  `members: [{name: kv-1, address: "127.0.0.1:1", vars: {raft: "127.0.0.1:9101", db_password: "correct-horse-battery", apiKey: "k-1234567890"}}]`,
			gone:  []string{"correct-horse-battery", "k-1234567890"},
			kept:  []string{"127.0.0.1:9101", "kv-1", "db_password", "apiKey"},
			paths: []string{"members[0].vars.db_password", "members[0].vars.apiKey"},
			known: []string{"correct-horse-battery", "k-1234567890"},
		},
		{
			name:  "env entries",
			yaml:  `run: {env: {API_TOKEN: "tok-0987654321", LOG_LEVEL: debug, SESSION_SECRET: "s3ss10n-s3cr3t"}}`,
			gone:  []string{"tok-0987654321", "s3ss10n-s3cr3t"},
			kept:  []string{"LOG_LEVEL: debug", "API_TOKEN"},
			paths: []string{"run.env.API_TOKEN", "run.env.SESSION_SECRET"},
		},
		{
			name: "a token_file keeps its path, a token does not",
			yaml: `hosts: [{name: h, agent: "127.0.0.1:7101", token_file: agent/token, token: "inline-token-value"}]`,
			gone: []string{"inline-token-value"},
			kept: []string{"agent/token", "127.0.0.1:7101"},
		},
		{
			name:  "a URL's password and a secret query parameter",
			yaml:  `traffic: {prometheus: {url: "https://ops:pr0m-pass@prom:9090/", latency: "q"}, targets: ["http://lb:8000/?access_token=qwertyuiop&x=1"]}`,
			gone:  []string{"pr0m-pass", "qwertyuiop"},
			kept:  []string{"https://ops:", "@prom:9090/", "&x=1"},
			paths: []string{"traffic.prometheus.url", "traffic.targets[0]"},
			known: []string{"pr0m-pass"},
		},
		{
			name:  "the argument after a flag that names a secret, and --name=value",
			yaml:  `run: {args: [api, --token, "argv-secret-1", --name, "{{.Name}}", "--db-password=argv-secret-2", -p, "8080"]}`,
			gone:  []string{"argv-secret-1", "argv-secret-2"},
			kept:  []string{"{{.Name}}", "--token", "--db-password=", "8080", "--name"},
			paths: []string{"run.args[2]", "run.args[5]"},
			known: []string{"argv-secret-1", "argv-secret-2"},
		},
		{
			name:  "an exec hook's Authorization header",
			yaml:  `hooks: {pre_upgrade: [{exec: [curl, -H, "Authorization: Bearer exec-bearer-token", "https://x/flag"]}]}`,
			gone:  []string{"exec-bearer-token"},
			kept:  []string{"curl", "Authorization", "https://x/flag"},
			paths: []string{"hooks.pre_upgrade[0].exec[2]"},
			known: []string{"exec-bearer-token"},
		},
		{
			name:  "a file's content",
			yaml:  `run: {files: [{path: conf/app.conf, mode: "0600", content: "password = file-secret-value\n"}]}`,
			gone:  []string{"file-secret-value", "password ="},
			kept:  []string{"conf/app.conf", "0600"},
			paths: []string{"run.files[0].content"},
		},
		{
			name: "comments are dropped",
			yaml: "# the root password is comment-secret-1\ncluster: demo # comment-secret-2\n",
			gone: []string{"comment-secret-1", "comment-secret-2"},
			kept: []string{"cluster: demo"},
		},
		{
			name:  "an anchor used as a header value is redacted where it is defined",
			yaml:  "vars: {raft: &auth \"Bearer anchored-secret-1\"}\nhooks: {pre_stop: [{headers: {Authorization: *auth}}]}\n",
			gone:  []string{"anchored-secret-1"},
			paths: []string{"hooks.pre_stop[0].headers.Authorization"},
		},
		{
			name: "artifacts keyed by a component whose name has 'key' in it are kept",
			yaml: `releases: [{version: 2.0.0, artifacts: {keystone: {path: /opt/keystone-2, sha256: "00ff"}}}]`,
			kept: []string{"keystone", "/opt/keystone-2", "00ff"},
		},
		{
			name:  "a secret key's whole subtree",
			yaml:  `vars: {credentials: {user: ops, pass: "nested-secret"}}`,
			gone:  []string{"nested-secret", "ops"},
			kept:  []string{"credentials", "user", "pass"},
			paths: []string{"vars.credentials.user", "vars.credentials.pass"},
		},
		{
			name: "nothing secret: nothing redacted",
			yaml: `components: [{name: api, health: {member: {http: "http://{{.Address}}/ready", interval: 100ms}}}]`,
			kept: []string{"http://{{.Address}}/ready", "100ms"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, reds, known, err := Description([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			s := string(out)
			for _, g := range c.gone {
				if strings.Contains(s, g) {
					t.Errorf("%q is still in the redacted description:\n%s", g, s)
				}
			}
			for _, k := range c.kept {
				if !strings.Contains(s, k) {
					t.Errorf("%q is gone from the redacted description:\n%s", k, s)
				}
			}
			var paths []string
			for _, r := range reds {
				paths = append(paths, r.Path)
				if r.Why == "" {
					t.Errorf("redaction of %s says no why", r.Path)
				}
			}
			for _, p := range c.paths {
				if !slices.Contains(paths, p) {
					t.Errorf("redacted paths %q lack %q", paths, p)
				}
			}
			if len(c.gone) == 0 && len(reds) > 0 {
				t.Errorf("redacted %q from a description without secrets", paths)
			}
			for _, k := range c.known {
				if !slices.Contains(known, k) {
					t.Errorf("secret values to scrub %q lack %q", known, k)
				}
			}
			var v any
			if err := yaml.Unmarshal(out, &v); err != nil {
				t.Errorf("the redacted description is not YAML: %v\n%s", err, s)
			}
			if len(c.paths) > 0 && !strings.Contains(s, Redacted) {
				t.Errorf("no %s marker:\n%s", Redacted, s)
			}
		})
	}
}

func TestDescriptionNotYAML(t *testing.T) {
	if _, _, _, err := Description([]byte("a: [unclosed\n  password: x")); err == nil {
		t.Fatal("a description that is not YAML was redacted")
	}
}

// TestScrub: known secrets and credential forms are replaced in text,
// in records and in events, and what is no secret is left alone.
func TestScrub(t *testing.T) {
	sc := newScrubber([]string{"agent-token-0123456789", "short", "server-token-abcdefghij"})
	for in, want := range map[string]string{
		"GET /x with agent-token-0123456789 in it":                      "GET /x with " + Redacted + " in it",
		"Authorization: Bearer sometokenvalue":                          "Authorization: Bearer " + Redacted,
		"dial https://u:pw-in-url@host:1/ failed":                       "dial https://u:" + Redacted + "@host:1/ failed",
		"config: password=hunter2 user=ops":                             "config: password=" + Redacted + " user=ops",
		`{"api_key": "k123"}`:                                           `{"api_key": "` + Redacted + `"}`,
		"short values stay: short":                                      "short values stay: short",
		"session: 3, authority=x, keyspace=users":                       "session: 3, authority=x, keyspace=users",
		"--- ferry agent: starting kv-1 version 1.0.0 (sha256 00), ...": "--- ferry agent: starting kv-1 version 1.0.0 (sha256 00), ...",
	} {
		if got := sc.text(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	u := upgrade.Upgrade{ID: "u", Reason: "hook answered token=abcdef: x",
		Members: map[string]*upgrade.Member{"m": {Name: "m", Detail: "saw server-token-abcdefghij"}},
		Effects: effect.Journal{{ID: "e1", What: "flag set", Error: "401 for Bearer agent-token-0123456789"}}}
	sc.value(&u)
	ev := store.Event{Kind: "action", Message: "call answered agent-token-0123456789"}
	sc.value(&ev)
	for _, s := range []string{u.Reason, u.Members["m"].Detail, u.Effects[0].Error, ev.Message} {
		if strings.Contains(s, "abcdef:") || strings.Contains(s, "token-0123456789") || strings.Contains(s, "abcdefghij") {
			t.Errorf("a secret survived scrubbing: %q", s)
		}
	}
	if u.ID != "u" || u.Members["m"].Name != "m" || ev.Kind != "action" {
		t.Errorf("scrubbing changed what is no secret: %+v %+v", u, ev)
	}
}
