package server

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// clusterServer builds a server over a running sample cluster, as
// 'ferry server' would, its configuration changed by opts; it is
// closed at the end of the test.
func clusterServer(t *testing.T, cl *demo.Cluster, opts ...func(*Config)) *Server {
	t.Helper()
	st, err := store.Open(cl.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := LoadOrCreateToken(filepath.Join(cl.DataDir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Cluster: cl.Config, Driver: cl.Driver, Store: st, Token: tok}
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

var membersLine = regexp.MustCompile(`^ferry_members\{component="([^"]+)",version="([^"]+)"\} (\S+)$`)

// scrape reads /metrics and returns the members per component per
// version, and the whole text.
func scrape(t *testing.T, c *client) (map[string]map[string]float64, string) {
	t.Helper()
	text := string(c.do("GET", "/metrics", nil).expect(t, "metrics", 200).body)
	out := map[string]map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if m := membersLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseFloat(m[3], 64)
			if out[m[1]] == nil {
				out[m[1]] = map[string]float64{}
			}
			out[m[1]][m[2]] = n
		}
	}
	return out, text
}

func current(t *testing.T, c *client) UpgradeStatus {
	t.Helper()
	var us UpgradeStatus
	c.do("GET", "/v1/upgrade", nil).expect(t, "GET /v1/upgrade", 200).json(t, &us)
	return us
}

// TestUpgradeThroughAPI drives a real upgrade of the sample cluster
// through the API: the views before, a start, the 409 of a second
// start, /metrics showing members between versions, a pause, a restart
// of the server (the new one takes the upgrade up), a resume, the end,
// and the clearing of the ended upgrade; the event stream sees it all.
func TestUpgradeThroughAPI(t *testing.T) {
	cl := startCluster(t, 700*time.Millisecond)
	a := clusterServer(t, cl)
	c := serve(t, a)

	var ms Members
	c.do("GET", "/v1/members", nil).expect(t, "members", 200).json(t, &ms)
	if len(ms.Members) != 7 {
		t.Fatalf("members: %d, want 7", len(ms.Members))
	}
	for _, m := range ms.Members {
		if m.Running != "1.0.0" || m.Status != "healthy" || m.Target != "" {
			t.Errorf("member before the upgrade: %+v", m)
		}
	}
	var vs Versions
	c.do("GET", "/v1/versions", nil).expect(t, "versions", 200).json(t, &vs)
	if len(vs.Components) != 2 || vs.Components[0].Component != "kv" || vs.Components[0].Versions["1.0.0"] != 3 || vs.Components[1].Versions["1.0.0"] != 4 {
		t.Fatalf("versions = %+v", vs)
	}
	var rs Releases
	c.do("GET", "/v1/releases", nil).expect(t, "releases", 200).json(t, &rs)
	if len(rs.Releases) != 2 || rs.Releases[0].State != "active" || rs.Releases[0].Members != 7 || rs.Releases[1].State != "available" {
		t.Fatalf("releases = %+v", rs)
	}
	c.do("GET", "/v1/releases/2.0.0", nil).expect(t, "release 2.0.0", 200)
	var h HealthReport
	c.do("GET", "/v1/health?to=2.0.0", nil).expect(t, "preflight", 200).json(t, &h)
	if !h.OK {
		t.Fatalf("preflight failed: %+v", h.Checks)
	}
	c.do("GET", "/v1/health", nil).expect(t, "preflight without a target", 200)

	str := c.stream("/v1/events/stream")
	defer str.close()
	var us UpgradeStatus
	resp := c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "start", 202)
	resp.json(t, &us)
	if resp.header.Get("Location") != "/v1/upgrade" || us.Upgrade.To != "2.0.0" || us.DrivenBy != DrivenByServer || len(us.Upgrade.Members) != 7 {
		t.Fatalf("start = %+v (Location %q)", us, resp.header.Get("Location"))
	}
	id := us.Upgrade.ID
	c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "a second start", 409, CodeUpgradeInProgress)
	c.do("DELETE", "/v1/upgrade", nil).expect(t, "DELETE while it runs", 409, CodeUpgradeNotEnded)

	// /metrics scraped during the upgrade shows members of a component
	// on both versions.
	var moving string
	waitFor(t, time.Minute, "/metrics showing a component on 1.0.0 and 2.0.0 at once", func() bool {
		mv, _ := scrape(t, c)
		for comp, v := range mv {
			if v["1.0.0"] > 0 && v["2.0.0"] > 0 {
				moving = fmt.Sprintf("%s: %v", comp, v)
				return true
			}
		}
		return false
	})
	t.Logf("members moving, as /metrics showed them: %s", moving)

	c.do("PATCH", "/v1/upgrade", map[string]string{"action": "pause"}).expect(t, "pause", 202)
	waitFor(t, time.Minute, "state paused", func() bool { return current(t, c).Upgrade.State == upgrade.StatePaused.String() })
	c.do("PATCH", "/v1/upgrade", map[string]string{"action": "pause"}).expect(t, "a second pause", 409, CodeAlreadyPaused)
	waitFor(t, 5*time.Second, "the stream's pause events", func() bool {
		return str.has("intent", "pause requested") && str.has("state", "→ paused") && str.has("step", "→ done")
	})

	// The server stops; a new one over the same store takes the
	// upgrade up by itself.
	a.Close()
	b := clusterServer(t, cl)
	cb := serve(t, b)
	waitFor(t, 10*time.Second, "server B drives the paused upgrade", func() bool {
		us := current(t, cb)
		return us.DrivenBy == DrivenByServer && us.Upgrade.ID == id && us.Upgrade.State == upgrade.StatePaused.String()
	})
	strB := cb.stream("/v1/events/stream?upgrade=current")
	defer strB.close()
	var ar ActionResult
	cb.do("PATCH", "/v1/upgrade", map[string]string{"action": "resume"}).expect(t, "resume", 202).json(t, &ar)
	if ar.DrivenBy != DrivenByServer {
		t.Fatalf("resume: driven by %s", ar.DrivenBy)
	}
	waitFor(t, 2*time.Minute, "state completed", func() bool {
		u := current(t, cb).Upgrade
		if u.Terminal() && u.State != upgrade.StateCompleted.String() {
			t.Fatalf("the upgrade ended %s: %s", u.State, u.Reason)
		}
		return u.State == upgrade.StateCompleted.String()
	})
	if by := current(t, cb).DrivenBy; by != DrivenByServer {
		t.Errorf("once completed: driven by %q, want %s (what drove it)", by, DrivenByServer)
	}
	waitFor(t, 5*time.Second, "the stream's completed event", func() bool { return strB.has("state", "→ completed") })
	if evs, _, _ := strB.snapshot(); evs[0].Kind != "state" || !strings.Contains(evs[0].Message, "created") {
		t.Errorf("the stream of the current upgrade began with %+v, want its creation", evs[0])
	}

	waitFor(t, 10*time.Second, "every member on 2.0.0 and healthy", func() bool {
		var ms Members
		cb.do("GET", "/v1/members", nil).expect(t, "members", 200).json(t, &ms)
		for _, m := range ms.Members {
			if m.Running != "2.0.0" || m.Target != "2.0.0" || m.Step != "done" || m.Status != "healthy" {
				return false
			}
		}
		return true
	})
	mv, text := scrape(t, cb)
	if mv["kv"]["2.0.0"] != 3 || mv["api"]["2.0.0"] != 4 || mv["kv"]["1.0.0"] != 0 {
		t.Errorf("ferry_members after the upgrade: %v", mv)
	}
	for _, want := range []string{`ferry_upgrade_state{state="completed"} 1`, `ferry_upgrade_state{state="paused"} 0`,
		`ferry_upgrade_members{step="done"} 7`, `ferry_gate_healthy{component="kv"} 1`, `ferry_member_healthy{component="api",member="api-1"} 1`,
		`ferry_step_duration_seconds_count{action="start",component="kv",outcome="ok"}`, `ferry_step_duration_seconds_count{action="stop",component="api",outcome="ok"}`,
		`ferry_api_requests_total{code="202",route="PATCH /v1/upgrade"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	cb.do("PATCH", "/v1/upgrade", map[string]string{"action": "resume"}).expect(t, "resume after the end", 409, CodeUpgradeEnded)
	cb.do("PATCH", "/v1/upgrade", map[string]string{"action": "abort"}).expect(t, "abort after the end", 409, CodeUpgradeEnded)
	cb.do("DELETE", "/v1/upgrade", nil).expect(t, "DELETE after the end", 200)
	cb.do("GET", "/v1/upgrade", nil).expect(t, "GET after DELETE", 404, CodeNoUpgrade)
	var rs2 Releases
	cb.do("GET", "/v1/releases", nil).expect(t, "releases after", 200).json(t, &rs2)
	if rs2.Releases[1].Version != "2.0.0" || rs2.Releases[1].State != "active" {
		t.Errorf("releases after the upgrade = %+v", rs2.Releases)
	}
}

// TestServerCommand runs 'ferry server' itself: it listens, creates
// its token file 0600 without printing the token, answers, and exits 0
// on SIGTERM.
func TestServerCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ferry; not with -short")
	}
	buildBinaries(t)
	o := offlineCluster(t)
	cmd := exec.Command(bins.ferry, "-f", o.cfg.File, "--data-dir", o.dataDir, "server", "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncWriter
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var out syncWriter
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(&out, line)
			if _, u, ok := strings.Cut(line, "listening on "); ok {
				urls <- u
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var url string
	select {
	case url = <-urls:
	case err := <-exited:
		t.Fatalf("ferry server exited: %v\n%s%s", err, out.String(), stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("ferry server did not listen within 20s\n%s%s", out.String(), stderr.String())
	}
	tokPath := filepath.Join(o.dataDir, TokenFile)
	fi, err := os.Stat(tokPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	tok, _, err := LoadOrCreateToken(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, base: url, token: tok, spec: loadSpec(t)}
	c.do("GET", "/v1/healthz", nil, "Authorization", "").expect(t, "healthz", 200)
	c.do("GET", "/v1/members", nil).expect(t, "members, the agent away", 503, CodeObserveFailed)
	c.do("GET", "/v1/upgrade", nil, "Authorization", "Bearer nope-nope-nope-nope").expect(t, "a wrong token", 401, CodeUnauthorized)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("ferry server after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ferry server did not exit within 15s of SIGTERM")
	}
	if all := out.String() + stderr.String(); strings.Contains(all, tok) {
		t.Fatalf("ferry server printed its token:\n%s", all)
	}
	if !strings.Contains(out.String(), "dashboard: "+url+"/dashboard/") {
		t.Errorf("output does not name the dashboard:\n%s", out.String())
	}
}
