package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
)

// proc is one member running as a child process. Its output goes to a
// log file that is printed if the test fails.
type proc struct {
	name string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

type cluster struct {
	t     *testing.T
	bin   string
	dir   string
	procs map[string]*proc
}

func (c *cluster) add(name string, args ...string) *proc {
	p := &proc{name: name, args: args, log: filepath.Join(c.dir, name+".log")}
	c.procs[name] = p
	return p
}

func (c *cluster) start(p *proc) {
	c.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(c.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
}

// stop sends SIGTERM and requires a clean exit within 15s.
func (c *cluster) stop(p *proc) {
	c.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatalf("signal %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		c.t.Fatalf("%s did not exit within 15s of SIGTERM", p.name)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		c.t.Fatalf("%s exited %d after SIGTERM", p.name, code)
	}
}

func (c *cluster) killAll() {
	for _, p := range c.procs {
		if p.cmd == nil {
			continue
		}
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (c *cluster) dumpLogs() {
	for _, p := range c.procs {
		b, _ := os.ReadFile(p.log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		c.t.Logf("--- %s (last %d lines)\n%s", p.name, len(lines), strings.Join(lines, "\n"))
	}
}

// build builds the sample binary with a version and fault baked in, as
// a release of it would be.
func build(t *testing.T, out, version, fault string) {
	t.Helper()
	ldflags := "-X main.version=" + version
	if fault != "" {
		ldflags += " -X main.fault=" + fault
	}
	cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", out,
		"github.com/ferry-upgrade/ferry/examples/sample/cmd/sample")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", out, err, b)
	}
}

func get(url string) (int, string) { return sampletest.Do(http.MethodGet, url, nil) }

func waitOK(t *testing.T, what, url string) {
	t.Helper()
	sampletest.WaitFor(t, 15*time.Second, what, func() bool {
		code, _ := get(url)
		return code == http.StatusOK
	})
}

type backendStatus struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Healthy bool   `json:"healthy"`
}

func lbBackend(t *testing.T, admin, name string) backendStatus {
	t.Helper()
	code, body := get(admin + "/admin/backends/" + name)
	var st backendStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("lb backend %s: %d %s", name, code, body)
	}
	return st
}

// TestRollingRestartLosesNoRequest runs the whole cluster as processes
// and writes keys through the load balancer, without a pause, while an
// api member is drained, stopped and started again, and while the kv
// leader steps down, stops and starts again; every write must succeed
// and be readable afterwards. The writers go on until the restarts are
// over and some writes followed them: a fixed number of writes ran out
// before the restarts on a loaded machine, where a restart is slow.
func TestRollingRestartLosesNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sample binary and runs six processes")
	}
	dir := t.TempDir()
	c := &cluster{t: t, bin: filepath.Join(dir, "sample"), dir: dir, procs: map[string]*proc{}}
	t.Cleanup(func() {
		c.killAll()
		if t.Failed() {
			c.dumpLogs()
		}
	})

	began := time.Now()
	build(t, c.bin, "2.0.0", "")
	t.Logf("built in %s", time.Since(began).Round(time.Millisecond))

	// Addresses for three kv members (HTTP and raft), two api members
	// and the balancer's two listeners.
	var kvHTTP, kvRaft, peers []string
	for i := 1; i <= 3; i++ {
		h, r := sampletest.FreeAddr(t), sampletest.FreeAddr(t)
		kvHTTP, kvRaft = append(kvHTTP, h), append(kvRaft, r)
		peers = append(peers, fmt.Sprintf("kv-%d=%s=%s", i, r, h))
	}
	apiHTTP := []string{sampletest.FreeAddr(t), sampletest.FreeAddr(t)}
	lbHTTP, lbAdmin := sampletest.FreeAddr(t), sampletest.FreeAddr(t)
	lbURL, adminURL := "http://"+lbHTTP, "http://"+lbAdmin

	for i := range 3 {
		c.start(c.add(fmt.Sprintf("kv-%d", i+1), "kv", "--id", fmt.Sprintf("kv-%d", i+1),
			"--http", kvHTTP[i], "--raft", kvRaft[i], "--peers", strings.Join(peers, ","),
			"--data", filepath.Join(dir, fmt.Sprintf("data-kv-%d", i+1))))
	}
	for i := range 2 {
		c.start(c.add(fmt.Sprintf("api-%d", i+1), "api", "--name", fmt.Sprintf("api-%d", i+1),
			"--http", apiHTTP[i], "--kv", strings.Join(kvHTTP, ",")))
	}
	c.start(c.add("lb", "lb", "--http", lbHTTP, "--admin", lbAdmin,
		"--backend", "api-1="+apiHTTP[0], "--backend", "api-2="+apiHTTP[1]))

	for i, a := range kvHTTP {
		waitOK(t, fmt.Sprintf("kv-%d ready", i+1), "http://"+a+"/ready")
	}
	for i, a := range apiHTTP {
		waitOK(t, fmt.Sprintf("api-%d ready", i+1), "http://"+a+"/ready")
	}
	sampletest.WaitFor(t, 10*time.Second, "both backends healthy in the lb", func() bool {
		return lbBackend(t, adminURL, "api-1").Healthy && lbBackend(t, adminURL, "api-2").Healthy
	})
	for _, u := range []string{"http://" + kvHTTP[0], "http://" + apiHTTP[0], adminURL} {
		if code, body := get(u + "/version"); code != http.StatusOK || !strings.Contains(body, `"version":"2.0.0"`) {
			t.Fatalf("%s/version: %d %s", u, code, body)
		}
	}
	t.Logf("cluster up after %s", time.Since(began).Round(time.Millisecond))

	// Two writers write fresh keys until told to stop, so that each
	// phase below sees writes however long it takes.
	var (
		next, acked atomic.Int64
		mu          sync.Mutex
		failures    []string
		slowest     time.Duration
		slowestKey  string
		values      = map[string]string{}
		stop        = make(chan struct{})
		writers     sync.WaitGroup
	)
	for range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1) - 1
				key, val := fmt.Sprintf("key-%05d", i), fmt.Sprintf("value-%05d", i)
				t0 := time.Now()
				code, body := sampletest.Do(http.MethodPut, lbURL+"/v1/kv/"+key, []byte(val))
				took := time.Since(t0)
				mu.Lock()
				if took > slowest {
					slowest, slowestKey = took, key
				}
				if code == http.StatusNoContent {
					values[key] = val
					acked.Add(1)
				} else {
					failures = append(failures, fmt.Sprintf("PUT %s: %d %s", key, code, strings.TrimSpace(body)))
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // pacing, not synchronisation
			}
		}()
	}
	progress := func(what string, n int64) {
		t.Helper()
		from := acked.Load()
		sampletest.WaitFor(t, 15*time.Second, fmt.Sprintf("%d writes %s", n, what), func() bool {
			return acked.Load() >= from+n
		})
	}
	admin := func(path string) {
		t.Helper()
		if code, body := sampletest.Do(http.MethodPost, adminURL+path, nil); code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
	}
	// The writers stop on every path out.
	var stopOnce sync.Once
	stopWriters := func() { stopOnce.Do(func() { close(stop) }); writers.Wait() }
	defer stopWriters()

	progress("before the restarts", 20)

	// api-1, as an upgrade of a stateless member would do it.
	phase := time.Now()
	admin("/admin/backends/api-1/drain?timeout=10s")
	c.stop(c.procs["api-1"])
	progress("with api-1 down", 10)
	c.start(c.procs["api-1"])
	waitOK(t, "api-1 ready again", "http://"+apiHTTP[0]+"/ready")
	admin("/admin/backends/api-1/enable")
	sampletest.WaitFor(t, 5*time.Second, "api-1 healthy in the lb", func() bool {
		return lbBackend(t, adminURL, "api-1").Healthy
	})
	t.Logf("api-1 restarted in %s", time.Since(phase).Round(time.Millisecond))
	progress("after api-1 is back", 10)

	// The kv leader, as an upgrade of a quorum member would do it.
	phase = time.Now()
	code, body := get("http://" + kvHTTP[0] + "/cluster")
	var cl struct {
		Leader     string `json:"leader"`
		LeaderHTTP string `json:"leader_http"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &cl) != nil || cl.Leader == "" {
		t.Fatalf("/cluster: %d %s", code, body)
	}
	code, body = sampletest.Do(http.MethodPost, "http://"+cl.LeaderHTTP+"/admin/step-down", nil)
	if code != http.StatusOK || strings.Contains(body, `"leader":"`+cl.Leader+`"`) {
		t.Fatalf("step-down on %s: %d %s", cl.Leader, code, body)
	}
	old := c.procs[cl.Leader]
	c.stop(old)
	progress("with the old kv leader down", 10)
	c.start(old)
	waitOK(t, cl.Leader+" ready again", "http://"+cl.LeaderHTTP+"/ready")
	waitOK(t, "quorum seen by "+cl.Leader, "http://"+cl.LeaderHTTP+"/cluster")
	t.Logf("kv leader %s restarted in %s", cl.Leader, time.Since(phase).Round(time.Millisecond))
	progress("after the kv member is back", 10)
	stopWriters()

	t.Logf("%d writes done after %s; slowest %s took %s", acked.Load(), time.Since(began).Round(time.Millisecond),
		slowestKey, slowest.Round(time.Millisecond))
	for _, f := range failures {
		t.Error(f)
	}
	if n, total := acked.Load(), next.Load(); n != total {
		t.Fatalf("%d of %d writes acknowledged", n, total)
	}
	// Every acknowledged write is there, read through the whole stack.
	for key, want := range values {
		code, got := get(lbURL + "/v1/kv/" + key)
		if code != http.StatusOK || got != want {
			t.Errorf("GET %s: %d %q, want %q", key, code, got, want)
		}
	}
	// Every member stops cleanly on SIGTERM.
	phase = time.Now()
	for _, name := range []string{"lb", "api-1", "api-2", "kv-1", "kv-2", "kv-3"} {
		c.stop(c.procs[name])
	}
	t.Logf("stopped everything in %s", time.Since(phase).Round(time.Millisecond))
	t.Logf("done in %s", time.Since(began).Round(time.Millisecond))
}
