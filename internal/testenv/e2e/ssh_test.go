package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// sshDescription is the sample cluster on three hosts reached over SSH
// (network namespaces, each with its own sshd): kv-N and api-N on host
// hN, every port the same on each host (each has its own network). The
// load balancer runs beside ferry, on loopback. %[1]s: the hosts; %[2]s
// the hosts' network prefix (10.A.B.); %[3]s the balancer's admin
// address; %[4]s the releases.
const sshDescription = `cluster: ssh-sample
substrate: ssh
hosts:
%[1]s
components:
  - name: kv
    order: 1
    strategy: {type: one-at-a-time, quorum: 2, max_unavailable: 1}
    members:
      - {name: kv-1, host: h1, address: "%[2]s11:8101", vars: {raft: "%[2]s11:9101"}}
      - {name: kv-2, host: h2, address: "%[2]s12:8101", vars: {raft: "%[2]s12:9101"}}
      - {name: kv-3, host: h3, address: "%[2]s13:8101", vars: {raft: "%[2]s13:9101"}}
    run:
      args: [kv, --id, "{{.Name}}", --http, "{{.Address}}", --raft, "{{.Vars.raft}}", --data, data,
             --peers, "{{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Name}}={{$m.Vars.raft}}={{$m.Address}}{{end}}"]
      stop_timeout: 10s
    health:
      member:  {http: "http://{{.Address}}/ready", expect_status: 200, interval: 100ms, timeout: 1s}
      cluster: {http: "http://{{.Any}}/cluster", json: {path: quorum, equals: true}, interval: 100ms, timeout: 1s}
    role: {name: leader, check: {http: "http://{{.Address}}/ready", json: {path: state, equals: Leader}, interval: 100ms, timeout: 1s}}
    soak: 1s
    deadline: 60s
    gate_deadline: 60s
    hooks:
      pre_stop: [{http: "http://{{.Address}}/admin/step-down", method: POST, timeout: 5s}]
  - name: api
    order: 2
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members:
      - {name: api-1, host: h1, address: "%[2]s11:8201"}
      - {name: api-2, host: h2, address: "%[2]s12:8201"}
      - {name: api-3, host: h3, address: "%[2]s13:8201"}
    run:
      args: [api, --name, "{{.Name}}", --http, "{{.Address}}", --kv, "%[2]s11:8101,%[2]s12:8101,%[2]s13:8101"]
      stop_timeout: 10s
    health:
      member: {http: "http://{{.Address}}/ready", interval: 100ms, timeout: 1s}
    soak: 1s
    deadline: 60s
    gate_deadline: 60s
    hooks:
      pre_stop:
        - http: "http://%[3]s/admin/backends/{{.Name}}/drain?timeout=10s"
          method: POST
          timeout: 15s
          undo: {http: "http://%[3]s/admin/backends/{{.Name}}/enable", method: POST}
releases:
%[4]s
policy: {on_failure: rollback, tick: 200ms}
`

// sshCluster is the sample cluster on namespace hosts, brought up with
// 'ferry cluster up' over SSH, and the hosts.
type sshCluster struct {
	*demo.Cluster
	env   *sshtest.Env
	hosts map[string]*sshtest.Host // by the name the description gives it
	lb    *exec.Cmd
}

// sshOptions change the sample on namespace hosts: the balancer's
// admin address on the hosts' network (so that a command on a host can
// reach it) and each api backend locked with its host; more of each
// host's entry (its commands); release 2.0.0's flow.
type sshOptions struct {
	// Hosts adds keys to host h's entry, given the balancer's admin
	// URL, when set; the balancer then listens on the hosts' gateway.
	Hosts func(h *sshtest.Host, lbAdmin string) string
	Flow  string
}

// startSSHCluster makes three namespace hosts, writes the description,
// starts the load balancer and brings the cluster up on 1.0.0 with
// 'ferry cluster up' (which copies the sample binary to each host), and
// waits until every member is healthy and the balancer sees each api
// member. The test's end brings it down with 'ferry cluster down' and
// removes the hosts.
func startSSHCluster(t *testing.T) *sshCluster {
	t.Helper()
	return startSSHClusterWith(t, sshOptions{})
}

// startSSHClusterWith is startSSHCluster changed by o.
func startSSHClusterWith(t *testing.T, o sshOptions) *sshCluster {
	t.Helper()
	env := sshtest.New(t, 3)
	dir := t.TempDir()
	seed := rand.Uint64()
	ports, err := loopback.Ports(seed, 2)
	if err != nil {
		t.Fatal(err)
	}
	lbAddr, lbAdmin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	if o.Hosts != nil {
		lbAdmin = fmt.Sprintf("%s:%d", env.Gateway, ports[1])
	}
	var hosts, rels []string
	for _, h := range env.Hosts {
		y := h.YAML()
		if o.Hosts != nil {
			y = strings.TrimSuffix(y, "}") + ", " + o.Hosts(h, "http://"+lbAdmin) + "}"
		}
		hosts = append(hosts, "  - "+y)
	}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		sum, err := checksum.File(bin.sample[v])
		if err != nil {
			t.Fatal(err)
		}
		r := fmt.Sprintf("  - version: %q\n", v)
		if v != "1.0.0" {
			r += "    upgrade_from: [\"1.0.x\"]\n"
			if o.Flow != "" {
				r += "    flow: " + o.Flow + "\n"
			}
		}
		rels = append(rels, r+fmt.Sprintf("    artifacts: {\"*\": {path: %q, sha256: %q}}", bin.sample[v], sum))
	}
	prefix := strings.TrimSuffix(env.Gateway, "1")
	desc := fmt.Sprintf(sshDescription, strings.Join(hosts, "\n"), prefix, lbAdmin, strings.Join(rels, "\n"))
	// The balancer, beside ferry: not a member of the description.
	var backends []string
	for i := 1; i <= 3; i++ {
		b := fmt.Sprintf("api-%d=%s%d:8201", i, prefix, 10+i)
		if o.Hosts != nil {
			b += fmt.Sprintf("@h%d", i) // locked with its host
		}
		backends = append(backends, b)
	}
	return upSSH(t, env, dir, desc, lbAddr, lbAdmin, backends)
}

// upSSH writes description desc into dir, starts the balancer (its
// client address lbAddr, its admin lbAdmin, each of backends one
// --backend) and brings the cluster up on 1.0.0 with 'ferry cluster up'
// over SSH on env's hosts, then waits until the balancer sees every
// backend healthy. The test's end brings it down with 'ferry cluster
// down'.
func upSSH(t *testing.T, env *sshtest.Env, dir, desc, lbAddr, lbAdmin string, backends []string) *sshCluster {
	t.Helper()
	cl := &sshCluster{env: env, hosts: map[string]*sshtest.Host{}, Cluster: &demo.Cluster{Dir: dir, File: filepath.Join(dir, "cluster.yaml"), DataDir: filepath.Join(dir, "ferry"),
		LB: "http://" + lbAddr, LBAdmin: "http://" + lbAdmin, Addresses: map[string]string{}}}
	if err := os.WriteFile(cl.File, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(cl.File)
	if err != nil {
		t.Fatalf("the description: %v\n%s", err, desc)
	}
	cl.Config = c
	if cl.Driver, err = substrate.New(c, substrate.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d, ok := cl.Driver.(interface{ Close() error }); ok {
			d.Close()
		}
	})
	for i, h := range c.Hosts {
		cl.hosts[h.Name] = env.Hosts[i]
	}
	for _, comp := range c.ComponentsInOrder() {
		for _, m := range comp.Members {
			cl.Members = append(cl.Members, driver.Member{Name: m.Name, Component: comp.Name, Host: m.Host, Address: m.Address})
			cl.Addresses[m.Name] = m.Address
		}
	}
	args := []string{"lb", "--http", lbAddr, "--admin", lbAdmin}
	for _, b := range backends {
		args = append(args, "--backend", b)
	}
	logf, err := os.Create(filepath.Join(dir, "lb.log"))
	if err != nil {
		t.Fatal(err)
	}
	cl.lb = exec.Command(bin.sample["1.0.0"], args...)
	cl.lb.Stdout, cl.lb.Stderr = logf, logf
	cl.lb.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cl.lb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.lb.Process.Kill(); _ = cl.lb.Wait(); logf.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster directory: %s; hosts' directories under %s", dir, env.Dir)
		}
		if out, code := ferry(t, cl.Cluster, "cluster", "down"); code != 0 {
			t.Logf("ferry cluster down: exit %d\n%s", code, out)
		}
	})
	start := time.Now()
	out, code := ferry(t, cl.Cluster, "cluster", "up", "--version", "1.0.0")
	if code != 0 {
		t.Fatalf("ferry cluster up: exit %d\n%s", code, out)
	}
	waitFor(t, 30*time.Second, "the balancer seeing every api member", func() bool { return lbHealthy(cl.LBAdmin) })
	t.Logf("ferry cluster up over SSH on %d hosts: %s\n%s", len(env.Hosts), time.Since(start).Round(time.Millisecond), out)
	return cl
}

// lbHealthy reports whether the balancer sees each backend healthy.
func lbHealthy(admin string) bool {
	resp, err := http.Get(admin + "/admin/backends")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var bs []struct {
		Healthy bool `json:"healthy"`
	}
	if json.NewDecoder(resp.Body).Decode(&bs) != nil || len(bs) == 0 {
		return false
	}
	for _, b := range bs {
		if !b.Healthy {
			return false
		}
	}
	return true
}

// TestSSHUpgradeUnderTraffic: the sample cluster on three hosts reached
// over SSH (each a network namespace with its own sshd), brought up with
// 'ferry cluster up', upgraded to 2.0.0 with 'ferry upgrade start' under
// traffic through the balancer: 0 failed requests, every acknowledged
// write read back, every member on 2.0.0; 'ferry bundle' holds each
// member's output from its host, of both instances; 'ferry cluster
// down' stops every member.
func TestSSHUpgradeUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	cl := startSSHCluster(t)
	out, code, took, rec := upgradeUnderTraffic(t, cl)
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	t.Logf("upgraded over SSH in %s:\n%s", took.Round(time.Millisecond), out)
	if failed := failedRequests(rec); failed > 0 {
		t.Errorf("%d of %d requests failed, want 0", failed, len(rec.Samples()))
	}
	checkWrites(t, cl.Cluster, rec)
	expectAllOn(t, cl.Cluster, "2.0.0")
	u, _ := status(t, cl.Cluster)
	if u.State != upgrade.StateCompleted || len(u.Effects) > 0 {
		t.Errorf("the upgrade: %s, owing %v", u.State, u.Effects)
	}

	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if out, code := ferry(t, cl.Cluster, "bundle", "-o", path); code != 0 {
		t.Fatalf("ferry bundle: exit %d\n%s", code, out)
	}
	files := readBundle(t, path)
	for _, m := range cl.Members {
		cur, prev := files["members/"+m.Name+"/current.log"], files["members/"+m.Name+"/previous.log"]
		if cur == "" || prev == "" {
			t.Errorf("the bundle has %d bytes of %s's current output and %d of its previous (1.0.0) instance's, want both", len(cur), m.Name, len(prev))
		}
	}

	if out, code := ferry(t, cl.Cluster, "cluster", "down"); code != 0 {
		t.Fatalf("ferry cluster down: exit %d\n%s", code, out)
	}
	for n, v := range versions(t, cl.Cluster) {
		if !strings.HasSuffix(v, "(not running)") {
			t.Errorf("%s after cluster down: %s", n, v)
		}
	}
}

// pids reads the pid file ferry's helper keeps for each member on its
// host (the hosts share this machine's file system).
func (cl *sshCluster) pids(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range cl.Members {
		h := cl.hosts[m.Host]
		b, err := os.ReadFile(filepath.Join(h.Dir, "members", m.Name, "pid"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(h.Dir, "members", m.Name, "stopped")); err == nil {
			out[m.Name] = "stopped"
			continue
		}
		pid := strings.TrimSpace(string(b))
		if _, err := os.Stat("/proc/" + pid); err != nil {
			pid += " (gone)"
		}
		out[m.Name] = pid
	}
	return out
}

// TestSSHChangedHostKeyStopsEverything: host h2 presents a new key (its
// sshd restarted with it, as a reinstalled host or a machine in the
// middle would): 'ferry upgrade start' refuses before anything moves,
// naming h2 and both fingerprints; no member was stopped (each runs
// the same process), and no upgrade was recorded.
func TestSSHChangedHostKeyStopsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	cl := startSSHCluster(t)
	before := cl.pids(t)
	old, now := cl.env.Hosts[1].Rekey(t)
	out, code := ferry(t, cl.Cluster, "upgrade", "start", "--to", "2.0.0", "-q")
	t.Logf("ferry upgrade start: exit %d\n%s", code, out)
	if code == 0 {
		t.Fatal("the upgrade started with a host whose key changed")
	}
	for _, w := range []string{"ssh host h2", cl.env.Hosts[1].SSH, old, now} {
		if !strings.Contains(out, w) {
			t.Errorf("the refusal does not name %q", w)
		}
	}
	if after := cl.pids(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("members' processes changed: %v, were %v", after, before)
	}
	if u, ok := status(t, cl.Cluster); ok {
		t.Errorf("an upgrade was recorded: %s %s", u.ID, u.State)
	}
}

// TestSSHHostCutOffHolds: during the upgrade, host h3's link goes down
// (its members run on, unreachable). The upgrade holds: the record
// names the outage and the host, and no member is admitted while it
// lasts; once the link is up again the upgrade goes on and completes,
// every member on 2.0.0.
func TestSSHHostCutOffHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	cl := startSSHCluster(t)
	bg := startFerry(t, cl.Cluster, "upgrade", "start", "--to", "2.0.0", "-q")
	var u upgrade.Upgrade
	waitFor(t, 90*time.Second, "a member's move done", func() bool {
		bg.alive(t)
		var ok bool
		u, ok = status(t, cl.Cluster)
		return ok && moved(u) >= 1
	})
	h3 := cl.env.Hosts[2]
	if err := h3.LinkDown(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	linkUp := func() {
		if err := h3.LinkUp(); err != nil {
			t.Error(err)
		}
	}
	defer func() {
		if !t.Failed() {
			return
		}
		linkUp()
	}()
	waitFor(t, 30*time.Second, "the upgrade holding on h3", func() bool {
		var ok bool
		u, ok = status(t, cl.Cluster)
		return ok && u.Outage != nil
	})
	t.Logf("holding %s after the cut: %s", time.Since(cut).Round(time.Millisecond), u.Waiting)
	if !strings.Contains(u.Outage.Detail, "ssh host h3") || !strings.Contains(u.Waiting, "holding") {
		t.Errorf("the outage does not name h3: %+v; waiting: %s", u.Outage, u.Waiting)
	}
	admitted := moved(u) + inFlight(u)
	// Held for 6 s: nothing more is admitted.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if v, ok := status(t, cl.Cluster); ok {
			if n := moved(v) + inFlight(v); n > admitted {
				t.Errorf("a member was admitted during the outage: %d moved or moving, were %d", n, admitted)
				break
			}
			if v.Outage == nil {
				t.Errorf("the outage ended while h3 was cut off: %s", v.Waiting)
				break
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	linkUp()
	t.Logf("link up after %s", time.Since(cut).Round(time.Millisecond))
	code, out := bg.wait(t)
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	expectAllOn(t, cl.Cluster, "2.0.0")
	u, _ = status(t, cl.Cluster)
	if u.State != upgrade.StateCompleted {
		t.Errorf("the upgrade: %s", u.State)
	}
	var outage []string
	for _, ev := range eventsOf(t, cl.Cluster, u.ID) {
		if strings.Contains(ev.Message, "ssh host h3") || strings.Contains(ev.Message, "answers again") {
			outage = append(outage, ev.Kind+": "+ev.Message)
		}
	}
	t.Logf("the outage in the events: %d, e.g. %.300s", len(outage), strings.Join(outage, "\n"))
	if len(outage) == 0 {
		t.Error("no event names h3's outage")
	}
}

// moved counts the members whose move is done.
func moved(u upgrade.Upgrade) int {
	n := 0
	for _, m := range u.Members {
		if m.Step == upgrade.StepDone {
			n++
		}
	}
	return n
}

// inFlight counts the members admitted and not done.
func inFlight(u upgrade.Upgrade) int {
	n := 0
	for _, m := range u.Members {
		if m.Step != upgrade.StepDone && m.Step != upgrade.StepPending {
			n++
		}
	}
	return n
}
