package demo

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// repoRoot is the module root.
func repoRoot(t *testing.T) string { return sourcetree.Root(t) }

// buildAll builds ferry (which runs the agent) and both sample releases.
func buildAll(t *testing.T) (self, artifacts string) {
	t.Helper()
	dir := t.TempDir()
	root := repoRoot(t)
	builds := [][]string{
		{"build", "-o", filepath.Join(dir, "ferry"), "./cmd/ferry"},
		{"build", "-ldflags", "-X main.version=1.0.0", "-o", filepath.Join(dir, "sample-1.0.0"), "./examples/sample/cmd/sample"},
		{"build", "-ldflags", "-X main.version=2.0.0", "-o", filepath.Join(dir, "sample-2.0.0"), "./examples/sample/cmd/sample"},
	}
	for _, b := range builds {
		cmd := exec.Command("go", b...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	return filepath.Join(dir, "ferry"), dir
}

// TestDemo runs the embedded default end to end with real processes: the
// agent, a raft kv of three, four api members, the load balancer, and
// client traffic; it checks the promise of the demo.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds binaries and runs a real cluster")
	}
	self, arts := buildAll(t)
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	// Through a ferry server, as 'ferry demo' runs it.
	serve := func(ctx context.Context, cl *Cluster, st *store.Store, logger *slog.Logger) (string, string, func(), error) {
		tok, _, err := server.LoadOrCreateToken(filepath.Join(cl.DataDir, server.TokenFile))
		if err != nil {
			return "", "", nil, err
		}
		s, err := server.New(server.Config{Cluster: cl.Config, Driver: cl.Driver, Store: st, Token: tok})
		if err != nil {
			return "", "", nil, err
		}
		url, stop, err := s.Loopback(ctx)
		return url, tok, stop, err
	}
	rep, err := Run(ctx, Options{Dir: t.TempDir(), Artifacts: arts, Self: self, Rate: 400, Concurrency: 8, Seed: seed, Out: &out,
		Migrations: true, Serve: serve})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	t.Logf("report: state %s, %d requests (%d failed) p50 %.1fms p99 %.1fms, %d writes (%d lost), %.1fs upgrade, overhead p50 %.2fms",
		rep.State, rep.Requests.Total, rep.Requests.Failed, rep.Requests.P50MS, rep.Requests.P99MS,
		rep.Writes.Acknowledged, rep.Writes.Lost, rep.DurationS, rep.Overhead.P50MS)
	if err := rep.Completed(); err != nil {
		t.Fatalf("demo promise broken: %v\n%s", err, out.String())
	}
	if rep.DrivenBy != "server" || !strings.HasPrefix(rep.Server, "http://127.0.0.1:") {
		t.Errorf("the report says the upgrade was driven by %q at %q, want the server", rep.DrivenBy, rep.Server)
	}
	if len(rep.Members) != 7 {
		t.Errorf("members in report = %d, want 7", len(rep.Members))
	}
	if rep.Requests.Total < 1000 || rep.Writes.Acknowledged < 500 {
		t.Errorf("too little traffic to prove anything: %d requests, %d writes", rep.Requests.Total, rep.Writes.Acknowledged)
	}
	for _, want := range []string{"expanding", "upgrading-kv", "upgraded-kv", "upgrading-api", "migrating", "finalizing", "contracting", "completed", "drain", "ferry server on http://127.0.0.1:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("live view never showed %q", want)
		}
	}
	if _, err := os.Stat(self); err != nil {
		t.Fatal(err)
	}
}

// TestNaiveAllAtOnce upgrades the api tier of a fresh sample cluster
// the naive way (every member stopped, then all started on 2.0.0)
// under the demo's traffic: clients see failures, counted, and the
// verdict is not zero-downtime (ferry's own upgrade of the same tier
// is, in TestDemo).
func TestNaiveAllAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds binaries and runs a real cluster")
	}
	self, arts := buildAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := Options{Self: self, From: "1.0.0", To: "2.0.0", Rate: 400, Concurrency: 8, Seed: 1}
	bins := map[string]string{"1.0.0": filepath.Join(arts, "sample-1.0.0"), "2.0.0": filepath.Join(arts, "sample-2.0.0")}
	c, err := compareOne(ctx, o, bins, t.TempDir(), AllAtOnce)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all at once: %d requests, %d failed, in %.1fs; zero downtime %v", c.Requests.Total, c.Requests.Failed, c.DurationS, c.ZeroDowntime)
	if c.ZeroDowntime || c.Requests.Failed == 0 {
		t.Errorf("restarting every api member at once: %+v; want failed requests and zero_downtime false", c)
	}
}

// TestStartClusterOnAPortClash takes api-4's port after it is drawn and
// before api-4 starts, as another process may: api-4 fails to bind, the
// start is given up at once (not after the minute's wait for health) and
// made again on new ports, and the cluster comes up healthy.
func TestStartClusterOnAPortClash(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds binaries and runs a real cluster")
	}
	self, arts := buildAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var held net.Listener
	var heldPort string
	defer func() {
		if held != nil {
			held.Close()
		}
	}()
	o := ClusterOptions{Dir: t.TempDir(), Self: self, Start: "1.0.0", Soak: 300 * time.Millisecond,
		Releases: []Release{{Version: "1.0.0", Path: filepath.Join(arts, "sample-1.0.0")}}}
	o.drawn = func(ports map[string]string) {
		if held != nil {
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+ports["API4"])
		if err != nil {
			t.Errorf("take api-4's port %s: %v", ports["API4"], err)
			return
		}
		held, heldPort = l, ports["API4"]
	}
	start := time.Now()
	cl, err := StartCluster(ctx, o)
	if err != nil {
		t.Fatalf("start with api-4's port taken once: %v", err)
	}
	defer cl.Close()
	took := time.Since(start)
	t.Logf("started in %s; api-4's first port %s, now %s", took.Round(time.Millisecond), heldPort, cl.Addresses["api-4"])
	if held == nil {
		t.Fatal("no port was taken")
	}
	if cl.Addresses["api-4"] == "127.0.0.1:"+heldPort {
		t.Errorf("api-4 is on the taken port %s", heldPort)
	}
	if took > 55*time.Second {
		t.Errorf("the clash was waited out (%s), not seen", took)
	}
}
