package realsys

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// The end-to-end tests on real systems ferry did not write: etcd 3.5 →
// 3.6 and NATS 2.10 → 2.11 (JetStream), each brought up by 'ferry
// cluster up' or started by a script and adopted, under its own
// client's load, upgraded by ferry; a release that exits at start
// rolled back. They need scripts/realsys.sh's builds: scripts/test.sh
// makes them and sets FERRY_REALSYS=1; FERRY_REALSYS=0 skips them, and
// so does a run where they were never built (saying how to build them).

var (
	env       Env
	ferryBin  string
	skipWhy   string
	portSeed  uint64 // FERRY_REALSYS_SEED replays a run's ports
	binDir    string
	loadRate  = 100 // requests per second: the machine is 2 shared cores
	realsysOn = os.Getenv("FERRY_REALSYS")
)

func TestMain(m *testing.M) {
	code := func() int {
		if realsysOn == "0" {
			skipWhy = "FERRY_REALSYS=0: the real systems' tests are off"
			return m.Run()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if env, err = LoadEnv(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if miss := env.Missing("ETCD_N", "ETCD_N1", "NATS_N", "NATS_N1", "ETCDLOAD", "NATSLOAD"); len(miss) > 0 {
			if realsysOn == "1" {
				fmt.Fprintf(os.Stderr, "realsys: FERRY_REALSYS=1 but not built: %s (scripts/realsys.sh build)\n", strings.Join(miss, ", "))
				return 1
			}
			skipWhy = "the real systems are not built (" + strings.Join(miss, ", ") + "): scripts/realsys.sh build, or make test, builds them"
			return m.Run()
		}
		if s := os.Getenv("FERRY_REALSYS_SEED"); s != "" {
			portSeed, _ = strconv.ParseUint(s, 10, 64)
		}
		if binDir, err = os.MkdirTemp("", "ferry-realsys-bin-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(binDir)
		ferryBin = filepath.Join(binDir, "ferry")
		if out, err := exec.Command("go", "build", "-o", ferryBin, "github.com/ferry-upgrade/ferry/cmd/ferry").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "realsys: building ferry: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func needRealsys(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real systems: not with -short")
	}
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

// badRelease writes a release that exits at start (any system's bad
// N+1) and returns it as a catalog entry.
func badRelease(t *testing.T, sys *System) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bad-release")
	script := "#!/bin/sh\necho \"bad release: exiting at start\" >&2\nexit 1\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := checksum.File(p)
	if err != nil {
		t.Fatal(err)
	}
	major, rest, _ := strings.Cut(sys.N, ".")
	minor, _, _ := strings.Cut(rest, ".")
	v := sys.N1 + "-bad.exit"
	return v, fmt.Sprintf("  - version: %q\n    upgrade_from: [\"%s.%s.x\"]\n    artifacts: {\"*\": {path: %q, sha256: %q}}", v, major, minor, p, sum)
}

func newCluster(t *testing.T, sys *System, extra string) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	if os.Getenv("FERRY_REALSYS_KEEP") != "" { // keep the cluster's directory, to look into it
		var err error
		if dir, err = os.MkdirTemp("", "ferry-realsys-"+t.Name()+"-"); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(ctx, sys, ferryBin, dir, Options{Soak: 2 * time.Second, Extra: extra, Seed: portSeed, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster's directory (agent.log, agent/logs/MEMBER/current.log): %s\n%s", c.Dir, c.Tails(15))
		}
		c.Close()
	})
	return c
}

// ferry runs ferry on the cluster and fails the test unless it exits
// with want.
func ferry(t *testing.T, c *Cluster, want int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, code, err := c.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("ferry %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return out
}

// status is the current upgrade, as 'ferry upgrade status -o json'.
func status(t *testing.T, c *Cluster) upgrade.Upgrade {
	t.Helper()
	var u upgrade.Upgrade
	if err := json.Unmarshal([]byte(ferry(t, c, 0, "upgrade", "status", "-o", "json")), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// members is 'ferry members -o json'.
func members(t *testing.T, c *Cluster) []engine.MemberView {
	t.Helper()
	var ms []engine.MemberView
	if err := json.Unmarshal([]byte(ferry(t, c, 0, "members", "-o", "json")), &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// expectOn fails the test unless every member says, through the
// system's own version report, that it runs v.
func expectOn(t *testing.T, c *Cluster, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := c.Versions(ctx)
	for name, have := range got {
		if have != v {
			t.Errorf("%s reports version %q, want %s (all: %v)", name, have, v, got)
		}
	}
}

// expectClean fails the test on a failed request or a lost write.
func expectClean(t *testing.T, r Report) {
	t.Helper()
	t.Logf("%s clients: %d requests, %d failed, %d retried, %d acknowledged, %d read back, %d lost; p50 %.1f ms, p99 %.1f ms; errors %v",
		r.System, r.Requests, r.Failed, r.Retries, r.Acknowledged, r.Verified, r.Lost, r.P50MS, r.P99MS, r.Errors)
	if r.Acknowledged < 200 {
		t.Errorf("only %d acknowledged writes: too few to prove anything", r.Acknowledged)
	}
	if r.Failed > 0 {
		t.Errorf("%d requests failed (per second %v): %v", r.Failed, r.FailedPerSec, r.Errors)
	}
	if r.Lost > 0 {
		t.Errorf("%d acknowledged writes lost: %v", r.Lost, r.LostKeys)
	}
}

func TestEtcdUpgrade(t *testing.T) { needRealsys(t); upgradeUnderLoad(t, Etcd(env)) }
func TestNATSUpgrade(t *testing.T) { needRealsys(t); upgradeUnderLoad(t, NATS(env)) }

// upgradeUnderLoad brings a cluster up at N with 'ferry cluster up'
// and, under its own client's load, upgrades it to a release that exits
// at start (rolled back: every member on N again) and then to N+1: no
// request failed, no acknowledged write lost, every member on N+1 by
// its own version report. A run the system's own known defect spoiled
// (System.stuck) is run once more on a fresh cluster, and says so.
func upgradeUnderLoad(t *testing.T, sys *System) {
	for try := 1; ; try++ {
		why := upgradeOnce(t, sys)
		if why == "" {
			return
		}
		if try == 2 {
			t.Fatalf("%s, twice", why)
		}
		t.Logf("%s: once more on a fresh cluster (try 2 of 2)", why)
	}
}

// upgradeOnce is one run of upgradeUnderLoad on a cluster of its own;
// it returns why it stopped early when sys.stuck knows the failure,
// having brought that cluster down, else "".
func upgradeOnce(t *testing.T, sys *System) string {
	bad, entry := badRelease(t, sys)
	c := newCluster(t, sys, entry)
	out := ferry(t, c, 0, "cluster", "up", "--version", sys.N)
	t.Logf("cluster up:\n%s", out)
	expectOn(t, c, sys.N)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// nats-server 2.10.27 now and then forms its JetStream meta group of
	// two of its three servers started together, and stays so: Formed
	// restarts the one left out through the agent (natsRejoin), and
	// fails if the group still does not hold every server.
	if err := c.Formed(ctx); err != nil {
		t.Fatal(err)
	}
	load, err := c.StartLoad(ctx, loadRate)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_, _ = load.Stop()
		}
	}()

	t0 := time.Now()
	out = ferry(t, c, 4, "upgrade", "start", "--to", bad, "-q")
	u := status(t, c)
	t.Logf("to %s: %s in %s: %s", bad, u.State, time.Since(t0).Round(time.Millisecond), u.Reason)
	if u.State != upgrade.StateRolledBack || !strings.Contains(u.Reason, "crash loop") {
		if sys.stuck != nil {
			if why := sys.stuck(u.Reason); why != "" {
				t.Logf("the bad release ended %s: %s\n%s", u.State, why, c.Tails(15))
				c.Close()
				return why
			}
		}
		t.Fatalf("the bad release ended %s (%s), want rolled-back on a crash loop\n%s", u.State, u.Reason, out)
	}
	expectOn(t, c, sys.N)

	t0 = time.Now()
	ferry(t, c, 0, "upgrade", "start", "--to", sys.N1, "-q")
	u = status(t, c)
	t.Logf("to %s: %s in %s; pace: %s against a lower bound of %s", sys.N1, u.State, time.Since(t0).Round(time.Millisecond),
		u.Ended.Sub(u.Created).Round(time.Millisecond), u.Bound.Total().Round(time.Millisecond))

	stopped = true
	r, err := load.Stop()
	if err != nil {
		t.Fatal(err)
	}
	expectClean(t, r)
	expectOn(t, c, sys.N1)
	for _, m := range members(t, c) {
		if m.Running != sys.N1 || m.Status != "healthy" {
			t.Errorf("ferry members: %+v, want healthy on %s", m, sys.N1)
		}
	}
	return ""
}

// TestNATSFormedRestartsTheLeftOut: a server JetStream's meta group
// does not hold as a current member (here one stopped through the
// agent: the leader lists it offline or not current) is restarted
// through the agent by Formed, which says so, and the group holds every
// server again.
func TestNATSFormedRestartsTheLeftOut(t *testing.T) {
	needRealsys(t)
	sys := NATS(env)
	c := newCluster(t, sys, "")
	var logged []string
	c.log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)); t.Logf(f, a...) }
	ferry(t, c, 0, "cluster", "up", "--version", sys.N)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Formed(ctx); err != nil {
		t.Fatal(err)
	}
	names, monitors := c.monitors()
	g := jetStreamGroup(&http.Client{Timeout: 2 * time.Second}, names, monitors)
	gone := names[(slices.Index(names, g.leader)+1)%len(names)] // not the leader
	_, d, m, err := c.member(gone)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (meta leader %s) stopped through the agent", gone, g.leader)
	t0 := time.Now()
	if err := c.Formed(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("formed again in %s", time.Since(t0).Round(time.Millisecond))
	if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "restarting "+gone+", which the meta group left out") }) {
		t.Errorf("Formed did not say it restarted %s: %q", gone, logged)
	}
	expectOn(t, c, sys.N)
}

func TestEtcdAdopted(t *testing.T) { needRealsys(t); adoptedUnderLoad(t, Etcd(env)) }
func TestNATSAdopted(t *testing.T) { needRealsys(t); adoptedUnderLoad(t, NATS(env)) }

// adoptedUnderLoad starts a cluster at N by os/exec, not through ferry,
// and lets ferry find it (adopt: listen), learn its version (version:)
// and upgrade it under load like one it started: each member handed
// over to the agent at its step, the processes started outside gone.
func adoptedUnderLoad(t *testing.T, sys *System) {
	c := newCluster(t, sys, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := c.StartOutside(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range members(t, c) {
		if !m.Adopted || m.Running != sys.N || m.Status != "healthy" {
			t.Errorf("ferry members before the upgrade: %+v, want adopted, healthy on %s", m, sys.N)
		}
	}
	if out := ferry(t, c, 0, "members"); !strings.Contains(out, "healthy (adopted)") {
		t.Errorf("ferry members does not say adopted:\n%s", out)
	}
	// cluster up leaves adopted members alone.
	ferry(t, c, 0, "cluster", "up", "--version", sys.N)

	load, err := c.StartLoad(ctx, loadRate)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	out := ferry(t, c, 0, "upgrade", "start", "--to", sys.N1, "-q")
	r, err := load.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adopted, to %s in %s:\n%s", sys.N1, time.Since(t0).Round(time.Millisecond), out)
	expectClean(t, r)
	expectOn(t, c, sys.N1)
	for _, m := range members(t, c) {
		if m.Adopted || m.Running != sys.N1 || m.Status != "healthy" {
			t.Errorf("ferry members after the upgrade: %+v, want the agent's, healthy on %s", m, sys.N1)
		}
	}
	for _, pid := range c.OutsidePIDs() {
		if err := waitUntil(ctx, 10*time.Second, fmt.Sprintf("process %d started outside ferry is gone", pid), func() (bool, error) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			return err != nil || strings.Contains(string(b), ") Z "), nil
		}); err != nil {
			t.Error(err)
		}
	}
}

// TestNATSStuck: only the known health-check defect makes a run of
// upgradeUnderLoad start over; any other failure fails it.
func TestNATSStuck(t *testing.T) {
	for _, c := range []struct {
		reason string
		stuck  bool
	}{
		{`rollback failed: member n1: not healthy on 2.10.27 within healthy_deadline 1m30s: GET http://127.0.0.1:24227/healthz: status 503, want 2xx (body "{\"status\":\"unavailable\",\"error\":\"JetStream stream '$G \u003e LOAD' is not current: group node unhealthy\"}")`, true},
		{`rollback failed: member n1: not healthy on 2.10.27 within healthy_deadline 1m30s: GET http://127.0.0.1:24227/healthz: status 503`, false},
		{"member n2: crash loop: exited 2 times since its start", false},
		{"", false},
	} {
		if got := natsStuck(c.reason) != ""; got != c.stuck {
			t.Errorf("natsStuck(%q) = %v, want %v", c.reason, got, c.stuck)
		}
	}
}

// TestMetaGroup: JetStream's meta group holds every server when they
// agree on a leader that lists the others online and current, whatever
// its cluster_size says; the servers it leaves out are those it lists
// nowhere or not current, and none when the servers agree on no leader.
func TestMetaGroup(t *testing.T) {
	names := []string{"n1", "n2", "n3"}
	follower := func(leader string) string {
		return `{"server_id":"X","meta_cluster":{"name":"ferry","leader":"` + leader + `","cluster_size":3}}`
	}
	leaderless := `{"server_id":"X","meta_cluster":{"name":"ferry","cluster_size":3}}`
	for _, c := range []struct {
		name    string
		jsz     [3]string // n1's, n2's, n3's /jsz
		ok      bool
		leftOut []string
		last    string
	}{
		{"formed", [3]string{
			`{"meta_cluster":{"leader":"n1","cluster_size":3,"replicas":[{"name":"n2","current":true,"active":1000},{"name":"n3","current":true}]}}`,
			follower("n1"), follower("n1")}, true, nil, ""},
		// CI, once brought down and up again: the size n2 stored.
		{"formed, cluster_size 2", [3]string{
			follower("n2"),
			`{"meta_cluster":{"leader":"n2","cluster_size":2,"replicas":[{"name":"n1","current":true},{"name":"n3","current":true}]}}`,
			follower("n2")}, true, nil, ""},
		// CI's first formation: n2 follows n1, which lists it nowhere.
		{"two of three", [3]string{
			`{"meta_cluster":{"leader":"n1","cluster_size":2,"replicas":[{"name":"n3","current":true}]}}`,
			follower("n1"), follower("n1")}, false, []string{"n2"},
			"meta leader n1's group holds 2 servers of 3 ([n1 n3], cluster_size 2)"},
		{"two of three, the third follows nobody", [3]string{
			`{"meta_cluster":{"leader":"n1","cluster_size":2,"replicas":[{"name":"n3","current":true}]}}`,
			leaderless, follower("n1")}, false, []string{"n2"}, "holds 2 servers of 3"},
		{"heard from, never added", [3]string{
			follower("n3"), follower("n3"),
			`{"meta_cluster":{"leader":"n3","cluster_size":2,"replicas":[{"name":"n1","current":true},{"name":"n2","current":false,"active":95000000000}]}}`},
			false, []string{"n2"}, "meta leader n3: n2 offline false, current false (cluster_size 2)"},
		{"one server offline", [3]string{
			`{"meta_cluster":{"leader":"n1","cluster_size":3,"replicas":[{"name":"n2","current":true,"offline":true},{"name":"n3","current":true}]}}`,
			follower("n1"), follower("n1")}, false, []string{"n2"}, "n2 offline true"},
		{"listed, current, following nobody yet", [3]string{
			`{"meta_cluster":{"leader":"n1","cluster_size":3,"replicas":[{"name":"n2","current":true},{"name":"n3","current":true}]}}`,
			follower("n1"), leaderless}, false, nil, "n3: no meta leader (meta leader n1's group: [n1 n2 n3])"},
		{"no leader yet", [3]string{leaderless, leaderless, `{"server_id":"X"}`}, false, nil, "no meta leader (n1, n2, n3)"},
		{"two leaders", [3]string{
			`{"meta_cluster":{"leader":"n1","cluster_size":2,"replicas":[{"name":"n3","current":true}]}}`,
			`{"meta_cluster":{"leader":"n2","cluster_size":2}}`, follower("n1")}, false, nil, "meta leaders n1 and n2"},
		{"the leader the others name does not lead", [3]string{
			follower("n3"), follower("n3"), leaderless}, false, nil, "meta leader n3 does not say it leads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers := make([]jszMeta, len(names))
			for i, s := range c.jsz {
				if err := json.Unmarshal([]byte(s), &answers[i]); err != nil {
					t.Fatal(err)
				}
			}
			g := metaGroup(names, answers)
			if g.ok != c.ok || !slices.Equal(g.leftOut, c.leftOut) || !strings.Contains(g.last, c.last) || (c.ok && g.last != "") {
				t.Errorf("metaGroup = ok %v, left out %v, last %q; want ok %v, left out %v, last with %q", g.ok, g.leftOut, g.last, c.ok, c.leftOut, c.last)
			}
		})
	}
}
