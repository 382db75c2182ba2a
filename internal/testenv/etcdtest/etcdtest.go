// Package etcdtest starts real etcd members on loopback for tests: the
// etcd binary the Kubernetes test environment builds from etcd's Go
// module (scripts/kube-testenv.sh build), never a fake. A test that
// needs etcd is skipped, saying why, when that binary is not built;
// with FERRY_KUBE=1 (scripts/test.sh built it) it fails instead, so
// that CI never passes with the etcd tests skipped.
package etcdtest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// BinEnv names an etcd binary to use instead of the test environment's.
const BinEnv = "FERRY_ETCD_BIN"

// Cluster is n etcd members started for one test, stopped when it ends.
type Cluster struct {
	// Endpoints are the members' client URLs.
	Endpoints []string
	Dir       string

	mu      sync.Mutex
	members []*member
}

type member struct {
	name, client, peer string
	dir                string
	cmd                *exec.Cmd
	done               chan struct{}
}

// Bin finds the etcd binary: $FERRY_ETCD_BIN, else the Kubernetes test
// environment's cache (scripts/kube-testenv.sh env). The error says why
// there is none and how to build it.
func Bin() (string, error) {
	if b := os.Getenv(BinEnv); b != "" {
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinEnv, b, err)
		}
		return b, nil
	}
	script, err := kubetest.FindScript()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("bash", script, "env").Output()
	if err != nil {
		return "", fmt.Errorf("%s env: %w", script, err)
	}
	bin := filepath.Join(strings.TrimSpace(string(out)), "etcd")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("etcd is not built at %s: run `scripts/kube-testenv.sh build` (scripts/test.sh does), or set %s", bin, BinEnv)
	}
	return bin, nil
}

// Start starts n members of one etcd cluster on loopback ports drawn
// from seed (internal/loopback), and returns once each answers
// /health. It skips the test when there is no etcd binary (fails it
// with FERRY_KUBE=1).
func Start(t testing.TB, n int, seed uint64) *Cluster {
	t.Helper()
	bin, err := Bin()
	if err != nil && os.Getenv(kubetest.EnvVar) == "1" {
		t.Fatalf("no etcd to test against, with %s=1: %v", kubetest.EnvVar, err)
	} else if err != nil {
		t.Skipf("no etcd to test against: %v", err)
	}
	for attempt := range 3 {
		c, err := start(t, bin, n, seed+uint64(attempt)*7919)
		if err == nil {
			return c
		}
		if !errors.Is(err, errClash) {
			t.Fatal(err)
		}
		t.Logf("etcdtest: %v; drawing other ports", err)
	}
	t.Fatal("etcdtest: the ports drawn were taken three times")
	return nil
}

var errClash = errors.New("a port was taken")

func start(t testing.TB, bin string, n int, seed uint64) (*Cluster, error) {
	ports, err := loopback.Ports(seed, 2*n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: t.TempDir()}
	var initial []string
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i), client: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peer: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]), dir: filepath.Join(c.Dir, fmt.Sprintf("m%d", i))}
		c.members = append(c.members, m)
		c.Endpoints = append(c.Endpoints, m.client)
		initial = append(initial, m.name+"="+m.peer)
	}
	t.Cleanup(c.stop)
	for _, m := range c.members {
		if err := run(bin, m, strings.Join(initial, ",")); err != nil {
			c.stop()
			return nil, err
		}
	}
	for _, m := range c.members {
		if err := waitHealthy(m, 60*time.Second); err != nil {
			c.stop()
			return nil, err
		}
	}
	t.Logf("etcdtest: %d etcd member(s) at %s (port seed %d)", n, strings.Join(c.Endpoints, ","), seed)
	return c, nil
}

// run starts member m of a new cluster of the initial members.
func run(bin string, m *member, initial string) error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(m.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	m.cmd = exec.Command(bin, "--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", "ferry-etcdtest",
		// A shared machine: no fsync (the tests kill ferry, not etcd), and
		// elections that survive a busy second.
		"--unsafe-no-fsync", "--heartbeat-interval", "200", "--election-timeout", "2000",
		"--log-level", "warn")
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("etcdtest: start %s: %w", bin, err)
	}
	m.done = make(chan struct{})
	go func() {
		_ = m.cmd.Wait()
		logf.Close()
		close(m.done)
	}()
	return nil
}

// waitHealthy waits for m's /health to say true, within limit.
func waitHealthy(m *member, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-m.done:
			b, _ := os.ReadFile(m.dir + ".log")
			if strings.Contains(string(b), "address already in use") {
				return fmt.Errorf("%w: etcd %s: %s", errClash, m.name, lastLines(string(b), 3))
			}
			return fmt.Errorf("etcdtest: etcd %s exited: %s", m.name, lastLines(string(b), 10))
		default:
		}
		resp, err := client.Get(m.client + "/health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"health":"true"`) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(m.dir + ".log")
	return fmt.Errorf("etcdtest: etcd %s at %s not healthy after %s: %s", m.name, m.client, limit, lastLines(string(b), 10))
}

func (c *Cluster) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.cmd != nil && m.cmd.Process != nil {
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			<-m.done
			m.cmd = nil
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
