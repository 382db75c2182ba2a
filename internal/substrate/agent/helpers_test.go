package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

var (
	runTag   = agenttest.NewTag() // every member of this test run carries it
	buildDir string

	buildOnce sync.Once
	programs  *agenttest.Programs
	buildErr  error
)

func TestMain(m *testing.M) {
	var err error
	buildDir, err = os.MkdirTemp("", "ferry-agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if pids := agenttest.KillTagged(runTag); len(pids) > 0 {
		fmt.Fprintf(os.Stderr, "killed leftover member processes %v\n", pids)
	}
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// progs builds the member (two versions) and the standalone agent,
// once per test run.
func progs(t testing.TB) *agenttest.Programs {
	t.Helper()
	buildOnce.Do(func() { programs, buildErr = agenttest.Build(buildDir) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return programs
}

// testTag returns a tag for the members of one test, and kills them
// when the test ends, whatever happened.
func testTag(t *testing.T) string {
	tag := runTag + "-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	t.Cleanup(func() { agenttest.KillTagged(tag) })
	return tag
}

type testAgent struct {
	t     *testing.T
	dir   string
	srv   *Server
	hs    *httptest.Server
	token string
	log   *agenttest.LockedBuffer
	tag   string

	// uploaded are the member versions uploaded to the agent's store
	// (uploadFor).
	uploadMu sync.Mutex
	uploaded map[string]bool
}

// startAgent runs an agent in-process on dir, served by httptest.
func startAgent(t *testing.T, dir string) *testAgent {
	t.Helper()
	return startAgentConfig(t, Config{Dir: dir})
}

// startAgentConfig is startAgent with cfg's unexported settings (the
// restart backoff, the output bound).
func startAgentConfig(t *testing.T, cfg Config) *testAgent {
	t.Helper()
	dir := cfg.Dir
	a := &testAgent{t: t, dir: dir, log: &agenttest.LockedBuffer{}}
	cfg.TokenFile = filepath.Join(dir, "token")
	cfg.Logger = slog.New(slog.NewTextHandler(a.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.srv = srv
	// Registered after dir was made: runs before dir is removed.
	t.Cleanup(func() { agenttest.KillUnder(dir) })
	a.hs = httptest.NewServer(srv.Handler())
	b, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	a.token = strings.TrimSpace(string(b))
	t.Cleanup(a.close)
	return a
}

// uploadFor uploads the member version whose sha256 a member spec
// names, the first time a spec names it: the agent runs only artifacts
// of its store, and ferry's driver would upload it so. A sum that is
// not one of the member's versions is left for the test to handle.
func (a *testAgent) uploadFor(sum string) {
	a.t.Helper()
	p := progs(a.t)
	for _, art := range []agenttest.Artifact{p.V1, p.V2} {
		if art.SHA256 != sum {
			continue
		}
		a.uploadMu.Lock()
		defer a.uploadMu.Unlock()
		if a.uploaded[sum] {
			return
		}
		a.upload(art.Path, art.SHA256)
		if a.uploaded == nil {
			a.uploaded = map[string]bool{}
		}
		a.uploaded[sum] = true
	}
}

// upload puts the file at path into the agent's artifact store as sum
// (PUT /v1/artifacts/{sha256}) and expects 200 or 201.
func (a *testAgent) upload(path, sum string) Artifact {
	a.t.Helper()
	code, body := uploadFile(a.t, a.hs.Client(), a.hs.URL, a.token, path, sum)
	if code != 200 && code != 201 {
		a.t.Fatalf("upload of %s: %d %s", path, code, body)
	}
	var art Artifact
	if err := json.Unmarshal(body, &art); err != nil {
		a.t.Fatal(err)
	}
	return art
}

// uploadFile sends the file at path to the agent at url as the
// artifact sum, named by the file's base name.
func uploadFile(t *testing.T, c *http.Client, url, token, path, sum string) (int, []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req, err := http.NewRequest("PUT", url+"/v1/artifacts/"+sum+"?name="+filepath.Base(path), f)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (a *testAgent) close() {
	a.hs.Close()
	a.srv.Close()
	if strings.Contains(a.log.String(), a.token) {
		a.t.Errorf("the agent logged its token")
	}
}

// call makes an API call with the agent's token; body may be nil, a
// string (sent as is) or a value (sent as JSON).
func (a *testAgent) call(method, path string, body any) (int, []byte) {
	return a.callToken(method, path, body, a.token)
}

func (a *testAgent) callToken(method, path string, body any, token string) (int, []byte) {
	a.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case wire.MemberSpec:
		if method == "PUT" && token != "" {
			a.uploadFor(b.SHA256)
		}
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.hs.URL+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.hs.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" && !(resp.StatusCode == 200 && strings.Contains(path, "/logs")) {
		a.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, out
}

// put PUTs a spec and expects 200.
func (a *testAgent) put(name string, spec wire.MemberSpec) wire.Status {
	a.t.Helper()
	code, body := a.call("PUT", "/v1/members/"+name, spec)
	if code != 200 {
		a.t.Fatalf("PUT %s: %d %s", name, code, body)
	}
	return decodeStatus(a.t, body)
}

func (a *testAgent) stop(name string, timeoutMS int64) wire.Status {
	a.t.Helper()
	var body any
	if timeoutMS != 0 {
		body = wire.StopRequest{TimeoutMS: timeoutMS}
	}
	code, out := a.call("POST", "/v1/members/"+name+"/stop", body)
	if code != 200 {
		a.t.Fatalf("stop %s: %d %s", name, code, out)
	}
	return decodeStatus(a.t, out)
}

func (a *testAgent) get(name string) wire.Status {
	a.t.Helper()
	code, out := a.call("GET", "/v1/members/"+name, nil)
	if code != 200 {
		a.t.Fatalf("GET %s: %d %s", name, code, out)
	}
	return decodeStatus(a.t, out)
}

func decodeStatus(t *testing.T, b []byte) wire.Status {
	t.Helper()
	var st wire.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	return st
}

func decodeError(t *testing.T, b []byte) wire.ErrorBody {
	t.Helper()
	var e wire.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Code == "" || e.Message == "" {
		t.Fatalf("not an error body: %s (%v)", b, err)
	}
	return e
}

// spec returns a PUT body for the member program; extra args follow
// the standard ones (listen on a free port, write ready.json in the
// member's directory, carry the test's tag).
func spec(a agenttest.Artifact, tag string, extra ...string) wire.MemberSpec {
	args := append([]string{"-addr=127.0.0.1:0", "-ready=ready.json", agenttest.TagArg(tag)}, extra...)
	return wire.MemberSpec{Version: a.Version, SHA256: a.SHA256, Args: args}
}

// memberInfo is what the member program reports.
type memberInfo struct {
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	Addr     string `json:"addr"`
	Cwd      string `json:"cwd"`
	Greeting string `json:"greeting"`
	File     string `json:"file"`
	FileMode string `json:"file_mode"`
}

// waitReady waits until the member process pid has written its
// ready.json in dir, and returns it.
func waitReady(t *testing.T, memberDir string, pid int) memberInfo {
	t.Helper()
	var info memberInfo
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(memberDir, "ready.json"))
		if err != nil {
			return false, err.Error()
		}
		if err := json.Unmarshal(b, &info); err != nil {
			return false, err.Error()
		}
		return info.PID == pid, fmt.Sprintf("ready.json is from pid %d, want %d", info.PID, pid)
	}); msg != "" {
		t.Fatalf("member %d not ready: %s", pid, msg)
	}
	return info
}

// askVersion asks a member for its version over HTTP.
func askVersion(t *testing.T, addr string) memberInfo {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/version")
	if err != nil {
		t.Fatalf("member at %s: %v", addr, err)
	}
	defer resp.Body.Close()
	var info memberInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatalf("member at %s: %v", addr, err)
	}
	return info
}

// logs GETs a member's output and expects 200.
func (a *testAgent) logs(name string, previous bool, lines int) string {
	a.t.Helper()
	code, out := a.call("GET", fmt.Sprintf("/v1/members/%s/logs?previous=%v&lines=%d", name, previous, lines), nil)
	if code != 200 {
		a.t.Fatalf("logs of %s (previous %v): %d %s", name, previous, code, out)
	}
	return string(out)
}

// waitStatus waits until the member's status satisfies cond.
func (a *testAgent) waitStatus(name string, d time.Duration, cond func(wire.Status) bool) wire.Status {
	a.t.Helper()
	var st wire.Status
	if msg := agenttest.WaitFor(d, func() (bool, string) {
		st = a.get(name)
		return cond(st), fmt.Sprintf("%+v", st)
	}); msg != "" {
		a.t.Fatalf("member %s: %s", name, msg)
	}
	return st
}

// waitGone waits until pid is no longer a live process.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		return !agenttest.Alive(pid), fmt.Sprintf("pid %d still alive", pid)
	}); msg != "" {
		t.Fatal(msg)
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil && agenttest.Alive(pid)
}

// try is call for any goroutine, within timeout: no answer in time is
// an error, not a failed test.
func (a *testAgent) try(method, path string, body any, timeout time.Duration) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		if sp, ok := body.(wire.MemberSpec); ok && method == "PUT" {
			a.uploadFor(sp.SHA256)
		}
		j, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.hs.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	c := *a.hs.Client()
	c.Timeout = timeout
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
