package health

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// statusServer answers like etcd's status and version endpoints and a
// Prometheus text page.
func statusServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/leader", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"header":{"member_id":"7285072478107582415"},"leader":"7285072478107582415","version":"3.6.8"}`)
	})
	mux.HandleFunc("/follower", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"header":{"member_id":"1"},"leader":"7285072478107582415"}`)
	})
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"etcdserver":"3.5.35","etcdcluster":"3.5.0","n":3,"none":null}`)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# HELP x\netcd_server_is_leader 1\netcd_server_version{server_version=\"3.5.35\"} 1\n")
	})
	mux.HandleFunc("/jsz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"meta_cluster":{"leader":"kv-1"}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestPatternAndPaths: a call's pattern must match its answer, equals
// may name another field of the answer or be a template over the member.
func TestPatternAndPaths(t *testing.T) {
	srv := statusServer(t)
	d := member(srv.Listener.Addr().String())
	base := "http://" + d.Address
	for _, tc := range []struct {
		name   string
		call   config.Call
		ok     bool
		detail []string
	}{
		{"equals_path: the leader", config.Call{HTTP: base + "/leader", JSON: &config.JSONMatch{Path: "leader", EqualsPath: "header.member_id"}}, true,
			[]string{`leader = header.member_id = "7285072478107582415"`}},
		{"equals_path: a follower", config.Call{HTTP: base + "/follower", JSON: &config.JSONMatch{Path: "leader", EqualsPath: "header.member_id"}}, false,
			[]string{`leader = "7285072478107582415", header.member_id = "1": not equal`}},
		{"equals_path missing", config.Call{HTTP: base + "/leader", JSON: &config.JSONMatch{Path: "leader", EqualsPath: "header.id"}}, false,
			[]string{`header.id: not in the response`}},
		{"equals rendered over the member", config.Call{HTTP: base + "/jsz", JSON: &config.JSONMatch{Path: "meta_cluster.leader", Equals: "{{.Name}}"}}, true,
			[]string{`meta_cluster.leader = "kv-1"`}},
		{"equals rendered, another member", config.Call{HTTP: base + "/jsz", JSON: &config.JSONMatch{Path: "meta_cluster.leader", Equals: "{{.Name}}x"}}, false,
			[]string{`want "kv-1x"`}},
		{"pattern matches the body", config.Call{HTTP: base + "/metrics", Pattern: `(?m)^etcd_server_is_leader 1$`}, true,
			[]string{`matches "(?m)^etcd_server_is_leader 1$"`}},
		{"pattern does not match", config.Call{HTTP: base + "/metrics", Pattern: `(?m)^etcd_server_is_leader 0$`}, false,
			[]string{`the answer does not match "(?m)^etcd_server_is_leader 0$"`}},
		{"pattern on a command's output", config.Call{Exec: []string{"echo", "nats-server: v2.10.27"}, Pattern: `v(\d+\.\d+\.\d+)`}, true,
			[]string{"(2.10.27)"}},
		{"pattern, the command failed", config.Call{Exec: []string{"sh", "-c", "echo v1.2.3; exit 1"}, Pattern: `v(\S+)`}, false,
			[]string{"exit status 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, Do(context.Background(), tc.call, d), tc.ok, tc.detail...)
		})
	}
}

// TestVersion: a version call reads the version from a JSON field or a
// pattern's group, and says why when it cannot.
func TestVersion(t *testing.T) {
	srv := statusServer(t)
	d := member(srv.Listener.Addr().String())
	base := "http://" + d.Address
	for _, tc := range []struct {
		name   string
		call   config.Call
		want   string
		detail []string
	}{
		{"json path", config.Call{HTTP: "http://{{.Address}}/version", JSON: &config.JSONMatch{Path: "etcdserver"}}, "3.5.35", []string{`etcdserver = "3.5.35"`}},
		{"json number", config.Call{HTTP: base + "/version", JSON: &config.JSONMatch{Path: "n"}}, "3", nil},
		{"json null", config.Call{HTTP: base + "/version", JSON: &config.JSONMatch{Path: "none"}}, "", []string{"none = null"}},
		{"json path missing", config.Call{HTTP: base + "/version", JSON: &config.JSONMatch{Path: "server"}}, "", []string{`server: not in the response`}},
		{"http pattern", config.Call{HTTP: base + "/metrics", Pattern: `server_version="([^"]+)"`}, "3.5.35", nil},
		{"exec pattern", config.Call{Exec: []string{"echo", "etcd Version: 3.6.8\nGit SHA: x"}, Pattern: `etcd Version: (\S+)`}, "3.6.8", nil},
		{"exec, no match", config.Call{Exec: []string{"echo", "nothing"}, Pattern: `Version: (\S+)`}, "", []string{"does not match"}},
		{"no json, no pattern", config.Call{HTTP: base + "/version"}, "", []string{"no version in the answer"}},
		{"unreachable", config.Call{HTTP: "http://" + closedPort(t) + "/version", JSON: &config.JSONMatch{Path: "v"}}, "", []string{"connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, r := NewProber().Version(context.Background(), tc.call, d)
			checkResult(t, r, tc.want != "", tc.detail...)
			if v != tc.want {
				t.Errorf("version %q, want %q", v, tc.want)
			}
		})
	}
}
