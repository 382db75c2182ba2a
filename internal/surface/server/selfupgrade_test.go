package server

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/testenv/ferrybuild"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// memberPIDs are which process each member is now.
func memberPIDs(t *testing.T, cl *demo.Cluster) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := cl.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestSelfUpgradeThroughTheAPI: POST /v1/self-upgrade refuses a binary
// outside the artifact roots, a wrong sha256 and the server's own
// release before anything changes; then re-executes the agent on a
// ferry linked as 99.0.0, every member on its pid, and GET /v1/versions
// says the server's release and the agent's new one.
func TestSelfUpgradeThroughTheAPI(t *testing.T) {
	cl := startCluster(t, 300*time.Millisecond)
	binDir := t.TempDir()
	next, err := ferrybuild.Build(binDir, "99.0.0")
	if err != nil {
		t.Fatal(err)
	}
	// The test's own ferry (startCluster built it) is this release.
	same := ferrybuild.Binary{Path: filepath.Join(binDir, "ferry-same"), Release: buildinfo.Release()}
	if b, err := os.ReadFile(bins.ferry); err != nil || os.WriteFile(same.Path, b, 0o755) != nil {
		t.Fatalf("copy of %s: %v", bins.ferry, err)
	}
	if same.SHA256, err = checksum.File(same.Path); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	s := clusterServer(t, cl, func(c *Config) { c.DataDir, c.ArtifactRoots = dataDir, []string{binDir} })
	c := serve(t, s)
	before := memberPIDs(t, cl)

	c.do("POST", "/v1/self-upgrade", selfupgrade.Request{Binary: cl.File, SHA256: next.SHA256}).expect(t, "outside the roots", 422, CodeArtifactRefused)
	wrong := strings.Repeat("0", 64)
	r := c.do("POST", "/v1/self-upgrade", selfupgrade.Request{Binary: next.Path, SHA256: wrong}).expect(t, "wrong sha256", 422, CodeSelfUpgradeRefused)
	t.Logf("wrong sha256: %s", r.body)
	r = c.do("POST", "/v1/self-upgrade", selfupgrade.Request{Binary: same.Path, SHA256: same.SHA256}).expect(t, "same release", 422, CodeSelfUpgradeRefused)
	t.Logf("same release: %s", r.body)
	var v Versions
	c.do("GET", "/v1/versions", nil).expect(t, "versions", 200).json(t, &v)
	if v.Ferry.Release != buildinfo.Release() || len(v.Agents) != 1 || v.Agents[0].Release != buildinfo.Release() {
		t.Fatalf("versions before: %+v", v.Builds)
	}

	var rep selfupgrade.Report
	c.do("POST", "/v1/self-upgrade", selfupgrade.Request{Binary: next.Path, SHA256: next.SHA256}).expect(t, "self-upgrade", 200).json(t, &rep)
	if rep.Release != "99.0.0" || len(rep.Agents) != 1 || rep.Agents[0].To != "99.0.0" || rep.Agents[0].Skipped {
		t.Fatalf("report: %+v", rep)
	}
	t.Logf("agent %s: %s → %s in %s", rep.Agents[0].Host, rep.Agents[0].From, rep.Agents[0].To, rep.Agents[0].Took)
	c.do("GET", "/v1/versions", nil).expect(t, "versions", 200).json(t, &v)
	if v.Ferry.Release != buildinfo.Release() || len(v.Agents) != 1 || v.Agents[0].Release != "99.0.0" {
		t.Fatalf("versions after: %+v", v.Builds)
	}
	if after := memberPIDs(t, cl); !maps.Equal(before, after) {
		t.Errorf("members' pids changed: before %v, after %v", before, after)
	}
	// Again: the agent is on it already, nothing moves.
	c.do("POST", "/v1/self-upgrade", selfupgrade.Request{Binary: next.Path, SHA256: next.SHA256}).expect(t, "again", 200).json(t, &rep)
	if !rep.Agents[0].Skipped {
		t.Errorf("again: %+v, want the agent skipped", rep)
	}

	// The server's own re-exec: checked like a self-upgrade, answered
	// 202, handed to ListenAndServe (none here: it stays queued), and
	// once only.
	var info ServerInfo
	c.do("GET", "/v1/server", nil).expect(t, "server", 200).json(t, &info)
	if info.Release != buildinfo.Release() || info.PID != os.Getpid() || !info.Leads {
		t.Errorf("GET /v1/server: %+v", info)
	}
	c.do("POST", "/v1/server/reexec", ServerReexecRequest{Binary: next.Path, SHA256: next.SHA256, Release: "98.0.0"}).expect(t, "reexec, another release", 422, CodeSelfUpgradeRefused)
	c.do("POST", "/v1/server/reexec", ServerReexecRequest{Binary: same.Path, SHA256: same.SHA256, Release: same.Release}).expect(t, "reexec, same release", 422, CodeSelfUpgradeRefused)
	c.do("POST", "/v1/server/reexec", ServerReexecRequest{Binary: next.Path, SHA256: next.SHA256, Release: "99.0.0"}).expect(t, "reexec", 202)
	select {
	case p := <-s.reexec:
		if p != next.Path {
			t.Errorf("re-exec queued on %s, want %s", p, next.Path)
		}
	default:
		t.Errorf("the re-exec was not handed to ListenAndServe")
	}
	c.do("POST", "/v1/server/reexec", ServerReexecRequest{Binary: next.Path, SHA256: next.SHA256, Release: "99.0.0"}).expect(t, "reexec again", 409, CodeUpgradeInProgress)
}
