package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/testenv/ferrybuild"
)

// startFerryBin is startFerry with another ferry binary.
func startFerryBin(t *testing.T, ferryBin string, cl *demo.Cluster, args ...string) *background {
	t.Helper()
	cmd := exec.Command(ferryBin, append([]string{"-f", cl.File, "--data-dir", cl.DataDir}, args...)...)
	bg := &background{cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = bg.out, bg.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { bg.exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return bg
}

// ferryEvents are the events of kind ferry (one per host whose agent
// moved) and the first event of a member's action, of upgrade id.
func ferryEvents(t *testing.T, cl *demo.Cluster, id string) (ferry []store.Event, firstMember *store.Event, done *store.Event) {
	t.Helper()
	for _, ev := range eventsOf(t, cl, id) {
		switch {
		case ev.Kind == "ferry":
			ferry = append(ferry, ev)
		case ev.Kind == "action" && strings.HasPrefix(ev.Message, "ferry first:") && strings.Contains(ev.Message, ": done in"):
			done = &ev
		case ev.Kind == "action" && ev.Member != "" && firstMember == nil:
			firstMember = &ev
		}
	}
	return ferry, firstMember, done
}

// runningProcesses is processIdentity of the members running now (one
// stopped in its own turn is left out).
func runningProcesses(t *testing.T, cl *demo.Cluster) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sts, err := cl.Driver.Observe(ctx, cl.Members)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, st := range sts {
		if st.Running && st.PID != 0 {
			out[st.Name] = fmt.Sprintf("pid %d since %s", st.PID, st.Since.UTC().Format(time.RFC3339Nano))
		}
	}
	return out
}

// actedOn names the members some action was started on in upgrade id.
func actedOn(t *testing.T, cl *demo.Cluster, id string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, ev := range eventsOf(t, cl, id) {
		if ev.Kind == "action" && ev.Member != "" {
			out[ev.Member] = true
		}
	}
	return out
}

// TestFerryFirstUnderTraffic is ferry first as an upgrade's first step
// on the sample cluster's three hosts, under traffic. Release 1.0.1
// requires ferry 99.0.0: the ferry linked as 99.0.0 runs the upgrade,
// its agents are on 0.9.0. The upgrade re-executes each agent on the
// running ferry's own binary before any member moves; ferry is
// SIGKILLed once the first agent moved (no member restarted), and a
// 'ferry server' (99.0.0) takes the upgrade up from its record: the
// remaining agents move, then the members, and no client request
// fails. Release 2.0.0 names a ferry binary of its own (99.1.0): one
// whose sha256 is not the catalog's is refused by the start before
// anything changes; the right one is what the agents move to first.
func TestFerryFirstUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	seed := envSeed(t, "FERRY_SELFUP_SEED")
	t.Logf("seed %d (FERRY_SELFUP_SEED)", seed)
	const hosts = 3
	binDir := t.TempDir()
	next, err := ferrybuild.Build(binDir, "99.0.0")
	if err != nil {
		t.Fatal(err)
	}
	named, err := ferrybuild.Build(binDir, "99.1.0")
	if err != nil {
		t.Fatal(err)
	}
	cl := startCluster(t, demo.ClusterOptions{Hosts: hosts, HostCapacity: 2, Soak: time.Second, KVSoak: time.Second,
		Deadline: 30 * time.Second, GateDeadline: 30 * time.Second,
		Releases: []demo.Release{
			{Version: "1.0.0", Path: bin.sample["1.0.0"]},
			{Version: "1.0.1", Path: bin.sample["1.0.1"], UpgradeFrom: []string{"1.0.x"}, RequiresFerry: "99.0.0"},
			{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}, FerryPath: named.Path},
		}})
	agentsOn(t, ferryBuilds(t, cl), buildinfo.Release(), hosts)
	before := processIdentity(t, cl)

	// The health query of the ferry that meets requires_ferry says
	// what the start will do first.
	out, code := ferryOf(t, next.Path, cl, "health", "--to", "1.0.1")
	t.Logf("ferry 99.0.0 health --to 1.0.1 (exit %d):\n%s", code, out)
	if code != 0 || !regexp.MustCompile(`ferry's agents understand release 1\.0\.1.*host-1, host-2, host-3 .* re-executed on ferry 99\.0\.0`).MatchString(out) {
		t.Fatalf("the health query does not say the agents move first (exit %d)", code)
	}
	// A ferry binary whose sha256 is not the catalog's: refused before
	// anything changes (exit 5), naming the check and the file.
	orig, err := os.ReadFile(named.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(named.Path, append(append([]byte(nil), orig...), 0), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code = ferryOf(t, next.Path, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	t.Logf("a ferry binary changed by one byte (exit %d):\n%s", code, out)
	if code != 5 || !strings.Contains(out, "ferry's agents understand release 2.0.0") || !strings.Contains(out, named.Path+": sha256") {
		t.Errorf("start with a changed ferry binary: exit %d, want 5 naming the check and the file", code)
	}
	if err := os.WriteFile(named.Path, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	agentsOn(t, ferryBuilds(t, cl), buildinfo.Release(), hosts)
	sameProcesses(t, cl, before)

	live, stop := liveTraffic(cl, seed)
	waitFor(t, 20*time.Second, "100 requests before", func() bool { return len(live.Samples()) >= 100 })
	start := time.Now()
	bg := startFerryBin(t, next.Path, cl, "upgrade", "start", "--to", "1.0.1", "-q")
	var id string
	waitFor(t, time.Minute, "the first agent moved", func() bool {
		bg.alive(t)
		u, ok := status(t, cl)
		if !ok {
			return false
		}
		id = u.ID
		f, _, _ := ferryEvents(t, cl, id)
		return len(f) > 0
	})
	_ = bg.cmd.Process.Signal(syscall.SIGKILL)
	<-bg.exited
	t.Logf("ferry SIGKILLed %s after the start, once the first agent moved", time.Since(start).Round(time.Millisecond))
	sameProcesses(t, cl, before) // nothing but agents moved

	// A server on the newer ferry takes the upgrade up from its record:
	// the agents not moved yet first, then the members.
	srv := startFerryBin(t, next.Path, cl, "server", "--listen", "127.0.0.1:0")
	var moved map[string]string
	waitFor(t, 2*time.Minute, "the agents' move done", func() bool {
		srv.alive(t)
		_, _, done := ferryEvents(t, cl, id)
		if done == nil {
			return false
		}
		moved = runningProcesses(t, cl) // before the members' actions are read
		return true
	})
	acted := actedOn(t, cl, id)
	untouched := 0
	for name, was := range before {
		if acted[name] {
			continue // its own turn had begun
		}
		untouched++
		if moved[name] != was {
			t.Errorf("member %s restarted by the agents' move: %s, then %s", name, was, moved[name])
		}
	}
	t.Logf("when the agents' move ended, %d members not yet acted on were each the same process", untouched)
	var u upgrade.Upgrade
	waitFor(t, 3*time.Minute, "the upgrade to 1.0.1 ended", func() bool {
		srv.alive(t)
		u, _ = status(t, cl)
		return u.State.Terminal()
	})
	took := time.Since(start)
	n := len(live.Samples())
	waitFor(t, 20*time.Second, "100 requests after", func() bool { return len(live.Samples()) >= n+100 })
	rec := stop()
	if u.State != upgrade.StateCompleted {
		t.Fatalf("upgrade %s ended %s: %s\n%s", id, u.State, u.Reason, srv.out.String())
	}
	t.Logf("upgrade %s to 1.0.1 completed %s after its start (the SIGKILL and the server's take-over included)", id, took.Round(time.Millisecond))
	f, first, done := ferryEvents(t, cl, id)
	for _, ev := range f {
		t.Logf("event %d %s: %s", ev.Seq, ev.Kind, ev.Message)
	}
	t.Logf("event %d %s: %s", done.Seq, done.Kind, done.Message)
	t.Logf("event %d %s: %s: %s (the first of a member)", first.Seq, first.Kind, first.Member, first.Message)
	if len(f) < hosts {
		t.Errorf("%d ferry events, want one per host (%d)", len(f), hosts)
	}
	for _, ev := range append(f, *done) {
		if ev.Seq > first.Seq {
			t.Errorf("event %d (%s) comes after the first member's action (event %d): the agents move before any member", ev.Seq, ev.Message, first.Seq)
		}
	}
	if u.Ferry == nil || u.Ferry.Done.IsZero() || u.Ferry.Tries != 2 {
		t.Errorf("the record's ferry first step: %+v, want done at its second take (the first lost with the SIGKILLed process)", u.Ferry)
	}
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d of %d requests failed", n, len(rec.Samples()))
	}
	checkWrites(t, cl, rec)
	expectAllOn(t, cl, "1.0.1")
	agentsOn(t, ferryBuilds(t, cl), "99.0.0", hosts)
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
	<-srv.exited

	// ferry versions (the newer ferry's) shows its own release and each
	// agent's.
	out, code = ferryOf(t, next.Path, cl, "versions")
	t.Logf("ferry versions:\n%s", out)
	if code != 0 || !regexp.MustCompile(`(?m)^ferry\s+99\.0\.0\s`).MatchString(out) || strings.Count(out, "99.0.0") < hosts+1 {
		t.Errorf("ferry versions (exit %d) does not show ferry 99.0.0 and each agent on it", code)
	}

	// Release 2.0.0 names its ferry binary (99.1.0, newer than the
	// ferry that runs the upgrade): the agents move onto it first.
	out, code = ferryOf(t, next.Path, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	if code != 0 {
		t.Fatalf("upgrade to 2.0.0: exit %d\n%s", code, out)
	}
	u, _ = status(t, cl)
	f, first, done = ferryEvents(t, cl, u.ID)
	if len(f) != hosts || done == nil || first == nil || done.Seq > first.Seq {
		t.Errorf("upgrade to 2.0.0: %d ferry events, done %v, first member action %v: want the %d agents moved before any member", len(f), done, first, hosts)
	} else {
		t.Logf("event %d: %s", done.Seq, done.Message)
	}
	expectAllOn(t, cl, "2.0.0")
	agentsOn(t, ferryBuilds(t, cl), "99.1.0", hosts)
}
