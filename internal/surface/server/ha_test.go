package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

func startHAServer(t *testing.T, o offline, endpoints []string, name string) *haServer {
	t.Helper()
	st, err := etcdstore.Open(etcdstore.Config{Endpoints: endpoints, Prefix: "/ferry-server-test/", Name: name, TTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	s := newTestServer(t, o, func(c *Config) { c.Store, c.DataDir, c.Advertise = st, o.dataDir, url })
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
	req, err := http.NewRequest(method, h.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.s.cfg.Token)
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
// itself; when the leader stops, the standby leads within a lease and
// answers writes itself.
func TestStandbyForwardsWritesAndTakesOver(t *testing.T) {
	c := etcdtest.Start(t, 1, 4401)
	o := offlineCluster(t)
	a := startHAServer(t, o, c.Endpoints, "a")
	waitFor(t, 10*time.Second, "server a leading", a.st.Leads)
	b := startHAServer(t, o, c.Endpoints, "b")

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

	a.stop()
	start := time.Now()
	waitFor(t, 2*time.Second+5*time.Second, "server b leading after a stopped", b.st.Leads)
	t.Logf("b leads %s after a stopped", time.Since(start).Round(time.Millisecond))
	resp, body = b.call(t, "DELETE", "/v1/upgrade")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Ferry-Leader") != "" {
		t.Fatalf("a write to the new leader: %d %s (leader %q), want its own 404", resp.StatusCode, body, resp.Header.Get("X-Ferry-Leader"))
	}
}
