package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/api"
	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
)

func startAPI(t *testing.T, cfg api.Config) (*api.Server, string) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "api-1"
	}
	cfg.Version = "test"
	cfg.Logger = sampletest.Logger(t)
	cfg.Listener = sampletest.Listen(t)
	s, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s, "http://" + s.Addr()
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	sampletest.WaitFor(t, 10*time.Second, base+" ready", func() bool {
		code, _ := sampletest.Do(http.MethodGet, base+"/ready", nil)
		return code == http.StatusOK
	})
}

func put(t *testing.T, base, key, val string) {
	t.Helper()
	if code, body := sampletest.Do(http.MethodPut, base+"/v1/kv/"+key, []byte(val)); code != http.StatusNoContent {
		t.Errorf("PUT %s: %d %s", key, code, body)
	}
}

func get(t *testing.T, base, key string, wantCode int, want string) {
	t.Helper()
	code, body := sampletest.Do(http.MethodGet, base+"/v1/kv/"+key, nil)
	if code != wantCode || (wantCode == http.StatusOK && body != want) {
		t.Errorf("GET %s: %d %q, want %d %q", key, code, body, wantCode, want)
	}
}

func TestWritesAndReadsReachTheLeader(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	_, base := startAPI(t, api.Config{KVAddrs: c.HTTPAddrs()})
	waitReady(t, base)
	put(t, base, "greeting", "hello")
	get(t, base, "greeting", http.StatusOK, "hello")
	get(t, base, "absent", http.StatusNotFound, "")
	get(t, base, "greeting?stale=1", http.StatusOK, "hello")

	code, body := sampletest.Do(http.MethodGet, base+"/version", nil)
	var v map[string]string
	if err := json.Unmarshal([]byte(body), &v); err != nil || code != http.StatusOK ||
		v["name"] != "api-1" || v["component"] != "api" || v["version"] != "test" {
		t.Fatalf("/version: %d %s", code, body)
	}
}

func TestWritesSurviveLeaderChanges(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	_, base := startAPI(t, api.Config{KVAddrs: c.HTTPAddrs()})
	waitReady(t, base)
	put(t, base, "k", "before")

	// The api's cached leader is now wrong: it must follow the 421.
	old := c.WaitLeader()
	if code, body := sampletest.Do(http.MethodPost, c.URL(old)+"/admin/step-down", nil); code != http.StatusOK {
		t.Fatalf("step-down: %d %s", code, body)
	}
	put(t, base, "k", "after-step-down")
	get(t, base, "k", http.StatusOK, "after-step-down")

	// Writes in flight while leadership moves twice and the leader goes
	// away entirely all succeed.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	acked := map[string]string{}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("v%d", i)
				code, body := sampletest.Do(http.MethodPut, base+"/v1/kv/"+key, []byte(val))
				if code != http.StatusNoContent {
					t.Errorf("PUT %s during leader change: %d %s", key, code, body)
					return
				}
				mu.Lock()
				acked[key] = val
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	sampletest.WaitFor(t, 5*time.Second, "some writes", func() bool { return count() >= 10 })
	l := c.WaitLeader()
	if code, body := sampletest.Do(http.MethodPost, c.URL(l)+"/admin/step-down", nil); code != http.StatusOK {
		t.Fatalf("step-down: %d %s", code, body)
	}
	n := count()
	sampletest.WaitFor(t, 5*time.Second, "writes after step-down", func() bool { return count() >= n+10 })
	l = c.WaitLeader()
	c.Stop(l) // hands leadership over, then stops answering at all
	n = count()
	sampletest.WaitFor(t, 5*time.Second, "writes with the old leader gone", func() bool { return count() >= n+10 })
	close(stop)
	wg.Wait()
	for k, v := range acked {
		get(t, base, k, http.StatusOK, v)
	}
	t.Logf("%d writes acknowledged across two leader changes", len(acked))
}

func TestReadyNeedsAKVLeader(t *testing.T) {
	dead := sampletest.FreeAddr(t)
	s, base := startAPI(t, api.Config{KVAddrs: []string{dead}, RetryBudget: 300 * time.Millisecond})
	code, body := sampletest.Do(http.MethodGet, base+"/ready", nil)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/ready with no kv: %d %s", code, body)
	}
	// A request gives up after its retry budget with a 503.
	start := time.Now()
	if code, body := sampletest.Do(http.MethodPut, base+"/v1/kv/k", []byte("v")); code != http.StatusServiceUnavailable {
		t.Fatalf("PUT with no kv: %d %s", code, body)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("PUT with no kv took %s, budget was 300ms", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, reason := s.Ready(); ok || reason != "shutting down" {
		t.Fatalf("Ready after shutdown: %v %q", ok, reason)
	}
}

func TestFaultOptions(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	_, never := startAPI(t, api.Config{Name: "never", KVAddrs: c.HTTPAddrs(), NeverReady: true})
	_, slow := startAPI(t, api.Config{Name: "slow", KVAddrs: c.HTTPAddrs(), ExtraLatency: 50 * time.Millisecond})
	waitReady(t, slow)
	// never-ready still serves, it just never says it is ready.
	put(t, never, "k", "v")
	if code, body := sampletest.Do(http.MethodGet, never+"/ready", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("never-ready /ready: %d %s", code, body)
	}
	start := time.Now()
	get(t, slow, "k", http.StatusOK, "v")
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("slow GET took %s, want at least 50ms", took)
	}
}

// restartAllAt stops every kv member, starts them all again as builds
// of version, and waits until they have a leader and are ready.
func restartAllAt(c *sampletest.KVCluster, version string) {
	for i := range c.Peers {
		c.Stop(i)
	}
	for i := range c.Peers {
		c.RestartAt(i, version)
	}
	c.WaitLeader()
	c.WaitReady()
}

// TestNeedsNewKV: an api of the needs-new-kv fault fails every request
// while the kv leader runs an older major release, stays ready all the
// while (only a check of the mixed state finds it), and serves once
// every kv member runs the new one.
func TestNeedsNewKV(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	restartAllAt(c, "1.0.0")
	_, base := startAPI(t, api.Config{KVAddrs: c.HTTPAddrs(), NeedsKVMajor: 2})
	waitReady(t, base)
	code, body := sampletest.Do(http.MethodPut, base+"/v1/kv/k", []byte("v"))
	if code != http.StatusInternalServerError || !strings.Contains(body, `needs kv 2.x, the kv leader runs \"1.0.0\"`) {
		t.Fatalf("PUT against kv 1.0.0: %d %s, want 500 naming both versions", code, body)
	}
	if code, body := sampletest.Do(http.MethodGet, base+"/ready", nil); code != http.StatusOK {
		t.Fatalf("/ready against kv 1.0.0: %d %s, want 200", code, body)
	}
	restartAllAt(c, "2.0.0")
	sampletest.WaitFor(t, 10*time.Second, "a write through the api once kv runs 2.0.0", func() bool {
		code, _ := sampletest.Do(http.MethodPut, base+"/v1/kv/k", []byte("v"))
		return code == http.StatusNoContent
	})
	get(t, base, "k", http.StatusOK, "v")
	if got := api.MajorOf("2.0.0-mixbad"); got != 2 {
		t.Errorf("MajorOf(2.0.0-mixbad) = %d", got)
	}
}
