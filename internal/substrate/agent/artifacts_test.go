package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/agenttest"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// TestArtifactStore: an upload is kept under its sum (0755, named by
// ?name=), answered by GET and HEAD and listed; again it is a 200 that
// changes nothing; an upload without the token, of another media
// type, or over the agent's bound keeps nothing.
func TestArtifactStore(t *testing.T) {
	t.Parallel()
	p := progs(t)
	const limit = 1 << 20 // below the member program's size
	a := startAgentConfig(t, Config{Dir: t.TempDir(), MaxArtifactSize: 64 << 20})
	for _, art := range []agenttest.Artifact{p.V1, p.V2} {
		if code, body := uploadFile(t, a.hs.Client(), a.hs.URL, a.token, art.Path, art.SHA256); code != 201 {
			t.Fatalf("first upload of %s: %d %s", art.Version, code, body)
		}
	}

	want := filepath.Join(a.dir, "artifacts", p.V1.SHA256, "member")
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("stored artifact mode %v, want 0755", fi.Mode().Perm())
	}
	again := a.upload(p.V1.Path, p.V1.SHA256)
	if again.Path != want || again.SHA256 != p.V1.SHA256 || again.Size != fi.Size() {
		t.Errorf("upload again: %+v", again)
	}
	if fi2, _ := os.Stat(want); !os.SameFile(fi, fi2) {
		t.Errorf("upload of the same bytes replaced the stored file")
	}
	code, body := a.call("GET", "/v1/artifacts/"+strings.ToUpper(p.V1.SHA256), nil)
	var got Artifact
	if code != 200 || json.Unmarshal(body, &got) != nil || got != again {
		t.Errorf("GET: %d %s, want %+v", code, body, again)
	}
	req, _ := http.NewRequest("HEAD", a.hs.URL+"/v1/artifacts/"+p.V2.SHA256, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	if resp, err := a.hs.Client().Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	var list []Artifact
	code, body = a.call("GET", "/v1/artifacts", nil)
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list) != 2 {
		t.Fatalf("list: %d %s", code, body)
	}
	if list[0].SHA256 > list[1].SHA256 {
		t.Errorf("list not sorted by sha256: %s", body)
	}

	// Refused, nothing kept.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("#!/bin/sh\necho other\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	osum, _ := agenttest.SHA256File(other)
	if code, body := uploadFile(t, a.hs.Client(), a.hs.URL, "", other, osum); code != 401 {
		t.Errorf("upload without the token: %d %s", code, body)
	}
	f, _ := os.Open(other)
	req, _ = http.NewRequest("PUT", a.hs.URL+"/v1/artifacts/"+osum, f)
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hs.Client().Do(req)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "application/octet-stream") {
		t.Errorf("upload as JSON: %d %s", resp.StatusCode, b)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "artifacts", osum)); !os.IsNotExist(err) {
		t.Errorf("a refused upload was kept: %v", err)
	}

	// Its length announced, and not (chunked): refused either way.
	small := startAgentConfig(t, Config{Dir: t.TempDir(), MaxArtifactSize: limit})
	code, body = uploadFile(t, small.hs.Client(), small.hs.URL, small.token, p.V2.Path, p.V2.SHA256)
	if code != 413 || decodeError(t, body).Code != wire.CodeTooLarge || !strings.Contains(string(body), "1 MiB") {
		t.Errorf("upload over the bound: %d %s", code, body)
	}
	f, _ = os.Open(p.V2.Path)
	req, _ = http.NewRequest("PUT", small.hs.URL+"/v1/artifacts/"+p.V2.SHA256, struct{ io.Reader }{f})
	req.Header.Set("Authorization", "Bearer "+small.token)
	resp, err = small.hs.Client().Do(req)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked upload over the bound: %d %s (length %d)", resp.StatusCode, b, req.ContentLength)
	}
	if _, err := os.Stat(filepath.Join(small.dir, "artifacts", p.V2.SHA256)); !os.IsNotExist(err) {
		t.Errorf("an upload over the bound was kept: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(small.dir, "artifacts", ".upload-*")); len(left) != 0 {
		t.Errorf("upload leftovers: %v", left)
	}
}

// TestStoreCopyCorrupted: a stored artifact whose bytes changed since
// its upload is refused at the next start, removed, and the member
// keeps running; uploaded again, it runs.
func TestStoreCopyCorrupted(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	a := startAgent(t, t.TempDir())
	old := a.put("db", spec(p.V1, tag))
	a.uploadFor(p.V2.SHA256)

	stored := filepath.Join(a.dir, "artifacts", p.V2.SHA256, "member")
	if err := os.WriteFile(stored, []byte("#!/bin/sh\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, body := a.call("PUT", "/v1/members/db", spec(p.V2, tag))
	if code != 403 || decodeError(t, body).Code != wire.CodeArtifactUnknown || !strings.Contains(string(body), "another sum") {
		t.Fatalf("PUT of a corrupted stored artifact: %d %s", code, body)
	}
	if st := a.get("db"); !st.Running || st.PID != old.PID {
		t.Errorf("the member changed: %+v, want pid %d", st, old.PID)
	}
	if code, _ := a.call("GET", "/v1/artifacts/"+p.V2.SHA256, nil); code != 404 {
		t.Errorf("the corrupted copy is still listed: %d", code)
	}
	a.upload(p.V2.Path, p.V2.SHA256)
	if st := a.put("db", spec(p.V2, tag)); !st.Running || st.Version != "2.0.0" {
		t.Errorf("after the upload: %+v", st)
	}
}

// TestRecordOutsideStoreNotRun: a member's state file that names a
// program outside the store (an agent's state is only written by
// agents, but it is a file on disk) is not run by the restart it asks
// for: every exec goes through the store check.
func TestRecordOutsideStoreNotRun(t *testing.T) {
	t.Parallel()
	p := progs(t)
	tag := testTag(t)
	dir := t.TempDir()
	s, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := record{Name: "m", Version: "1.0.0", SHA256: p.V1.SHA256, Artifact: p.V1.Path,
		Args: []string{"-addr=127.0.0.1:0", agenttest.TagArg(tag)}, Restart: wire.RestartOnFailure,
		RestartPending: true, Instance: 1, Since: time.Now()}
	b, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, "state", "m.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgentConfig(t, Config{Dir: dir, restartMin: 10 * time.Millisecond})
	if msg := agenttest.WaitFor(10*time.Second, func() (bool, string) {
		return strings.Contains(a.log.String(), "member not started"), a.log.String()
	}); msg != "" {
		t.Fatalf("the restart was not refused: %s", msg)
	}
	if !strings.Contains(a.log.String(), "not a file of this agent's artifact store") {
		t.Errorf("the log does not say why: %s", a.log.String())
	}
	if live := agenttest.Tagged(tag); len(live) != 0 {
		t.Errorf("a program outside the store runs: %v", live)
	}
	if st := a.get("m"); st.Running {
		t.Errorf("status: %+v", st)
	}
}

func TestInStore(t *testing.T) {
	s := &Server{dir: "/var/lib/ferry-agent"}
	h := strings.Repeat("ab", 32)
	for _, c := range []struct {
		path, sum string
		ok        bool
	}{
		{"/var/lib/ferry-agent/artifacts/" + h + "/sample", h, true},
		{"/var/lib/ferry-agent/artifacts/" + h + "/../" + h + "/sample", h, true},
		{"/var/lib/ferry-agent/artifacts/" + h + "/sample", strings.Repeat("cd", 32), false},
		{"/var/lib/ferry-agent/artifacts/" + h, h, false},
		{"/var/lib/ferry-agent/artifacts/" + h + "/x/sample", h, false},
		{"/var/lib/ferry-agent/artifacts/" + h + "/../../bin/sh", h, false},
		{"/bin/sh", h, false},
		{"/var/lib/ferry-agent/artifacts/x/sample", "x", false},
		{"", h, false},
	} {
		if got := s.inStore(c.path, c.sum); got != c.ok {
			t.Errorf("inStore(%q, %.8s) = %v, want %v", c.path, c.sum, got, c.ok)
		}
	}
	for name, ok := range map[string]bool{"member": true, "sample-2.0.0": true, "etcd": true, "a+b_c": true,
		"": false, ".x": false, "../x": false, "a/b": false, "-x": false, strings.Repeat("a", 129): false, "a b": false} {
		if wire.ValidArtifactName(name) != ok {
			t.Errorf("ValidArtifactName(%q) = %v", name, !ok)
		}
	}
}
