package e2e_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
)

// exitCode waits for p to exit on its own and returns its exit code.
func (c *cluster) exitCode(p *proc, within time.Duration) int {
	c.t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		c.t.Fatalf("%s still running after %s", p.name, within)
		return -1
	}
}

// TestFaultBuilds checks that each fault build misbehaves the way ferry's
// rollback demo relies on: exit-at-start exits 1 at once, never-ready
// serves but never reports ready, crash-after reports ready and then
// exits 2 about four seconds later, and slow adds 200ms to api requests.
func TestFaultBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sample binary five times and runs it")
	}
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, procs: map[string]*proc{}}
	t.Cleanup(func() {
		c.killAll()
		if t.Failed() {
			c.dumpLogs()
		}
	})
	bins := map[string]string{}
	for _, f := range []string{"", "exit-at-start", "never-ready", "crash-after", "slow"} {
		name := "sample-" + f
		if f == "" {
			name = "sample-ok"
		}
		bins[f] = filepath.Join(dir, name)
		build(t, bins[f], "9.9.9", f)
	}
	// run starts one member on the given build.
	run := func(fault, name string, args ...string) *proc {
		c.bin = bins[fault]
		p := c.add(name, args...)
		c.start(p)
		return p
	}
	// kvArgs are the flags of a one-member kv cluster, which elects
	// itself at once.
	kvArgs := func(name string) (string, []string) {
		h, r := sampletest.FreeAddr(t), sampletest.FreeAddr(t)
		return "http://" + h, []string{"kv", "--id", name, "--http", h, "--raft", r,
			"--peers", fmt.Sprintf("%s=%s=%s", name, r, h), "--data", filepath.Join(dir, name)}
	}
	apiArgs := func(name, kvURL string) (string, []string) {
		h := sampletest.FreeAddr(t)
		return "http://" + h, []string{"api", "--name", name, "--http", h, "--kv", kvURL[len("http://"):]}
	}

	// exit-at-start: exits 1 right after parsing flags.
	_, args := kvArgs("kv-exit")
	if code := c.exitCode(run("exit-at-start", "kv-exit", args...), 10*time.Second); code != 1 {
		t.Errorf("kv exit-at-start exited %d, want 1", code)
	}
	_, args = apiArgs("api-exit", "http://127.0.0.1:1")
	if code := c.exitCode(run("exit-at-start", "api-exit", args...), 10*time.Second); code != 1 {
		t.Errorf("api exit-at-start exited %d, want 1", code)
	}

	// A healthy kv for the api members, and the crash-after members,
	// whose four seconds run while the rest is checked.
	kvURL, args := kvArgs("kv-ok")
	run("", "kv-ok", args...)
	waitOK(t, "healthy kv ready", kvURL+"/ready")
	crashKVURL, args := kvArgs("kv-crash")
	crashKV := run("crash-after", "kv-crash", args...)
	crashAPIURL, args := apiArgs("api-crash", kvURL)
	crashAPI := run("crash-after", "api-crash", args...)
	waitOK(t, "crash-after kv ready", crashKVURL+"/ready")
	waitOK(t, "crash-after api ready", crashAPIURL+"/ready")
	readyAt := time.Now()

	// never-ready: works, but /ready stays 503.
	nrKVURL, args := kvArgs("kv-never")
	run("never-ready", "kv-never", args...)
	waitOK(t, "never-ready kv leading itself", nrKVURL+"/cluster")
	if code, body := sampletest.Do(http.MethodPut, nrKVURL+"/kv/k", []byte("v")); code != http.StatusNoContent {
		t.Errorf("never-ready kv PUT: %d %s", code, body)
	}
	if code, body := get(nrKVURL + "/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("never-ready kv /ready: %d %s", code, body)
	}
	nrAPIURL, args := apiArgs("api-never", kvURL)
	run("never-ready", "api-never", args...)
	sampletest.WaitFor(t, 10*time.Second, "never-ready api serving", func() bool {
		code, _ := sampletest.Do(http.MethodPut, nrAPIURL+"/v1/kv/k", []byte("v"))
		return code == http.StatusNoContent
	})
	if code, body := get(nrAPIURL + "/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("never-ready api /ready: %d %s", code, body)
	}

	// slow: every /v1/kv request takes at least 200ms more.
	slowURL, args := apiArgs("api-slow", kvURL)
	run("slow", "api-slow", args...)
	waitOK(t, "slow api ready", slowURL+"/ready")
	for range 3 {
		start := time.Now()
		if code, body := get(slowURL + "/v1/kv/k"); code != http.StatusOK || body != "v" {
			t.Errorf("slow api GET: %d %s", code, body)
		}
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("slow api GET took %s, want at least 200ms", took)
		}
	}

	// crash-after: exit 2, about four seconds after becoming ready.
	for _, p := range []*proc{crashKV, crashAPI} {
		if code := c.exitCode(p, 15*time.Second); code != 2 {
			t.Errorf("%s exited %d, want 2", p.name, code)
		}
	}
	if since := time.Since(readyAt); since < 3*time.Second {
		t.Errorf("crash-after members exited %s after ready, want about 4s", since)
	}
	// The healthy build reports its version.
	if code, body := get(kvURL + "/version"); code != http.StatusOK || body != `{"component":"kv","name":"kv-ok","version":"9.9.9"}`+"\n" {
		t.Errorf("/version: %d %q", code, body)
	}
}
