package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
	"github.com/ferry-upgrade/ferry/internal/testenv/etcdtest"
	"github.com/ferry-upgrade/ferry/internal/testenv/ferrybuild"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// processIdentity is each member's pid and start: the same after a
// step means the member never restarted.
func processIdentity(t *testing.T, cl *demo.Cluster) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := cl.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// sameProcesses fails the test for each member that is not the process
// it was before.
func sameProcesses(t *testing.T, cl *demo.Cluster, before map[string]string) {
	t.Helper()
	after := processIdentity(t, cl)
	for name, id := range before {
		if after[name] != id {
			t.Errorf("member %s restarted: %s, then %s", name, id, after[name])
		}
	}
	t.Logf("%d members, each the same process before and after", len(before))
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	sum, err := checksum.File(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// ferryBuilds reads 'ferry versions --builds -o json'.
func ferryBuilds(t *testing.T, cl *demo.Cluster) selfupgrade.Builds {
	t.Helper()
	out, code := ferry(t, cl, "versions", "--builds", "-o", "json")
	var b selfupgrade.Builds
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil {
		t.Fatalf("ferry versions --builds -o json: exit %d\n%s", code, out)
	}
	return b
}

func agentsOn(t *testing.T, b selfupgrade.Builds, release string, hosts int) {
	t.Helper()
	if len(b.Agents) != hosts {
		t.Fatalf("agents: %+v, want %d", b.Agents, hosts)
	}
	for _, a := range b.Agents {
		if a.Release != release || a.Error != "" {
			t.Errorf("agent of %s: %+v, want release %s", a.Host, a, release)
		}
	}
}

// TestSelfUpgradeAgentsUnderTraffic is "ferry first" on the sample
// cluster's three hosts, under traffic: a checksum that does not
// match, the same release and a downgrade are refused before anything
// changes; then 'ferry self-upgrade' re-executes each host's agent on a
// ferry linked as 99.0.0, one host after another, while every member
// runs on (same pid and start time) and no client request fails; each
// agent then says 99.0.0 in 'ferry versions'.
func TestSelfUpgradeAgentsUnderTraffic(t *testing.T) {
	seed := envSeed(t, "FERRY_SELFUP_SEED")
	t.Logf("seed %d (FERRY_SELFUP_SEED)", seed)
	const hosts = 3
	cl := startCluster(t, demo.ClusterOptions{Hosts: hosts, HostCapacity: 2, Soak: time.Second, KVSoak: time.Second,
		Deadline: 30 * time.Second, GateDeadline: 30 * time.Second})
	next, err := ferrybuild.Build(t.TempDir(), "99.0.0")
	if err != nil {
		t.Fatal(err)
	}
	b := ferryBuilds(t, cl)
	if b.Ferry.Release != buildinfo.Release() {
		t.Errorf("ferry versions says ferry %s, want %s", b.Ferry.Release, buildinfo.Release())
	}
	agentsOn(t, b, buildinfo.Release(), hosts)
	if out, code := ferry(t, cl, "versions"); code != 0 || !strings.Contains(out, "agent host-2\t") && !strings.Contains(out, "agent host-2 ") {
		t.Errorf("ferry versions (table): exit %d, no row for host-2's agent\n%s", code, out)
	}
	before := processIdentity(t, cl)

	// Refused before anything changes (exit 5): a sum that does not
	// match; the running release; a downgrade (the new ferry asked to
	// put the old one on).
	for _, c := range []struct {
		name  string
		ferry string
		args  []string
		says  []string
	}{
		{"wrong sha256", bin.ferry, []string{"--binary", next.Path, "--sha256", strings.Repeat("0", 64)}, []string{"has sha256 " + next.SHA256, "not 0000"}},
		{"same release", next.Path, []string{"--binary", next.Path, "--sha256", next.SHA256}, []string{"release 99.0.0, the release this ferry is already"}},
		{"downgrade", next.Path, []string{"--binary", bin.ferry, "--sha256", sha256Of(t, bin.ferry)}, []string{"release " + buildinfo.Release() + ", older than this ferry's 99.0.0", "downgrade"}},
	} {
		out, code := ferryOf(t, c.ferry, cl, append([]string{"self-upgrade"}, c.args...)...)
		if code != 5 {
			t.Errorf("%s: exit %d, want 5\n%s", c.name, code, out)
		}
		for _, s := range c.says {
			if !strings.Contains(out, s) {
				t.Errorf("%s: output does not say %q:\n%s", c.name, s, out)
			}
		}
		t.Logf("%s: %s", c.name, strings.TrimSpace(out))
	}
	agentsOn(t, ferryBuilds(t, cl), buildinfo.Release(), hosts)

	live, stop := liveTraffic(cl, seed)
	// Traffic before the agents move, and after.
	waitFor(t, 20*time.Second, "100 requests before", func() bool { return len(live.Samples()) >= 100 })
	start := time.Now()
	out, code := ferry(t, cl, "self-upgrade", "--binary", next.Path, "--sha256", next.SHA256)
	took := time.Since(start)
	n := len(live.Samples())
	waitFor(t, 20*time.Second, "100 requests after", func() bool { return len(live.Samples()) >= n+100 })
	rec := stop()
	if code != 0 {
		t.Fatalf("ferry self-upgrade: exit %d\n%s", code, out)
	}
	t.Logf("ferry self-upgrade (%s):\n%s", took.Round(time.Millisecond), out)
	for i := 1; i <= hosts; i++ {
		if !strings.Contains(out, "host host-"+strconv.Itoa(i)+": agent "+buildinfo.Release()+" → 99.0.0") {
			t.Errorf("the output does not say host-%d's agent moved", i)
		}
	}
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d of %d requests failed during the self-upgrade", n, len(rec.Samples()))
	}
	t.Logf("requests %d, failed %d", len(rec.Samples()), failedRequests(rec))
	checkWrites(t, cl, rec)
	sameProcesses(t, cl, before)
	agentsOn(t, ferryBuilds(t, cl), "99.0.0", hosts)

	// An agent on the release already is skipped.
	out, code = ferry(t, cl, "self-upgrade", "--binary", next.Path, "--sha256", next.SHA256)
	if code != 0 || strings.Count(out, "already") != hosts {
		t.Errorf("second self-upgrade: exit %d, want every agent skipped\n%s", code, out)
	}
}

// serverInfo reads GET /v1/server of server i; ok is false while it
// does not answer (between its programs).
func (h *ha) serverInfo(i int) (server.ServerInfo, bool) {
	var info server.ServerInfo
	code, b, err := h.call(i, "GET", "/v1/server", nil)
	if err != nil || code != 200 || json.Unmarshal(b, &info) != nil {
		return info, false
	}
	return info, true
}

// TestSelfUpgradeServersUnderTraffic is ferry first with the server
// replicas: three 'ferry server' processes on a real three-member etcd,
// the sample under traffic. 'ferry self-upgrade --servers --addr' sent
// to a standby is forwarded to the leader, which moves the agent, then
// each standby (re-executed on the new binary, waited for on 99.0.0),
// answers, and re-executes itself, revoking its lease: an upgraded
// standby leads. Every server then answers on 99.0.0 with the same pid
// (a re-exec, not a restart), no member restarted, no request failed,
// and an upgrade started through the new servers completes.
func TestSelfUpgradeServersUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster and a real etcd")
	}
	seed := envSeed(t, "FERRY_SELFUP_SEED")
	t.Logf("seed %d (FERRY_SELFUP_SEED)", seed)
	etcd := etcdtest.Start(t, 3, seed)
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "1.0.1")
	binDir := t.TempDir()
	next, err := ferrybuild.Build(binDir, "99.0.0")
	if err != nil {
		t.Fatal(err)
	}
	ha := startHA(t, cl, etcd.Endpoints, seed, "--artifact-root", binDir)
	before := processIdentity(t, cl)
	leader := ha.leader(t)
	pids := map[int]int{}
	for i := range ha.urls {
		info, ok := ha.serverInfo(i)
		if !ok || info.Release != buildinfo.Release() {
			t.Fatalf("server %s before: %+v (answered %v)", ha.urls[i], info, ok)
		}
		pids[i] = info.PID
	}
	standby := (leader + 1) % len(ha.urls)
	t.Logf("leader %s; the request goes to the standby %s", ha.urls[leader], ha.urls[standby])

	live, stop := liveTraffic(cl, seed)
	waitFor(t, 20*time.Second, "100 requests before", func() bool { return len(live.Samples()) >= 100 })
	start := time.Now()
	out, code := ferry(t, cl, "--addr", ha.urls[standby], "--token-file", filepath.Join(ha.dirs[standby], server.TokenFile),
		"self-upgrade", "--binary", next.Path, "--sha256", next.SHA256, "--servers")
	if code != 0 {
		t.Fatalf("ferry self-upgrade --servers: exit %d\n%s", code, out)
	}
	t.Logf("ferry self-upgrade --servers answered in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	var newLeader int
	waitFor(t, 2*haTTL+20*time.Second, "every server on 99.0.0, one leading", func() bool {
		leads := 0
		for i := range ha.urls {
			info, ok := ha.serverInfo(i)
			if !ok || info.Release != "99.0.0" {
				return false
			}
			if info.Leads {
				leads++
				newLeader = i
			}
		}
		return leads == 1
	})
	t.Logf("every server on 99.0.0 %s after the request; %s leads now (was %s)", time.Since(start).Round(time.Millisecond), ha.urls[newLeader], ha.urls[leader])
	n := len(live.Samples())
	waitFor(t, 20*time.Second, "100 requests after", func() bool { return len(live.Samples()) >= n+100 })
	rec := stop()
	for i := range ha.urls {
		if info, _ := ha.serverInfo(i); info.PID != pids[i] {
			t.Errorf("server %s: pid %d, was %d: restarted, not re-executed", ha.urls[i], info.PID, pids[i])
		}
	}
	if newLeader == leader {
		t.Errorf("the leader %s leads again: it did not hand over", ha.urls[leader])
	}
	if strings.Count(out, "server http://") != len(ha.urls) {
		t.Errorf("the output does not name the %d servers", len(ha.urls))
	}
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d of %d requests failed during the self-upgrade", n, len(rec.Samples()))
	}
	checkWrites(t, cl, rec)
	sameProcesses(t, cl, before)
	agentsOn(t, ferryBuilds(t, cl), "99.0.0", 1)

	// The new servers drive: an upgrade through them completes.
	id := ha.start(t, "1.0.1")
	if u := ha.wait(t, id, 3*time.Minute); u.State != upgrade.StateCompleted.String() {
		t.Fatalf("upgrade %s through the new servers ended %s: %s", id, u.State, u.Reason)
	}
	expectAllOn(t, cl, "1.0.1")
	t.Logf("upgrade %s to 1.0.1 through the servers on 99.0.0: completed", id)
}
