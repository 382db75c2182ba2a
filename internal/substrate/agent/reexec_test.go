package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

func (ap *agentProc) health() wire.Health {
	ap.t.Helper()
	code, out := ap.call("GET", "/v1/health", nil)
	var h wire.Health
	if code != 200 || json.Unmarshal(out, &h) != nil {
		ap.t.Fatalf("health: %d %s", code, out)
	}
	return h
}

// TestReexecKeepsMembers: an agent asked to re-execute itself on the
// next release's binary (uploaded to its store) answers 202, and comes
// back on the same pid saying the new release, while its member runs
// on untouched (same pid, no signal); the member, still the agent's
// child, is reaped when it exits after the re-exec, not left a zombie.
func TestReexecKeepsMembers(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "sigterm")
	ap := spawnAgent(t, p.Agent, dir)
	st := ap.status("PUT", "/v1/members/db-1", spec(p.V1, tag, "-marker="+marker))
	info := waitReady(t, filepath.Join(dir, "members", "db-1"), st.PID)
	before := ap.health()
	if before.Release != buildinfo.Release() || before.PID != ap.cmd.Process.Pid {
		t.Fatalf("health before: %+v, want release %s pid %d", before, buildinfo.Release(), ap.cmd.Process.Pid)
	}

	if code, body := uploadFile(t, http.DefaultClient, ap.url, ap.token, p.NextAgent.Path, p.NextAgent.SHA256); code != 201 {
		t.Fatalf("upload of the next agent: %d %s", code, body)
	}
	code, out := ap.call("POST", "/v1/agent/reexec", wire.ReexecRequest{SHA256: p.NextAgent.SHA256, Release: agenttest.NextRelease})
	if code != 202 {
		t.Fatalf("reexec: %d %s", code, out)
	}
	var acc wire.ReexecAccepted
	if err := json.Unmarshal(out, &acc); err != nil || acc.PID != ap.cmd.Process.Pid || acc.Release != agenttest.NextRelease {
		t.Fatalf("reexec answer: %v %s", err, out)
	}
	start := time.Now()
	var after wire.Health
	if msg := agenttest.WaitFor(15*time.Second, func() (bool, string) {
		code, out, err := ap.tryCall("GET", "/v1/health")
		if err != nil || code != 200 || json.Unmarshal(out, &after) != nil {
			return false, fmt.Sprintf("%d %s %v", code, out, err)
		}
		return after.Release == agenttest.NextRelease, fmt.Sprintf("release %q", after.Release)
	}); msg != "" {
		t.Fatalf("the agent did not come back on %s: %s\n%s", agenttest.NextRelease, msg, ap.stderr)
	}
	t.Logf("the agent answered on release %s %s after the re-exec (pid %d)", after.Release, time.Since(start).Round(time.Millisecond), after.PID)
	if after.PID != ap.cmd.Process.Pid {
		t.Errorf("pid after the re-exec %d, want %d (a re-exec keeps it)", after.PID, ap.cmd.Process.Pid)
	}
	got := ap.status("GET", "/v1/members/db-1", nil)
	if !got.Running || got.PID != st.PID || got.Instance != st.Instance {
		t.Fatalf("member after the re-exec: %+v, want running pid %d instance %d", got, st.PID, st.Instance)
	}
	if v := askVersion(t, info.Addr); v.PID != st.PID {
		t.Fatalf("member answers from pid %d, want %d", v.PID, st.PID)
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Errorf("member got a signal during the re-exec: %q", b)
	}

	// Stopped by the new program: gone, and reaped (no /proc entry: a
	// zombie keeps one).
	ap.status("POST", "/v1/members/db-1/stop", wire.StopRequest{TimeoutMS: 5000})
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", st.PID))
		return os.IsNotExist(err), fmt.Sprintf("/proc/%d: %v", st.PID, err)
	}); msg != "" {
		t.Errorf("member not reaped after the re-exec: %s", msg)
	}
}

// TestReexecRefused: the agent refuses, naming why and changing
// nothing, a binary its store lacks, one that is no ferry (a script),
// one that says another release, and a re-exec when its handler is not
// served by Serve.
func TestReexecRefused(t *testing.T) {
	t.Parallel()
	p := progs(t)
	dir := t.TempDir()
	ap := spawnAgent(t, p.Agent, dir)
	script := filepath.Join(t.TempDir(), "not-ferry")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	scriptSum, err := agenttest.SHA256File(script)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := uploadFile(t, http.DefaultClient, ap.url, ap.token, script, scriptSum); code != 201 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := uploadFile(t, http.DefaultClient, ap.url, ap.token, p.NextAgent.Path, p.NextAgent.SHA256); code != 201 {
		t.Fatalf("upload: %d %s", code, body)
	}
	for _, c := range []struct {
		name string
		req  wire.ReexecRequest
		code int
		want string
	}{
		{"not in the store", wire.ReexecRequest{SHA256: p.V2.SHA256[:63] + "0", Release: "1.0.0"}, 403, wire.CodeArtifactUnknown},
		{"not a ferry", wire.ReexecRequest{SHA256: scriptSum, Release: agenttest.NextRelease}, 422, wire.CodeNotAFerry},
		{"another release", wire.ReexecRequest{SHA256: p.NextAgent.SHA256, Release: "98.0.0"}, 422, wire.CodeNotAFerry},
		{"bad sum", wire.ReexecRequest{SHA256: "xyz", Release: "1.0.0"}, 400, wire.CodeBadRequest},
	} {
		code, out := ap.call("POST", "/v1/agent/reexec", c.req)
		var eb wire.ErrorBody
		json.Unmarshal(out, &eb)
		if code != c.code || eb.Code != c.want {
			t.Errorf("%s: %d %s, want %d %s", c.name, code, out, c.code, c.want)
		} else {
			t.Logf("%s: %d %s", c.name, code, eb.Message)
		}
	}
	if h := ap.health(); h.Release != buildinfo.Release() || h.PID != ap.cmd.Process.Pid {
		t.Errorf("after the refusals: %+v", h)
	}

	a := startAgent(t, t.TempDir())
	a.upload(p.NextAgent.Path, p.NextAgent.SHA256)
	code, out := a.call("POST", "/v1/agent/reexec", wire.ReexecRequest{SHA256: p.NextAgent.SHA256, Release: agenttest.NextRelease})
	if eb := decodeError(t, out); code != 409 || eb.Code != wire.CodeCannotReexec {
		t.Errorf("in-process agent: %d %s, want 409 %s", code, out, wire.CodeCannotReexec)
	}
}

// tryCall is call that returns a transport error (the agent between
// its programs) instead of failing the test.
func (ap *agentProc) tryCall(method, path string) (int, []byte, error) {
	req, _ := http.NewRequest(method, ap.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+ap.token)
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, nil
}
