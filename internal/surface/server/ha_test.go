package server

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/store/etcdstore"
	"github.com/ferry-upgrade/ferry/internal/testenv/etcdtest"
)

// haServer is a server on the etcd store at endpoints, served on
// loopback with its URL as its election value.
type haServer struct {
	s   *Server
	st  *etcdstore.Store
	url string
	ts  *httptest.Server
}

func startHAServer(t *testing.T, o offline, endpoints []string, name, root string) *haServer {
	t.Helper()
	c, err := config.Load(o.cfg.File) // a catalog of its own, as in a process of its own
	if err != nil {
		t.Fatal(err)
	}
	st, err := etcdstore.Open(etcdstore.Config{Endpoints: endpoints, Prefix: "/ferry-server-test/", Name: name, TTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	s := newTestServer(t, o, func(cfg *Config) {
		cfg.Cluster, cfg.Store, cfg.DataDir, cfg.Advertise, cfg.ArtifactRoots = c, st, o.dataDir, url, []string{root}
	})
	ts.Config.Handler = s.Handler()
	ts.Start()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	h := &haServer{s: s, st: st, url: url, ts: ts}
	t.Cleanup(h.stop)
	return h
}

// stop closes the server and its store (its lease revoked, as a
// graceful shutdown does).
func (h *haServer) stop() {
	h.s.Close()
	h.ts.Close()
	h.st.Close()
}

func (h *haServer) call(t *testing.T, method, path string, header ...string) (*http.Response, string) {
	t.Helper()
	return h.send(t, method, path, "", header...)
}

func (h *haServer) send(t *testing.T, method, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.s.cfg.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestStandbyForwardsWritesAndTakesOver: two servers on one real etcd.
// The first leads; a write to the second (DELETE /v1/upgrade: no
// upgrade to clear) is answered by the leader, through the standby,
// naming it; a write already forwarded once is refused 503 not_leader
// rather than forwarded again; reads are answered by the standby
// itself; a release imported through the standby joins the leader's
// catalog, in etcd, and then the standby's; when the leader stops, the
// standby leads within a lease and answers writes itself.
func TestStandbyForwardsWritesAndTakesOver(t *testing.T) {
	c := etcdtest.Start(t, 1, 4401)
	o := offlineCluster(t)
	root := t.TempDir()
	a := startHAServer(t, o, c.Endpoints, "a", root)
	waitFor(t, 10*time.Second, "server a leading", a.st.Leads)
	b := startHAServer(t, o, c.Endpoints, "b", root)

	resp, body := b.call(t, "DELETE", "/v1/upgrade")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, CodeNoUpgrade) || resp.Header.Get("X-Ferry-Leader") != a.url {
		t.Fatalf("a write to the standby: %d %s (leader %q), want the leader %s's 404 no_upgrade", resp.StatusCode, body, resp.Header.Get("X-Ferry-Leader"), a.url)
	}
	resp, body = b.call(t, "DELETE", "/v1/upgrade", ForwardedHeader, "http://elsewhere")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, CodeNotLeader) || !strings.Contains(body, a.url) {
		t.Fatalf("a forwarded write to the standby: %d %s, want 503 not_leader naming %s", resp.StatusCode, body, a.url)
	}
	resp, body = b.call(t, "GET", "/v1/upgrade")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Ferry-Leader") != "" {
		t.Fatalf("a read on the standby: %d %s (leader %q), want its own 404", resp.StatusCode, body, resp.Header.Get("X-Ferry-Leader"))
	}

	art := filepath.Join(root, "app-2.1.0")
	content := []byte("#!/bin/sh\necho 2.1.0\n")
	if err := os.WriteFile(art, content, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	imp := fmt.Sprintf(`{"version": "2.1.0", "upgrade_from": ["2.0.x"], "artifacts": {"*": {"path": %q, "sha256": "%x"}}}`, art, sum)
	resp, body = b.send(t, "POST", "/v1/releases", imp)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Ferry-Leader") != a.url {
		t.Fatalf("an import through the standby: %d %s (leader %q), want the leader's 201", resp.StatusCode, body, resp.Header.Get("X-Ferry-Leader"))
	}
	for _, h := range []*haServer{a, b} {
		waitFor(t, 5*time.Second, h.url+"'s catalog having 2.1.0", func() bool {
			h.s.catalogMu.RLock()
			defer h.s.catalogMu.RUnlock()
			return h.s.cfg.Cluster.Release("2.1.0") != nil
		})
	}

	a.stop()
	start := time.Now()
	waitFor(t, 2*time.Second+5*time.Second, "server b leading after a stopped", b.st.Leads)
	t.Logf("b leads %s after a stopped", time.Since(start).Round(time.Millisecond))
	resp, body = b.call(t, "DELETE", "/v1/upgrade")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Ferry-Leader") != "" {
		t.Fatalf("a write to the new leader: %d %s (leader %q), want its own 404", resp.StatusCode, body, resp.Header.Get("X-Ferry-Leader"))
	}
}
