package sampletest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/kv"
)

// WaitFor polls cond every 20ms until it holds, failing the test if it
// does not within timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Listen opens a listener on a free loopback port.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return ln
}

// FreeAddr returns a loopback address that was free a moment ago, for
// a child process to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln := Listen(t)
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close probe listener: %v", err)
	}
	return addr
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a logger that collects everything at info and above
// and prints it only if the test fails (or always, with SAMPLE_TEST_LOG
// set). It never calls t.Log from a background goroutine, which would
// panic once the test has returned.
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("SAMPLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	buf := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, nil))
}

// Client is an HTTP client with a timeout, for tests.
var Client = &http.Client{Timeout: 10 * time.Second}

// Do sends one request and returns the status and body; a transport
// error is status 0 and the error text as body.
func Do(method, url string, body []byte) (int, string) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := Client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// KVCluster is an in-process kv cluster on loopback ports it owns.
type KVCluster struct {
	t       testing.TB
	log     *slog.Logger
	Peers   []kv.Peer
	dirs    []string
	servers []*kv.Server // nil while a member is stopped

	// SnapshotThreshold is passed to members started after it is set.
	SnapshotThreshold uint64
}

// StartKV starts an n-member cluster and waits until it has a leader
// and every member is ready. Members are stopped when the test ends.
func StartKV(t testing.TB, n int) *KVCluster {
	t.Helper()
	c := &KVCluster{t: t, log: Logger(t), servers: make([]*kv.Server, n)}
	raftLns := make([]net.Listener, n)
	httpLns := make([]net.Listener, n)
	base := t.TempDir()
	for i := range n {
		raftLns[i], httpLns[i] = Listen(t), Listen(t)
		c.Peers = append(c.Peers, kv.Peer{
			ID:       fmt.Sprintf("kv-%d", i+1),
			RaftAddr: raftLns[i].Addr().String(),
			HTTPAddr: httpLns[i].Addr().String(),
		})
		c.dirs = append(c.dirs, filepath.Join(base, fmt.Sprintf("kv-%d", i+1)))
	}
	t.Cleanup(func() {
		for i := range c.servers {
			c.Stop(i)
		}
	})
	for i := range n {
		c.start(i, raftLns[i], httpLns[i], "test")
	}
	c.WaitLeader()
	c.WaitReady()
	return c
}

func (c *KVCluster) start(i int, raftLn, httpLn net.Listener, version string) {
	c.t.Helper()
	srv, err := kv.New(kv.Config{
		ID: c.Peers[i].ID, Peers: c.Peers, DataDir: c.dirs[i], Version: version, Logger: c.log,
		RaftListener: raftLn, HTTPListener: httpLn, SnapshotThreshold: c.SnapshotThreshold,
	})
	if err != nil {
		c.t.Fatalf("new %s: %v", c.Peers[i].ID, err)
	}
	if err := srv.Start(); err != nil {
		c.t.Fatalf("start %s: %v", c.Peers[i].ID, err)
	}
	c.servers[i] = srv
}

// Stop shuts member i down gracefully; stopping a stopped member is a
// no-op.
func (c *KVCluster) Stop(i int) {
	if c.servers[i] == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.servers[i].Shutdown(ctx); err != nil {
		c.t.Errorf("shutdown %s: %v", c.Peers[i].ID, err)
	}
	c.servers[i] = nil
}

// Restart starts a stopped member again on the same addresses and data
// directory.
func (c *KVCluster) Restart(i int) {
	c.t.Helper()
	c.RestartAt(i, "test")
}

// RestartAt is Restart as a build of release version (1.x knows format
// 1 only; "test" is the newest code).
func (c *KVCluster) RestartAt(i int, version string) {
	c.t.Helper()
	if c.servers[i] != nil {
		c.t.Fatalf("%s is running", c.Peers[i].ID)
	}
	rl, err := net.Listen("tcp", c.Peers[i].RaftAddr)
	if err != nil {
		c.t.Fatalf("relisten raft %s: %v", c.Peers[i].ID, err)
	}
	hl, err := net.Listen("tcp", c.Peers[i].HTTPAddr)
	if err != nil {
		_ = rl.Close()
		c.t.Fatalf("relisten http %s: %v", c.Peers[i].ID, err)
	}
	c.start(i, rl, hl, version)
}

// Server returns member i, nil while it is stopped.
func (c *KVCluster) Server(i int) *kv.Server { return c.servers[i] }

// URL is member i's base URL.
func (c *KVCluster) URL(i int) string { return "http://" + c.Peers[i].HTTPAddr }

// HTTPAddrs lists every member's HTTP address.
func (c *KVCluster) HTTPAddrs() []string {
	var out []string
	for _, p := range c.Peers {
		out = append(out, p.HTTPAddr)
	}
	return out
}

// Index returns the position of the member with the given ID, or -1.
func (c *KVCluster) Index(id string) int {
	for i, p := range c.Peers {
		if p.ID == id {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member leads with a confirmed
// majority and returns its index.
func (c *KVCluster) WaitLeader() int {
	c.t.Helper()
	leader := -1
	WaitFor(c.t, 10*time.Second, "a kv leader with quorum", func() bool {
		for i, s := range c.servers {
			if s == nil {
				continue
			}
			if st := s.Cluster(context.Background()); st.Quorum && st.Leader == c.Peers[i].ID {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// Put writes key=val through whichever member leads, retrying while
// leadership moves (421, 503, refused connections) for up to 10s. It is
// for tests whose subject is not leadership: on a loaded machine a
// 250ms leader lease can lapse and move leadership at any time.
func (c *KVCluster) Put(key, val string) {
	c.t.Helper()
	c.onLeader(http.MethodPut, "/kv/"+key, []byte(val), http.StatusNoContent, "")
}

// Get does a linearizable read through whichever member leads and
// requires the value, retrying like Put.
func (c *KVCluster) Get(key, want string) {
	c.t.Helper()
	c.onLeader(http.MethodGet, "/kv/"+key, nil, http.StatusOK, want)
}

func (c *KVCluster) onLeader(method, path string, body []byte, wantCode int, want string) {
	c.t.Helper()
	var code int
	var got string
	WaitFor(c.t, 10*time.Second, method+" "+path+" on the leader", func() bool {
		for i, s := range c.servers {
			if s == nil {
				continue
			}
			if code, got = Do(method, c.URL(i)+path, body); code == wantCode && got == want {
				return true
			}
			switch code {
			case 0, http.StatusMisdirectedRequest, http.StatusServiceUnavailable:
				continue // not the leader, or leadership moving: try the next
			}
			c.t.Fatalf("%s %s on %s: %d %q, want %d %q", method, path, c.Peers[i].ID, code, got, wantCode, want)
		}
		return false
	})
}

// WaitReady waits until every running member answers /ready with 200.
func (c *KVCluster) WaitReady() {
	c.t.Helper()
	for i, s := range c.servers {
		if s == nil {
			continue
		}
		WaitFor(c.t, 10*time.Second, c.Peers[i].ID+" ready", func() bool {
			code, _ := Do(http.MethodGet, c.URL(i)+"/ready", nil)
			return code == http.StatusOK
		})
	}
}
