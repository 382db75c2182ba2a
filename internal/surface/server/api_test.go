package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

func TestHealthzIsPublic(t *testing.T) {
	c := serve(t, newTestServer(t, offlineCluster(t)))
	var h Healthz
	c.do("GET", "/v1/healthz", nil, "Authorization", "").expect(t, "healthz without a token", 200).json(t, &h)
	if h.Status != "ok" || h.Cluster != "no-agent" {
		t.Fatalf("healthz = %+v", h)
	}
	c.do("GET", "/v1/healthz?x=1", nil).expect(t, "healthz with an unknown parameter", 400, CodeBadRequest)
}

// TestAuthRefusal: every route but /v1/healthz refuses a call without
// the token, with a wrong one, and with another scheme; the
// dashboard's files need none.
func TestAuthRefusal(t *testing.T) {
	s := newTestServer(t, offlineCluster(t))
	c := serve(t, s)
	for _, r := range s.Routes() {
		method, path, _ := strings.Cut(r, " ")
		if path == "/v1/healthz" {
			continue
		}
		path = strings.ReplaceAll(path, "{version}", "1.0.0")
		for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Basic " + s.cfg.Token, "Bearer", "Bearer " + s.cfg.Token + "x"} {
			resp := c.do(method, path, nil, "Authorization", auth)
			resp.expect(t, fmt.Sprintf("%s with Authorization %q", r, auth), 401, CodeUnauthorized)
			if !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: 401 without WWW-Authenticate: Bearer", r)
			}
			if bytes.Contains(resp.body, []byte(s.cfg.Token)) {
				t.Fatalf("%s: the refusal shows the token", r)
			}
		}
	}
	c.do("GET", "/v1/events", nil, "Authorization", "bearer "+s.cfg.Token).expect(t, "the scheme in lower case", 200)
	for _, f := range []string{"/dashboard/", "/dashboard/app.js", "/dashboard/style.css"} {
		resp := c.do("GET", f, nil, "Authorization", "")
		resp.expect(t, f, 200)
		if csp := resp.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", f, csp)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(c.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("GET / = %d → %q, want a redirect to /dashboard/", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d", TokenFile)
	tok, created, err := LoadOrCreateToken(path)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("first start: %q %v %v", tok, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	tok2, created, err := LoadOrCreateToken(path)
	if err != nil || created || tok2 != tok {
		t.Fatalf("second start: same token %v, created %v, %v", tok2 == tok, created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable token file: %v, want a refusal", err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(short); err == nil {
		t.Fatal("a 3-character token was taken")
	}
}

// TestTokenNeverLogged: the server's log, at its most verbose, never
// holds the token, whatever the calls.
func TestTokenNeverLogged(t *testing.T) {
	o := offlineCluster(t)
	var logBuf syncWriter
	st, err := store.Open(o.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := LoadOrCreateToken(filepath.Join(o.dataDir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Cluster: o.cfg, Driver: process.New([]process.Host{{Name: "host-1", Addr: "127.0.0.1:1"}}), Store: st, Token: tok,
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := serve(t, s)
	c.do("GET", "/v1/members", nil).expect(t, "members", 503, CodeObserveFailed)
	c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "start on a cluster that does not answer", 422, CodePreflightFailed)
	c.do("GET", "/v1/events", nil, "Authorization", "Bearer "+tok+"0").expect(t, "wrong token", 401)
	if strings.Contains(logBuf.String(), tok) {
		t.Fatal("the log holds the token")
	}
}

func TestMalformedBodies(t *testing.T) {
	c := serve(t, newTestServer(t, offlineCluster(t)))
	big := `{"to": "` + strings.Repeat("1", 70<<10) + `"}`
	cases := []struct {
		method, body, ctype string
		status              int
		code, says          string
	}{
		{"POST", ``, "", 400, CodeBadRequest, "empty"},
		{"POST", `{"to": "2.0.0"`, "", 400, CodeBadRequest, "not complete"},
		{"POST", `{"to": 2}`, "", 400, CodeBadRequest, `field "to" must be string`},
		{"POST", `["2.0.0"]`, "", 400, CodeBadRequest, "JSON object"},
		{"POST", `{"to": "2.0.0", "force": true}`, "", 400, CodeBadRequest, `unknown field "force"`},
		{"POST", `{"to": "2.0.0"} {"to": "2.0.0"}`, "", 400, CodeBadRequest, "more than one"},
		{"POST", `{"to": "2.0.0",}`, "", 400, CodeBadRequest, "not valid JSON"},
		{"POST", `{}`, "", 400, CodeBadRequest, `"to" is required`},
		{"POST", `{"to": "2.0.0; rm -rf"}`, "", 400, CodeBadRequest, "not a release version"},
		{"POST", `{"to": "9.9.9"}`, "", 400, CodeUnknownRelease, "known: 1.0.0, 2.0.0"},
		{"POST", big, "", 413, CodeBodyTooLarge, "larger than"},
		{"POST", `{"to": "2.0.0"}`, "text/plain", 415, CodeUnsupportedMedia, "application/json"},
		{"PATCH", `{}`, "", 400, CodeBadRequest, `"action" is required`},
		{"PATCH", `{"action": "explode"}`, "", 400, CodeBadRequest, `"explode" is not one of`},
		{"PATCH", `{"action": "pause", "now": 1}`, "", 400, CodeBadRequest, `unknown field "now"`},
		{"PATCH", `{"action": true}`, "", 400, CodeBadRequest, `field "action" must be string`},
		{"PATCH", `nul`, "", 400, CodeBadRequest, "JSON"},
	}
	for _, cs := range cases {
		h := []string{}
		if cs.ctype != "" {
			h = append(h, "Content-Type", cs.ctype)
		}
		resp := c.do(cs.method, "/v1/upgrade", cs.body, h...)
		what := fmt.Sprintf("%s %.60q", cs.method, cs.body)
		resp.expect(t, what, cs.status, cs.code)
		var e apiError
		resp.json(t, &e)
		if !strings.Contains(e.Message, cs.says) {
			t.Errorf("%s: message %q does not say %q", what, e.Message, cs.says)
		}
	}
}

func TestNoUpgradeAndRouting(t *testing.T) {
	c := serve(t, newTestServer(t, offlineCluster(t)))
	c.do("GET", "/v1/upgrade", nil).expect(t, "GET with none", 404, CodeNoUpgrade)
	c.do("PATCH", "/v1/upgrade", `{"action": "pause"}`).expect(t, "PATCH with none", 404, CodeNoUpgrade)
	c.do("DELETE", "/v1/upgrade", nil).expect(t, "DELETE with none", 404, CodeNoUpgrade)
	c.do("GET", "/v1/events?upgrade=current", nil).expect(t, "events of the current with none", 404, CodeNoUpgrade)
	c.do("GET", "/v1/events?upgrade=upg-nope", nil).expect(t, "events of an unknown upgrade", 404, CodeNoUpgrade)
	resp := c.do("PUT", "/v1/upgrade", `{}`)
	resp.expect(t, "PUT", 405, CodeMethodNotAllowed)
	if a := resp.header.Get("Allow"); a != "GET, POST, PATCH, DELETE" {
		t.Errorf("Allow: %q", a)
	}
	c.do("GET", "/v1/nothing", nil).expect(t, "an unknown path", 404, CodeNotFound)
	c.do("GET", "/v1/releases/9.9.9", nil).expect(t, "an unknown release", 404, CodeUnknownRelease)
	c.do("GET", "/v1/releases/1.0.0%20x", nil).expect(t, "a malformed version", 400, CodeBadRequest)
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=10001", "after=1&after=2", "since=3", "upgrade=a%20b"} {
		c.do("GET", "/v1/events?"+q, nil).expect(t, "events?"+q, 400, CodeBadRequest)
	}
	c.do("GET", "/v1/events/stream?after=x", nil).expect(t, "stream?after=x", 400, CodeBadRequest)
	c.do("GET", "/v1/events/stream", nil, "Last-Event-ID", "abc").expect(t, "stream with a bad Last-Event-ID", 400, CodeBadRequest)
	c.do("GET", "/v1/health?to=a%20b", nil).expect(t, "health?to=a b", 400, CodeBadRequest)
	c.do("GET", "/v1/members?all=1", nil).expect(t, "members?all=1", 400, CodeBadRequest)
}

// TestObserveFailed: with the host's agent not answering, the views
// answer 503 and say why; the preflight reports the failed check.
func TestObserveFailed(t *testing.T) {
	c := serve(t, newTestServer(t, offlineCluster(t)))
	for _, p := range []string{"/v1/members", "/v1/versions", "/v1/releases", "/v1/releases/2.0.0"} {
		c.do("GET", p, nil).expect(t, p, 503, CodeObserveFailed)
	}
	var h HealthReport
	c.do("GET", "/v1/health?to=2.0.0", nil).expect(t, "health", 200).json(t, &h)
	if h.OK || h.To != "2.0.0" || len(h.Checks) == 0 {
		t.Fatalf("health = %+v", h)
	}
	failed := false
	for _, ch := range h.Checks {
		if ch.Name == "hosts answer" && !ch.OK {
			failed = true
		}
	}
	if !failed {
		t.Fatalf("no failed 'hosts answer' check: %+v", h.Checks)
	}
	m := string(c.do("GET", "/metrics", nil).expect(t, "metrics", 200).body)
	for _, want := range []string{"ferry_observe_up 0", "ferry_preflight_ok 0", `ferry_preflight_check_ok{check="hosts answer"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestEventsPagesAndStream(t *testing.T) {
	s := newTestServer(t, offlineCluster(t))
	st := boltOf(s)
	now := time.Now()
	for i, up := range []string{"a", "b", "a", "a", "b"} {
		if _, err := st.Append(store.Event{Time: now, Upgrade: up, Kind: "action", Message: fmt.Sprint("m", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	c := serve(t, s)
	var page Events
	c.do("GET", "/v1/events?limit=2", nil).expect(t, "page 1", 200).json(t, &page)
	if len(page.Events) != 2 || page.Events[0].Seq != 1 || page.Last != 2 {
		t.Fatalf("page 1 = %+v", page)
	}
	c.do("GET", fmt.Sprintf("/v1/events?after=%d&limit=10", page.Last), nil).expect(t, "page 2", 200).json(t, &page)
	if len(page.Events) != 3 || page.Events[0].Message != "m3" || page.Last != 5 {
		t.Fatalf("page 2 = %+v", page)
	}
	c.do("GET", "/v1/events?after=5", nil).expect(t, "past the end", 200).json(t, &page)
	if len(page.Events) != 0 || page.Last != 5 {
		t.Fatalf("past the end = %+v", page)
	}
	if err := st.Create(upgrade.Upgrade{ID: "b", State: upgrade.StateCompleted, Members: map[string]*upgrade.Member{}}); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/v1/events?upgrade=b", nil).expect(t, "events of b", 200).json(t, &page)
	if len(page.Events) != 2 || page.Events[1].Message != "m5" {
		t.Fatalf("events of b = %+v", page)
	}
	c.do("GET", "/v1/events?upgrade=current", nil).expect(t, "events of the current", 200).json(t, &page)
	if len(page.Events) != 2 {
		t.Fatalf("events of the current (b) = %+v", page)
	}

	// The stream: the backlog after ?after=, then events as another
	// process stores them.
	str := c.stream("/v1/events/stream?after=2")
	defer str.close()
	waitFor(t, 5*time.Second, "the backlog m3..m5", func() bool { evs, _, _ := str.snapshot(); return len(evs) >= 3 })
	for i := 6; i <= 7; i++ {
		if _, err := st.Append(store.Event{Time: time.Now(), Upgrade: "a", Kind: "state", Message: fmt.Sprint("m", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "live events m6, m7", func() bool { return str.has("state", "m7") })
	evs, ids, err := str.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+3) || ids[i] != fmt.Sprint(ev.Seq) || ev.Message != fmt.Sprint("m", i+3) {
			t.Fatalf("stream event %d = %+v (id %s), want seq %d in order, no gap, no repeat", i, ev, ids[i], i+3)
		}
	}
	// A client reconnecting with Last-Event-ID misses nothing.
	again := c.stream("/v1/events/stream", "Last-Event-ID", "6")
	defer again.close()
	waitFor(t, 5*time.Second, "m7 after Last-Event-ID 6", func() bool { return again.has("state", "m7") })
	if evs, _, _ := again.snapshot(); evs[0].Seq != 7 {
		t.Fatalf("after Last-Event-ID 6 the stream began at %d", evs[0].Seq)
	}
	only := c.stream("/v1/events/stream?upgrade=b")
	defer only.close()
	waitFor(t, 5*time.Second, "b's events", func() bool { evs, _, _ := only.snapshot(); return len(evs) == 2 })
	if evs, _, _ := only.snapshot(); evs[0].Upgrade != "b" || evs[1].Upgrade != "b" {
		t.Fatalf("stream of b = %+v", evs)
	}
	m := string(c.do("GET", "/metrics", nil).expect(t, "metrics", 200).body)
	if !strings.Contains(m, `ferry_events_total{kind="state"} 2`) {
		t.Errorf("metrics: the two state events stored after the start are not counted")
	}
}

// stuckUpgrade records an upgrade of the offline cluster that has not
// ended, as a ferry process that died would have left it.
func stuckUpgrade(t *testing.T, st *store.Store, digest string) upgrade.Upgrade {
	t.Helper()
	p := plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Phases: []plan.Phase{{Component: "app", Strategy: strategy.Canary, MaxUnavailable: 1,
		Batches: []plan.Batch{{Members: []string{"app-1"}}}}}}
	u := upgrade.New("upg-stuck", p, map[string]string{"app-1": "1.0.0"}, nil, time.Now())
	u.State = upgrade.Upgrading("app")
	u.Description = digest
	if err := st.Create(u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUpgradeInProgress: a server started over a store holding an
// upgrade that has not ended drives it; a second start is refused with
// 409, through it and through a second server, which sees the first
// drive it; requests are checked like the CLI's.
func TestUpgradeInProgress(t *testing.T) {
	o := offlineCluster(t)
	a := newTestServer(t, o)
	u := stuckUpgrade(t, boltOf(a), o.cfg.Digest)
	ca := serve(t, a)
	waitFor(t, 5*time.Second, "server A drives the stuck upgrade", func() bool {
		var us UpgradeStatus
		ca.do("GET", "/v1/upgrade", nil).expect(t, "GET", 200).json(t, &us)
		return us.DrivenBy == DrivenByServer && us.Upgrade.ID == u.ID
	})
	var h Healthz
	ca.do("GET", "/v1/healthz", nil).json(t, &h)
	if h.Driving != u.ID {
		t.Errorf("healthz driving %q, want %s", h.Driving, u.ID)
	}
	ca.do("POST", "/v1/upgrade", `{"to": "2.0.0"}`).expect(t, "a second start", 409, CodeUpgradeInProgress)
	ca.do("DELETE", "/v1/upgrade", nil).expect(t, "DELETE while it runs", 409, CodeUpgradeNotEnded)
	ca.do("PATCH", "/v1/upgrade", `{"action": "finalize"}`).expect(t, "finalize before its time", 409, CodeFinalizeRefused)
	// Overrides: one named predicate at a time, recorded with who (the
	// token's name, not the body's "by") and when; never all at once;
	// an unknown one named as such.
	ca.do("POST", "/v1/upgrade/overrides", `{"predicate": "*"}`).expect(t, "override of everything", 422, CodeInvalidOverride)
	ca.do("POST", "/v1/upgrade/overrides", `{"predicate": "quorom"}`).expect(t, "override of an unknown predicate", 422, CodeInvalidOverride)
	ca.do("POST", "/v1/upgrade/overrides", `{"predicate": "quorum", "member": "app-9"}`).expect(t, "override for an unknown member", 422, CodeInvalidOverride)
	var os UpgradeStatus
	ca.do("POST", "/v1/upgrade/overrides", `{"predicate": "quorum", "member": "app-1", "by": "ops", "reason": "a test"}`).expect(t, "override", 201).json(t, &os)
	if n := len(os.Upgrade.Overrides); n != 1 || os.Upgrade.Overrides[0].Predicate != "quorum" || os.Upgrade.Overrides[0].By != TokenName {
		t.Fatalf("overrides = %+v", os.Upgrade.Overrides)
	}
	ca.do("POST", "/v1/upgrade/overrides", `{"predicate": "quorum", "member": "app-1"}`).expect(t, "the same override again", 422, CodeInvalidOverride)
	var ar ActionResult
	ca.do("PATCH", "/v1/upgrade", `{"action": "pause"}`).expect(t, "pause", 202).json(t, &ar)
	if ar.DrivenBy != DrivenByServer || ar.Upgrade.Intent == nil || ar.Upgrade.Intent.Kind != string(upgrade.IntentPause) || ar.Action != "pause" {
		t.Fatalf("pause = %+v", ar)
	}

	// A second server on the same data directory: the engine lock says
	// another process drives the upgrade.
	b := newTestServer(t, o)
	cb := serve(t, b)
	var us UpgradeStatus
	cb.do("GET", "/v1/upgrade", nil).expect(t, "GET on B", 200).json(t, &us)
	if us.DrivenBy != DrivenByOther {
		t.Fatalf("B says driven by %q, want %s", us.DrivenBy, DrivenByOther)
	}
	cb.do("POST", "/v1/upgrade", `{"to": "2.0.0"}`).expect(t, "a start on B", 409, CodeUpgradeInProgress)
	cb.do("PATCH", "/v1/upgrade", `{"action": "abort"}`).expect(t, "abort through B", 202).json(t, &ar)
	if ar.DrivenBy != DrivenByOther || ar.Upgrade.Intent == nil || ar.Upgrade.Intent.Seq != 2 {
		t.Fatalf("abort through B = %+v", ar)
	}

	// A stops; the upgrade ends (as a process would record it); B
	// refuses what needs it running, and clears it.
	a.Close()
	got, err := boltOf(a).Get(u.ID)
	if err != nil {
		t.Fatal(err)
	}
	got.State, got.Ended = upgrade.StateRolledBack, time.Now()
	if err := boltOf(a).Save(got); err != nil {
		t.Fatal(err)
	}
	cb.do("PATCH", "/v1/upgrade", `{"action": "resume"}`).expect(t, "resume after the end", 409, CodeUpgradeEnded)
	cb.do("DELETE", "/v1/upgrade", nil).expect(t, "DELETE after the end", 200).json(t, &us)
	if us.Upgrade.ID != u.ID || us.Upgrade.State != upgrade.StateRolledBack.String() {
		t.Fatalf("DELETE = %+v", us)
	}
	cb.do("GET", "/v1/upgrade", nil).expect(t, "GET after DELETE", 404, CodeNoUpgrade)
	var page Events
	cb.do("GET", "/v1/events?upgrade="+u.ID, nil).expect(t, "events of the cleared upgrade", 200).json(t, &page)
	if len(page.Events) < 2 {
		t.Fatalf("the cleared upgrade's events: %+v", page.Events)
	}
}

// TestDrivenByWhileRetrying: a server that retries often to take up an
// upgrade another server drives never reports itself as its driver, and
// the one that drives never reports another process, however the views
// fall between the retries' reservations and their takes of the engine
// lock (each once answered "server" and "other-process" in that window).
func TestDrivenByWhileRetrying(t *testing.T) {
	o := offlineCluster(t)
	fast := func(c *Config) { c.Poll, c.Retry = 5*time.Millisecond, time.Millisecond }
	a := newTestServer(t, o, fast)
	u := stuckUpgrade(t, boltOf(a), o.cfg.Digest)
	ca := serve(t, a)
	waitFor(t, 5*time.Second, "server A drives the stuck upgrade", func() bool {
		var us UpgradeStatus
		ca.do("GET", "/v1/upgrade", nil).expect(t, "GET", 200).json(t, &us)
		return us.DrivenBy == DrivenByServer && us.Upgrade.ID == u.ID
	})
	b := newTestServer(t, o, fast)
	cb := serve(t, b)
	for i := 0; i < 60; i++ {
		var ua, ub UpgradeStatus
		cb.do("GET", "/v1/upgrade", nil).expect(t, "GET on B", 200).json(t, &ub)
		ca.do("GET", "/v1/upgrade", nil).expect(t, "GET on A", 200).json(t, &ua)
		if ub.DrivenBy != DrivenByOther || ua.DrivenBy != DrivenByServer {
			t.Fatalf("GET %d: B says driven by %q, A by %q; want %s and %s", i, ub.DrivenBy, ua.DrivenBy, DrivenByOther, DrivenByServer)
		}
	}
	var h Healthz
	ca.do("GET", "/v1/healthz", nil).json(t, &h)
	if h.Driving != u.ID {
		t.Errorf("A's healthz driving %q, want %s", h.Driving, u.ID)
	}
}

// TestClusterLocked: an upgrade begun with another description is
// neither driven nor acted on by this server.
func TestClusterLocked(t *testing.T) {
	o := offlineCluster(t)
	s := newTestServer(t, o)
	stuckUpgrade(t, boltOf(s), strings.Repeat("ab", 32))
	c := serve(t, s)
	c.do("PATCH", "/v1/upgrade", `{"action": "resume"}`).expect(t, "resume with another description", 409, CodeClusterLocked)
	waitFor(t, 5*time.Second, "the server gives up driving it", func() bool {
		var us UpgradeStatus
		c.do("GET", "/v1/upgrade", nil).expect(t, "GET", 200).json(t, &us)
		return us.DrivenBy == DrivenByNone
	})
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	s := newTestServer(t, offlineCluster(t))
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.ListenAndServe(ctx, ListenConfig{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, OnListen: func(u string) { urls <- u }})
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no listener within 10s")
	}
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("url %q", url)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	resp, err := hc.Get(url + "/v1/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz over TLS: %d", resp.StatusCode)
	}
	plain, err := http.Get("http" + strings.TrimPrefix(url, "https") + "/v1/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the TLS port")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ListenAndServe after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return within 10s of its context's end")
	}
	if err := s.ListenAndServe(context.Background(), ListenConfig{Addr: "127.0.0.1:0", CertFile: certFile}); err == nil {
		t.Fatal("a certificate without a key was taken")
	}
}

func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferry test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// syncWriter is a buffer safe for concurrent writes.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
