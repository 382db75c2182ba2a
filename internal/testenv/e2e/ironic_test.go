package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/testenv/realsys"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// ironicPorts are examples/ironic's address placeholders.
var ironicPorts = []string{"AGENT", "CONDUCTOR1", "CONDUCTOR2", "CONDUCTOR1_RAFT", "CONDUCTOR2_RAFT", "API1", "API2", "LB", "LB_ADMIN"}

// ironicExample is examples/ironic rendered and running: the cluster,
// its agent's directory and the values the template was filled with.
type ironicExample struct {
	*demo.Cluster
	agentDir string
	vars     map[string]string
}

// renderIronic fills examples/ironic/cluster.yaml.tmpl with vars, with
// one conductor (conductor-2's line left out) when single.
func renderIronic(t *testing.T, vars map[string]string, single bool) string {
	t.Helper()
	tmpl := readFile(t, filepath.Join(realsys.Root(), "examples", "ironic", "cluster.yaml.tmpl"))
	if single {
		lines := strings.Split(tmpl, "\n")
		tmpl = strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, "{name: conductor-2,") }), "\n")
	}
	desc, err := realsys.Fill(tmpl, vars)
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// startIronic renders examples/ironic with free ports (seeded, the seed
// printed), starts its agent and the sample's load balancer before api-1
// and api-2, brings the cluster up on 1.0.0 with 'ferry cluster up' and
// waits until the balancer sees both APIs. The test's end brings it
// down with 'ferry cluster down' and stops the agent.
func startIronic(t *testing.T) *ironicExample {
	t.Helper()
	dir := t.TempDir()
	seed := rand.Uint64()
	ports, err := loopback.Ports(seed, len(ironicPorts))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ports from seed %d", seed)
	vars := map[string]string{"TOKEN_FILE": filepath.Join(dir, "agent", "token"), "DATA": filepath.Join(dir, "data"), "SOAK": "1s"}
	for i, n := range ironicPorts {
		vars[n] = fmt.Sprintf("127.0.0.1:%d", ports[i])
	}
	vars["CONDUCTORS"] = vars["CONDUCTOR1"] + "," + vars["CONDUCTOR2"]
	for i, v := range []string{"1.0.0", "2.0.0"} {
		vars[fmt.Sprintf("BIN%d", i+1)] = bin.sample[v]
		if vars[fmt.Sprintf("SUM%d", i+1)], err = checksum.File(bin.sample[v]); err != nil {
			t.Fatal(err)
		}
	}
	ex := &ironicExample{agentDir: filepath.Join(dir, "agent"), vars: vars, Cluster: &demo.Cluster{Dir: dir, File: filepath.Join(dir, "cluster.yaml"),
		DataDir: filepath.Join(dir, "ferry"), LB: "http://" + vars["LB"], LBAdmin: "http://" + vars["LB_ADMIN"], Addresses: map[string]string{}}}
	writeFile(t, ex.File, renderIronic(t, vars, false))
	c, err := config.Load(ex.File)
	if err != nil {
		t.Fatalf("examples/ironic rendered: %v", err)
	}
	ex.Config = c
	for _, comp := range c.ComponentsInOrder() {
		for _, m := range comp.Members {
			ex.Members = append(ex.Members, driver.Member{Name: m.Name, Component: comp.Name, Host: m.Host, Address: m.Address})
			ex.Addresses[m.Name] = m.Address
		}
	}

	// The agent, in a session of its own as an operator would run it.
	if err := os.MkdirAll(ex.agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	agent := startProcess(t, filepath.Join(dir, "agent.log"), bin.ferry, "agent", "--listen", vars["AGENT"], "--dir", ex.agentDir)
	waitFor(t, 20*time.Second, "the agent answering", func() bool {
		agent.alive(t)
		_, err := os.Stat(vars["TOKEN_FILE"])
		return err == nil && answers("http://"+vars["AGENT"]+"/v1/health")
	})
	if ex.Driver, err = substrate.New(c, substrate.Options{}); err != nil {
		t.Fatal(err)
	}
	// The balancer, beside ferry: not a member of the description.
	startProcess(t, filepath.Join(dir, "lb.log"), bin.sample["1.0.0"], "lb", "--http", vars["LB"], "--admin", vars["LB_ADMIN"],
		"--backend", "api-1="+vars["API1"], "--backend", "api-2="+vars["API2"])
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster directory (agent.log, members' logs under agent/): %s", dir)
		}
		if out, code := ferry(t, ex.Cluster, "cluster", "down"); code != 0 {
			t.Logf("ferry cluster down: exit %d\n%s", code, out)
		}
	})
	began := time.Now()
	out, code := ferry(t, ex.Cluster, "cluster", "up", "--version", "1.0.0")
	if code != 0 {
		t.Fatalf("ferry cluster up: exit %d\n%s", code, out)
	}
	waitFor(t, 30*time.Second, "the balancer seeing api-1 and api-2", func() bool { return lbHealthy(ex.LBAdmin) })
	t.Logf("ferry cluster up in %s:\n%s", time.Since(began).Round(time.Millisecond), out)
	return ex
}

// startProcess starts a process of the test's (its output in logPath),
// stopped with SIGTERM at the test's end and SIGKILLed if it outlives 10 s.
func startProcess(t *testing.T, logPath, path string, args ...string) *background {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bg := &background{cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1)}
	go func() { bg.exited <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-bg.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-bg.exited
		}
	})
	return bg
}

// regexpList compiles each pattern.
func regexpList(patterns ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(p)
	}
	return out
}

// answers reports whether url answers 200.
func answers(url string) bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// expectPinned checks what every member says it keeps to: the version
// and the pin on GET /version (its --pin), and the pin_release_version
// of the ironic.conf ferry wrote into its directory at its start.
func (ex *ironicExample) expectPinned(t *testing.T, version, pin string) {
	t.Helper()
	expectPins(t, ex.Cluster, version, pin)
	for _, m := range ex.Members {
		if conf := readFile(t, filepath.Join(ex.agentDir, "members", m.Name, "ironic.conf")); conf != "[DEFAULT]\npin_release_version = "+pin+"\n" {
			t.Errorf("%s's ironic.conf %q, want pin_release_version = %s", m.Name, conf, pin)
		}
	}
}

// overlaps lists the pairs of members of one component whose times
// down (each member's "down" event: its stop to its first healthy
// check) overlap, from the events of upgrade id.
func overlaps(t *testing.T, ex *ironicExample, id string) (downs int, pairs []string) {
	t.Helper()
	type span struct {
		member, comp string
		from, to     time.Time
	}
	comp := map[string]string{}
	for _, m := range ex.Members {
		comp[m.Name] = m.Component
	}
	var spans []span
	for _, ev := range eventsOf(t, ex.Cluster, id) {
		if ev.Kind == "down" {
			d := time.Duration(ev.DurationMS * float64(time.Millisecond))
			spans = append(spans, span{ev.Member, comp[ev.Member], ev.Time.Add(-d), ev.Time})
		}
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.comp == b.comp && a.from.Before(b.to) && b.from.Before(a.to) {
				pairs = append(pairs, a.member+" with "+b.member)
			}
		}
	}
	return len(spans), pairs
}

// TestIronicExample: examples/ironic rendered and run. 'ferry plan'
// shows Ironic's order; 'ferry health --to 2.0.0' warns of nothing with
// two conductors, and with the description rendered with one it warns
// "component conductor keeps serving" before anything starts. Then
// 'ferry upgrade start --to 2.0.0' under client traffic through the
// balancer: an abort once the unpin (the rollout) has begun is refused
// naming the stage rolling-out-conductor, and the upgrade goes on to
// completed. The events show expanding, the conductors one at a time,
// the APIs one at a time, the unpin's rollout of the conductors before
// the APIs, migrating, finalizing, contracting, in that order; no two
// members of a component were down at once, in the events and to an
// observer polling every member; 0 requests failed and every
// acknowledged write reads back; every member runs 2.0.0 pinned to
// 2.0.0 (on GET /version and in its ironic.conf), the records in
// format 2 only.
func TestIronicExample(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	ex := startIronic(t)
	ex.expectPinned(t, "1.0.0", "1.0.0") // cluster up at 1.0.0 pins it there

	out, code := ferry(t, ex.Cluster, "plan", "--to", "2.0.0")
	want := "flow of 2.0.0: expanding → upgrading-conductor → upgrading-api → rolling-out-conductor (point of no return) → rolling-out-api → migrating → finalizing → contracting"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("ferry plan: exit %d, want the line %q\n%s", code, want, out)
	}
	t.Logf("ferry plan --to 2.0.0:\n%s", out)

	const warn = "component conductor keeps serving"
	out, code = ferry(t, ex.Cluster, "health", "--to", "2.0.0")
	t.Logf("ferry health --to 2.0.0, two conductors: exit %d\n%s", code, out)
	if code != 0 || strings.Contains(out, warn) {
		t.Errorf("health with two conductors: exit %d; want 0 and no %q", code, warn)
	}
	single := &demo.Cluster{File: filepath.Join(ex.Dir, "single.yaml"), DataDir: filepath.Join(ex.Dir, "single-ferry")}
	vars := maps.Clone(ex.vars)
	vars["CONDUCTORS"] = vars["CONDUCTOR1"]
	writeFile(t, single.File, renderIronic(t, vars, true))
	out, code = ferry(t, single, "health", "--to", "2.0.0")
	t.Logf("ferry health --to 2.0.0, the description rendered with one conductor: exit %d\n%s", code, out)
	if !strings.Contains(out, warn) || !strings.Contains(out, "WARN") || !strings.Contains(out, "conductor has one member (conductor-1)") {
		t.Errorf("health with one conductor: want WARN %q naming conductor-1", warn)
	}
	if _, ok := status(t, single); ok {
		t.Error("the health query recorded an upgrade")
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("traffic seed %d", seed)
	stop := clientTraffic(ex.Cluster, seed)
	obs := watch(ex.Cluster)
	began := time.Now()
	bg := startFerry(t, ex.Cluster, "upgrade", "start", "--to", "2.0.0")
	var u upgrade.Upgrade
	waitFor(t, 90*time.Second, "the unpin's rollout", func() bool {
		bg.alive(t)
		var ok bool
		u, ok = status(t, ex.Cluster)
		return ok && (u.State == upgrade.RollingOut("conductor") || u.State == upgrade.RollingOut("api"))
	})
	out, code = ferry(t, ex.Cluster, "upgrade", "abort")
	t.Logf("ferry upgrade abort in %s: exit %d\n%s", u.State, code, out)
	if code != 3 || !strings.Contains(out, "passed its point of no return, stage rolling-out-conductor") {
		t.Errorf("abort after the unpin: exit %d, want 3 naming the stage rolling-out-conductor", code)
	}
	code, out = bg.wait(t)
	took := time.Since(began)
	rec := stop()
	obs.stop()
	<-obs.finished
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	t.Logf("Ironic's rolling upgrade in %s:\n%s", took.Round(time.Millisecond), out)

	u, _ = status(t, ex.Cluster)
	if u.State != upgrade.StateCompleted || len(u.Effects) > 0 || u.Pin != "2.0.0" || u.NoReturn != upgrade.RollingOut("conductor") {
		t.Errorf("the upgrade: %s (%s), owing %v, pin %s, point of no return %s", u.State, u.Reason, u.Effects, u.Pin, u.NoReturn)
	}
	states := expectStates(t, eventsOf(t, ex.Cluster, u.ID), "expanding", "upgrading-conductor", "upgraded-conductor", "upgrading-api", "upgraded-api",
		"rolling-out-conductor", "rolled-out-conductor", "rolling-out-api", "rolled-out-api", "migrating", "finalizing", "contracting", "completed")
	t.Logf("states: %s", strings.Join(states, " → "))

	// The batches in order: one member each, the conductors then the
	// APIs, first on 2.0.0 (pinned to 1.0.0), then restarted unpinned.
	var batches []string
	for _, b := range u.Batches {
		kind := "phase"
		if b.Rollout {
			kind = "rollout"
		}
		batches = append(batches, kind+" "+strings.Join(b.Members, "+"))
	}
	t.Logf("batches: %s", strings.Join(batches, ", "))
	wantBatches := regexpList(`^phase conductor-\d$`, `^phase conductor-\d$`, `^phase api-\d$`, `^phase api-\d$`,
		`^rollout conductor-\d$`, `^rollout conductor-\d$`, `^rollout api-\d$`, `^rollout api-\d$`)
	if len(batches) != len(wantBatches) {
		t.Errorf("%d batches, want %d: each member alone, in a phase and in the rollout", len(batches), len(wantBatches))
	} else {
		for i, b := range batches {
			if !wantBatches[i].MatchString(b) {
				t.Errorf("batch %d: %q, want %s", i+1, b, wantBatches[i])
			}
		}
	}

	downs, pairs := overlaps(t, ex, u.ID)
	t.Logf("the events: %d times down, overlapping within a component: %v", downs, pairs)
	if downs != 8 || len(pairs) > 0 {
		t.Errorf("%d times down in the events (want 8: each member twice), overlapping in a component: %v", downs, pairs)
	}
	t.Logf("observer: %d rounds; most down at once: conductor %d (%s), api %d (%s)", obs.rounds,
		obs.maxDown["conductor"], obs.worst["conductor"], obs.maxDown["api"], obs.worst["api"])
	if obs.rounds < 50 || obs.maxDown["conductor"] > 1 || obs.maxDown["api"] > 1 {
		t.Errorf("the observer (%d rounds) saw %d conductors and %d APIs down at once, want at most 1 each", obs.rounds, obs.maxDown["conductor"], obs.maxDown["api"])
	}

	if failed := failedRequests(rec); failed > 0 {
		t.Errorf("%d of %d requests failed, want 0", failed, len(rec.Samples()))
	}
	checkWrites(t, ex.Cluster, rec)
	expectAllOn(t, ex.Cluster, "2.0.0")
	ex.expectPinned(t, "2.0.0", "2.0.0")
	for _, m := range []string{"conductor-1", "conductor-2"} {
		f := format(t, ex.Cluster, m)
		t.Logf("%s: format compat %d, records v1 %d, v2 %d", m, f.Compat, f.Records.V1, f.Records.V2)
		if f.Compat != 2 || f.Records.V1 != 0 || f.Records.V2 == 0 {
			t.Errorf("%s after contract: compat %d, %d format-1 and %d format-2 records; want compat 2, format 2 only", m, f.Compat, f.Records.V1, f.Records.V2)
		}
	}
}
