package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// agentProc is an agent running as its own process (testdata/agentmain).
type agentProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	token  string
	stderr *agenttest.LockedBuffer
	exited chan struct{}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// spawnAgent starts agentmain on dir in its own process group and
// waits until it answers.
func spawnAgent(t *testing.T, bin, dir string) *agentProc {
	t.Helper()
	addr := freeAddr(t)
	ap := &agentProc{t: t, url: "http://" + addr, stderr: &agenttest.LockedBuffer{}, exited: make(chan struct{})}
	ap.cmd = exec.Command(bin, "-listen", addr, "-dir", dir, "-token-file", filepath.Join(dir, "token"))
	ap.cmd.Stderr = ap.stderr
	ap.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ap.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { ap.cmd.Wait(); close(ap.exited) }()
	t.Cleanup(func() {
		syscall.Kill(ap.cmd.Process.Pid, syscall.SIGKILL)
		<-ap.exited
		agenttest.KillUnder(dir)
	})
	c := &http.Client{Timeout: time.Second}
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		select {
		case <-ap.exited:
			t.Fatalf("agent exited: %s", ap.stderr)
		default:
		}
		resp, err := c.Get(ap.url + "/v1/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	}); msg != "" {
		t.Fatalf("agent not up: %s\n%s", msg, ap.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	ap.token = strings.TrimSpace(string(b))
	// The member's versions in its store, as ferry's driver would put
	// them: uploaded only when missing, so that a new agent on the
	// same directory runs them from the store the one before filled.
	p := progs(t)
	for _, art := range []agenttest.Artifact{p.V1, p.V2} {
		if code, _ := ap.call("GET", "/v1/artifacts/"+art.SHA256, nil); code == 404 {
			if code, body := uploadFile(t, http.DefaultClient, ap.url, ap.token, art.Path, art.SHA256); code != 201 {
				t.Fatalf("upload of %s: %d %s", art.Path, code, body)
			}
		}
	}
	return ap
}

func (ap *agentProc) call(method, path string, body any) (int, []byte) {
	ap.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, ap.url+path, r)
	req.Header.Set("Authorization", "Bearer "+ap.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ap.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (ap *agentProc) status(method, path string, body any) wire.Status {
	ap.t.Helper()
	code, out := ap.call(method, path, body)
	if code != 200 {
		ap.t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return decodeStatus(ap.t, out)
}

// TestMembersSurviveAgentCrash kills -9 the agent's whole process group
// and checks that the member lives on and that a new agent adopts it.
func TestMembersSurviveAgentCrash(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "sigterm")

	a1 := spawnAgent(t, p.Agent, dir)
	st := a1.status("PUT", "/v1/members/db-1", spec(p.V1, tag, "-marker="+marker))
	info := waitReady(t, filepath.Join(dir, "members", "db-1"), st.PID)

	// kill -9 the agent's process group: the member, in its own
	// session, gets nothing.
	if err := syscall.Kill(-a1.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a1.exited
	if !processAlive(st.PID) {
		t.Fatalf("member %d died with the agent", st.PID)
	}
	if v := askVersion(t, info.Addr); v.Version != "1.0.0" || v.PID != st.PID {
		t.Fatalf("member after the agent's death: %+v", v)
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Errorf("member got a signal when the agent died: %q", b)
	}

	a2 := spawnAgent(t, p.Agent, dir)
	got := a2.status("GET", "/v1/members/db-1", nil)
	if !got.Running || got.PID != st.PID || got.Version != "1.0.0" || got.SHA256 != p.V1.SHA256 {
		t.Fatalf("new agent reports %+v, want running pid %d on 1.0.0", got, st.PID)
	}
	// PUT of the same artifact is a no-op on the adopted member.
	if again := a2.status("PUT", "/v1/members/db-1", spec(p.V1, tag, "-marker="+marker)); again.PID != st.PID {
		t.Fatalf("PUT restarted the adopted member: %+v", again)
	}

	stopped := a2.status("POST", "/v1/members/db-1/stop", wire.StopRequest{TimeoutMS: 5000})
	if stopped.Running || stopped.Version != "1.0.0" {
		t.Errorf("after stop: %+v", stopped)
	}
	waitGone(t, st.PID)
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), fmt.Sprintf("SIGTERM %d", st.PID)) {
		t.Errorf("adopted member was not stopped with SIGTERM: %q", b)
	}

	// Serve ends cleanly on SIGTERM, and leaves members running.
	st = a2.status("PUT", "/v1/members/db-1", spec(p.V2, tag, "-marker="+marker))
	a2.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a2.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not exit on SIGTERM")
	}
	if code := a2.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("agent exit code %d: %s", code, a2.stderr)
	}
	if !processAlive(st.PID) {
		t.Errorf("member died when the agent shut down")
	}
	if strings.Contains(a2.stderr.String(), a2.token) {
		t.Errorf("agent logged its token")
	}
}
