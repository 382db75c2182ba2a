package e2e

import (
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
)

// stxHosts are the StarlingX-shaped example's hosts, in the order of
// the description (examples/starlingx/cluster.yaml.tmpl).
var stxHosts = []string{"controller-0", "controller-1", "storage-0", "storage-1", "worker-0", "worker-1", "worker-2"}

// stxCluster is examples/starlingx on seven namespace hosts: the
// cluster, the state directory its hostcmd.sh shares with ferry, the
// script, and release 2.0.0's signature file with its good content.
type stxCluster struct {
	*sshCluster
	state, script string
	sig           string
	goodSig       []byte
	ip            map[string]string // each host's address
}

// startStarlingX makes seven namespace hosts, fills in
// examples/starlingx/cluster.yaml.tmpl for them (release 2.0.0 signed
// with an Ed25519 key made here), starts the balancer on the hosts'
// gateway and brings the cluster up on 1.0.0, every host's load 1.0.0
// with its platform data. Each swact takes handover (the coordinators'
// --handover-delay) at least.
func startStarlingX(t *testing.T, handover time.Duration) *stxCluster {
	t.Helper()
	env := sshtest.New(t, len(stxHosts))
	dir := t.TempDir()
	ports, err := loopback.Ports(rand.Uint64(), 2)
	if err != nil {
		t.Fatal(err)
	}
	lbAddr, lbAdmin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("%s:%d", env.Gateway, ports[1])
	root, err := filepath.Abs("../../../examples/starlingx")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "cluster.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	st := &stxCluster{state: filepath.Join(dir, "state"), script: filepath.Join(root, "hostcmd.sh"), sig: filepath.Join(dir, "sample-2.0.0.sig"), ip: map[string]string{}}
	vars := map[string]string{"HOSTCMD": st.script, "STATE": st.state, "KEY": filepath.Join(dir, "signing.pub"), "SIG2": st.sig,
		"HANDOVERDELAY": handover.String()}
	var hosts, backends []string
	for i, name := range stxHosts {
		h := env.Hosts[i]
		personality, _, _ := strings.Cut(name, "-") // controller, storage, worker
		hosts = append(hosts, "  - "+strings.Replace(h.YAML(), "name: "+h.Name+",", "name: "+name+", labels: {personality: "+personality+"},", 1))
		vars[strings.ToUpper(strings.ReplaceAll(name, "-", ""))] = h.IP
		st.ip[name] = h.IP
		if w, ok := strings.CutPrefix(name, "worker-"); ok {
			backends = append(backends, fmt.Sprintf("api-%s=%s:8201@%s", w, h.IP, name))
		}
		writeIn(t, filepath.Join(st.state, "load", name), "1.0.0\n")
		writeIn(t, filepath.Join(st.state, "data", name, "1.0.0", "platform.conf"), "host="+name+"\n")
		if strings.HasPrefix(name, "controller-") {
			writeIn(t, filepath.Join(st.state, "coord", name), h.IP+":8301")
		}
	}
	writeIn(t, filepath.Join(st.state, "lb"), "http://"+lbAdmin)
	vars["HOSTS"] = strings.Join(hosts, "\n")
	pub, priv, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	write(t, vars["KEY"], []byte(base64.StdEncoding.EncodeToString(pub)+"\n"), 0o644)
	for i, v := range []string{"1.0.0", "2.0.0"} {
		b, err := os.ReadFile(bin.sample[v])
		if err != nil {
			t.Fatal(err)
		}
		vars[fmt.Sprintf("BIN%d", i+1)], vars[fmt.Sprintf("SUM%d", i+1)] = bin.sample[v], sha(b)
		if v == "2.0.0" {
			st.goodSig = ed25519.Sign(priv, b)
			write(t, st.sig, st.goodSig, 0o644)
		}
	}
	// Only ${NAME}: the description's own templates have $ of theirs.
	desc := regexp.MustCompile(`\$\{[A-Z0-9]+\}`).ReplaceAllStringFunc(string(tmpl), func(k string) string {
		v, ok := vars[k[2:len(k)-1]]
		if !ok {
			t.Fatalf("cluster.yaml.tmpl: no value for %s", k)
		}
		return v
	})
	st.sshCluster = upSSH(t, env, dir, desc, lbAddr, lbAdmin, backends)
	return st
}

// writeIn writes s into path, its directory made first.
func writeIn(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, []byte(s), 0o644)
}

// loads reads the load each host runs, as its reinstall left it.
func (st *stxCluster) loads(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, h := range stxHosts {
		out[h] = strings.TrimSpace(readFile(t, filepath.Join(st.state, "load", h)))
	}
	return out
}

// dataLoads lists, for each host, the loads whose platform data it
// keeps, and whether each has the host's platform.conf.
func (st *stxCluster) dataLoads(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, h := range stxHosts {
		es, err := os.ReadDir(filepath.Join(st.state, "data", h))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			d := e.Name()
			if _, err := os.Stat(filepath.Join(st.state, "data", h, d, "platform.conf")); err != nil {
				d += " (no platform.conf)"
			}
			out[h] = append(out[h], d)
		}
	}
	return out
}

// configChange tries a configuration change through the example's
// script, as an operator would during the upgrade: nil when allowed.
func (st *stxCluster) configChange() error {
	out, err := exec.Command(st.script, st.state, "config", "change").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockedNow lists the hosts the example's script has locked.
func (st *stxCluster) lockedNow(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(st.state, "locked"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// expectEnded checks the cluster after upgrade u ended in state want:
// nothing owed, every member and every host's load on version, 0
// failed requests and every acknowledged write read back, no host
// locked (at the balancer or by the script), configuration changes
// allowed again.
func (st *stxCluster) expectEnded(t *testing.T, u upgrade.Upgrade, want upgrade.State, version string, rec *traffic.Recorder) {
	t.Helper()
	if u.State != want || len(u.Effects) > 0 {
		t.Errorf("the upgrade: %s (%s), owing %v; want %s", u.State, u.Reason, u.Effects, want)
	}
	expectAllOn(t, st.Cluster, version)
	for h, v := range st.loads(t) {
		if v != version {
			t.Errorf("host %s runs load %s, want %s", h, v, version)
		}
	}
	if failed := failedRequests(rec); failed > 0 {
		t.Errorf("%d of %d requests failed, want 0", failed, len(rec.Samples()))
	}
	t.Logf("%d requests, %d failed", len(rec.Samples()), failedRequests(rec))
	checkWrites(t, st.Cluster, rec)
	if left, err := lockedHosts(http.DefaultClient, st.Cluster); err != nil || len(left) > 0 || len(st.lockedNow(t)) > 0 {
		t.Errorf("left locked: %v %v (%v)", left, st.lockedNow(t), err)
	}
	if err := st.configChange(); err != nil {
		t.Errorf("a configuration change once the upgrade ended: %v", err)
	}
}

// lockSets records each different set of hosts the balancer has locked
// at once, polled every 50 ms until end.
type lockSets struct {
	mu   sync.Mutex
	sets map[string]bool
	stop chan struct{}
	done chan struct{}
}

func watchLockSets(admin string) *lockSets {
	ls := &lockSets{sets: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	c := &http.Client{Timeout: time.Second}
	go func() {
		defer close(ls.done)
		for {
			if locked, err := lockedHosts(c, &demo.Cluster{LBAdmin: admin}); err == nil && len(locked) > 0 {
				ls.mu.Lock()
				ls.sets[strings.Join(locked, " ")] = true
				ls.mu.Unlock()
			}
			select {
			case <-ls.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return ls
}

func (ls *lockSets) end() []string {
	close(ls.stop)
	<-ls.done
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]string, 0, len(ls.sets))
	for s := range ls.sets {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// stateOrder lists the upgrade's states, as shown (StarlingX's words
// where the flow names them), in the order its events say it entered
// them, each once in a row.
func stateOrder(t *testing.T, st *stxCluster, id string) []string {
	t.Helper()
	re := regexp.MustCompile(`^state .+ → ([^\s:]+)`)
	var out []string
	for _, ev := range eventsOf(t, st.Cluster, id) {
		if m := re.FindStringSubmatch(ev.Message); ev.Kind == "state" && m != nil && (len(out) == 0 || out[len(out)-1] != m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// hostSteps lists each host's steps in the order the events say.
func hostSteps(t *testing.T, st *stxCluster, id string) (map[string][]string, []string) {
	t.Helper()
	re := regexp.MustCompile(`^host (\S+): \S* → (\S+)$`)
	steps := map[string][]string{}
	var locking []string
	for _, ev := range eventsOf(t, st.Cluster, id) {
		if m := re.FindStringSubmatch(ev.Message); m != nil {
			steps[m[1]] = append(steps[m[1]], m[2])
			if m[2] == "locking" {
				locking = append(locking, m[1])
			}
		}
	}
	return steps, locking
}

// TestStarlingXPlatformFlow: examples/starlingx on seven namespace
// hosts. A load whose signature does not verify is refused before
// anything moves (no member restarted, no host command run, no upgrade
// recorded). With the good signature, 'ferry upgrade start' runs
// StarlingX's flow under client traffic through the balancer, its
// states shown in StarlingX's words: upgrade-started (configuration
// changes refused from then on), upgrading-controllers (the stage of
// controller-1: locked, reinstalled, migrated, its coord moved,
// unlocked; then the stage of controller-0: the swact of coord's role
// to coord-1 by ferry's switchover, journaled, then controller-0's
// lock, run on controller-1 where the role went, which passes the
// point of no return: an abort from then on is refused naming that
// lock), upgrading-hosts (the storage hosts, 50%: one at a time; the
// workers two at a time), activating, activation-complete (the role
// back to controller-0), completing (the 1.0.0 data removed),
// completed: every state in that order in the events, 0 failed
// requests across the swact (from the switchover until 2 s after
// coord-1 holds the role) and in all, every acknowledged write read
// back, every host on 2.0.0, nothing locked, configuration changes
// allowed again.
func TestStarlingXPlatformFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	st := startStarlingX(t, 0)

	// A load whose signature does not verify: refused before anything moves.
	before := st.pids(t)
	bad := slices.Clone(st.goodSig)
	bad[0] ^= 0xff
	write(t, st.sig, bad, 0o644)
	out, code := ferry(t, st.Cluster, "upgrade", "start", "--to", "2.0.0", "-q")
	t.Logf("with a bad signature, ferry upgrade start: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, "signature of") {
		t.Fatalf("exit %d, want a refusal naming the signature", code)
	}
	if after := st.pids(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("members' processes changed: %v, were %v", after, before)
	}
	if u, ok := status(t, st.Cluster); ok {
		t.Errorf("an upgrade was recorded: %s %s", u.ID, u.State)
	}
	if _, err := os.Stat(filepath.Join(st.state, "commands.log")); err == nil {
		t.Errorf("host commands ran before the refusal:\n%s", readFile(t, filepath.Join(st.state, "commands.log")))
	}
	write(t, st.sig, st.goodSig, 0o644)
	if err := st.configChange(); err != nil {
		t.Fatalf("a configuration change before the upgrade: %v", err)
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("traffic seed %d", seed)
	stop := clientTraffic(st.Cluster, seed)
	locks := watchLockSets(st.LBAdmin)
	began := time.Now()
	bg := startFerry(t, st.Cluster, "upgrade", "start", "--to", "2.0.0")
	var u upgrade.Upgrade
	waitFor(t, 2*time.Minute, "upgrading-controllers", func() bool {
		bg.alive(t)
		var ok bool
		u, ok = status(t, st.Cluster)
		return ok && upgrade.Shown(&u) == "upgrading-controllers"
	})
	refusedChange := st.configChange()
	t.Logf("a configuration change during upgrading-controllers: %v", refusedChange)
	if refusedChange == nil {
		t.Error("a configuration change was allowed during the upgrade")
	}
	waitFor(t, 3*time.Minute, "upgrading-hosts", func() bool {
		bg.alive(t)
		var ok bool
		u, ok = status(t, st.Cluster)
		return ok && upgrade.Shown(&u) == "upgrading-hosts"
	})
	out, code = ferry(t, st.Cluster, "upgrade", "abort")
	t.Logf("ferry upgrade abort in upgrading-hosts: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, "point of no return, host controller-0's lock") || u.NoReturnHost != "controller-0" {
		t.Errorf("the abort past the point of no return: exit %d (passed at %q), want a refusal naming controller-0's lock", code, u.NoReturnHost)
	}
	code, out = bg.wait(t)
	took := time.Since(began)
	rec := stop()
	sets := locks.end()
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	t.Logf("StarlingX's flow on 7 hosts in %s:\n%s", took.Round(time.Millisecond), out)
	u, _ = status(t, st.Cluster)
	st.expectEnded(t, u, upgrade.StateCompleted, "2.0.0", rec)

	states := stateOrder(t, st, u.ID)
	t.Logf("states: %s", strings.Join(states, " → "))
	want := []string{"preflight", "upgrading-controllers", "upgrading-hosts", "activating", "activation-complete", "completing", "completed"}
	if got := slices.DeleteFunc(slices.Clone(states), func(s string) bool { return !slices.Contains(want, s) }); !slices.Equal(got, want) {
		t.Errorf("states in the events: %v, want %v in that order", states, want)
	}
	steps, locking := hostSteps(t, st, u.ID)
	t.Logf("hosts locked in the order %v", locking)
	for _, h := range stxHosts {
		if got := strings.TrimSpace(strings.TrimPrefix(strings.Join(steps[h], " "), "pending")); got != "locking reinstalling migrating locked unlocking done" {
			t.Errorf("host %s went %s", h, got)
		}
	}
	if len(locking) < 4 || locking[0] != "controller-1" || locking[1] != "controller-0" || !strings.HasPrefix(locking[2], "storage-") || !strings.HasPrefix(locking[3], "storage-") {
		t.Errorf("hosts locked in the order %v: want controller-1, controller-0, the storage hosts, then the workers", locking)
	}
	t.Logf("the balancer saw locked at once: %q", sets)
	workersAtOnce := 0
	for _, s := range sets {
		f := strings.Fields(s)
		storage := len(slices.DeleteFunc(slices.Clone(f), func(h string) bool { return !strings.HasPrefix(h, "storage-") }))
		workers := len(slices.DeleteFunc(slices.Clone(f), func(h string) bool { return !strings.HasPrefix(h, "worker-") }))
		workersAtOnce = max(workersAtOnce, workers)
		if storage > 1 || storage > 0 && workers > 0 || len(f) > 2 {
			t.Errorf("locked at once: %s (at most half the storage hosts, no worker with a storage host, at most 2 hosts)", s)
		}
	}
	t.Logf("workers locked at once, at most: %d", workersAtOnce)

	ran := readFile(t, filepath.Join(st.state, "commands.log"))
	t.Logf("the hosts' commands:\n%s", ran)
	// Each lock and unlock ran on the active controller: controller-1's
	// on controller-0, controller-0's on controller-1 after the swact.
	for h, on := range map[string]string{"controller-1": "controller-0", "controller-0": "controller-1", "storage-0": "controller-1"} {
		if line := "lock " + h + " - on " + st.ip[on]; !strings.Contains(ran, line) {
			t.Errorf("no %q in the commands' log: %s's lock not run on %s", line, h, on)
		}
	}
	if a := coordActive(t, st.Cluster); a != "coord-0" {
		t.Errorf("the active coordinator after the upgrade: %q, want coord-0 (swacted back to controller-0 by action-swact)", a)
	}
	// The requests around the swact: from controller-0's lock until
	// 2 s after coord-1 was seen holding the role.
	var from, to time.Time
	for _, ev := range eventsOf(t, st.Cluster, u.ID) {
		switch {
		case strings.Contains(ev.Message, "the role active switched over from coord-0 to coord-1") && from.IsZero():
			from = ev.Time // the switchover journaled, before its call
		case ev.Kind == "role" && ev.Message == "coord-1 holds the role active" && to.IsZero():
			to = ev.Time.Add(2 * time.Second)
		}
	}
	around, failedAround := 0, 0
	for _, smp := range rec.Samples() {
		if !smp.Start.Before(from) && smp.Start.Before(to) {
			around++
			if !smp.OK {
				failedAround++
			}
		}
	}
	t.Logf("across the swact (%s from the switchover): %d requests, %d failed", to.Sub(from).Round(time.Millisecond), around, failedAround)
	if from.IsZero() || to.IsZero() || around == 0 || failedAround > 0 {
		t.Errorf("across the swact (%s to %s): %d requests, %d failed; want some, none failed", from, to, around, failedAround)
	}
	for h, ds := range st.dataLoads(t) {
		if fmt.Sprint(ds) != "[2.0.0]" {
			t.Errorf("host %s keeps platform data %v, want [2.0.0] (migrated, the 1.0.0 data removed at completing)", h, ds)
		}
	}
}

// TestStarlingXAbortBeforeNoReturn: examples/starlingx on seven
// namespace hosts, each swact 3 s long, aborted once controller-1 is
// upgraded and controller-0's turn has begun with the swact (ferry's
// switchover of coord's role to coord-1, journaled; before the point of
// no return, which is controller-0's lock): the abort is let through,
// the switchover's undo hands the role back to coord-0 before
// controller-1 is locked again for coord-1's return, and every host
// returns to load 1.0.0 (each reinstalled host reinstalled with 1.0.0
// again, StarlingX's aborting-reinstall), every member on 1.0.0,
// nothing locked, configuration changes allowed again, 0 failed
// requests.
func TestStarlingXAbortBeforeNoReturn(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	st := startStarlingX(t, 3*time.Second)
	seed := uint64(time.Now().UnixNano())
	t.Logf("traffic seed %d", seed)
	stop := clientTraffic(st.Cluster, seed)
	bg := startFerry(t, st.Cluster, "upgrade", "start", "--to", "2.0.0", "-q")
	var u upgrade.Upgrade
	waitFor(t, 3*time.Minute, "controller-0's swact", func() bool {
		bg.alive(t)
		var ok bool
		u, ok = status(t, st.Cluster)
		h := u.Hosts["controller-0"]
		return ok && h != nil && h.Step != upgrade.HostPending
	})
	t.Logf("aborting with controller-0 %s (passed the point of no return at %q)", u.Hosts["controller-0"].Step, u.NoReturnHost)
	out, code := ferry(t, st.Cluster, "upgrade", "abort")
	if code != 0 {
		t.Fatalf("ferry upgrade abort: exit %d\n%s", code, out)
	}
	code, out = bg.wait(t)
	rec := stop()
	t.Logf("ferry upgrade start: exit %d\n%s", code, out)
	u, _ = status(t, st.Cluster)
	st.expectEnded(t, u, upgrade.StateRolledBack, "1.0.0", rec)
	t.Logf("states: %s", strings.Join(stateOrder(t, st, u.ID), " → "))
	ran := readFile(t, filepath.Join(st.state, "commands.log"))
	t.Logf("the hosts' commands:\n%s", ran)
	// Each host reinstalled with 2.0.0 is reinstalled with 1.0.0 again;
	// the swact's undo hands the role back to controller-0 before
	// controller-1 is locked for its return.
	for _, h := range []string{"controller-0", "controller-1"} {
		if strings.Contains(ran, "reinstall "+h+" 2.0.0") && !strings.Contains(ran, "reinstall "+h+" 1.0.0") {
			t.Errorf("%s was reinstalled with 2.0.0, never with 1.0.0 again", h)
		}
	}
	if a := coordActive(t, st.Cluster); a != "coord-0" {
		t.Errorf("the active coordinator after the abort: %q, want coord-0 (controller-0's, as before)", a)
	}
	var swact string
	var undone, relock time.Time
	opened := regexp.MustCompile(`^effect (e\d+) opened \(upgrade\): coord: the role active switched over from coord-0 to coord-1`)
	for _, ev := range eventsOf(t, st.Cluster, u.ID) {
		switch m := opened.FindStringSubmatch(ev.Message); {
		case m != nil:
			swact = m[1]
		case swact != "" && strings.HasPrefix(ev.Message, "effect "+swact+" undone"):
			undone = ev.Time
		case !undone.IsZero() && ev.Message == "host controller-1: pending → locking":
			relock = ev.Time
		}
	}
	t.Logf("the swact %s undone at %s, controller-1 locked again at %s", swact, undone.Format(time.StampMilli), relock.Format(time.StampMilli))
	if swact == "" || undone.IsZero() || relock.IsZero() {
		t.Errorf("want the swact journaled (%q), undone (%s), then controller-1 locked again (%s)", swact, undone, relock)
	}
}

// TestStarlingXKilledResumes: examples/starlingx on seven namespace
// hosts, upgraded under client traffic while ferry is SIGKILLed at
// FERRY_STX_KILLS moments (default 10), each 0.3 to 2 s after a start
// (drawn from a seed, printed; FERRY_KILL_SEED reproduces them), and
// resumed with 'ferry upgrade resume' each time; the last resume goes
// to the end (killStorm). It must complete, killed that many times,
// with every member and host on 2.0.0, nothing owed in the journal,
// nothing locked, configuration changes allowed again, 0 failed
// requests and every acknowledged write read back.
func TestStarlingXKilledResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	least := envCount(t, "FERRY_STX_KILLS", 10)
	seed := killSeed(t)
	t.Logf("seed %d (FERRY_KILL_SEED=%d reproduces the kill points)", seed, seed)
	st := startStarlingX(t, 0)
	stop := clientTraffic(st.Cluster, seed)
	began := time.Now()
	rng, moments := rand.New(rand.NewPCG(seed, 1)), 0
	var where []string // the state and the hosts in flight at each kill
	kills := killStorm(t, st.Cluster, "2.0.0", func() time.Duration {
		if u, ok := status(t, st.Cluster); ok && moments > 0 {
			at := u.State.String()
			for _, h := range sortedHostNames(u) {
				if hm := u.Hosts[h]; hm.Step != upgrade.HostPending && hm.Step != upgrade.HostDone {
					at += " " + h + ":" + string(hm.Step)
				}
			}
			where = append(where, at)
		}
		if moments++; moments > least {
			return 0 // the kills made: the last run goes to the end
		}
		return time.Duration(300+rng.IntN(1700)) * time.Millisecond
	})
	rec := stop()
	t.Logf("completed after %d kills in %s; after each kill: %s", kills, time.Since(began).Round(time.Millisecond), strings.Join(where, "; "))
	if kills < least {
		t.Errorf("ferry was killed %d times, want at least %d", kills, least)
	}
	u, _ := status(t, st.Cluster)
	st.expectEnded(t, u, upgrade.StateCompleted, "2.0.0", rec)
	t.Logf("states: %s", strings.Join(stateOrder(t, st, u.ID), " → "))
	ran := readFile(t, filepath.Join(st.state, "commands.log"))
	t.Logf("the hosts' commands (capacity and config asks left out):\n%s", strings.Join(slices.DeleteFunc(strings.Split(ran, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "capacity ") || strings.HasPrefix(l, "config change")
	}), "\n"))
}
