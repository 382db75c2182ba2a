package ssh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
)

// hostScript writes an executable script for a host's commands (the
// hosts share this file system) and returns its path.
func hostScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hostcmd.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostCommands: a host's lock, unlock and data migration run as an
// argv (an argument with spaces, quotes and $(...) arrives as it is,
// no shell in between) on the host the command says: h3's lock runs on
// h1 (as StarlingX runs host-lock on the active controller; sshd there
// says so in SSH_CONNECTION), h2's on h2; locking twice is the
// command's own idempotence; a command that fails is an error with the
// host, its exit status and what it said.
func TestHostCommands(t *testing.T) {
	e := sshtest.New(t, 3)
	log := filepath.Join(t.TempDir(), "log")
	script := hostScript(t, `set -e
conn=${SSH_CONNECTION:-none}
set -- "$@"
printf '%s|%s|%s|%s|%s\n' "$1" "$2" "$FERRY_HOST" "${conn#* * }" "$(pwd)" >>"`+log+`"
[ "$1" != fail ] || { echo "host-lock: $2 is the active controller" >&2; exit 3; }
`)
	d := newDriver(t, e, nil)
	odd := `it's "$(touch /tmp/x)" ; a`
	for _, c := range []struct {
		what string
		run  func() error
	}{
		{"lock h3 on h1", func() error {
			return d.LockHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h3", On: "h1", Argv: []string{script, "lock", "h3"}})
		}},
		{"lock h3 on h1 again", func() error {
			return d.LockHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h3", On: "h1", Argv: []string{script, "lock", "h3"}})
		}},
		{"lock h2 on itself", func() error {
			return d.LockHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h2", Argv: []string{script, "lock", odd}})
		}},
		{"migrate h2", func() error {
			return d.MigrateHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h2", Argv: []string{script, "migrate", "2.0.0"}})
		}},
		{"unlock h3 on h1", func() error {
			return d.UnlockHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h3", On: "h1", Argv: []string{script, "unlock", "h3"}})
		}},
	} {
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	h1, h2 := e.Hosts[0], e.Hosts[1]
	want := []string{
		"lock|h3|h3|" + h1.IP + " 22|" + filepath.Join(h1.Dir, "hosts", "h3"),
		"lock|h3|h3|" + h1.IP + " 22|" + filepath.Join(h1.Dir, "hosts", "h3"),
		"lock|" + odd + "|h2|" + h2.IP + " 22|" + filepath.Join(h2.Dir, "hosts", "h2"),
		"migrate|2.0.0|h2|" + h2.IP + " 22|" + filepath.Join(h2.Dir, "hosts", "h2"),
		"unlock|h3|h3|" + h1.IP + " 22|" + filepath.Join(h1.Dir, "hosts", "h3"),
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the commands ran as\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat("/tmp/x"); err == nil {
		t.Error("an argument was run by a shell: /tmp/x exists")
	}

	err = d.LockHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h1", On: "h2", Argv: []string{script, "fail", "h1"}})
	if err == nil {
		t.Fatal("a lock command that exits 3 succeeded")
	}
	for _, w := range []string{"lock of host h1", "ssh host h2", "exit status 3", "h1 is the active controller"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the failure does not say %q: %v", w, err)
		}
	}
	if err := d.LockHost(ctxT(t, time.Minute), driver.HostCommand{Host: "h1", On: "h9", Argv: []string{script}}); err == nil || !strings.Contains(err.Error(), `unknown host "h9"`) {
		t.Errorf("a command run on an unknown host: %v", err)
	}
}

// reinstallScript is a host's reinstall that cuts the host off from
// inside its namespace (its link down, as a reinstall's reboot would)
// for away, then brings it back and records the release it installed.
func reinstallScript(t *testing.T, away string) string {
	return hostScript(t, `echo down >"$FERRY_HOST.state"
ip link set eth0 down
sleep `+away+`
ip link set eth0 up
echo "installed $1" >"$FERRY_HOST.state"
`)
}

// TestReinstallComesBack: h2's reinstall takes its link down for 4 s
// (the connection is lost: a keepalive not answered) and brings it
// back: ReinstallHost waits, dials again (h2's key checked again) and
// returns once the command ended with status 0, after it and well
// before its bound. A second call with the same key reports it done
// without running it again.
func TestReinstallComesBack(t *testing.T) {
	e := sshtest.New(t, 2)
	d := newDriver(t, e, nil, WithKeepalive(500*time.Millisecond), WithRequestTimeout(time.Second))
	cmd := driver.HostCommand{Host: "h2", Argv: []string{reinstallScript(t, "4"), "2.0.0"}, Key: "u1-2.0.0"}
	c := d.hosts["h2"]
	start := time.Now()
	if err := d.ReinstallHost(ctxT(t, time.Minute), cmd, 20*time.Second); err != nil {
		reinstallLogs(t, e.Hosts[1])
		t.Fatalf("ReinstallHost: %v", err)
	}
	took := time.Since(start)
	state := filepath.Join(e.Hosts[1].Dir, "hosts", "h2", "h2.state")
	b, _ := os.ReadFile(state)
	c.mu.Lock()
	opened := c.opened
	c.mu.Unlock()
	t.Logf("reinstalled in %s over %d connections: %s", took.Round(time.Millisecond), opened, strings.TrimSpace(string(b)))
	if strings.TrimSpace(string(b)) != "installed 2.0.0" {
		t.Errorf("the host says %q, want installed 2.0.0", b)
	}
	// Back once the host is: not before its 4 s away, and well before
	// the 20 s bound (dialed again, not waited out). A loaded machine
	// adds seconds to the return: 7.3 s at a load average of 36.
	if took < 4*time.Second || took > 15*time.Second {
		t.Errorf("ReinstallHost returned after %s; the host was away 4 s, its bound 20 s", took)
	}
	if opened < 2 {
		t.Errorf("%d connection(s) opened: the one lost with the link was not dialed again", opened)
	}
	if err := os.WriteFile(state, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ReinstallHost(ctxT(t, time.Minute), cmd, 20*time.Second); err != nil {
		t.Fatalf("ReinstallHost again: %v", err)
	}
	if b, _ := os.ReadFile(state); string(b) != "untouched\n" {
		t.Errorf("the reinstall ran again for the same key: %q", b)
	}
}

// TestReinstallPastItsBound: h2's reinstall keeps it away 12 s; its
// bound is 3 s: ReinstallHost fails once the host has not answered for
// longer than that (noticed at the end of the poll under way: a dial
// takes up to its connect timeout, 5 s), naming the host and the
// bound, before the host is back.
func TestReinstallPastItsBound(t *testing.T) {
	e := sshtest.New(t, 2)
	d := newDriver(t, e, nil, WithKeepalive(500*time.Millisecond), WithRequestTimeout(time.Second))
	cmd := driver.HostCommand{Host: "h2", Argv: []string{reinstallScript(t, "12"), "2.0.0"}, Key: "u1-2.0.0"}
	start := time.Now()
	err := d.ReinstallHost(ctxT(t, time.Minute), cmd, 3*time.Second)
	took := time.Since(start)
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a reinstall past its bound succeeded")
	}
	for _, w := range []string{"reinstall of host h2", "did not answer", "bound 3s"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the failure does not say %q: %v", w, err)
		}
	}
	if took > 11*time.Second {
		t.Errorf("failed after %s: the bound is 3 s, a dial's 5 s", took)
	}
	// The host comes back by itself (the test's cleanup needs it).
	waitUntil(t, 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(e.Hosts[1].Dir, "hosts", "h2", "h2.state"))
		return strings.HasPrefix(string(b), "installed")
	})
}

// TestReinstallNewKeyRefused: h2 comes back from its reinstall with
// another host key: ReinstallHost refuses it (driver.ErrNotTrusted, a
// HostKeyError naming h2 and both fingerprints), it never takes it for
// a host still away.
func TestReinstallNewKeyRefused(t *testing.T) {
	e := sshtest.New(t, 2)
	d := newDriver(t, e, nil, WithKeepalive(500*time.Millisecond), WithRequestTimeout(time.Second))
	cmd := driver.HostCommand{Host: "h2", Argv: []string{reinstallScript(t, "3"), "2.0.0"}, Key: "u1-2.0.0"}
	state := filepath.Join(e.Hosts[1].Dir, "hosts", "h2", "h2.state")
	done := make(chan error, 1)
	go func() { done <- d.ReinstallHost(t.Context(), cmd, 30*time.Second) }()
	waitUntil(t, 30*time.Second, func() bool { b, _ := os.ReadFile(state); return strings.TrimSpace(string(b)) == "down" })
	old, now := e.Hosts[1].Rekey(t) // waits for the new sshd: the link is back
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ReinstallHost did not return within 30 s of the host's return with a new key")
	}
	t.Logf("refused: %v", err)
	var he *HostKeyError
	if !errors.As(err, &he) || !errors.Is(err, driver.ErrNotTrusted) || errors.Is(err, driver.ErrUnreachable) {
		t.Fatalf("ReinstallHost = %v, want a HostKeyError, ErrNotTrusted and not unreachable", err)
	}
	for _, w := range []string{"ssh host h2", old, now, "CHANGED"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not say %q", w)
		}
	}
}

// reinstallLogs logs what host h's reinstalls left: their state, pid,
// exit status and output.
func reinstallLogs(t *testing.T, h *sshtest.Host) {
	t.Helper()
	dir := filepath.Join(h.Dir, "hosts", h.Name)
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			t.Logf("%s: %q", strings.TrimPrefix(p, dir+"/"), b)
		}
		return nil
	})
}

func waitUntil(t *testing.T, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCancelledHostCommandStops: a host's lock cancelled while it runs
// (an abort) is stopped on the host before LockHost returns, so that
// the unlock that follows cannot run before the rest of the lock (the
// StarlingX example once ended with controller-0 locked: its unlock ran,
// then the cancelled lock's last step).
func TestCancelledHostCommandStops(t *testing.T) {
	e := sshtest.New(t, 1)
	dir := t.TempDir()
	pidFile, finished := filepath.Join(dir, "pid"), filepath.Join(dir, "finished")
	script := hostScript(t, `echo $$ >"`+pidFile+`.tmp" && mv "`+pidFile+`.tmp" "`+pidFile+`"
sleep 5
: >"`+finished+`"
`)
	d := newDriver(t, e, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.LockHost(ctx, driver.HostCommand{Host: "h1", Argv: []string{script}}) }()
	waitUntil(t, 30*time.Second, func() bool { _, err := os.Stat(pidFile); return err == nil })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("LockHost did not return within 30s of its cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("LockHost cancelled: %v, want context.Canceled", err)
	}
	// The hosts share this machine's processes: the script's must be
	// gone (or a zombie its sshd has not reaped yet) once LockHost
	// returned.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
		t.Errorf("the cancelled lock (pid %d) still runs on the host after LockHost returned: %s", pid, st)
	}
	if _, err := os.Stat(finished); err == nil {
		t.Error("the cancelled lock ran on to its end")
	}
}
