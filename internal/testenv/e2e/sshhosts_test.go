package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
)

// hostCommands is a host's commands as the tests give them: one script
// (on the file system the hosts share) that logs each call with the
// address of the sshd that ran it (SSH_CONNECTION), locks and unlocks
// the host in the balancer (curl to its admin address on the hosts'
// network, as StarlingX's host-lock moves the host's work away), and
// reinstalls: says so in the host's state file and waits until the
// test has taken the host's sshd down and up again.
const hostCommandsScript = `#!/bin/sh
set -e
kind=$1 host=$2 arg=$3
set -- ${SSH_CONNECTION:-none none none}
printf '%%s %%s %%s on %%s\n' "$kind" "$host" "$arg" "$3" >>%[1]q
case $kind in
lock) curl -fsS -X POST "$arg/admin/hosts/$host/lock?timeout=10s" >/dev/null ;;
unlock) curl -fsS -X POST "$arg/admin/hosts/$host/unlock" >/dev/null ;;
reinstall)
	rm -f %[2]q/$host.back
	echo "reinstalling $arg" >%[2]q/$host
	while [ ! -e %[2]q/$host.back ]; do sleep 0.1; done
	echo "installed $arg" >%[2]q/$host ;;
esac
`

// reinstallWatch plays the hosts' reinstalls: when a host says it
// reinstalls, its sshd is taken down (with every connection to it) for
// as long as away says, then started again, and the reinstall told to
// end.
type reinstallWatch struct {
	mu   sync.Mutex
	log  []string
	stop chan struct{}
	done chan struct{}
}

func watchReinstalls(t *testing.T, env *sshtest.Env, dir string, away func(host, version string, n int) time.Duration) *reinstallWatch {
	w := &reinstallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	seen := map[string]int{}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, h := range env.Hosts {
				b, _ := os.ReadFile(filepath.Join(dir, h.Name))
				v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "reinstalling ")
				if !ok {
					continue
				}
				if _, err := os.Stat(filepath.Join(dir, h.Name+".back")); err == nil {
					continue
				}
				seen[h.Name]++
				d := away(h.Name, v, seen[h.Name])
				h.StopSSHD()
				began := time.Now()
				time.Sleep(d)
				if err := h.StartSSHD(); err != nil {
					t.Error(err)
				}
				w.mu.Lock()
				w.log = append(w.log, fmt.Sprintf("%s: sshd down %s while it reinstalled %s", h.Name, time.Since(began).Round(100*time.Millisecond), v))
				w.mu.Unlock()
				if err := os.WriteFile(filepath.Join(dir, h.Name+".back"), nil, 0o644); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *reinstallWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *reinstallWatch) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

// startSSHHosts starts the sample on three namespace hosts whose
// release 2.0.0 moves host by host (a hosts stage of kv and api, one
// host at a time), each host's lock and unlock run over SSH (h3's on
// h1, as StarlingX runs host-lock on the active controller; h1's and
// h2's on themselves), reinstalled (unreachable at most bound) and its
// data migrated. It returns the cluster, the commands' log and the
// hosts' state directory.
func startSSHHosts(t *testing.T, bound string) (*sshCluster, string, string) {
	t.Helper()
	dir := t.TempDir()
	log, state := filepath.Join(dir, "commands.log"), filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "hostcmd.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(hostCommandsScript, log, state)), 0o755); err != nil {
		t.Fatal(err)
	}
	cl := startSSHClusterWith(t, sshOptions{
		Flow: `[{stage: hosts, components: [kv, api], max_unavailable: 1}]`,
		Hosts: func(h *sshtest.Host, lbAdmin string) string {
			runOn := ""
			if h.Name == "h3" {
				runOn = ", run_on: h1"
			}
			return fmt.Sprintf(`commands: {lock: {argv: [%[1]q, lock, "{{.Host}}", %[2]q]%[3]s}, unlock: {argv: [%[1]q, unlock, "{{.Host}}", %[2]q]%[3]s}, `+
				`reinstall: {argv: [%[1]q, reinstall, "{{.Host}}", "{{.Version}}"], unreachable: %[4]s, timeout: 2m}, migrate: {argv: [%[1]q, migrate, "{{.Host}}", "{{.Version}}"]}}`,
				script, lbAdmin, runOn, bound)
		},
	})
	return cl, log, state
}

// upgradeUnderTraffic runs 'ferry upgrade start --to 2.0.0' under
// client traffic through the balancer (its seed logged), and returns
// its output, exit code and time, and what the clients saw.
func upgradeUnderTraffic(t *testing.T, cl *sshCluster) (string, int, time.Duration, *traffic.Recorder) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("traffic seed %d", seed)
	stop := clientTraffic(cl.Cluster, seed)
	start := time.Now()
	out, code := ferry(t, cl.Cluster, "upgrade", "start", "--to", "2.0.0")
	took := time.Since(start)
	return out, code, took, stop()
}

// commandsRan reads the commands' log: each line "KIND HOST ARG on IP".
func commandsRan(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestSSHHostsLockReinstall: the sample on three namespace hosts,
// upgraded host by host under traffic through the balancer. Each host
// is locked over SSH (h3's lock and unlock run on h1, the others' on
// themselves), reinstalled (its sshd taken down 3 s, every connection
// with it: ferry dials again within the bound of 20 s, the host's key
// checked again), its data migrated, its members moved, and unlocked:
// every member on 2.0.0, 0 failed requests, every acknowledged write
// read back, never more than one host locked in the balancer and none
// left locked, nothing owed.
func TestSSHHostsLockReinstall(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	cl, log, state := startSSHHosts(t, "20s")
	rw := watchReinstalls(t, cl.env, state, func(string, string, int) time.Duration { return 3 * time.Second })
	locks := watchLocks(cl.Cluster)
	out, code, took, rec := upgradeUnderTraffic(t, cl)
	most, seen, rounds := locks.end()
	rw.end()
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	t.Logf("upgraded host by host over SSH in %s; the balancer saw %v locked (most at once %d, %d looks); %s",
		took.Round(time.Millisecond), seen, most, rounds, strings.Join(rw.lines(), "; "))
	if failed := failedRequests(rec); failed > 0 {
		t.Errorf("%d of %d requests failed, want 0", failed, len(rec.Samples()))
	}
	t.Logf("%d requests, 0 failed", len(rec.Samples()))
	checkWrites(t, cl.Cluster, rec)
	expectAllOn(t, cl.Cluster, "2.0.0")
	u, _ := status(t, cl.Cluster)
	if u.State != upgrade.StateCompleted || len(u.Effects) > 0 {
		t.Errorf("the upgrade: %s, owing %v", u.State, u.Effects)
	}
	if most != 1 || len(seen) < 3 {
		t.Errorf("the balancer saw %v locked, at most %d at once: want each of the 3 hosts, one at a time", seen, most)
	}
	if left, err := lockedHosts(http.DefaultClient, cl.Cluster); err != nil || len(left) > 0 {
		t.Errorf("left locked: %v (%v)", left, err)
	}
	if n := len(rw.lines()); n != 3 {
		t.Errorf("%d reinstalls took a host's sshd down, want 3", n)
	}

	ran := commandsRan(t, log)
	t.Logf("the hosts' commands:\n%s", strings.Join(ran, "\n"))
	ip := map[string]string{}
	for _, h := range cl.env.Hosts {
		ip[h.Name] = h.IP
	}
	count := map[string]int{}
	for _, l := range ran {
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Errorf("a log line %q", l)
			continue
		}
		kind, host, on := f[0], f[1], f[4]
		count[kind+" "+host]++
		want := ip[host]
		if host == "h3" && (kind == "lock" || kind == "unlock") {
			want = ip["h1"] // run on the active controller
		}
		if on != want {
			t.Errorf("%s of %s ran on %s, want %s", kind, host, on, want)
		}
		if (kind == "reinstall" || kind == "migrate") && f[2] != "2.0.0" {
			t.Errorf("%s of %s with %s, want 2.0.0", kind, host, f[2])
		}
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		for _, k := range []string{"lock", "unlock", "reinstall", "migrate"} {
			if count[k+" "+h] != 1 {
				t.Errorf("%s of %s ran %d times, want once", k, h, count[k+" "+h])
			}
		}
	}

	// The events: each host locked, reinstalled, migrated, its members
	// moved, unlocked, in that order; the lock journaled with the
	// command and where it runs.
	steps := map[string][]string{}
	journaled := ""
	for _, ev := range eventsOf(t, cl.Cluster, u.ID) {
		if m := regexp.MustCompile(`^host (h\d): \S* → (\S+)$`).FindStringSubmatch(ev.Message); m != nil {
			steps[m[1]] = append(steps[m[1]], m[2])
		}
		if strings.Contains(ev.Message, "host h3 locked:") && journaled == "" {
			journaled = ev.Message
		}
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		got := strings.Join(steps[h], " ")
		if strings.Trim(strings.TrimPrefix(got, "pending"), " ") != "locking reinstalling migrating locked unlocking done" {
			t.Errorf("host %s went %s", h, got)
		}
	}
	if !strings.Contains(journaled, "lock h3") || !strings.Contains(journaled, "(run on h1)") {
		t.Errorf("h3's lock journaled as %q, want its command and where it runs", journaled)
	}
	t.Logf("journaled: %s", journaled)
}

// TestSSHReinstallPastItsBound: the first host to reinstall keeps its
// sshd down 15 s, past its bound of 4 s: the reinstall fails naming the
// host and the bound, and the upgrade rolls back (the host held while
// it does not answer): the host reinstalled with 1.0.0 (its sshd down
// 1 s), every host moved before it returned, every member on 1.0.0,
// nothing left locked, 0 failed requests through the balancer.
func TestSSHReinstallPastItsBound(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	cl, log, state := startSSHHosts(t, "4s")
	var first string
	var mu sync.Mutex
	rw := watchReinstalls(t, cl.env, state, func(h, v string, _ int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if first == "" && v == "2.0.0" {
			first = h
			return 15 * time.Second
		}
		return time.Second
	})
	out, code, took, rec := upgradeUnderTraffic(t, cl)
	rw.end()
	t.Logf("ferry upgrade start: exit %d after %s; %s\n%s", code, took.Round(time.Millisecond), strings.Join(rw.lines(), "; "), out)
	if code == 0 {
		t.Fatal("the upgrade succeeded with a reinstall past its bound")
	}
	u, _ := status(t, cl.Cluster)
	mu.Lock()
	h := first
	mu.Unlock()
	if u.State != upgrade.StateRolledBack || len(u.Effects) > 0 {
		t.Errorf("the upgrade: %s, owing %v", u.State, u.Effects)
	}
	for _, w := range []string{"host " + h, "reinstall", "bound 4s"} {
		if !strings.Contains(u.Reason, w) {
			t.Errorf("the reason does not say %q: %s", w, u.Reason)
		}
	}
	t.Logf("reason: %s", u.Reason)
	expectAllOn(t, cl.Cluster, "1.0.0")
	if failed := failedRequests(rec); failed > 0 {
		t.Errorf("%d of %d requests failed, want 0", failed, len(rec.Samples()))
	}
	checkWrites(t, cl.Cluster, rec)
	if left, err := lockedHosts(http.DefaultClient, cl.Cluster); err != nil || len(left) > 0 {
		t.Errorf("left locked: %v (%v)", left, err)
	}
	ran := commandsRan(t, log)
	t.Logf("the hosts' commands:\n%s", strings.Join(ran, "\n"))
	var reinstalls []string
	for _, l := range ran {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "reinstall" && f[1] == h {
			reinstalls = append(reinstalls, f[2])
		}
	}
	if strings.Join(reinstalls, " ") != "2.0.0 1.0.0" {
		t.Errorf("%s reinstalled with %v, want 2.0.0 then 1.0.0 (the rollback's)", h, reinstalls)
	}
}

// TestSSHKeyChangedMidUpgradeStops: during the upgrade, host h3's sshd
// goes down with its connections and comes back with another host key
// (as a host reinstalled behind ferry's back, or a machine in the
// middle, would). ferry dials again, is refused, and stops: the upgrade
// pauses with the reason naming h3 and both fingerprints, never held
// as an outage waiting for the host to answer; no member is admitted
// after the refusal.
func TestSSHKeyChangedMidUpgradeStops(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	cl := startSSHCluster(t)
	bg := startFerry(t, cl.Cluster, "upgrade", "start", "--to", "2.0.0", "-q")
	waitFor(t, 90*time.Second, "a member's move done", func() bool {
		bg.alive(t)
		u, ok := status(t, cl.Cluster)
		return ok && moved(u) >= 1
	})
	h3 := cl.env.Hosts[2]
	h3.StopSSHD()
	old, now := h3.Rekey(t)
	changed := time.Now()
	var u upgrade.Upgrade
	waitFor(t, 60*time.Second, "the upgrade stopped on h3's key", func() bool {
		bg.alive(t)
		var ok bool
		u, ok = status(t, cl.Cluster)
		return ok && u.State == upgrade.StatePaused
	})
	t.Logf("paused %s after h3's key changed: %s", time.Since(changed).Round(time.Millisecond), u.Reason)
	for _, w := range []string{"stopped", "ssh host h3", old, now, "CHANGED"} {
		if !strings.Contains(u.Reason, w) {
			t.Errorf("the reason does not say %q: %s", w, u.Reason)
		}
	}
	admitted := moved(u) + inFlight(u)
	time.Sleep(3 * time.Second) // what it does meanwhile: nothing more is admitted
	v, _ := status(t, cl.Cluster)
	if n := moved(v) + inFlight(v); n > admitted || v.State != upgrade.StatePaused {
		t.Errorf("after the refusal: %s, %d members moved or moving, were %d", v.State, n, admitted)
	}
	for _, ev := range eventsOf(t, cl.Cluster, u.ID) {
		if ev.Kind == "outage" && strings.Contains(ev.Message, "CHANGED") {
			t.Errorf("the refusal was taken for an outage: %s", ev.Message)
		}
	}
}
