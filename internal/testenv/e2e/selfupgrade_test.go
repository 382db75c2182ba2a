package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/testenv/ferrybuild"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// processIdentity is each member's pid and start: the same after a
// step means the member never restarted.
func processIdentity(t *testing.T, cl *demo.Cluster) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sts, err := cl.Driver.Observe(ctx, cl.Members)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	out := map[string]string{}
	for _, st := range sts {
		if !st.Running || st.PID == 0 {
			t.Fatalf("member %s is not running: %+v", st.Name, st)
		}
		out[st.Name] = st.Since.UTC().Format(time.RFC3339Nano) + " pid " + itoa(st.PID)
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

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
		if !strings.Contains(out, "host host-"+itoa(i)+": agent "+buildinfo.Release()+" → 99.0.0") {
			t.Errorf("the output does not say host-%d's agent moved", i)
		}
	}
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d of %d requests failed during the self-upgrade", n, len(rec.Samples()))
	}
	t.Logf("requests %d, failed %d", len(rec.Samples()), failedRequests(rec))
	checkWrites(t, cl, rec)
	after := processIdentity(t, cl)
	for name, id := range before {
		if after[name] != id {
			t.Errorf("member %s restarted: %s, then %s", name, id, after[name])
		}
	}
	t.Logf("%d members, each the same process before and after", len(before))
	agentsOn(t, ferryBuilds(t, cl), "99.0.0", hosts)

	// An agent on the release already is skipped.
	out, code = ferry(t, cl, "self-upgrade", "--binary", next.Path, "--sha256", next.SHA256)
	if code != 0 || strings.Count(out, "already") != hosts {
		t.Errorf("second self-upgrade: exit %d, want every agent skipped\n%s", code, out)
	}
}
