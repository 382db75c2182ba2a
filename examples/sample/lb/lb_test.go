package lb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
	"github.com/ferry-upgrade/ferry/examples/sample/lb"
)

// backend is a real HTTP server standing in for an api member. It
// answers with its name (echoing any body), and can be made unready,
// broken (drops connections before answering), overloaded (503s) or
// slow (/slow blocks until released).
type backend struct {
	name     string
	srv      *httptest.Server
	hits     atomic.Int64
	unready  atomic.Bool
	broken   atomic.Bool
	overload atomic.Bool
	started  chan string
	release  chan struct{}
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{name: name, started: make(chan string, 16), release: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			if b.unready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		if b.broken.Load() {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if b.overload.Load() {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		b.hits.Add(1)
		if r.URL.Path == "/slow" {
			b.started <- name
			<-b.release
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%s", name, body)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

type harness struct {
	lb    *lb.LB
	url   string
	admin string
	bs    map[string]*backend
}

// start starts a balancer over a backend for each name ("a", or
// "a@h1" for a backend on host h1).
func start(t *testing.T, specs ...string) *harness {
	t.Helper()
	h := &harness{bs: map[string]*backend{}}
	var cfg []lb.Backend
	var names []string
	for _, s := range specs {
		n, host, _ := strings.Cut(s, "@")
		b := newBackend(t, n)
		h.bs[n] = b
		names = append(names, n)
		cfg = append(cfg, lb.Backend{Name: n, Addr: b.addr(), Host: host})
	}
	l, err := lb.New(lb.Config{Backends: cfg, Version: "test", Logger: sampletest.Logger(t),
		HTTPListener: sampletest.Listen(t), AdminListener: sampletest.Listen(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	h.lb, h.url, h.admin = l, "http://"+l.Addr(), "http://"+l.AdminAddr()
	for _, n := range names {
		h.waitHealthy(t, n, true)
	}
	return h
}

func (h *harness) status(t *testing.T, name string) lb.BackendStatus {
	t.Helper()
	for _, st := range h.lb.Backends() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no backend %s", name)
	return lb.BackendStatus{}
}

func (h *harness) waitHealthy(t *testing.T, name string, want bool) {
	t.Helper()
	sampletest.WaitFor(t, 5*time.Second, fmt.Sprintf("%s healthy=%v", name, want), func() bool {
		return h.status(t, name).Healthy == want
	})
}

// send makes n requests and returns which backend answered each; any
// answer but 200 fails the test.
func (h *harness) send(t *testing.T, n int) []string {
	t.Helper()
	var who []string
	for i := range n {
		code, body := sampletest.Do(http.MethodPut, h.url+"/v1/kv/x", []byte(fmt.Sprint(i)))
		name, echo, _ := strings.Cut(body, ":")
		if code != http.StatusOK || echo != fmt.Sprint(i) {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		who = append(who, name)
	}
	return who
}

func TestParseBackends(t *testing.T) {
	got, err := lb.ParseBackends([]string{"api-1=127.0.0.1:8201,api-2=127.0.0.1:8202", "api-3=127.0.0.1:8203"})
	if err != nil || len(got) != 3 || got[2] != (lb.Backend{Name: "api-3", Addr: "127.0.0.1:8203"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range [][]string{nil, {"api-1"}, {"a=x,a=y"}, {"=x"}} {
		if _, err := lb.ParseBackends(bad); err == nil {
			t.Errorf("ParseBackends(%q): no error", bad)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	t.Parallel()
	h := start(t, "a", "b")
	who := h.send(t, 10)
	for i := 1; i < len(who); i++ {
		if who[i] == who[i-1] {
			t.Fatalf("not round robin: %v", who)
		}
	}
	if a, b := h.status(t, "a"), h.status(t, "b"); a.Served != 5 || b.Served != 5 || a.State != "enabled" {
		t.Fatalf("status: %+v %+v", a, b)
	}
	code, body := sampletest.Do(http.MethodGet, h.admin+"/version", nil)
	if code != http.StatusOK || !strings.Contains(body, `"component":"lb"`) {
		t.Fatalf("/version: %d %s", code, body)
	}
	code, body = sampletest.Do(http.MethodGet, h.admin+"/admin/backends", nil)
	var list []lb.BackendStatus
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list) != 2 || list[0].Address != h.bs["a"].addr() {
		t.Fatalf("/admin/backends: %d %s", code, body)
	}
}

func TestDrainWaitsForInFlightRequests(t *testing.T) {
	t.Parallel()
	h := start(t, "a", "b")
	slowDone := make(chan int, 1)
	go func() {
		code, _ := sampletest.Do(http.MethodGet, h.url+"/slow", nil)
		slowDone <- code
	}()
	var busy string
	select {
	case busy = <-h.bs["a"].started:
	case busy = <-h.bs["b"].started:
	case <-time.After(5 * time.Second):
		t.Fatal("slow request reached no backend")
	}
	other := map[string]string{"a": "b", "b": "a"}[busy]

	drained := make(chan string, 1)
	go func() {
		code, body := sampletest.Do(http.MethodPost, h.admin+"/admin/backends/"+busy+"/drain", nil)
		drained <- fmt.Sprint(code, " ", strings.TrimSpace(body))
	}()
	sampletest.WaitFor(t, 5*time.Second, busy+" drained", func() bool {
		st := h.status(t, busy)
		return st.State == "drained" && st.Inflight == 1
	})
	// Out of rotation at once: new requests all go to the other one.
	before := h.bs[busy].hits.Load()
	for _, w := range h.send(t, 6) {
		if w != other {
			t.Fatalf("request reached drained backend %s", w)
		}
	}
	if h.bs[busy].hits.Load() != before {
		t.Fatal("drained backend got a request")
	}
	select {
	case res := <-drained:
		t.Fatalf("drain returned with a request in flight: %s", res)
	default:
	}
	close(h.bs[busy].release)
	if code := <-slowDone; code != http.StatusOK {
		t.Fatalf("in-flight request during drain: %d", code)
	}
	if res := <-drained; res != fmt.Sprintf(`200 {"inflight":0,"name":"%s","state":"drained"}`, busy) {
		t.Fatalf("drain: %s", res)
	}
	// Idempotent.
	if code, body := sampletest.Do(http.MethodPost, h.admin+"/admin/backends/"+busy+"/drain", nil); code != http.StatusOK {
		t.Fatalf("second drain: %d %s", code, body)
	}

	// A drain that times out says so and how many are left.
	go func() { sampletest.Do(http.MethodGet, h.url+"/slow", nil) }()
	<-h.bs[other].started
	code, body := sampletest.Do(http.MethodPost, h.admin+"/admin/backends/"+other+"/drain?timeout=100ms", nil)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, `"inflight":1`) {
		t.Fatalf("drain with timeout: %d %s", code, body)
	}
	close(h.bs[other].release)
	// Nothing in rotation: 503, not a hang.
	if code, body := sampletest.Do(http.MethodGet, h.url+"/x", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("with every backend drained: %d %s", code, body)
	}
}

func TestFailingBackendCostsTheClientNothing(t *testing.T) {
	t.Parallel()
	h := start(t, "a", "b", "c")
	// Drops connections before answering (EOF before a response).
	h.bs["b"].broken.Store(true)
	// Answers 503.
	h.bs["c"].overload.Store(true)
	for _, w := range h.send(t, 9) {
		if w != "a" {
			t.Fatalf("answer from %s", w)
		}
	}
	if st := h.status(t, "b"); st.Failed == 0 {
		t.Fatalf("b: %+v", st)
	}
	// Closed between two health checks: refused connections, retried.
	h.bs["b"].broken.Store(false)
	h.bs["c"].overload.Store(false)
	h.bs["a"].srv.Close()
	for _, w := range h.send(t, 9) {
		if w == "a" {
			t.Fatalf("answer from closed backend")
		}
	}
	// The health checks catch up and take it out.
	h.waitHealthy(t, "a", false)
}

func TestEnableAndHealthChecks(t *testing.T) {
	t.Parallel()
	h := start(t, "a", "b")
	if code, body := sampletest.Do(http.MethodPost, h.admin+"/admin/backends/a/drain", nil); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	for _, w := range h.send(t, 4) {
		if w != "b" {
			t.Fatalf("answer from drained %s", w)
		}
	}
	code, body := sampletest.Do(http.MethodPost, h.admin+"/admin/backends/a/enable", nil)
	if code != http.StatusOK || !strings.Contains(body, `"state":"enabled"`) {
		t.Fatalf("enable: %d %s", code, body)
	}
	if who := h.send(t, 4); who[0] == who[1] {
		t.Fatalf("enabled backend not back in rotation: %v", who)
	}

	// A backend whose /ready fails twice leaves rotation; one pass
	// brings it back.
	h.bs["a"].unready.Store(true)
	h.waitHealthy(t, "a", false)
	for _, w := range h.send(t, 4) {
		if w != "b" {
			t.Fatalf("answer from unhealthy %s", w)
		}
	}
	h.bs["a"].unready.Store(false)
	h.waitHealthy(t, "a", true)
	if who := h.send(t, 4); who[0] == who[1] {
		t.Fatalf("healthy backend not back in rotation: %v", who)
	}
}

func TestUnknownBackendIs404(t *testing.T) {
	t.Parallel()
	h := start(t, "a")
	for _, path := range []string{"/admin/backends/nope/drain", "/admin/backends/nope/enable"} {
		code, body := sampletest.Do(http.MethodPost, h.admin+path, nil)
		var e map[string]string
		if code != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e["error"] == "" {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
}
