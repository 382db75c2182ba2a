package health

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// checkResult is the one assertion of the call tests.
func checkResult(t *testing.T, r Result, wantOK bool, want ...string) {
	t.Helper()
	t.Logf("OK=%v %s (%s)", r.OK, r.Detail, r.Duration)
	if r.OK != wantOK {
		t.Errorf("OK = %v, want %v (detail %q)", r.OK, wantOK, r.Detail)
	}
	if r.Detail == "" {
		t.Errorf("empty detail")
	}
	for _, w := range want {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("detail %q does not say %q", r.Detail, w)
		}
	}
	if r.Duration <= 0 {
		t.Errorf("duration %v", r.Duration)
	}
}

// member is the template data of a member whose address is addr.
func member(addr string) config.TemplateData {
	return config.TemplateData{Name: "kv-1", Component: "kv", Host: "h1", Address: addr, Any: addr,
		Vars: map[string]string{"token": "s3cret"}}
}

func sec(d time.Duration) config.Duration { return config.Duration(d) }

// sampleServer answers as a member might.
func sampleServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/not-ready", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "raft: no leader\nretry later", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/created", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux.HandleFunc("/cluster", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"quorum": true, "leader": "kv-2", "term": 3, "members": [{"name": "kv-1"}, {"name": "kv-2"}]}`)
	})
	mux.HandleFunc("/no-quorum", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"quorum": false}`) })
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "quorum: yes") })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		// A valid JSON document of 2 MiB: only its first 1 MiB is read.
		fmt.Fprintf(w, `{"pad": "%s", "quorum": true}`, strings.Repeat("x", 2<<20))
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ready", http.StatusFound) })
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/step-down", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := fmt.Sprintf("%s %s auth=%s host=%s", r.Method, body, r.Header.Get("Authorization"), r.Host)
		if got != "POST member=kv-1 auth=Bearer s3cret host=kv-1.internal" {
			http.Error(w, got, http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/method", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			http.Error(w, r.Method, http.StatusMethodNotAllowed)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTP(t *testing.T) {
	srv := sampleServer(t)
	d := member(srv.Listener.Addr().String())
	base := "http://" + d.Address
	for _, tc := range []struct {
		name   string
		call   config.Call
		ok     bool
		detail []string
	}{
		{"2xx by default", config.Call{HTTP: "http://{{.Address}}/ready"}, true, []string{"GET " + base + "/ready: 200 OK"}},
		{"201 is 2xx", config.Call{HTTP: base + "/created"}, true, nil},
		{"expect_status", config.Call{HTTP: base + "/ready", ExpectStatus: 200}, true, nil},
		{"expect_status other than the answer", config.Call{HTTP: base + "/created", ExpectStatus: 200}, false,
			[]string{"GET " + base + "/created: status 201, want 200"}},
		{"503", config.Call{HTTP: "http://{{.Address}}/not-ready", ExpectStatus: 200}, false,
			[]string{"GET " + base + "/not-ready: status 503, want 200", `(body "raft: no leader | retry later")`}},
		{"503 against any 2xx", config.Call{HTTP: base + "/not-ready"}, false, []string{"status 503, want 2xx"}},
		{"expecting a 503", config.Call{HTTP: base + "/not-ready", ExpectStatus: 503}, true, nil},
		{"redirects are not followed", config.Call{HTTP: base + "/moved"}, false, []string{"status 302, want 2xx"}},
		{"json match", config.Call{HTTP: base + "/cluster", JSON: &config.JSONMatch{Path: "quorum", Equals: true}}, true,
			[]string{"200 OK, quorum = true"}},
		{"json mismatch", config.Call{HTTP: "http://{{.Any}}/no-quorum", JSON: &config.JSONMatch{Path: "quorum", Equals: true}}, false,
			[]string{"quorum = false, want true"}},
		{"json number from YAML", config.Call{HTTP: base + "/cluster", JSON: &config.JSONMatch{Path: "term", Equals: 3}}, true, nil},
		{"json in an array", config.Call{HTTP: base + "/cluster", JSON: &config.JSONMatch{Path: "members.1.name", Equals: "kv-2"}}, true, nil},
		{"json path missing", config.Call{HTTP: base + "/cluster", JSON: &config.JSONMatch{Path: "raft.quorum", Equals: true}}, false,
			[]string{`raft.quorum: not in the response (the response has no "raft")`}},
		{"not json", config.Call{HTTP: base + "/text", JSON: &config.JSONMatch{Path: "quorum", Equals: true}}, false,
			[]string{"the response is not JSON"}},
		{"json beyond the first MiB", config.Call{HTTP: base + "/huge", JSON: &config.JSONMatch{Path: "quorum", Equals: true}}, false,
			[]string{"the response (its first 1048576 bytes) is not JSON"}},
		{"status is checked before json", config.Call{HTTP: base + "/not-ready", JSON: &config.JSONMatch{Path: "quorum", Equals: true}}, false,
			[]string{"status 503"}},
		{"method in the url, body, headers, all rendered", config.Call{
			HTTP:    "POST http://{{.Address}}/step-down",
			Body:    "member={{.Name}}",
			Headers: map[string]string{"Authorization": "Bearer {{.Vars.token}}", "Host": "{{.Name}}.internal"},
		}, true, []string{"POST " + base + "/step-down: 200 OK"}},
		{"a body means POST", config.Call{HTTP: base + "/step-down", Body: "member={{.Name}}"}, false,
			[]string{"POST " + base + "/step-down: status 400", "auth= host="}},
		{"method", config.Call{HTTP: base + "/method", Method: "put"}, true, []string{"PUT "}},
		{"timeout", config.Call{HTTP: base + "/hang", Timeout: sec(50 * time.Millisecond)}, false,
			[]string{"GET " + base + "/hang: no answer within 50ms"}},
		{"bad url", config.Call{HTTP: "http://%zz/"}, false, []string{"GET http://%zz/: not a valid URL: invalid URL escape"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, Do(context.Background(), tc.call, d), tc.ok, tc.detail...)
		})
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	addr := closedPort(t)
	r := Do(context.Background(), config.Call{HTTP: "http://{{.Address}}/ready", ExpectStatus: 200}, member(addr))
	checkResult(t, r, false, "GET http://"+addr+"/ready: connection refused")
}

func TestHTTPCanceled(t *testing.T) {
	srv := sampleServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Do(ctx, config.Call{HTTP: srv.URL + "/ready"}, member(""))
	checkResult(t, r, false, "canceled")
}

// TestProberOpensAFreshConnection: a probe never rides a connection a
// previous probe opened, so a restarted member is asked on a new one.
func TestProberOpensAFreshConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	for _, p := range []*Prober{NewProber(), {}} {
		before := conns.Load()
		for range 3 {
			checkResult(t, p.Do(context.Background(), config.Call{HTTP: srv.URL}, member("")), true)
		}
		if n := conns.Load() - before; n != 3 {
			t.Errorf("3 probes opened %d connections, want 3", n)
		}
	}
}

func TestTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open, closed := ln.Addr().String(), closedPort(t)
	checkResult(t, Do(context.Background(), config.Call{TCP: "{{.Address}}"}, member(open)), true, "tcp "+open+": connected")
	checkResult(t, Do(context.Background(), config.Call{TCP: "{{.Address}}"}, member(closed)), false, "tcp "+closed+": connection refused")
}

// closedPort returns an address nothing listens on: a port that was
// just listened on and closed.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestExec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		call   config.Call
		ok     bool
		detail []string
	}{
		{"exit 0", config.Call{Exec: []string{"/bin/true"}}, true, []string{"exec /bin/true: exit status 0"}},
		{"exit 1", config.Call{Exec: []string{"/bin/false"}}, false, []string{"exec /bin/false: exit status 1"}},
		{"args are rendered and passed without a shell",
			config.Call{Exec: []string{"sh", "-c", `test "$1" = 'kv-1 $HOME' || { echo "got $1"; exit 1; }`, "sh", "{{.Name}} $HOME"}}, true, nil},
		{"output lines on one line", config.Call{Exec: []string{"sh", "-c", "echo one; echo two; exit 2"}}, false,
			[]string{"exit status 2: one | two"}},
		{"no such program", config.Call{Exec: []string{"/nonexistent/step-down", "{{.Name}}"}}, false,
			[]string{"exec /nonexistent/step-down kv-1: ", "no such file or directory"}},
		{"an empty program", config.Call{Exec: []string{"{{.Host | printf \"%.0s\"}}"}}, false, []string{"no program to run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Do(context.Background(), tc.call, member("127.0.0.1:1"))
			checkResult(t, r, tc.ok, tc.detail...)
		})
	}
}

// TestExecOutputTail: the detail ends with the exit status and the last
// 200 bytes of what the command wrote, stdout and stderr together.
func TestExecOutputTail(t *testing.T) {
	out := strings.Repeat("a", 100) + strings.Repeat("b", 150)
	call := config.Call{Exec: []string{"sh", "-c", "printf %s " + out + "; printf %s " + strings.Repeat("c", 50) + " >&2; exit 3"}}
	r := Do(context.Background(), call, member(""))
	want := "exit status 3: " + strings.Repeat("b", 150) + strings.Repeat("c", 50)
	checkResult(t, r, false, want)
	if !strings.HasSuffix(r.Detail, want) {
		t.Errorf("detail %q does not end with %q", r.Detail, want)
	}
}

// TestExecTimeout: a command past its timeout is killed, with the
// children it started (the shell's sleep would hold the output pipe).
// The timeout leaves the shell 2 s to write its first line: at 200 ms a
// loaded machine (CI, load 15) sometimes killed it before it had.
func TestExecTimeout(t *testing.T) {
	call := config.Call{Exec: []string{"sh", "-c", "echo started; sleep 30; echo never"}, Timeout: sec(2 * time.Second)}
	r := Do(context.Background(), call, member(""))
	checkResult(t, r, false, "killed: no exit within 2s: started")
	if r.Duration > 10*time.Second {
		t.Errorf("took %v: the sleep was not killed", r.Duration)
	}
}

// TestRenderError: a template that does not render is a failed call
// with the reason, for every kind of call and every field.
func TestRenderError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		call   config.Call
		detail string
	}{
		{"url", config.Call{HTTP: "http://{{.Adress}}/ready"}, "http url: template: no field Adress"},
		{"unparsable url", config.Call{HTTP: "http://{{.Address/ready"}, "http url: not a valid template"},
		{"body", config.Call{HTTP: "http://127.0.0.1:1/", Body: "{{.Vars.missing}}"}, "http body: template"},
		{"header", config.Call{HTTP: "http://127.0.0.1:1/", Headers: map[string]string{"X-A": "{{.Nope}}"}}, "http header X-A: template: no field Nope"},
		{"tcp", config.Call{TCP: "{{.Nope}}:1"}, "tcp address: template: no field Nope"},
		{"exec", config.Call{Exec: []string{"/bin/true", "{{"}}, "exec arg 1: not a valid template"},
		{"no call", config.Call{}, "none of http, tcp and exec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, Do(context.Background(), tc.call, member("127.0.0.1:1")), false, tc.detail)
		})
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 5}
	for _, s := range []string{"ab", "cd", "efg", "", "0123456789", "x"} {
		tl.Write([]byte(s))
	}
	if got := tl.String(); got != "6789x" {
		t.Errorf("tail = %q, want 6789x", got)
	}
}
