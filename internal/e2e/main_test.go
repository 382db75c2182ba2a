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
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/demo"
	"github.com/ferry-upgrade/ferry/internal/traffic"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
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
	"2.0.0":           "",
	"2.0.0-bad.exit":  "exit-at-start",
	"2.0.0-bad.never": "never-ready",
	"2.0.0-bad.crash": "crash-after",
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
// releases (each upgradable from 1.0.x; 1.0.0 from 2.0.x, so that a
// test can go back and forth) and closes it at the end of the test.
func startCluster(t *testing.T, o demo.ClusterOptions, versions ...string) *demo.Cluster {
	t.Helper()
	o.Dir, o.Self, o.Start = t.TempDir(), bin.ferry, "1.0.0"
	o.Releases = []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"], UpgradeFrom: []string{"2.0.x"}}}
	for _, v := range versions {
		o.Releases = append(o.Releases, demo.Release{Version: v, Path: bin.sample[v], UpgradeFrom: []string{"1.0.x"}})
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
	ctx, cancel := context.WithCancel(context.Background())
	var rec *traffic.Recorder
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec = traffic.Run(ctx, traffic.Config{BaseURL: cl.LB, Concurrency: 4, Rate: 100, WriteShare: 0.5, Seed: seed})
	}()
	return func() *traffic.Recorder { cancel(); <-done; return rec }
}

// checkWrites fails the test unless every write the store acknowledged
// reads back with its value.
func checkWrites(t *testing.T, cl *demo.Cluster, rec *traffic.Recorder) {
	t.Helper()
	w := cl.Verify(rec.Acked())
	t.Logf("acknowledged writes: %d, read back %d, lost %d", w.Acknowledged, w.Verified, w.Lost)
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
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	full := append([]string{"-f", cl.File, "--data-dir", cl.DataDir}, args...)
	cmd := exec.CommandContext(ctx, bin.ferry, full...)
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
