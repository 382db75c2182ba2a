// Package sshtest gives tests real hosts reached over SSH: each a
// network namespace the test makes, with an address on a veth pair
// joined to a bridge in the root namespace (10.A.B.0/24, A and B drawn
// at random and checked unused), and its own sshd (its own host key,
// its own configuration, a key the test generated in its
// AuthorizedKeysFile) run as a child of the test. The hosts share the
// machine's file system; each has its own directory for ferry.
//
// Everything is removed when the test ends, however it ends (members
// left running in a namespace are killed with it), and a run killed
// before it could clean up is cleaned up by the next (its names carry
// the pid of the process that made them). Tests that cannot make
// namespaces (not root, no ip or sshd: scripts/deps.sh installs them)
// are skipped with the reason.
package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// prefix starts the name of every namespace this package makes:
// prefix-PID-SEQ-HOST.
const prefix = "ferryssh"

// Env is a set of hosts made for one test.
type Env struct {
	// Dir holds the keys, known_hosts, each sshd's configuration and
	// log, and each host's directory for ferry.
	Dir string
	// KnownHosts holds every host's key; Identity is the client's
	// private key (0600) every sshd accepts.
	KnownHosts string
	Identity   string
	// Net is the hosts' network (10.A.B.0/24); Gateway the root
	// namespace's address on it (10.A.B.1).
	Net, Gateway string
	Hosts        []*Host

	t      testing.TB
	bridge string
	seq    int
}

// Host is one host: a namespace with its sshd.
type Host struct {
	// Name is the host's name in a description (h1, h2...).
	Name string
	// NS is its network namespace; IP its address; SSH its sshd's
	// address (IP:22).
	NS, IP, SSH string
	// Dir is ferry's directory on the host (an absolute path: the
	// hosts share the file system).
	Dir string

	env     *Env
	veth    string
	hostKey string
	config  string
	log     string
	mu      sync.Mutex
	sshd    *exec.Cmd
	exited  chan struct{}
}

var seq atomic.Int64

// Skip skips the test, with the reason, when this machine cannot make
// namespace hosts.
func Skip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sshtest: network namespaces need root (ip netns add); these tests run as root in CI")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("sshtest: no ip command (iproute2; scripts/deps.sh installs it)")
	}
	if sshdPath() == "" {
		t.Skip("sshtest: no sshd (openssh-server; scripts/deps.sh installs it)")
	}
}

func sshdPath() string {
	for _, p := range []string{"/usr/sbin/sshd", "/sbin/sshd"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	p, _ := exec.LookPath("sshd")
	return p
}

// New makes n hosts (h1 ... hn), each with its sshd answering; the
// test's end removes them. It skips the test when namespaces cannot be
// made here.
func New(t testing.TB, n int) *Env {
	t.Helper()
	Skip(t)
	if n < 1 || n > 200 {
		t.Fatalf("sshtest: %d hosts", n)
	}
	sweep(t)
	e := &Env{t: t, Dir: t.TempDir(), seq: int(seq.Add(1)) % 256}
	pid := os.Getpid()
	e.bridge = fmt.Sprintf("fb-%x-%x", pid, e.seq)
	t.Cleanup(e.cleanup)
	if err := ip("link", "add", e.bridge, "type", "bridge"); err != nil {
		t.Skipf("sshtest: cannot make a bridge here (%v): the SSH tests need ip link and ip netns", err)
	}
	// The draw and the address taken together, under a lock shared by
	// every test process of this machine: two packages' tests running
	// at once never draw the same network.
	unlock := lockMachine(t)
	e.Net, e.Gateway = e.subnet()
	err := ip("addr", "add", e.Gateway+"/24", "dev", e.bridge)
	unlock()
	must(t, err)
	base := strings.TrimSuffix(e.Gateway, "1")
	must(t, ip("link", "set", e.bridge, "up"))

	// The client's key, accepted by every host.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	e.Identity = filepath.Join(e.Dir, "id_ed25519")
	writeKey(t, e.Identity, priv)
	pub, err := gossh.NewPublicKey(priv.Public())
	must(t, err)
	authorized := filepath.Join(e.Dir, "authorized_keys")
	must(t, os.WriteFile(authorized, gossh.MarshalAuthorizedKey(pub), 0o600))
	must(t, os.MkdirAll("/run/sshd", 0o755)) // sshd's privilege separation directory

	var known bytes.Buffer
	for i := 1; i <= n; i++ {
		h := &Host{Name: fmt.Sprintf("h%d", i), env: e, exited: make(chan struct{})}
		h.NS = fmt.Sprintf("%s-%d-%d-%s", prefix, pid, e.seq, h.Name)
		h.veth = fmt.Sprintf("fv-%x-%x-%d", pid, e.seq, i)
		h.IP = base + strconv.Itoa(10+i)
		h.SSH = net.JoinHostPort(h.IP, "22")
		hd := filepath.Join(e.Dir, "hosts", h.Name)
		h.Dir = filepath.Join(hd, "ferry")
		h.hostKey, h.config, h.log = filepath.Join(hd, "ssh_host_ed25519_key"), filepath.Join(hd, "sshd_config"), filepath.Join(hd, "sshd.log")
		must(t, os.MkdirAll(h.Dir, 0o755))
		e.Hosts = append(e.Hosts, h)
		if err := ip("netns", "add", h.NS); err != nil {
			t.Skipf("sshtest: cannot make a network namespace here (%v)", err)
		}
		must(t, ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS))
		must(t, ip("link", "set", h.veth, "master", e.bridge))
		must(t, ip("link", "set", h.veth, "up"))
		must(t, ip("-n", h.NS, "addr", "add", h.IP+"/24", "dev", "eth0"))
		must(t, ip("-n", h.NS, "link", "set", "eth0", "up"))
		must(t, ip("-n", h.NS, "link", "set", "lo", "up"))
		hk := h.newHostKey(t)
		known.WriteString(knownhosts.Line([]string{knownhosts.Normalize(h.SSH)}, hk) + "\n")
		cfg := fmt.Sprintf(`ListenAddress %s
Port 22
HostKey %s
PidFile none
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 10
MaxStartups 50
LogLevel ERROR
`, h.IP, h.hostKey, authorized)
		must(t, os.WriteFile(h.config, []byte(cfg), 0o600))
	}
	e.KnownHosts = filepath.Join(e.Dir, "known_hosts")
	must(t, os.WriteFile(e.KnownHosts, known.Bytes(), 0o644))
	for _, h := range e.Hosts {
		must(t, h.startSSHD())
	}
	for _, h := range e.Hosts {
		must(t, h.waitSSHD(15*time.Second))
	}
	t.Logf("sshtest: %d hosts on %s (%s...), bridge %s, directory %s", n, e.Net, e.Hosts[0].SSH, e.bridge, e.Dir)
	return e
}

// subnet draws a /24 in 10.200.0.0-10.249.255.0 that no address or
// route of this machine uses, and returns it and its .1.
func (e *Env) subnet() (string, string) {
	used, _ := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	seed := mrand.Uint64()
	r := mrand.New(mrand.NewPCG(seed, uint64(os.Getpid())))
	for range 1000 {
		a, b := 200+r.IntN(50), r.IntN(256)
		p := fmt.Sprintf("10.%d.%d.", a, b)
		if bytes.Contains(used, []byte(p)) || bytes.Contains(routes, []byte(p)) {
			continue
		}
		return p + "0/24", p + "1"
	}
	e.t.Fatal("sshtest: no free 10.x.y.0/24")
	return "", ""
}

// lockMachine takes a lock every test process of this machine shares
// (an flock on a file in the temporary directory) and returns its
// release.
func lockMachine(t testing.TB) func() {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "ferry-sshtest.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	must(t, err)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

func (h *Host) newHostKey(t testing.TB) gossh.PublicKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	writeKey(t, h.hostKey, priv)
	pub, err := gossh.NewPublicKey(priv.Public())
	must(t, err)
	return pub
}

func writeKey(t testing.TB, path string, priv ed25519.PrivateKey) {
	blk, err := gossh.MarshalPrivateKey(priv, "")
	must(t, err)
	must(t, os.WriteFile(path, pem.EncodeToMemory(blk), 0o600))
}

// startSSHD starts the host's sshd in its namespace, a child of the
// test (killed if the test process dies).
func (h *Host) startSSHD() error {
	logf, err := os.OpenFile(h.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// The namespace's own mount namespace (ip netns exec makes one)
	// hides this machine's shell start-up files from the host's
	// sessions: sshd runs each command through the login shell, bash
	// reads ~/.bashrc for it, and a machine's .bashrc may do anything
	// (this one's runs `pyenv rehash`, which waits a minute on a lock
	// that a killed session left behind: every test here then timed out).
	files := startupFiles()
	argv := []string{"netns", "exec", h.NS, "/bin/sh", "-c", hideThenExec, "sh", strconv.Itoa(len(files))}
	argv = append(append(argv, files...), sshdPath(), "-D", "-e", "-f", h.config)
	cmd := exec.Command("ip", argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	h.mu.Lock()
	h.sshd, h.exited = cmd, exited
	h.mu.Unlock()
	return nil
}

// hideThenExec is sh's program that bind-mounts /dev/null over its first
// $1 arguments, then runs the rest: only paths of this package's own
// choosing (startupFiles) and sshd's argv, never a user's string.
const hideThenExec = `n=$1; shift
while [ "$n" -gt 0 ]; do mount --bind /dev/null "$1" || exit 1; shift; n=$((n - 1)); done
exec "$@"`

// startupFiles are the shell start-up files of the user the hosts' sessions
// run as (root, the tests' user) that exist on this machine.
func startupFiles() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range []string{".bashrc", ".bash_profile", ".bash_login", ".profile"} {
		if p := filepath.Join(home, name); regular(p) {
			out = append(out, p)
		}
	}
	return out
}

func regular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// waitSSHD waits until the host's sshd accepts connections.
func (h *Host) waitSSHD(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", h.SSH, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		h.mu.Lock()
		exited := h.exited
		h.mu.Unlock()
		select {
		case <-exited:
			b, _ := os.ReadFile(h.log)
			return fmt.Errorf("sshtest: sshd of %s exited: %s", h.Name, b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(h.log)
			return fmt.Errorf("sshtest: sshd of %s not answering at %s within %s: %v (log: %s)", h.Name, h.SSH, limit, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *Host) stopSSHD() {
	h.mu.Lock()
	cmd, exited := h.sshd, h.exited
	h.sshd = nil
	h.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Rekey gives the host a new host key (its sshd restarted with it; the
// known_hosts file keeps the old one), as a reinstalled host or a
// machine in the middle would present, and returns both fingerprints.
func (h *Host) Rekey(t testing.TB) (old, now string) {
	t.Helper()
	b, err := os.ReadFile(h.hostKey)
	must(t, err)
	s, err := gossh.ParsePrivateKey(b)
	must(t, err)
	old = gossh.FingerprintSHA256(s.PublicKey())
	h.stopSSHD()
	now = gossh.FingerprintSHA256(h.newHostKey(t))
	must(t, h.startSSHD())
	must(t, h.waitSSHD(15*time.Second))
	return old, now
}

// StopSSHD takes the host's sshd down and its connections with it
// (every sshd process of its namespace: the listener and each
// session's), as a reinstall that restarts it would; the host's other
// processes run on.
func (h *Host) StopSSHD() {
	h.stopSSHD()
	out, err := exec.Command("ip", "netns", "pids", h.NS).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.HasPrefix(string(comm), "sshd") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// StartSSHD starts the host's sshd again (with the key it had) and
// waits until it answers.
func (h *Host) StartSSHD() error {
	if err := h.startSSHD(); err != nil {
		return err
	}
	return h.waitSSHD(15 * time.Second)
}

// LinkDown cuts the host off: its link to the bridge goes down, and
// nothing reaches it or leaves it (its processes run on).
func (h *Host) LinkDown() error { return ip("link", "set", h.veth, "down") }

// LinkUp connects the host again.
func (h *Host) LinkUp() error { return ip("link", "set", h.veth, "up") }

// YAML is the host's entry in a description's hosts.
func (h *Host) YAML() string {
	return fmt.Sprintf(`{name: %s, ssh: {address: "%s", known_hosts: %q, identity_files: [%q], user: root, dir: %q}}`,
		h.Name, h.SSH, h.env.KnownHosts, h.env.Identity, h.Dir)
}

// cleanup kills what runs in each namespace (sshd, members), removes
// each host's link (both ends: a namespace may outlive its removal
// while the kernel still holds sockets of it, and with it the link),
// the namespaces and the bridge.
func (e *Env) cleanup() {
	for _, h := range e.Hosts {
		h.stopSSHD()
		killIn(h.NS)
		_ = ip("link", "del", h.veth)
		_ = ip("netns", "del", h.NS)
	}
	_ = ip("link", "del", e.bridge)
}

// killIn kills every process in namespace ns: SIGTERM first, then,
// after a second at most, SIGKILL for those left. The first lets a
// session's shell end what it holds (this machine's root .bashrc runs
// pyenv rehash in every SSH session, and a rehash killed outright
// leaves its lock behind: every later session then waits 60 s on it).
func killIn(ns string) {
	pids := func() []int {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return nil
		}
		var ps []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				ps = append(ps, pid)
			}
		}
		return ps
	}
	for _, pid := range pids() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && len(pids()) > 0; {
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range pids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// sweep removes what a run killed before its cleanup left: the
// namespaces and links whose names carry the pid of a process that is
// gone.
func sweep(t testing.TB) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix+"-") {
			continue
		}
		parts := strings.Split(f[0], "-")
		if len(parts) < 2 || !gone(parts[1], 10) {
			continue
		}
		killIn(f[0])
		if err := ip("netns", "del", f[0]); err == nil {
			t.Logf("sshtest: removed %s, left by a run that was killed", f[0])
		}
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(links), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if !strings.HasPrefix(name, "fb-") && !strings.HasPrefix(name, "fv-") {
			continue
		}
		parts := strings.Split(name, "-")
		if len(parts) >= 3 && gone(parts[1], 16) {
			_ = ip("link", "del", name)
		}
	}
}

// gone reports whether the pid written in base is no process now.
func gone(s string, base int) bool {
	pid, err := strconv.ParseInt(s, base, 64)
	if err != nil || pid <= 0 {
		return false
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	return os.IsNotExist(err)
}

// ip runs ip with args (names this package made, never a user's
// string), its output in the error.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
