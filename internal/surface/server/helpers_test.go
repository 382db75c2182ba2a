package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// bins are the binaries the cluster tests use, built once: the ferry
// CLI (the agent) and the sample at 1.0.0 and 2.0.0.
var bins struct {
	once   sync.Once
	dir    string
	err    error
	ferry  string
	sample map[string]string
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	// Every operation of api/openapi.yaml must have answered a success
	// to some test, when the whole package ran.
	if code == 0 && theSpec != nil && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		if un := theSpec.uncovered(); len(un) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: operations of api/openapi.yaml no test saw succeed: %s\n", strings.Join(un, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

func buildBinaries(t *testing.T) {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "ferry-server-test-bin-")
		if bins.err != nil {
			return
		}
		bins.ferry = filepath.Join(bins.dir, "ferry")
		bins.sample = map[string]string{}
		cmds := [][]string{{"build", "-o", bins.ferry, "github.com/ferry-upgrade/ferry/cmd/ferry"}}
		for _, v := range []string{"1.0.0", "2.0.0"} {
			p := filepath.Join(bins.dir, "sample-"+v)
			bins.sample[v] = p
			cmds = append(cmds, []string{"build", "-ldflags", "-X main.version=" + v, "-o", p, "github.com/ferry-upgrade/ferry/examples/sample/cmd/sample"})
		}
		for _, args := range cmds {
			if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("go %v: %w\n%s", args, err, out)
				return
			}
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
}

// startCluster starts a real sample cluster at 1.0.0, with 2.0.0 in
// its catalog, and closes it at the end of the test.
func startCluster(t *testing.T, soak time.Duration) *demo.Cluster {
	t.Helper()
	return startClusterWith(t, soak, true)
}

// startClusterWith is startCluster, with 2.0.0 in the description's
// catalog or not (to be imported through the API).
func startClusterWith(t *testing.T, soak time.Duration, with200 bool) *demo.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real sample cluster; not with -short")
	}
	buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rels := []demo.Release{{Version: "1.0.0", Path: bins.sample["1.0.0"]}}
	if with200 {
		rels = append(rels, demo.Release{Version: "2.0.0", Path: bins.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}})
	}
	cl, err := demo.StartCluster(ctx, demo.ClusterOptions{Dir: t.TempDir(), Self: bins.ferry, Start: "1.0.0",
		Soak: soak, Deadline: 20 * time.Second, GateDeadline: 20 * time.Second, Releases: rels})
	if err != nil {
		t.Fatalf("start the sample cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster directory (agent.log, member logs): %s", cl.Dir)
		}
		cl.Close()
	})
	return cl
}

// offline is a cluster description whose only host's agent does not
// answer: everything the API does without observing the cluster can
// be tested on it, and what needs observing answers 503.
type offline struct {
	cfg     *config.Cluster
	dataDir string
}

func offlineCluster(t *testing.T) offline {
	t.Helper()
	dir := t.TempDir()
	art := filepath.Join(dir, "app")
	if err := os.WriteFile(art, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("#!/bin/sh\n"))
	desc := fmt.Sprintf(`cluster: no-agent
substrate: process
hosts:
  - {name: host-1, agent: "127.0.0.1:1"}
components:
  - name: app
    order: 1
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members:
      - {name: app-1, host: host-1, address: "127.0.0.1:2"}
    run: {args: [app]}
    health:
      member: {tcp: "{{.Address}}", timeout: 200ms}
    soak: 1s
    deadline: 10s
releases:
  - version: "1.0.0"
    artifacts: {"*": {path: %q, sha256: %q}}
  - version: "2.0.0"
    upgrade_from: ["1.0.x"]
    artifacts: {"*": {path: %q, sha256: %q}}
`, art, hex.EncodeToString(sum[:]), art, hex.EncodeToString(sum[:]))
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return offline{cfg: c, dataDir: filepath.Join(dir, "data")}
}

// newTestServer builds a server over the offline description, a real
// store and a fresh token, its configuration changed by opts; it is
// closed at the end of the test.
func newTestServer(t *testing.T, o offline, opts ...func(*Config)) *Server {
	t.Helper()
	st, err := store.Open(o.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := LoadOrCreateToken(filepath.Join(o.dataDir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Cluster: o.cfg, Driver: process.New([]process.Host{{Name: "host-1", Addr: "127.0.0.1:1"}}), Store: st,
		Token: tok, Poll: 50 * time.Millisecond, Retry: 200 * time.Millisecond, ObserveTTL: 200 * time.Millisecond}
	for _, opt := range opts {
		opt(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// serve starts s and serves it on loopback; it returns a client that
// carries the token.
func serve(t *testing.T, s *Server) *client {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	// The server first: its close ends the event streams, which
	// httptest's Close would otherwise wait for.
	t.Cleanup(func() { s.Close(); ts.Close() })
	return &client{t: t, base: ts.URL, token: s.cfg.Token, spec: loadSpec(t)}
}

// client calls the API and holds every answer to api/openapi.yaml.
type client struct {
	t     *testing.T
	base  string
	token string
	spec  *spec
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errorCode is the code of an error body.
func (r response) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

// do sends a request; body is sent as is when a string or []byte, as
// JSON otherwise. header adds headers ("Authorization" replaces the
// token).
func (c *client) do(method, path string, body any, header ...string) response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	if u := req.URL.Path; strings.HasPrefix(u, "/v1/") || u == "/metrics" {
		if tmpl, known := c.spec.match(u); known && c.spec.paths[tmpl][method] != nil {
			for _, e := range c.spec.check(method, u, r.status, resp.Header.Get("Content-Type"), b) {
				c.t.Errorf("api/openapi.yaml: %s\n  body: %.400s", e, b)
			}
		}
	}
	return r
}

// expect fails the test unless the response has status (and, for an
// error, code).
func (r response) expect(t *testing.T, what string, status int, code ...string) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %.600s", what, r.status, status, r.body)
	}
	if len(code) > 0 && r.code() != code[0] {
		t.Fatalf("%s: code %q, want %q; body %.600s", what, r.code(), code[0], r.body)
	}
	return r
}

// waitFor polls cond every 50ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sse reads an event stream in the background.
type sse struct {
	mu     sync.Mutex
	events []store.Event
	ids    []string
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *client) stream(path string, header ...string) *sse {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		c.t.Fatalf("stream %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	c.spec.check("GET", req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), nil)
	s := &sse{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		var buf []byte
		tmp := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(tmp)
			buf = append(buf, tmp[:n]...)
			for {
				i := bytes.Index(buf, []byte("\n\n"))
				if i < 0 {
					break
				}
				block := string(buf[:i])
				buf = buf[i+2:]
				var id, data string
				for _, line := range strings.Split(block, "\n") {
					switch {
					case strings.HasPrefix(line, "id: "):
						id = line[4:]
					case strings.HasPrefix(line, "data: "):
						data = line[6:]
					}
				}
				if data == "" {
					continue
				}
				var ev store.Event
				s.mu.Lock()
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					s.err = fmt.Errorf("event %q: %w", data, err)
				} else {
					s.events = append(s.events, ev)
					s.ids = append(s.ids, id)
				}
				s.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *sse) close() { s.cancel(); <-s.done }

func (s *sse) snapshot() ([]store.Event, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Event(nil), s.events...), append([]string(nil), s.ids...), s.err
}

// has reports whether an event with kind and a message containing sub
// arrived.
func (s *sse) has(kind, sub string) bool {
	evs, _, _ := s.snapshot()
	for _, ev := range evs {
		if ev.Kind == kind && strings.Contains(ev.Message, sub) {
			return true
		}
	}
	return false
}

// boltOf is the bbolt store of a server the tests made.
func boltOf(s *Server) *store.Store { return s.cfg.Store.(*store.Store) }
