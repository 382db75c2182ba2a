package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

func TestStartRunsMember(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	sp := spec(p.V1, tag)
	sp.Env = map[string]string{"GREETING": "hello from the test"}
	before := time.Now()
	st := a.put("db-1", sp)
	if !st.Running || st.PID <= 0 || st.Version != "1.0.0" || st.SHA256 != p.V1.SHA256 || st.ExitCode != nil || st.Detail != "" {
		t.Fatalf("status after start: %+v", st)
	}
	if st.Since.Before(before.Add(-time.Second)) || st.Since.After(time.Now()) {
		t.Errorf("since %v not around now", st.Since)
	}

	memberDir := filepath.Join(a.dir, "members", "db-1")
	info := waitReady(t, memberDir, st.PID)
	got := askVersion(t, info.Addr)
	if got.Version != "1.0.0" || got.PID != st.PID {
		t.Errorf("member reports %+v, want version 1.0.0 pid %d", got, st.PID)
	}
	if got.Cwd != memberDir {
		t.Errorf("member cwd %q, want %q", got.Cwd, memberDir)
	}
	if got.Greeting != "hello from the test" {
		t.Errorf("member env GREETING %q", got.Greeting)
	}

	// The member runs the agent's copy of the artifact.
	copyPath := filepath.Join(a.dir, "artifacts", p.V1.SHA256, "member")
	fi, err := os.Stat(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("artifact copy mode %v, want 0755", fi.Mode().Perm())
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", st.PID)); err != nil || exe != copyPath {
		t.Errorf("member runs %q (%v), want %q", exe, err, copyPath)
	}

	// Its output goes to its instance's log.
	if msg := agenttest.WaitFor(5*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(a.dir, "logs", "db-1", "current.log"))
		return strings.Contains(string(b), fmt.Sprintf("member version 1.0.0 pid %d", st.PID)), string(b)
	}); msg != "" {
		t.Errorf("log: %s", msg)
	}
	if st.Instance != 1 || st.Restarts != 0 || st.Restart != wire.RestartNo {
		t.Errorf("first start: instance %d, restarts %d, policy %q", st.Instance, st.Restarts, st.Restart)
	}

	// It is in its own session: not in the agent's process group.
	if sid := sessionID(t, st.PID); sid != st.PID {
		t.Errorf("member session %d, want its own (%d)", sid, st.PID)
	}

	// State is persisted, 0600.
	sfi, err := os.Stat(filepath.Join(a.dir, "state", "db-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if sfi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v", sfi.Mode().Perm())
	}

	if g := a.get("db-1"); g.PID != st.PID || !g.Running || g.Version != "1.0.0" {
		t.Errorf("GET: %+v", g)
	}
	code, body := a.call("GET", "/v1/members", nil)
	var list []wire.Status
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list) != 1 || list[0].Name != "db-1" || list[0].PID != st.PID {
		t.Errorf("list: %d %s", code, body)
	}
}

// sessionID reads field 6 of /proc/<pid>/stat.
func sessionID(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var sid int
	fmt.Sscan(f[3], &sid)
	return sid
}

func TestPutSameArtifactIsNoop(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	first := a.put("web", spec(p.V1, tag))
	for range 3 {
		again := a.put("web", spec(p.V1, tag))
		if again.PID != first.PID || !again.Since.Equal(first.Since) || !again.Running {
			t.Fatalf("PUT again restarted the member: %+v, then %+v", first, again)
		}
	}
	if n := len(agenttest.Tagged(tag)); n != 1 {
		t.Errorf("%d member processes, want 1", n)
	}
}

func TestSwapVersion(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	marker := filepath.Join(t.TempDir(), "sigterm")

	old := a.put("api", spec(p.V1, tag, "-marker="+marker))
	waitReady(t, filepath.Join(a.dir, "members", "api"), old.PID)

	st := a.put("api", spec(p.V2, tag, "-marker="+marker))
	if !st.Running || st.PID == old.PID || st.Version != "2.0.0" || st.SHA256 != p.V2.SHA256 {
		t.Fatalf("after swap: %+v (old pid %d)", st, old.PID)
	}
	if processAlive(old.PID) {
		t.Errorf("old process %d still alive after the swap", old.PID)
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGTERM %d 1.0.0", old.PID)) {
		t.Errorf("old process was not stopped with SIGTERM; marker: %q", b)
	}
	info := waitReady(t, filepath.Join(a.dir, "members", "api"), st.PID)
	if v := askVersion(t, info.Addr); v.Version != "2.0.0" {
		t.Errorf("member now reports %q", v.Version)
	}
	if g := a.get("api"); g.Version != "2.0.0" || g.PID != st.PID {
		t.Errorf("GET after swap: %+v", g)
	}

	// And back: the v1 copy is reused.
	back := a.put("api", spec(p.V1, tag, "-marker="+marker))
	if back.Version != "1.0.0" || !back.Running || back.PID == st.PID {
		t.Errorf("swap back: %+v", back)
	}
	if n := len(agenttest.Tagged(tag)); n != 1 {
		t.Errorf("%d member processes, want 1", n)
	}
}

// TestUnknownArtifactKeepsOldMember: a PUT naming an artifact the
// store does not have is refused (403) before anything is stopped, and
// so is an upload whose bytes do not have the sum it claims (422).
func TestUnknownArtifactKeepsOldMember(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	old := a.put("db-2", spec(p.V1, tag))
	bad := spec(p.V2, tag)
	bad.SHA256 = strings.Repeat("ab", 32) // not in the store
	code, body := a.call("PUT", "/v1/members/db-2", bad)
	if code != 403 || decodeError(t, body).Code != wire.CodeArtifactUnknown {
		t.Fatalf("PUT of an artifact not in the store: %d %s", code, body)
	}
	if e := decodeError(t, body); !strings.Contains(e.Message, bad.SHA256) || !strings.Contains(e.Message, "PUT /v1/artifacts/"+bad.SHA256) {
		t.Errorf("message does not name the sum and what to do: %s", e.Message)
	}
	if st := a.get("db-2"); !st.Running || st.PID != old.PID || st.Version != "1.0.0" {
		t.Errorf("after the refusal: %+v, want pid %d on 1.0.0", st, old.PID)
	}
	if !processAlive(old.PID) {
		t.Errorf("old process died")
	}

	// An upload claiming V2's bytes have another sum: nothing kept.
	code, body = uploadFile(t, a.hs.Client(), a.hs.URL, a.token, p.V2.Path, bad.SHA256)
	if code != 422 || decodeError(t, body).Code != wire.CodeChecksumMismatch || !strings.Contains(string(body), p.V2.SHA256) {
		t.Fatalf("upload with a wrong sum: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "artifacts", bad.SHA256)); !os.IsNotExist(err) {
		t.Errorf("a copy was left under the wrong checksum: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(a.dir, "artifacts", ".upload-*")); len(left) != 0 {
		t.Errorf("upload leftovers: %v", left)
	}

	// A member never started stays unknown after a refusal.
	code, body = a.call("PUT", "/v1/members/fresh", bad)
	if code != 403 {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := a.call("GET", "/v1/members/fresh", nil); code != 404 {
		t.Errorf("GET after a failed first PUT: %d, want 404", code)
	}
}

func TestStopIsGracefulAndIdempotent(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	marker := filepath.Join(t.TempDir(), "sigterm")

	st := a.put("cache", spec(p.V1, tag, "-marker="+marker, "-term-delay=50ms"))
	waitReady(t, filepath.Join(a.dir, "members", "cache"), st.PID)

	stopped := a.stop("cache", 5000)
	if stopped.Running || stopped.PID != 0 || stopped.Version != "1.0.0" {
		t.Fatalf("after stop: %+v", stopped)
	}
	if stopped.ExitCode == nil || *stopped.ExitCode != 0 || stopped.Detail != "stopped (SIGTERM): exited with status 0" {
		t.Errorf("after stop: detail %q exit %v", stopped.Detail, stopped.ExitCode)
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGTERM %d", st.PID)) {
		t.Errorf("member did not get SIGTERM; marker %q", b)
	}
	if processAlive(st.PID) {
		t.Errorf("process %d alive after stop", st.PID)
	}

	again := a.stop("cache", 0)
	if again.Running || again.Detail != stopped.Detail || again.Version != "1.0.0" {
		t.Errorf("second stop: %+v", again)
	}
	if g := a.get("cache"); g.Running || g.Version != "1.0.0" {
		t.Errorf("GET after stop: %+v", g)
	}
	// A valid name the agent never knew: 200, not running.
	if never := a.stop("never-started", 0); never.Running || never.Name != "never-started" {
		t.Errorf("stop of an unknown member: %+v", never)
	}

	// Starting it again after a stop starts a new process.
	re := a.put("cache", spec(p.V1, tag, "-marker="+marker))
	if !re.Running || re.PID == st.PID {
		t.Errorf("restart after stop: %+v", re)
	}
}

func TestStopKillsAfterTimeout(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	marker := filepath.Join(t.TempDir(), "sigterm")

	sp := spec(p.V1, tag, "-marker="+marker, "-ignore-term")
	sp.StopTimeoutMS = 300
	st := a.put("stubborn", sp)
	waitReady(t, filepath.Join(a.dir, "members", "stubborn"), st.PID)

	t0 := time.Now()
	stopped := a.stop("stubborn", 0) // the member's own stop_timeout_ms
	took := time.Since(t0)
	if stopped.Running || stopped.ExitCode != nil ||
		stopped.Detail != "stopped (SIGKILL after 300ms): killed by SIGKILL" {
		t.Errorf("after kill: %+v", stopped)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("stop took %v, want a bit over the 300ms stop timeout", took)
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), "SIGTERM") {
		t.Errorf("member did not get SIGTERM first; marker %q", b)
	}
	if processAlive(st.PID) {
		t.Errorf("process %d alive after SIGKILL", st.PID)
	}
}

func TestExitIsRecorded(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	a.put("crashy", spec(p.V1, tag, "-exit-after=0s", "-exit-code=3"))
	var st wire.Status
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		st = a.get("crashy")
		return !st.Running, fmt.Sprintf("%+v", st)
	}); msg != "" {
		t.Fatal(msg)
	}
	if st.Detail != "exited with status 3" || st.ExitCode == nil || *st.ExitCode != 3 || st.Version != "1.0.0" {
		t.Errorf("after exit: %+v", st)
	}
	// PUT of the same artifact restarts a member that is down.
	if re := a.put("crashy", spec(p.V1, tag)); !re.Running {
		t.Errorf("PUT after exit: %+v", re)
	}
}

func TestConcurrentPutsStartOneProcess(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	const n = 8
	pids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := a.call("PUT", "/v1/members/q", spec(p.V1, tag))
			if code != 200 {
				t.Errorf("PUT %d: %d %s", i, code, body)
				return
			}
			var st wire.Status
			json.Unmarshal(body, &st)
			pids[i] = st.PID
		}()
	}
	wg.Wait()
	for _, pid := range pids {
		if pid != pids[0] {
			t.Fatalf("concurrent PUTs report different pids: %v", pids)
		}
	}
	if live := agenttest.Tagged(tag); len(live) != 1 {
		t.Errorf("live member processes %v, want 1", live)
	}

	// Mixed versions race: whatever wins, one process remains.
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			art := p.V1
			if i%2 == 1 {
				art = p.V2
			}
			if code, body := a.call("PUT", "/v1/members/q", spec(art, tag)); code != 200 {
				t.Errorf("PUT: %d %s", code, body)
			}
		}()
	}
	wg.Wait()
	st := a.get("q")
	if live := agenttest.Tagged(tag); len(live) != 1 || live[0] != st.PID {
		t.Errorf("live member processes %v, want just %d", live, st.PID)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())

	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(a.token) {
		t.Fatalf("generated token %q is not 32 hex-encoded bytes", a.token)
	}
	calls := []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/members", nil},
		{"GET", "/v1/members/x", nil},
		{"PUT", "/v1/members/x", spec(p.V1, tag)},
		{"POST", "/v1/members/x/stop", nil},
		{"GET", "/v1/nonsense", nil},
	}
	for _, tok := range []string{"", "wrong", a.token + "x", strings.ToUpper(a.token)} {
		for _, c := range calls {
			code, body := a.callToken(c.method, c.path, c.body, tok)
			if code != 401 || decodeError(t, body).Code != wire.CodeUnauthorized {
				t.Errorf("%s %s with token %q: %d %s", c.method, c.path, tok, code, body)
			}
		}
	}
	if live := agenttest.Tagged(tag); len(live) != 0 {
		t.Errorf("an unauthorized PUT started %v", live)
	}
	if code, body := a.call("GET", "/v1/members/x", nil); code != 404 {
		t.Errorf("member known after unauthorized PUT: %d %s", code, body)
	}
	// Health needs no token.
	if code, body := a.callToken("GET", "/v1/health", nil, ""); code != 200 || strings.TrimSpace(string(body)) != `{"ok":true,"tls":false}` {
		t.Errorf("health: %d %s", code, body)
	}
	// The scheme is case-insensitive; the token is not.
	code, _ := a.callToken("GET", "/v1/members", nil, a.token)
	if code != 200 {
		t.Errorf("right token: %d", code)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	good := spec(p.V1, tag)
	goodJSON, _ := json.Marshal(good)

	for _, c := range []struct {
		method, path string
		body         any
		code         int
	}{
		{"GET", "/v1/members/Bad", nil, 400},
		{"GET", "/v1/members/-x", nil, 400},
		{"GET", "/v1/members/a%2F..%2F..%2Fetc", nil, 400},
		{"GET", "/v1/members/..", nil, 400}, // cleaned by the mux to /v1/ -> not found (after redirect) or 400
		{"PUT", "/v1/members/" + strings.Repeat("a", 64), good, 400},
		{"PUT", "/v1/members/.hidden", good, 400},
		{"PUT", "/v1/members/ok", "{", 400},
		{"PUT", "/v1/members/ok", "", 400},
		{"PUT", "/v1/members/ok", "null", 400},
		{"PUT", "/v1/members/ok", "[]", 400},
		{"PUT", "/v1/members/ok", string(goodJSON) + "{}", 400},
		{"PUT", "/v1/members/ok", `{"version":"1","sha256":"xyz"}`, 400},
		{"PUT", "/v1/members/ok", `{"version":"1"}`, 400},
		// A path of the agent's host, as an older ferry sent: refused,
		// the artifact in the store or not.
		{"PUT", "/v1/members/ok", fmt.Sprintf(`{"version":"1","path":"/bin/true","sha256":%q}`, p.V1.SHA256), 400},
		{"PUT", "/v1/members/ok", fmt.Sprintf(`{"version":"1","path":%q,"sha256":%q}`, p.V1.Path, p.V1.SHA256), 400},
		{"PUT", "/v1/members/ok", fmt.Sprintf(`{"version":"1","sha256":%q,"stop_timeout_ms":-1}`, p.V1.SHA256), 400},
		{"PUT", "/v1/members/ok", fmt.Sprintf(`{"version":"1","sha256":%q,"env":{"A=B":"c"}}`, p.V1.SHA256), 400},
		{"PUT", "/v1/members/ok", fmt.Sprintf(`{"version":"1","sha256":%q,"args":["a\u0000b"]}`, p.V1.SHA256), 400},
		{"PUT", "/v1/members/ok", fmt.Sprintf(`{"version":1,"sha256":%q}`, p.V1.SHA256), 400},
		{"PUT", "/v1/artifacts/xyz", "bytes", 400},
		{"PUT", "/v1/artifacts/" + p.V1.SHA256 + "?name=../x", "bytes", 400},
		{"PUT", "/v1/artifacts/" + p.V1.SHA256 + "?name=.hidden", "bytes", 400},
		{"GET", "/v1/artifacts/" + strings.Repeat("0", 63), nil, 400},
		{"GET", "/v1/artifacts/" + strings.Repeat("0", 64), nil, 404},
		{"PUT", "/v1/members/ok", strings.Repeat(" ", maxBodyBytes+1), 400},
		{"POST", "/v1/members/ok/stop", "{", 400},
		{"POST", "/v1/members/ok/stop", `{"timeout_ms":-5}`, 400},
		{"POST", "/v1/members/ok/stop", `{"timeout_ms":"soon"}`, 400},
		{"POST", "/v1/members/BAD/stop", nil, 400},
		{"DELETE", "/v1/members/ok", nil, 404},
		{"GET", "/v2/anything", nil, 404},
		{"GET", "/v1/members/unknown", nil, 404},
	} {
		code, body := a.call(c.method, c.path, c.body)
		if c.path == "/v1/members/.." {
			// The mux cleans the path and redirects; never a 5xx.
			if code >= 500 {
				t.Errorf("%s %s: %d %s", c.method, c.path, code, body)
			}
			continue
		}
		if code != c.code {
			t.Errorf("%s %s %.60v: %d %s, want %d", c.method, c.path, c.body, code, body, c.code)
			continue
		}
		e := decodeError(t, body)
		want := map[int]string{400: wire.CodeBadRequest, 404: wire.CodeNotFound}[c.code]
		if e.Code != want {
			t.Errorf("%s %s: code %q, want %q", c.method, c.path, e.Code, want)
		}
	}
	if live := agenttest.Tagged(tag); len(live) != 0 {
		t.Errorf("bad requests started %v", live)
	}
	if code, body := a.call("GET", "/v1/members", nil); code != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("members after bad requests: %d %s", code, body)
	}
}

func TestStartFailed(t *testing.T) {
	t.Parallel()
	a := startAgent(t, t.TempDir())
	// A file with the right checksum that is not a program.
	f := filepath.Join(t.TempDir(), "not-a-program")
	if err := os.WriteFile(f, []byte("just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, _ := agenttest.SHA256File(f)
	a.upload(f, sum)
	code, body := a.call("PUT", "/v1/members/broken", wire.MemberSpec{Version: "1.0.0", SHA256: sum})
	if code != 500 || decodeError(t, body).Code != wire.CodeStartFailed {
		t.Fatalf("PUT of a non-program: %d %s", code, body)
	}
	st := a.get("broken")
	if st.Running || !strings.Contains(st.Detail, "start of version 1.0.0 failed") {
		t.Errorf("after a failed start: %+v", st)
	}
}

func TestTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tf := filepath.Join(dir, "sub", "token")
	s, err := New(Config{Dir: filepath.Join(dir, "agent"), TokenFile: tf})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	fi, err := os.Stat(tf)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	b1, _ := os.ReadFile(tf)
	// A second agent reads the same token.
	s, err = New(Config{Dir: filepath.Join(dir, "agent"), TokenFile: tf})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if b2, _ := os.ReadFile(tf); string(b1) != string(b2) {
		t.Errorf("token changed")
	}

	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		bad := filepath.Join(dir, fmt.Sprintf("token-%o", mode))
		os.WriteFile(bad, []byte("secret\n"), 0o600)
		os.Chmod(bad, mode)
		_, err := New(Config{Dir: filepath.Join(dir, "agent"), TokenFile: bad})
		if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "secret") {
			t.Errorf("token file with mode %o: %v", mode, err)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	if _, err := New(Config{Dir: filepath.Join(dir, "agent"), TokenFile: empty}); err == nil {
		t.Errorf("empty token file accepted")
	}
	// A token too short to be a secret is refused; one written by hand
	// (with a newline) works.
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("my-token\n"), 0o600)
	if _, err := New(Config{Dir: filepath.Join(dir, "agent"), TokenFile: short}); err == nil || !strings.Contains(err.Error(), "fewer than 16") {
		t.Errorf("an 8-character token: %v", err)
	}
	own := filepath.Join(dir, "own")
	os.WriteFile(own, []byte("my-own-token-of-the-agent\n"), 0o600)
	s, err = New(Config{Dir: filepath.Join(dir, "agent2"), TokenFile: own})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := New(Config{}); err == nil {
		t.Errorf("empty Dir accepted")
	}
}

func TestReadoptInProcess(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()
	a := startAgent(t, dir)
	marker := filepath.Join(t.TempDir(), "sigterm")
	st := a.put("db", spec(p.V1, tag, "-marker="+marker))
	waitReady(t, filepath.Join(dir, "members", "db"), st.PID)
	gone := a.put("gone", spec(p.V1, tag))
	a.close()

	// While no agent runs, one member dies.
	syscall.Kill(gone.PID, syscall.SIGKILL)
	waitGone(t, gone.PID)

	a2 := startAgent(t, dir)
	if g := a2.get("gone"); g.Running || g.Detail != "exited while the agent was down (status unknown)" || g.Version != "1.0.0" {
		t.Errorf("member that died while no agent ran: %+v", g)
	}
	g := a2.get("db")
	if !g.Running || g.PID != st.PID || g.Version != "1.0.0" || !g.Since.Equal(st.Since) {
		t.Fatalf("re-adopted: %+v, want pid %d", g, st.PID)
	}
	// Same artifact: still a no-op on an adopted process.
	if again := a2.put("db", spec(p.V1, tag, "-marker="+marker)); again.PID != st.PID {
		t.Errorf("PUT on adopted member restarted it: %+v", again)
	}
	stopped := a2.stop("db", 5000)
	if stopped.Running || !strings.HasPrefix(stopped.Detail, "stopped (SIGTERM): exited (status unknown") {
		t.Errorf("stop of adopted member: %+v", stopped)
	}
	waitGone(t, st.PID)
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGTERM %d", st.PID)) {
		t.Errorf("adopted member did not get SIGTERM: %q", b)
	}
	// An adopted member that exits on its own is noticed by polling.
	re := a2.put("db", spec(p.V1, tag, "-marker="+marker))
	a2.close()
	a3 := startAgent(t, dir)
	if g := a3.get("db"); !g.Running || g.PID != re.PID {
		t.Fatalf("re-adopted again: %+v", g)
	}
	syscall.Kill(re.PID, syscall.SIGKILL)
	if msg := agenttest.WaitFor(5*time.Second, func() (bool, string) {
		g := a3.get("db")
		return !g.Running && strings.HasPrefix(g.Detail, "exited (status unknown"), fmt.Sprintf("%+v", g)
	}); msg != "" {
		t.Error(msg)
	}
}

func TestReusedPIDIsNotAdopted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A record naming a live process (this test) with another start
	// time: the pid was reused, it is not the member.
	_, start, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	r := record{Name: "m", Version: "1.0.0", SHA256: strings.Repeat("0", 64), Running: true,
		PID: os.Getpid(), StartTime: start + 1, Since: time.Now()}
	b, _ := json.Marshal(r)
	os.WriteFile(filepath.Join(dir, "state", "m.json"), b, 0o600)
	os.WriteFile(filepath.Join(dir, "state", "junk.json"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, "state", ".m.123.tmp"), []byte("{"), 0o600)

	s, err = New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, ok := s.Get("m")
	if !ok || st.Running || st.Version != "1.0.0" || st.PID != 0 {
		t.Errorf("reused pid: %+v %v", st, ok)
	}
	if _, ok := s.Get("junk"); ok {
		t.Errorf("unreadable state file became a member")
	}
	if _, err := os.Stat(filepath.Join(dir, "state", ".m.123.tmp")); !os.IsNotExist(err) {
		t.Errorf("leftover temp state file not removed")
	}
	// The correction was persisted.
	var saved record
	b, _ = os.ReadFile(filepath.Join(dir, "state", "m.json"))
	if json.Unmarshal(b, &saved); saved.Running {
		t.Errorf("state still says running: %s", b)
	}
}

// TestRecoverInterruptedStart fakes an agent that died between
// starting a process and recording its pid: the state file says a
// start was under way. The next agent finds the process and adopts it
// rather than leave it unknown (and start a second one).
func TestRecoverInterruptedStart(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()
	a := startAgent(t, dir)
	st := a.put("db", spec(p.V2, tag))
	waitReady(t, filepath.Join(dir, "members", "db"), st.PID)
	a.put("idle", spec(p.V1, tag))
	a.stop("idle", 0)
	a.close()

	rewrite := func(name, oldVersion string) {
		path := filepath.Join(dir, "state", name+".json")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		r.Starting = &pending{Version: r.Version, SHA256: r.SHA256, Artifact: r.Artifact,
			Args: r.Args, Env: r.Env, StopTimeoutMS: r.StopTimeoutMS, Since: r.Since}
		r.Version, r.Running, r.PID, r.StartTime = oldVersion, false, 0, 0
		b, _ = json.Marshal(r)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rewrite("db", "1.0.0")   // its process runs
	rewrite("idle", "0.9.0") // its process never started

	a2 := startAgent(t, dir)
	if g := a2.get("db"); !g.Running || g.PID != st.PID || g.Version != "2.0.0" {
		t.Errorf("interrupted start, process running: %+v, want pid %d on 2.0.0", g, st.PID)
	}
	if g := a2.get("idle"); g.Running || g.Version != "0.9.0" {
		t.Errorf("interrupted start, no process: %+v", g)
	}
	if again := a2.put("db", spec(p.V2, tag)); again.PID != st.PID {
		t.Errorf("PUT started a second process: %+v", again)
	}
	if live := agenttest.Tagged(tag); len(live) != 1 {
		t.Errorf("live members %v, want one", live)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state", "db.json"))
	if strings.Contains(string(b), `"starting"`) {
		t.Errorf("recovered state still has a start under way: %s", b)
	}
}
