package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

var (
	runTag   = agenttest.NewTag()
	buildDir string

	buildOnce sync.Once
	programs  *agenttest.Programs
	buildErr  error
)

func TestMain(m *testing.M) {
	var err error
	buildDir, err = os.MkdirTemp("", "ferry-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	agenttest.KillTagged(runTag)
	os.RemoveAll(buildDir)
	os.Exit(code)
}

func progs(t *testing.T) *agenttest.Programs {
	t.Helper()
	buildOnce.Do(func() { programs, buildErr = agenttest.Build(buildDir) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return programs
}

func testTag(t *testing.T) string {
	tag := runTag + "-" + strings.ReplaceAll(t.Name(), "/", "-")
	t.Cleanup(func() { agenttest.KillTagged(tag) })
	return tag
}

type testHost struct {
	Host
	srv *agent.Server
	dir string
	log *agenttest.LockedBuffer
}

// startHost runs a real agent in-process and returns it as a Host.
func startHost(t *testing.T, name string) testHost {
	t.Helper()
	dir := t.TempDir()
	log := &agenttest.LockedBuffer{}
	srv, err := agent.New(agent.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close(); agenttest.KillUnder(dir) })
	tok, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return testHost{
		Host: Host{Name: name, Addr: strings.TrimPrefix(hs.URL, "http://"), Token: strings.TrimSpace(string(tok))},
		srv:  srv,
		dir:  dir,
		log:  log,
	}
}

func member(name, host, tag string, extra ...string) driver.Member {
	return driver.Member{
		Name:        name,
		Host:        host,
		Args:        append([]string{"-addr=127.0.0.1:0", agenttest.TagArg(tag)}, extra...),
		Env:         map[string]string{"GREETING": "hi"},
		StopTimeout: 5 * time.Second,
	}
}

func artifact(a agenttest.Artifact) driver.Artifact {
	return driver.Artifact{Version: a.Version, Path: a.Path, SHA256: a.SHA256}
}

func TestObserveAcrossHosts(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h1, h2 := startHost(t, "h1"), startHost(t, "h2")
	d := New([]Host{h1.Host, h2.Host})
	ctx := context.Background()

	a1 := member("a1", "h1", tag)
	b1 := member("b1", "h2", tag)
	b2 := member("b2", "h2", tag)
	unknown := member("nobody", "h1", tag)
	if err := d.Start(ctx, a1, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, b1, artifact(p.V2)); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, b2, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(ctx, b2); err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	sts, err := d.Observe(ctx, []driver.Member{b2, unknown, a1, b1})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, version string
		running       bool
	}{
		{"b2", "1.0.0", false},
		{"nobody", "", false},
		{"a1", "1.0.0", true},
		{"b1", "2.0.0", true},
	}
	if len(sts) != len(want) {
		t.Fatalf("got %d statuses: %+v", len(sts), sts)
	}
	for i, w := range want {
		s := sts[i]
		if s.Name != w.name || s.Version != w.version || s.Running != w.running {
			t.Errorf("status %d: %+v, want %+v", i, s, w)
		}
		if s.Running && (s.Since.IsZero() || s.Since.After(before)) {
			t.Errorf("%s: since %v", s.Name, s.Since)
		}
	}
	if !strings.Contains(sts[0].Detail, "stopped (SIGTERM)") {
		t.Errorf("stopped member detail %q", sts[0].Detail)
	}
	if sts[1] != (driver.Status{Name: "nobody"}) {
		t.Errorf("unknown member: %+v", sts[1])
	}
	// Each member runs on its own host's agent.
	if _, ok := h2.srv.Get("a1"); ok {
		t.Errorf("a1 known to h2's agent")
	}
	if st, ok := h1.srv.Get("a1"); !ok || !st.Running {
		t.Errorf("a1 on h1's agent: %+v", st)
	}

	if sts, err := d.Observe(ctx, nil); err != nil || len(sts) != 0 {
		t.Errorf("Observe(nil) = %v, %v", sts, err)
	}
	if _, err := d.Observe(ctx, []driver.Member{member("x", "h9", tag)}); err == nil || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("unknown host: %v", err)
	}
}

func TestStartStopIdempotent(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h := startHost(t, "h1")
	d := New([]Host{h.Host})
	ctx := context.Background()
	m := member("db", "h1", tag)

	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	first, _ := h.srv.Get("db")
	// Again, as after a crash of ferry: same process.
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	if again, _ := h.srv.Get("db"); again.PID != first.PID || !again.Running {
		t.Fatalf("second Start restarted the member: %+v then %+v", first, again)
	}

	// The swap.
	if err := d.Start(ctx, m, artifact(p.V2)); err != nil {
		t.Fatal(err)
	}
	swapped, _ := h.srv.Get("db")
	if swapped.PID == first.PID || swapped.Version != "2.0.0" || !swapped.Running {
		t.Fatalf("after the swap: %+v", swapped)
	}
	if agenttest.Alive(first.PID) {
		t.Errorf("old process %d alive after the swap", first.PID)
	}

	for range 2 {
		if err := d.Stop(ctx, m); err != nil {
			t.Fatal(err)
		}
		sts, err := d.Observe(ctx, []driver.Member{m})
		if err != nil {
			t.Fatal(err)
		}
		if sts[0].Running || sts[0].Version != "2.0.0" {
			t.Errorf("after stop: %+v", sts[0])
		}
	}
	if agenttest.Alive(swapped.PID) {
		t.Errorf("process %d alive after Stop", swapped.PID)
	}
	// Stopping a member the agent never knew is fine too.
	if err := d.Stop(ctx, member("never", "h1", tag)); err != nil {
		t.Errorf("stop of unknown member: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h := startHost(t, "h1")
	d := New([]Host{h.Host})
	ctx := context.Background()
	m := member("db", "h1", tag)
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	before, _ := h.srv.Get("db")

	bad := artifact(p.V2)
	bad.SHA256 = strings.Repeat("cd", 32) // not V2's checksum
	err := d.Start(ctx, m, bad)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 422 || ae.Code != wire.CodeChecksumMismatch || ae.Host != "h1" {
		t.Fatalf("checksum mismatch: %v", err)
	}
	if !errors.Is(err, ErrChecksumMismatch) || errors.Is(err, ErrStartFailed) || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("checksum mismatch error matches wrongly: %v", err)
	}
	if after, _ := h.srv.Get("db"); after.PID != before.PID || !after.Running {
		t.Errorf("member changed after a mismatch: %+v", after)
	}

	if err := d.Start(ctx, member("Bad/Name", "h1", tag), artifact(p.V1)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("bad name: %v", err)
	}
	if err := d.Start(ctx, m, driver.Artifact{Version: "3", Image: "img:3"}); err == nil || !strings.Contains(err.Error(), "no path") {
		t.Errorf("image artifact: %v", err)
	}
	if err := d.Start(ctx, member("x", "nowhere", tag), artifact(p.V1)); err == nil || !strings.Contains(err.Error(), `unknown host "nowhere"`) {
		t.Errorf("unknown host: %v", err)
	}

	wrong := h.Host
	wrong.Token = "wrong"
	dw := New([]Host{wrong})
	if err := dw.Start(ctx, member("other", "h1", tag), artifact(p.V1)); !errors.Is(err, ErrUnauthorized) || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("wrong token: %v", err)
	}
	if _, ok := h.srv.Get("other"); ok {
		t.Errorf("member started with a wrong token")
	}
	if err := dw.Health(ctx, "h1"); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Health with a wrong token: %v", err)
	}
	if err := d.Health(ctx, "h1"); err != nil {
		t.Errorf("Health: %v", err)
	}
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestUnreachableAgent(t *testing.T) {
	t.Parallel()
	tag := testTag(t)
	h1 := startHost(t, "h1")
	dead := Host{Name: "h2", Addr: deadAddr(t), Token: "x"}
	d := New([]Host{h1.Host, dead})
	ctx := context.Background()

	// The members of the dead agent are unknown (not down); the other
	// host's are observed.
	sts, err := d.Observe(ctx, []driver.Member{member("a", "h1", tag), member("b", "h2", tag)})
	if err != nil {
		t.Fatalf("Observe with a dead agent: %v", err)
	}
	if sts[0].Unknown || !sts[1].Unknown {
		t.Fatalf("Observe with a dead agent: %+v", sts)
	}
	if msg := sts[1].Detail; !strings.Contains(msg, "host h2") || !strings.Contains(msg, dead.Addr) || !strings.Contains(msg, driver.ErrUnreachable.Error()) {
		t.Errorf("the unknown member's detail does not name the dead host, its address, and that it is unreachable: %s", msg)
	}
	// The healthy host alone still answers.
	if _, err := d.Observe(ctx, []driver.Member{member("a", "h1", tag)}); err != nil {
		t.Errorf("Observe of h1 alone: %v", err)
	}
	for name, err := range map[string]error{
		"Start":  d.Start(ctx, member("b", "h2", tag), driver.Artifact{Version: "1", Path: "/x", SHA256: strings.Repeat("0", 64)}),
		"Stop":   d.Stop(ctx, member("b", "h2", tag)),
		"Health": d.Health(ctx, "h2"),
	} {
		var ae *APIError
		if !errors.Is(err, driver.ErrUnreachable) || errors.As(err, &ae) || !strings.Contains(err.Error(), dead.Addr) {
			t.Errorf("%s with a dead agent: %v", name, err)
		}
	}

	// A caller that gives up is not an unreachable agent.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Observe(cctx, []driver.Member{member("a", "h1", tag)}); !errors.Is(err, context.Canceled) || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("cancelled Observe: %v", err)
	}

	// An agent that does not answer in time is unreachable.
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	ds := New([]Host{{Name: "slow", Addr: slow.URL}}, WithRequestTimeout(100*time.Millisecond))
	if err := ds.Health(ctx, "slow"); !errors.Is(err, driver.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Health of a hanging agent: %v", err)
	}
}

func TestAPIErrorMapping(t *testing.T) {
	h := Host{Name: "h1", Addr: "10.0.0.1:7070"}
	for _, c := range []struct {
		name        string
		status      int
		body        string
		code        string
		msg         string
		is          error
		unreachable bool
	}{
		{"checksum", 422, `{"code":"checksum_mismatch","message":"artifact /a has sha256 x, want y"}`, wire.CodeChecksumMismatch, "artifact /a has sha256 x, want y", ErrChecksumMismatch, false},
		{"bad request", 400, `{"code":"bad_request","message":"invalid member name"}`, wire.CodeBadRequest, "invalid member name", ErrBadRequest, false},
		{"unauthorized", 401, `{"code":"unauthorized","message":"missing or wrong bearer token"}`, wire.CodeUnauthorized, "missing or wrong bearer token", ErrUnauthorized, false},
		{"not found", 404, `{"code":"not_found","message":"no"}`, wire.CodeNotFound, "no", ErrNotFound, false},
		{"start failed", 500, `{"code":"start_failed","message":"exec format error"}`, wire.CodeStartFailed, "exec format error", ErrStartFailed, false},
		{"internal", 500, `{"code":"internal","message":"disk full"}`, wire.CodeInternal, "disk full", ErrInternal, false},
		{"agent 503 with a body", 503, `{"code":"internal","message":"busy"}`, wire.CodeInternal, "busy", ErrInternal, false},
		{"proxy 502", 502, `<html>Bad Gateway</html>`, "", "<html>Bad Gateway</html>", nil, true},
		{"proxy 504 empty", 504, ``, "", "Gateway Timeout", nil, true},
		{"plain 500", 500, `oops`, "", "oops", nil, false},
		{"json without code", 400, `{"message":"x"}`, "", `{"message":"x"}`, nil, false},
		{"long body", 500, strings.Repeat("x", 300), "", strings.Repeat("x", 200) + "...", nil, false},
		{"artifact unknown", 403, `{"code":"artifact_unknown","message":"upload it"}`, wire.CodeArtifactUnknown, "upload it", ErrArtifactUnknown, false},
		// Go's TLS server, asked in plain HTTP.
		{"plain HTTP to a TLS agent", 400, "Client sent an HTTP request to an HTTPS server.\n", "",
			`the agent speaks HTTPS, and this host has no tls: in the description: pin its certificate with tls: {fingerprint: "sha256:..."} on host h1 (the agent prints it at start and writes it to its DIR/tls/fingerprint), or give tls: {ca_file: PATH}`, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := apiError(h, c.status, []byte(c.body))
			if e.Code != c.code || e.Message != c.msg || e.Status != c.status || e.Host != "h1" || e.Addr != h.Addr {
				t.Errorf("apiError = %+v", e)
			}
			var err error = fmt.Errorf("wrapped: %w", e)
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("not errors.Is %v", c.is)
			}
			for _, other := range []error{ErrBadRequest, ErrUnauthorized, ErrNotFound, ErrChecksumMismatch, ErrArtifactUnknown, ErrStartFailed, ErrInternal} {
				if other != c.is && errors.Is(err, other) {
					t.Errorf("errors.Is(%v) too", other)
				}
			}
			if errors.Is(err, driver.ErrUnreachable) != c.unreachable {
				t.Errorf("errors.Is(ErrUnreachable) = %v", !c.unreachable)
			}
			if !strings.Contains(e.Error(), "h1") || !strings.Contains(e.Error(), h.Addr) {
				t.Errorf("message %q does not name the host", e.Error())
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	pin := "sha256:" + strings.Repeat("0", 64)
	for _, c := range []struct {
		h    Host
		want string
	}{
		{Host{Addr: "127.0.0.1:7070"}, "http://127.0.0.1:7070"},
		{Host{Addr: "http://h:1"}, "http://h:1"},
		{Host{Addr: "https://h:1/"}, "https://h:1"},
		{Host{Addr: "[::1]:7070"}, "http://[::1]:7070"},
		{Host{Addr: "agent.example.com:7070"}, "http://agent.example.com:7070"},
		// TLS settings make it HTTPS, whatever the address says.
		{Host{Addr: "10.0.0.1:7101", Fingerprint: pin}, "https://10.0.0.1:7101"},
		{Host{Addr: "http://10.0.0.1:7101", Fingerprint: pin}, "https://10.0.0.1:7101"},
		{Host{Addr: "[::1]:7101", CA: []byte("x")}, "https://[::1]:7101"},
	} {
		if got := baseURL(c.h); got != c.want {
			t.Errorf("baseURL(%+v) = %q, want %q", c.h, got, c.want)
		}
	}
}

// TestRestartsAndLogs: the agent's restarts show in Observe, and Logs
// gives the output of the current and of the previous instance.
func TestRestartsAndLogs(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h := startHost(t, "h1")
	d := New([]Host{h.Host})
	ctx := context.Background()

	m := member("crashy", "h1", tag, "-exit-after=300ms", "-exit-code=1")
	m.Restart = wire.RestartOnFailure
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Logs(ctx, m, true, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("previous logs of a first instance: %v", err)
	}
	var st driver.Status
	if msg := agenttest.WaitFor(15*time.Second, func() (bool, string) {
		sts, err := d.Observe(ctx, []driver.Member{m})
		if err != nil {
			return false, err.Error()
		}
		st = sts[0]
		return st.Restarts >= 2, fmt.Sprintf("%+v", st)
	}); msg != "" {
		t.Fatalf("restarts not observed: %s", msg)
	}
	if err := d.Stop(ctx, m); err != nil {
		t.Fatal(err)
	}
	ag, _ := h.srv.Get("crashy")
	cur, err := d.Logs(ctx, m, false, 100)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := d.Logs(ctx, m, true, 100)
	if err != nil {
		t.Fatal(err)
	}
	// The last instance may have been stopped before it wrote anything;
	// the one before ran its 300ms.
	if !strings.Contains(cur, fmt.Sprintf("instance %d (restart %d)\n", ag.Instance, ag.Restarts)) {
		t.Errorf("current output (instance %d):\n%s", ag.Instance, cur)
	}
	if !strings.Contains(prev, fmt.Sprintf("instance %d", ag.Instance-1)) || strings.Contains(prev, fmt.Sprintf("instance %d", ag.Instance)) ||
		!strings.Contains(prev, "member version 1.0.0") {
		t.Errorf("previous output (instance %d):\n%s", ag.Instance-1, prev)
	}
	if last, err := d.Logs(ctx, m, false, 1); err != nil || strings.Count(last, "\n") != 1 {
		t.Errorf("one line: %q, %v", last, err)
	}

	if _, err := d.Logs(ctx, member("nobody", "h1", tag), false, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("logs of an unknown member: %v", err)
	}
	for _, n := range []int{0, wire.MaxLogLines + 1} {
		if _, err := d.Logs(ctx, m, false, n); err == nil {
			t.Errorf("logs with %d lines: no error", n)
		}
	}
	if _, err := d.Logs(ctx, member("x", "nowhere", tag), false, 1); err == nil || !strings.Contains(err.Error(), `unknown host "nowhere"`) {
		t.Errorf("unknown host: %v", err)
	}
}

// TestStartWithFiles: a member's files reach its directory before it
// starts; the same files again change nothing, other files restart it.
func TestStartWithFiles(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	h := startHost(t, "h1")
	d := New([]Host{h.Host})
	ctx := context.Background()

	m := member("conf", "h1", tag, "-ready=ready.json", "-read=etc/app.ini")
	m.Files = []driver.File{{Path: "etc/app.ini", Mode: 0o640, Content: "port = 1\n"}}
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	first, _ := h.srv.Get("conf")
	ready := func(pid int) map[string]any {
		var info map[string]any
		if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
			b, err := os.ReadFile(filepath.Join(h.dir, "members", "conf", "ready.json"))
			if err != nil || json.Unmarshal(b, &info) != nil {
				return false, fmt.Sprint(err)
			}
			return int(info["pid"].(float64)) == pid, string(b)
		}); msg != "" {
			t.Fatal(msg)
		}
		return info
	}
	if info := ready(first.PID); info["file"] != "port = 1\n" || info["file_mode"] != "0640" {
		t.Errorf("the member saw %v", info)
	}
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	if again, _ := h.srv.Get("conf"); again.PID != first.PID {
		t.Errorf("the same files restarted the member: %+v", again)
	}
	m.Files[0].Content = "port = 2\n"
	if err := d.Start(ctx, m, artifact(p.V1)); err != nil {
		t.Fatal(err)
	}
	changed, _ := h.srv.Get("conf")
	if changed.PID == first.PID || changed.Version != "1.0.0" {
		t.Fatalf("changed files: %+v", changed)
	}
	if info := ready(changed.PID); info["file"] != "port = 2\n" {
		t.Errorf("after the change the member saw %v", info)
	}
	m.Files[0].Path = "../out"
	if err := d.Start(ctx, m, artifact(p.V1)); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "'..'") {
		t.Errorf("a file outside the member's directory: %v", err)
	}
}
