package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestCLIThroughServer runs the operator's commands against a running
// 'ferry server' (--addr) instead of the data directory: the upgrade is
// started and followed through the API, the listings come from it, a
// second start is refused with the lock's exit code (the API's 409), and
// under traffic clients see no failure.
func TestCLIThroughServer(t *testing.T) {
	cl := startCluster(t, demo.ClusterOptions{}, "2.0.0")
	addr := startServer(t, cl)
	remote := func(args ...string) (string, int) {
		return ferry(t, cl, append([]string{"--addr", addr}, args...)...)
	}

	out, code := remote("health", "--to", "2.0.0")
	if code != 0 || !strings.Contains(out, "pass") {
		t.Fatalf("health through the server: exit %d\n%s", code, out)
	}
	out, code = remote("releases", "list")
	if code != 0 || !strings.Contains(out, "2.0.0") {
		t.Fatalf("releases list: exit %d\n%s", code, out)
	}

	stop := clientTraffic(cl, 11)
	started := startFerry(t, cl, "--addr", addr, "upgrade", "start", "--to", "2.0.0")
	waitFor(t, 30*time.Second, "the upgrade running on the server", func() bool {
		out, code := remote("upgrade", "status", "-o", "json")
		return code == 0 && strings.Contains(out, `"state"`)
	})
	out, code = remote("upgrade", "start", "--to", "2.0.0")
	if code != 3 || !strings.Contains(out, "409") {
		t.Errorf("a second start through the server: exit %d, want 3 (409)\n%s", code, out)
	}
	code, out = started.wait(t)
	rec := stop()
	t.Logf("ferry --addr upgrade start:\n%s", tail(out, 14))
	if code != 0 || !strings.Contains(out, "state:    completed") || !strings.Contains(out, "driven by the server") {
		t.Fatalf("exit %d", code)
	}
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d client requests failed", n)
	}

	out, code = remote("members", "-o", "json")
	var members []engine.MemberView
	if code != 0 || json.Unmarshal([]byte(out), &members) != nil || len(members) != 7 {
		t.Fatalf("members through the server: exit %d\n%s", code, out)
	}
	for _, m := range members {
		if m.Running != "2.0.0" {
			t.Errorf("member %s runs %q", m.Name, m.Running)
		}
	}
	out, code = remote("versions")
	if code != 0 || !strings.Contains(out, "2.0.0") || strings.Contains(out, "1.0.0") {
		t.Errorf("versions through the server: exit %d\n%s", code, out)
	}
	out, code = remote("events")
	if code != 0 || !strings.Contains(out, "completed") {
		t.Errorf("events through the server: exit %d\n%s", code, tail(out, 5))
	}
	wrong := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrong, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = ferry(t, cl, "--addr", addr, "--token-file", wrong, "versions")
	if code == 0 || !strings.Contains(out, "401") {
		t.Errorf("a wrong token: exit %d\n%s", code, out)
	}
}

// TestTrafficThroughServer: 'ferry --addr ... upgrade start --traffic'
// prints the server's verdict and writes its report under the data
// directory, where a local 'ferry bundle' finds it. Before, it printed
// no verdict and wrote nothing, and the bundle left the report out
// while saying nothing was.
func TestTrafficThroughServer(t *testing.T) {
	cl := startCluster(t, demo.ClusterOptions{}, "2.0.0")
	addr := startServer(t, cl)
	out, code := ferry(t, cl, "--addr", addr, "upgrade", "start", "--to", "2.0.0", "--traffic")
	t.Logf("ferry --addr upgrade start --traffic:\n%s", tail(out, 20))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	id := regexp.MustCompile(`upgrade (upg-[0-9a-z-]+):`).FindStringSubmatch(out)
	if id == nil {
		t.Fatal("no upgrade id in the output")
	}
	report := filepath.Join(cl.DataDir, "reports", id[1]+".json")
	for _, want := range []string{"zero downtime: yes", "report: " + report} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	var r proof.Report
	if err := json.Unmarshal([]byte(readFile(t, report)), &r); err != nil || r.UpgradeID != id[1] || r.Traffic == nil || r.Traffic.Requests.Total == 0 {
		t.Fatalf("the report written: %v, %+v", err, r)
	}
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	if out, code := ferry(t, cl, "bundle", id[1], "-o", path); code != 0 {
		t.Fatalf("ferry bundle: exit %d\n%s", code, out)
	}
	if files := readBundle(t, path); !strings.Contains(files["reports/"+id[1]+".json"], `"upgrade_id"`) {
		t.Errorf("the local bundle lacks the report: %v", slices.Collect(maps.Keys(files)))
	}
}
