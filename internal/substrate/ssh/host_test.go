package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
)

// hostsOf is the driver's view of the env's hosts.
func hostsOf(e *sshtest.Env) []Host {
	var out []Host
	for _, h := range e.Hosts {
		out = append(out, Host{Name: h.Name, Addr: h.SSH, User: "root", KnownHosts: e.KnownHosts, IdentityFiles: []string{e.Identity}, Dir: h.Dir})
	}
	return out
}

func newDriver(t *testing.T, e *sshtest.Env, cmds map[string]Commands, opts ...Option) *Driver {
	t.Helper()
	d, err := New(hostsOf(e), cmds, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// artifact writes a program (a shell script that prints its version
// and arguments, then sleeps until it is signalled) of version v.
func artifact(t *testing.T, dir, v string) driver.Artifact {
	t.Helper()
	p := filepath.Join(dir, "prog-"+v)
	script := "#!/bin/sh\necho \"prog " + v + " $*\"\ntrap 'echo \"prog " + v + " stopping\"; exit 0' TERM\nwhile :; do sleep 0.1; done\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256([]byte(script))
	return driver.Artifact{Version: v, Path: p, SHA256: hex.EncodeToString(s[:])}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func observe(t *testing.T, d *Driver, ms ...driver.Member) []driver.Status {
	t.Helper()
	sts, err := d.Observe(ctxT(t, 20*time.Second), ms)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return sts
}

// TestMemberLifecycle: on two namespace hosts, a member never started
// is down with no version; started on 1.0.0 it runs (pid, since, its
// output kept); started again with the same spec nothing changes; on
// 2.0.0 it is swapped (the old instance's output is the previous one);
// stopped, it is down, stopped by ferry, its version kept.
func TestMemberLifecycle(t *testing.T) {
	e := sshtest.New(t, 2)
	d := newDriver(t, e, nil)
	m := driver.Member{Name: "m-1", Component: "c", Host: "h2", Args: []string{"--name", "it's m-1", "$HOME"}, Env: map[string]string{"GREETING": "a b"}, StopTimeout: 5 * time.Second}
	if st := observe(t, d, m)[0]; st.Running || st.Version != "" || st.Unknown {
		t.Fatalf("before any start: %+v", st)
	}
	v1, v2 := artifact(t, t.TempDir(), "1.0.0"), artifact(t, t.TempDir(), "2.0.0")
	if err := d.Start(ctxT(t, time.Minute), m, v1); err != nil {
		t.Fatal(err)
	}
	st := observe(t, d, m)[0]
	if !st.Running || st.Version != "1.0.0" || st.PID <= 0 || st.Since.IsZero() || time.Since(st.Since) > time.Minute {
		t.Fatalf("after the start: %+v", st)
	}
	if err := d.Start(ctxT(t, time.Minute), m, v1); err != nil {
		t.Fatal(err)
	}
	if again := observe(t, d, m)[0]; again.PID != st.PID || !again.Since.Equal(st.Since) {
		t.Errorf("a second start of the same spec replaced it: %+v, was %+v", again, st)
	}
	out, err := d.Logs(ctxT(t, 10*time.Second), m, false, 10)
	if err != nil || !strings.Contains(out, "prog 1.0.0 --name it's m-1 $HOME") {
		t.Errorf("logs = %q, %v; want the arguments as given, quotes and $ untouched", out, err)
	}
	if err := d.Start(ctxT(t, time.Minute), m, v2); err != nil {
		t.Fatal(err)
	}
	st2 := observe(t, d, m)[0]
	if !st2.Running || st2.Version != "2.0.0" || st2.PID == st.PID {
		t.Fatalf("after the swap: %+v", st2)
	}
	prev, err := d.Logs(ctxT(t, 10*time.Second), m, true, 10)
	if err != nil || !strings.Contains(prev, "prog 1.0.0 stopping") {
		t.Errorf("previous logs = %q, %v; want 1.0.0's graceful stop", prev, err)
	}
	if err := d.Stop(ctxT(t, time.Minute), m); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(ctxT(t, time.Minute), m); err != nil {
		t.Errorf("a second stop: %v", err)
	}
	st3 := observe(t, d, m)[0]
	if st3.Running || st3.Version != "2.0.0" || st3.Detail != "stopped by ferry" {
		t.Errorf("after the stop: %+v", st3)
	}
	if n := d.hosts["h2"].opened; n != 1 {
		t.Errorf("%d connections opened to h2, want 1", n)
	}
}

// TestInstallResumes: a copy cut off half way is continued from where
// it stopped (only the rest is sent), checked on the host, and used; a
// partial copy that is not the artifact's beginning fails its check,
// is removed, and the artifact is copied again whole.
func TestInstallResumes(t *testing.T) {
	e := sshtest.New(t, 1)
	d := newDriver(t, e, nil)
	dir := t.TempDir()
	// An artifact of 1 MiB and some: a script, then filler.
	body := []byte("#!/bin/sh\necho big \"$@\"\nwhile :; do sleep 0.1; done\nexit 0\n#")
	body = append(body, bytes.Repeat([]byte("0123456789abcdef"), 1<<16)...)
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, body, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	a := driver.Artifact{Version: "1.0.0", Path: p, SHA256: hex.EncodeToString(sum[:])}
	half := int64(len(body) / 2)
	arts := filepath.Join(e.Hosts[0].Dir, "artifacts")
	if err := os.MkdirAll(arts, 0o755); err != nil {
		t.Fatal(err)
	}
	// What an interrupted copy left on the host.
	if err := os.WriteFile(filepath.Join(arts, a.SHA256+".part"), body[:half], 0o644); err != nil {
		t.Fatal(err)
	}
	m := driver.Member{Name: "big-1", Host: "h1"}
	if err := d.Start(ctxT(t, time.Minute), m, a); err != nil {
		t.Fatal(err)
	}
	if sent, want := d.sent.Load(), int64(len(body))-half; sent != want {
		t.Errorf("sent %d bytes, want %d (the rest of the partial copy only)", sent, want)
	}
	t.Logf("resumed: %d of %d bytes sent", d.sent.Load(), len(body))
	if st := observe(t, d, m)[0]; !st.Running || st.Version != "1.0.0" {
		t.Fatalf("after the start: %+v", st)
	}

	// A partial copy of something else: refused by its sum, copied
	// again from the start.
	body2 := append([]byte(nil), body...)
	body2[len(body2)-1] = '!'
	sum2 := sha256.Sum256(body2)
	p2 := filepath.Join(dir, "big2")
	if err := os.WriteFile(p2, body2, 0o755); err != nil {
		t.Fatal(err)
	}
	a2 := driver.Artifact{Version: "2.0.0", Path: p2, SHA256: hex.EncodeToString(sum2[:])}
	junk := bytes.Repeat([]byte{'x'}, int(half))
	if err := os.WriteFile(filepath.Join(arts, a2.SHA256+".part"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	before := d.sent.Load()
	if err := d.Start(ctxT(t, time.Minute), m, a2); err != nil {
		t.Fatal(err)
	}
	if sent, want := d.sent.Load()-before, int64(len(body2))-half+int64(len(body2)); sent != want {
		t.Errorf("sent %d bytes for a bad partial copy, want %d (its rest, refused, then all)", sent, want)
	}
	if st := observe(t, d, m)[0]; !st.Running || st.Version != "2.0.0" {
		t.Fatalf("after the second start: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(arts, a2.SHA256+".part")); !os.IsNotExist(err) {
		t.Errorf("the partial copy is still there: %v", err)
	}
}

// TestCorruptCopyRefusedBeforeTheStop: an artifact whose copy on the
// host no longer has its sha256 is refused before the running member
// is stopped (it runs on, on its release), removed from the host, and
// copied again at the next start.
func TestCorruptCopyRefusedBeforeTheStop(t *testing.T) {
	e := sshtest.New(t, 1)
	d := newDriver(t, e, nil)
	v1, v2 := artifact(t, t.TempDir(), "1.0.0"), artifact(t, t.TempDir(), "2.0.0")
	m := driver.Member{Name: "m-1", Host: "h1"}
	other := driver.Member{Name: "m-2", Host: "h1"}
	if err := d.Start(ctxT(t, time.Minute), m, v1); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctxT(t, time.Minute), other, v2); err != nil {
		t.Fatal(err)
	}
	before := observe(t, d, m)[0]
	copyOnHost := filepath.Join(e.Hosts[0].Dir, "artifacts", v2.SHA256)
	if err := os.WriteFile(copyOnHost, []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := d.Start(ctxT(t, time.Minute), m, v2)
	if !errors.Is(err, ErrChecksumMismatch) || !strings.Contains(err.Error(), v2.SHA256) {
		t.Fatalf("start on a tampered copy: %v, want ErrChecksumMismatch naming the sum", err)
	}
	if st := observe(t, d, m)[0]; !st.Running || st.PID != before.PID || st.Version != "1.0.0" {
		t.Errorf("after the refusal: %+v, want the 1.0.0 process %d untouched", st, before.PID)
	}
	if err := d.Start(ctxT(t, time.Minute), m, v2); err != nil {
		t.Fatalf("the next start (copied again): %v", err)
	}
	if st := observe(t, d, m)[0]; !st.Running || st.Version != "2.0.0" {
		t.Errorf("after the next start: %+v", st)
	}
}

// TestHostKeyRefused: a host whose key changed (its sshd restarted with
// a new one) is refused by Observe, Start and Stop, naming the host, the
// fingerprint known_hosts holds and the one presented; its member runs
// on untouched. A host known_hosts has no line for is refused too.
func TestHostKeyRefused(t *testing.T) {
	e := sshtest.New(t, 2)
	a := artifact(t, t.TempDir(), "1.0.0")
	m := driver.Member{Name: "m-1", Host: "h2"}
	{
		d := newDriver(t, e, nil)
		if err := d.Start(ctxT(t, time.Minute), m, a); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	pidBefore, _ := os.ReadFile(filepath.Join(e.Hosts[1].Dir, "members", "m-1", "pid"))
	old, now := e.Hosts[1].Rekey(t)
	d := newDriver(t, e, nil)
	_, err := d.Observe(ctxT(t, 20*time.Second), []driver.Member{{Name: "x", Host: "h1"}, m})
	var he *HostKeyError
	if !errors.As(err, &he) {
		t.Fatalf("Observe = %v, want a HostKeyError", err)
	}
	msg := err.Error()
	for _, w := range []string{"ssh host h2", e.Hosts[1].SSH, old, now, "CHANGED", e.KnownHosts} {
		if !strings.Contains(msg, w) {
			t.Errorf("the refusal does not say %q: %s", w, msg)
		}
	}
	if errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("a changed key is taken for a host that does not answer: %v", err)
	}
	t.Logf("refused: %s", msg)
	if err := d.Stop(ctxT(t, 20*time.Second), m); !errors.As(err, &he) {
		t.Errorf("Stop = %v, want a HostKeyError", err)
	}
	if err := d.Start(ctxT(t, 20*time.Second), m, artifact(t, t.TempDir(), "2.0.0")); !errors.As(err, &he) {
		t.Errorf("Start = %v, want a HostKeyError", err)
	}
	pidAfter, _ := os.ReadFile(filepath.Join(e.Hosts[1].Dir, "members", "m-1", "pid"))
	if string(pidBefore) != string(pidAfter) || len(pidAfter) == 0 {
		t.Errorf("the member's process changed: %q, was %q", pidAfter, pidBefore)
	}

	// known_hosts without h1's line.
	b, _ := os.ReadFile(e.KnownHosts)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, e.Hosts[0].IP+" ") {
			keep = append(keep, l)
		}
	}
	partial := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(partial, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hs := hostsOf(e)[:1]
	hs[0].KnownHosts = partial
	d2, err := New(hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	_, err = d2.Observe(ctxT(t, 20*time.Second), []driver.Member{{Name: "x", Host: "h1"}})
	if !errors.As(err, &he) || len(he.Known) != 0 || !strings.Contains(err.Error(), "unknown") || !strings.Contains(err.Error(), "SHA256:") {
		t.Errorf("an unknown host: %v, want a HostKeyError saying unknown, with the presented fingerprint", err)
	}
}

// TestIdentityFileRefused: a private key others may read, or a
// description with no known_hosts, is refused when the driver is built,
// naming the host and the file.
func TestIdentityFileRefused(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if err := os.WriteFile(key, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New([]Host{{Name: "h1", Addr: "10.0.0.1:22", KnownHosts: kh, IdentityFiles: []string{key}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "ssh host h1") || !strings.Contains(err.Error(), "mode 0644") || !strings.Contains(err.Error(), key) {
		t.Errorf("a key readable by others: %v", err)
	}
	_, err = New([]Host{{Name: "h1", Addr: "10.0.0.1:22"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "never accepts a host key it cannot check") {
		t.Errorf("no known_hosts: %v", err)
	}
}

// TestSessionsBounded: a burst of commands on one host shares its one
// connection, at most max_sessions channels at once (each command
// counts those running beside it on the host).
func TestSessionsBounded(t *testing.T) {
	e := sshtest.New(t, 1)
	hs := hostsOf(e)
	hs[0].MaxSessions = 3
	d, err := New(hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := d.hosts["h1"]
	mark := filepath.Join(t.TempDir(), "running")
	if err := os.MkdirAll(mark, 0o755); err != nil {
		t.Fatal(err)
	}
	line, err := Line([]string{"sh", "-c", `: >"$0/$$"; ls "$0" | wc -l; sleep 0.3; rm -f "$0/$$"`, mark})
	if err != nil {
		t.Fatal(err)
	}
	const n = 15
	counts := make([]int, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.run(ctxT(t, 30*time.Second), line, nil)
			if err != nil || r.code != 0 {
				t.Errorf("command %d: %v %+v", i, err, r)
				return
			}
			counts[i], _ = strconv.Atoi(strings.TrimSpace(string(r.stdout)))
		}()
	}
	wg.Wait()
	most := slices.Max(counts)
	t.Logf("%d commands in %s, at most %d at once on the host, %d connection(s)", n, time.Since(start).Round(time.Millisecond), most, c.opened)
	if most > 3 || most < 2 {
		t.Errorf("at most %d commands ran at once, want 3 (max_sessions), and more than 1", most)
	}
	if c.opened != 1 {
		t.Errorf("%d connections opened, want 1", c.opened)
	}
}

// TestHostCutOff: a host whose link goes down has its members observed
// as Unknown, the host named, while the other host's are observed as
// before; a start there is an unreachable error, never a verdict. Once
// its link is up again its members are seen as they are (the member
// ran on).
func TestHostCutOff(t *testing.T) {
	e := sshtest.New(t, 2)
	d := newDriver(t, e, nil, WithKeepalive(250*time.Millisecond), WithRequestTimeout(2*time.Second))
	a := artifact(t, t.TempDir(), "1.0.0")
	m1, m2 := driver.Member{Name: "m-1", Host: "h1"}, driver.Member{Name: "m-2", Host: "h2"}
	for _, m := range []driver.Member{m1, m2} {
		if err := d.Start(ctxT(t, time.Minute), m, a); err != nil {
			t.Fatal(err)
		}
	}
	before := observe(t, d, m1, m2)
	if err := e.Hosts[0].LinkDown(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	var sts []driver.Status
	for {
		sts = observe(t, d, m1, m2)
		if sts[0].Unknown || time.Since(cut) > 20*time.Second {
			break
		}
	}
	t.Logf("cut off: m-1 Unknown after %s: %s", time.Since(cut).Round(time.Millisecond), sts[0].Detail)
	if !sts[0].Unknown || !strings.Contains(sts[0].Detail, "ssh host h1") {
		t.Fatalf("m-1 on the host cut off: %+v, want Unknown naming h1", sts[0])
	}
	if sts[1].Unknown || !sts[1].Running || sts[1].PID != before[1].PID {
		t.Errorf("m-2 on the other host: %+v", sts[1])
	}
	err := d.Start(ctxT(t, 10*time.Second), m1, artifact(t, t.TempDir(), "2.0.0"))
	if !errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("a start on the host cut off: %v, want ErrUnreachable", err)
	}
	if err := e.Hosts[0].LinkUp(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for {
		sts = observe(t, d, m1, m2)
		if !sts[0].Unknown || time.Since(back) > 30*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("answering again after %s", time.Since(back).Round(time.Millisecond))
	if sts[0].Unknown || !sts[0].Running || sts[0].PID != before[0].PID || sts[0].Version != "1.0.0" {
		t.Errorf("m-1 after the host came back: %+v, want it running on 1.0.0 as before (pid %d)", sts[0], before[0].PID)
	}
}

// TestAgentKeys: with no identity file, the keys of the SSH agent at
// SSH_AUTH_SOCK log in (the agent signs; ferry never holds the key);
// with neither, the host is refused naming what to give.
func TestAgentKeys(t *testing.T) {
	e := sshtest.New(t, 1)
	b, err := os.ReadFile(e.Identity)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gossh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _ = agent.ServeAgent(keyring, c) }()
		}
	}()
	hs := hostsOf(e)
	hs[0].IdentityFiles = nil
	t.Setenv("SSH_AUTH_SOCK", sock)
	d, err := New(hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st := observe(t, d, driver.Member{Name: "x", Host: "h1"})[0]; st.Unknown || st.Running {
		t.Errorf("through the agent's key: %+v", st)
	}
	t.Setenv("SSH_AUTH_SOCK", "")
	d2, err := New(hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	_, err = d2.Observe(ctxT(t, 10*time.Second), []driver.Member{{Name: "x", Host: "h1"}})
	if err == nil || !strings.Contains(err.Error(), "no key to log in with") {
		t.Errorf("no key at all: %v", err)
	}
}

// TestOwnCommands: a component's own start, stop, status, version and
// logs commands (a control script on the host) run with FERRY_* set,
// arguments quoted; only the operation marked for sudo runs through
// sudo -n.
func TestOwnCommands(t *testing.T) {
	e := sshtest.New(t, 1)
	ctl := filepath.Join(t.TempDir(), "ctl")
	script := `#!/bin/sh
cd "$FERRY_DIR" || exit 70
alive() { [ -s own.pid ] && kill -0 "$(cat own.pid)" 2>/dev/null; }
case $1 in
start) alive && exit 0
	"$FERRY_ARTIFACT" "$2" </dev/null >>own.log 2>&1 &
	echo $! >own.pid; echo "$FERRY_VERSION" >own.version ;;
stop) alive && kill "$(cat own.pid)"; rm -f own.pid ;;
status) alive && exit 0; exit 3 ;;
version) cat own.version ;;
logs) tail -n "$FERRY_LINES" own.log ;;
esac
`
	if err := os.WriteFile(ctl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m := driver.Member{Name: "own-1", Host: "h1"}
	cmds := map[string]Commands{m.Name: {Start: []string{ctl, "start", "it's $me"}, Stop: []string{ctl, "stop"}, Status: []string{ctl, "status"},
		Version: []string{ctl, "version"}, Logs: []string{ctl, "logs"}, Sudo: map[Op]bool{OpStop: true}}}
	d := newDriver(t, e, cmds)
	var mu sync.Mutex
	var lines []string
	d.hosts["h1"].trace = func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	if st := observe(t, d, m)[0]; st.Running {
		t.Fatalf("before the start: %+v", st)
	}
	if err := d.Start(ctxT(t, time.Minute), m, artifact(t, t.TempDir(), "1.0.0")); err != nil {
		t.Fatal(err)
	}
	st := observe(t, d, m)[0]
	if !st.Running || st.Version != "1.0.0" || st.Adopted {
		t.Errorf("after its own start: %+v", st)
	}
	out, err := d.Logs(ctxT(t, 10*time.Second), m, false, 5)
	if err != nil || !strings.Contains(out, "prog 1.0.0 it's $me") {
		t.Errorf("its own logs: %q %v", out, err)
	}
	err = d.Stop(ctxT(t, time.Minute), m)
	if _, lookErr := exec.LookPath("sudo"); lookErr != nil {
		if err == nil || !strings.Contains(err.Error(), "sudo") {
			t.Errorf("stop through sudo on a host without sudo: %v, want sudo's absence said", err)
		}
	} else if err != nil {
		t.Errorf("stop through sudo: %v", err)
	} else if st := observe(t, d, m)[0]; st.Running {
		t.Errorf("after its own stop: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	sudo := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "sudo -n -- sh -c ") {
			sudo++
			if !strings.Contains(l, " exec ") || !strings.HasSuffix(l, ctl+" stop") {
				t.Errorf("a command through sudo that is not the stop: %.60s...%s", l, l[max(0, len(l)-60):])
			}
		} else if !strings.HasPrefix(l, "sh -c ") {
			t.Errorf("a command line that is not the helper's: %.80s", l)
		}
	}
	if sudo != 1 {
		t.Errorf("%d commands through sudo, want 1 (the stop) of %d", sudo, len(lines))
	}
}

// TestAdoptByPIDFile: a member ferry did not start, found by its pid
// file on its host, is observed running and adopted (its version not
// known: the engine asks the member); the first start replaces it
// (the adopted process gets its stop signal) with ferry's own.
func TestAdoptByPIDFile(t *testing.T) {
	e := sshtest.New(t, 1)
	d := newDriver(t, e, nil)
	a := artifact(t, t.TempDir(), "1.0.0")
	theirs := exec.Command(a.Path, "theirs")
	if err := theirs.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- theirs.Wait() }()
	t.Cleanup(func() { _ = theirs.Process.Kill() })
	pidFile := filepath.Join(t.TempDir(), "kv.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(theirs.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := driver.Member{Name: "kv-1", Host: "h1", Adopt: &driver.Adopt{PIDFile: pidFile}, StopTimeout: 5 * time.Second}
	st := observe(t, d, m)[0]
	if !st.Running || !st.Adopted || st.PID != theirs.Process.Pid || st.Version != "" {
		t.Fatalf("a process found by its pid file: %+v, want running, adopted, pid %d, no version", st, theirs.Process.Pid)
	}
	if err := d.Start(ctxT(t, time.Minute), m, a); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted process still runs after the start")
	}
	st = observe(t, d, m)[0]
	if !st.Running || st.Adopted || st.PID == theirs.Process.Pid || st.Version != "1.0.0" {
		t.Errorf("after the start: %+v, want ferry's own process on 1.0.0", st)
	}
}
