package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// bin holds the binaries every test uses, built once by TestMain: the
// ferry CLI (also the agent) and the sample at each release, with the
// fault builds of the bad releases.
var bin struct {
	ferry  string
	sample map[string]string // by version
}

// builds are the sample releases: version → fault ("" is healthy).
var builds = map[string]string{
	"1.0.0":           "",
	"1.0.1":           "",
	"2.0.0":           "",
	"2.0.0-bad.exit":  "exit-at-start",
	"2.0.0-bad.never": "never-ready",
	"2.0.0-bad.crash": "crash-after",
	"2.0.0-bad.slow":  "slow",
	// api 2.0.0-mixbad fails its requests while kv runs 1.x: a
	// mixed-version incompatibility (rehearse_test.go).
	"2.0.0-mixbad": "needs-new-kv",
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func build(dir string) error {
	bin.ferry = filepath.Join(dir, "ferry")
	bin.sample = map[string]string{}
	cmds := [][]string{{"build", "-o", bin.ferry, "github.com/ferry-upgrade/ferry/cmd/ferry"}}
	for v, fault := range builds {
		p := filepath.Join(dir, "sample-"+v)
		bin.sample[v] = p
		ld := "-X main.version=" + v
		if fault != "" {
			ld += " -X main.fault=" + fault
		}
		cmds = append(cmds, []string{"build", "-ldflags", ld, "-o", p, "github.com/ferry-upgrade/ferry/examples/sample/cmd/sample"})
	}
	for _, args := range cmds {
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("go %v: %w\n%s", args, err, out)
		}
	}
	return nil
}

// startCluster starts a sample cluster on 1.0.0 with the given
// releases (each upgradable from 1.0.x; 1.0.1 may go back to 1.0.0, so
// that a test can go back and forth) and closes it at the end of the
// test.
func startCluster(t *testing.T, o demo.ClusterOptions, versions ...string) *demo.Cluster {
	t.Helper()
	o.Dir, o.Self, o.Start = t.TempDir(), bin.ferry, "1.0.0"
	if len(o.Releases) == 0 {
		o.Releases = []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"]}}
	}
	for _, v := range versions {
		r := demo.Release{Version: v, Path: bin.sample[v], UpgradeFrom: []string{"1.0.x"}}
		if v == "1.0.1" {
			r.DowngradeTo = []string{"1.0.0"}
		}
		o.Releases = append(o.Releases, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := demo.StartCluster(ctx, o)
	if err != nil {
		t.Fatalf("start the sample cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster directory (agent.log, member logs): %s", cl.Dir)
		}
		cl.Close()
	})
	return cl
}

// clientTraffic drives reads and writes through the load balancer until
// the returned stop is called, which returns what the clients saw.
func clientTraffic(cl *demo.Cluster, seed uint64) (stop func() *traffic.Recorder) {
	_, stop = liveTraffic(cl, seed)
	return stop
}

// liveTraffic is clientTraffic with the recorder, to read while the
// clients go on.
func liveTraffic(cl *demo.Cluster, seed uint64) (*traffic.Recorder, func() *traffic.Recorder) {
	ctx, cancel := context.WithCancel(context.Background())
	rec, done := traffic.Start(ctx, traffic.Config{BaseURL: cl.LB, Concurrency: 4, Rate: 100, WriteShare: 0.5, Seed: seed})
	return rec, func() *traffic.Recorder { cancel(); <-done; return rec }
}

// checkWrites fails the test unless every write the store acknowledged
// reads back with its value.
func checkWrites(t *testing.T, cl *demo.Cluster, rec *traffic.Recorder) {
	t.Helper()
	w := cl.Verify(rec.Acked())
	t.Logf("acknowledged writes: %d, read back %d, lost %d; requests %d, failed %d", w.Acknowledged, w.Verified, w.Lost, len(rec.Samples()), failedRequests(rec))
	if w.Acknowledged < 100 {
		t.Errorf("only %d acknowledged writes: too few to prove anything", w.Acknowledged)
	}
	if w.Lost > 0 {
		t.Errorf("%d acknowledged writes lost, e.g. %v", w.Lost, w.LostKeys)
	}
}

// versions returns the version each upgraded member runs.
func versions(t *testing.T, cl *demo.Cluster) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sts, err := cl.Driver.Observe(ctx, cl.Members)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	out := map[string]string{}
	for _, st := range sts {
		if st.Name == "lb" {
			continue
		}
		v := st.Version
		if !st.Running {
			v += " (not running)"
		}
		out[st.Name] = v
	}
	return out
}

func expectAllOn(t *testing.T, cl *demo.Cluster, v string) {
	t.Helper()
	for n, got := range versions(t, cl) {
		if got != v {
			t.Errorf("%s runs %s, want %s", n, got, v)
		}
	}
}

// ferry runs the ferry CLI against the cluster and returns its output
// and exit code.
func ferry(t *testing.T, cl *demo.Cluster, args ...string) (string, int) {
	t.Helper()
	return ferryOf(t, bin.ferry, cl, args...)
}

// ferryOf is ferry with another ferry binary.
func ferryOf(t *testing.T, ferryBin string, cl *demo.Cluster, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	full := append([]string{"-f", cl.File, "--data-dir", cl.DataDir}, args...)
	cmd := exec.CommandContext(ctx, ferryBin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	default:
		t.Fatalf("ferry %v: %v", args, err)
		return "", -1
	}
}

// status reads the current upgrade record through 'ferry upgrade status -o json'.
func status(t *testing.T, cl *demo.Cluster) (upgrade.Upgrade, bool) {
	t.Helper()
	out, code := ferry(t, cl, "upgrade", "status", "-o", "json")
	if code != 0 {
		return upgrade.Upgrade{}, false
	}
	var u upgrade.Upgrade
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	return u, true
}

// waitFor polls cond every 100ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// observer polls every member's /version, independently of ferry, and
// keeps the most members of each component it saw not answering at
// once: what the operator's monitoring would see.
type observer struct {
	mu       sync.Mutex
	maxDown  map[string]int
	worst    map[string]string
	rounds   int
	stop     context.CancelFunc
	finished chan struct{}
}

func watch(cl *demo.Cluster) *observer {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{maxDown: map[string]int{}, worst: map[string]string{}, stop: cancel, finished: make(chan struct{})}
	client := &http.Client{Timeout: time.Second}
	comp := map[string]string{}
	for _, m := range cl.Members {
		if m.Name != "lb" {
			comp[m.Name] = m.Component
		}
	}
	go func() {
		defer close(o.finished)
		for ctx.Err() == nil {
			var mu sync.Mutex
			down := map[string][]string{}
			var wg sync.WaitGroup
			for name, addr := range cl.Addresses {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := client.Get("http://" + addr + "/version")
					if err == nil {
						resp.Body.Close()
						return
					}
					mu.Lock()
					down[comp[name]] = append(down[comp[name]], name)
					mu.Unlock()
				}()
			}
			wg.Wait()
			o.mu.Lock()
			o.rounds++
			for c, names := range down {
				if len(names) > o.maxDown[c] {
					o.maxDown[c] = len(names)
					o.worst[c] = fmt.Sprint(names)
				}
			}
			o.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	return o
}

// check stops the observer and fails the test if a component ever had
// more members down at once than its policy allows (kv: 1 of 3, which
// also keeps a quorum of 2 running; api: 2).
func (o *observer) check(t *testing.T) {
	t.Helper()
	o.stop()
	<-o.finished
	o.mu.Lock()
	defer o.mu.Unlock()
	t.Logf("observer: %d rounds; most down at once: kv %d, api %d", o.rounds, o.maxDown["kv"], o.maxDown["api"])
	if o.rounds < 50 {
		t.Errorf("observer polled only %d rounds", o.rounds)
	}
	for c, limit := range map[string]int{"kv": 1, "api": 2} {
		if o.maxDown[c] > limit {
			t.Errorf("observer saw %d %s members down at once (%s), policy allows %d", o.maxDown[c], c, o.worst[c], limit)
		}
	}
}

// expectOn checks that each member runs what except says, or v.
func expectOn(t *testing.T, cl *demo.Cluster, except map[string]string, v string) {
	t.Helper()
	for n, got := range versions(t, cl) {
		want, ok := except[n]
		if !ok {
			want = v
		}
		if got != want {
			t.Errorf("%s runs %s, want %s", n, got, want)
		}
	}
}

// engineArtifact is the artifact ferry would start comp on at v.
func engineArtifact(cl *demo.Cluster, comp, v string) (driver.Artifact, error) {
	e, _, err := cl.Engine(nil, nil)
	if err != nil {
		return driver.Artifact{}, err
	}
	return e.Artifact(comp, v)
}

// background is a ferry process running in the background.
type background struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startFerry starts ferry with args in the background; the test's end
// kills it if it still runs.
func startFerry(t *testing.T, cl *demo.Cluster, args ...string) *background {
	t.Helper()
	return startFerryIn(t, cl, cl.DataDir, args...)
}

// startFerryIn is startFerry with a data directory of its own (a
// server's beside others on one shared store).
func startFerryIn(t *testing.T, cl *demo.Cluster, dataDir string, args ...string) *background {
	t.Helper()
	cmd := exec.Command(bin.ferry, append([]string{"-f", cl.File, "--data-dir", dataDir}, args...)...)
	bg := &background{cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = bg.out, bg.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { bg.exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return bg
}

// wait waits (up to 3 minutes) for the process to exit.
func (bg *background) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case err := <-bg.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), bg.out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, bg.out.String()
	case <-time.After(3 * time.Minute):
		_ = bg.cmd.Process.Kill()
		t.Fatalf("ferry %v did not exit within 3 minutes\n%s", bg.cmd.Args, bg.out.String())
		return -1, ""
	}
}

// runAndKillWhen runs ferry with args and kills it with SIGKILL as soon
// as cond holds (polled every 50ms, for at most a minute).
func runAndKillWhen(t *testing.T, cl *demo.Cluster, args []string, cond func() bool) {
	t.Helper()
	bg := startFerry(t, cl, args...)
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case err := <-bg.exited:
			t.Fatalf("ferry %v exited (%v) before the kill point\n%s", args, err, bg.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kill point of ferry %v not reached within a minute\n%s", args, bg.out.String())
		}
	}
	_ = bg.cmd.Process.Signal(syscall.SIGKILL)
	<-bg.exited
}

// alive fails the test, with the process's output, if it has exited.
func (bg *background) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-bg.exited:
		t.Fatalf("ferry %v exited early (%v):\n%s", bg.cmd.Args[1:], err, bg.out.String())
	default:
	}
}

// failedRequests counts the client requests that failed.
func failedRequests(rec *traffic.Recorder) int {
	n := 0
	for _, s := range rec.Samples() {
		if !s.OK {
			n++
		}
	}
	return n
}

// startServer starts 'ferry server' on a free loopback port over the
// cluster and returns its address once it listens.
func startServer(t *testing.T, cl *demo.Cluster) string {
	t.Helper()
	srv := startFerry(t, cl, "server", "--listen", "127.0.0.1:0")
	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	var addr string
	waitFor(t, 30*time.Second, "the server listening", func() bool {
		srv.alive(t)
		if m := re.FindStringSubmatch(srv.out.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	return addr
}

// eventsOf reads every event of upgrade id from the cluster's store.
func eventsOf(t *testing.T, cl *demo.Cluster, id string) []store.Event {
	t.Helper()
	st, err := store.OpenReadOnly(cl.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// startBehindFerry restarts member m on release v of component comp
// through the driver, as a script would behind ferry's back.
func startBehindFerry(t *testing.T, cl *demo.Cluster, m driver.Member, comp, v string) {
	t.Helper()
	art, err := engineArtifact(cl, comp, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Driver.Stop(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if err := cl.Driver.Start(t.Context(), m, art); err != nil {
		t.Fatal(err)
	}
}
