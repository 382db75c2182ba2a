package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/driver"
	"github.com/ferry-upgrade/ferry/internal/sshtest"
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
