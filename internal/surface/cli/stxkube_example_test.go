package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// TestStarlingXKubernetesExample runs examples/starlingx-kubernetes as
// its README says, on the repository's test control plane
// (FERRY_KUBE=1): StarlingX's Kubernetes upgrade on two controllers and
// four workers (kwok's nodes), each host's control plane and kubelet
// two components sharing it.
//
//   - 1.39.0 is refused before anything moves: two applications do not
//     support it, each named;
//   - 1.37.2 → 1.38.0 with worker-2's kubelet upgrade failing: the
//     first control plane, the networking, the second, the controllers'
//     kubelets, the workers': StarlingX's states in that order in the
//     events, then upgrade-failed, with 1.38.0 and 1.37.2 both partial
//     in the version list and each host's two versions in the hosts view;
//     ferry SIGKILLed, the cause fixed, ferry upgrade resume goes on
//     from the versions running: worker-2, then worker-3, no other host
//     upgraded again and no control plane pod replaced again;
//   - an observer of its own (a watch of the nodes) never sees two
//     controllers cordoned at once, nor more than two workers, and sees
//     two workers at once (the workers in parallel);
//   - 1.38.0 → 1.38.1 → 1.38.0 (a downgrade to a listed patch); 1.37.2
//     refused, saying why.
func TestStarlingXKubernetesExample(t *testing.T) {
	began := time.Now()
	env := kubetest.Start(t, kubetest.Options{})
	src := filepath.FromSlash("../../../examples/starlingx-kubernetes")
	dir := t.TempDir()
	for _, f := range []string{"cluster.yaml", "kubehost.sh", "manifests.yaml", "nodes.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// kubehost.sh and the networking gate run kubectl, as on an
	// operator's machine: on the PATH, with $KUBECONFIG.
	path := "PATH=" + env.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")
	kubehost := func(args ...string) {
		t.Helper()
		cmd := ferryCmd(filepath.Join(dir, "kubehost.sh"), args...)
		cmd.Env = append(cmd.Env, path, "KUBECONFIG="+env.Kubeconfig)
		if r := run(t, time.Minute, cmd); r.code != 0 {
			t.Fatalf("kubehost.sh %v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	for _, f := range []string{"nodes.yaml", "manifests.yaml"} {
		if err := env.Apply(readFile(t, filepath.Join(dir, f))); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.WaitUntil(2*time.Minute, "6 nodes and 12 pods Ready", func() (bool, string, error) {
		nodes, err := env.Kubectl("get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}`)
		if err != nil {
			return false, "", err
		}
		pods, err := env.Kubectl("get", "pods", "-A", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}`)
		return strings.Count(nodes, "True") == 6 && strings.Count(pods, "True") == 12, nodes + "| " + pods, err
	}); err != nil {
		t.Fatal(err)
	}
	kubehost("init", "1.37.2")
	t.Logf("control plane, nodes and workloads ready in %s", time.Since(began).Round(time.Millisecond))

	ferryEnv := []string{path, "KUBECONFIG=" + env.Kubeconfig}
	command := func(args ...string) *exec.Cmd {
		cmd := ferryCmd("", args...)
		cmd.Dir = dir // ./kubehost.sh is found from the description's directory, as the README says
		cmd.Env = append(cmd.Env, ferryEnv...)
		return cmd
	}
	ferry := func(args ...string) result {
		t.Helper()
		r := run(t, 5*time.Minute, command(args...))
		t.Logf("ferry %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		return r
	}
	jsonOf := func(v any, args ...string) {
		t.Helper()
		r := run(t, time.Minute, command(append(args, "-o", "json")...))
		if r.code != 0 {
			t.Fatalf("ferry %v: exit %d: %s", args, r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			t.Fatalf("ferry %v: %v\n%s", args, err, r.stdout)
		}
	}
	releases := func() map[string]engine.ReleaseView {
		var rv []engine.ReleaseView
		jsonOf(&rv, "releases", "list")
		out := map[string]engine.ReleaseView{}
		for _, r := range rv {
			out[r.Version] = r
		}
		return out
	}
	hosts := func() map[string]engine.HostView {
		var hv []engine.HostView
		jsonOf(&hv, "members", "--by-host")
		out := map[string]engine.HostView{}
		for _, h := range hv {
			out[h.Host] = h
		}
		return out
	}
	if r := ferry("validate"); r.code != 0 {
		t.Fatal("validate failed")
	}
	if rv := releases(); rv["1.37.2"].State != "active" || !rv["1.37.2"].Target || rv["1.38.0"].State != "available" || rv["1.38.0"].Target {
		t.Fatalf("the version list before: %+v", rv)
	}

	// 1.39.0: refused, each application that does not support it named,
	// nothing changed.
	if r := ferry("upgrade", "start", "--to", "1.39.0", "-q"); r.code != 5 ||
		!strings.Contains(r.stderr, "FAIL  application cert-manager supports 1.39.0: cert-manager supports 1.37.x, 1.38.x, not 1.39.0") ||
		!strings.Contains(r.stderr, "FAIL  application platform-integ-apps supports 1.39.0: platform-integ-apps says no") {
		t.Fatalf("start --to 1.39.0: exit %d, want 5 naming both applications", r.code)
	}
	if r := run(t, time.Minute, command("upgrade", "status")); r.code == 0 {
		t.Fatalf("a refused start left an upgrade:\n%s", r.stdout)
	}

	// 1.38.0, worker-2's kubelet upgrade failing.
	obs := observeNodes(t, env)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(state, "fail"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(state, "fail", "worker-2"), "failed to pull image registry.local/kube-proxy:v1.38.0: not found")
	start := command("upgrade", "start", "--to", "1.38.0")
	var startOut lockedBuffer
	start.Stdout, start.Stderr = &startOut, &startOut
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- start.Wait() }()
	var status string
	if err := env.WaitUntil(4*time.Minute, "upgrade-failed", func() (bool, string, error) {
		select {
		case err := <-started:
			return false, "", fmt.Errorf("ferry upgrade start ended (%v) before it paused:\n%s", err, startOut.String())
		default:
		}
		r := run(t, time.Minute, command("upgrade", "status"))
		status = r.stdout
		return strings.Contains(status, "state:    upgrade-failed (paused)"), status, nil
	}); err != nil {
		_ = start.Process.Kill()
		t.Fatal(err)
	}
	t.Logf("ferry upgrade status, paused:\n%s", status)
	if !strings.Contains(status, "member worker-2") || !strings.Contains(status, "kubeadm upgrade node on worker-2: failed to pull image") {
		t.Errorf("the status does not name worker-2 and the failure's words:\n%s", status)
	}
	rv := releases()
	if rv["1.37.2"].State != "partial" || rv["1.38.0"].State != "partial" || !rv["1.38.0"].Target || rv["1.37.2"].Target {
		t.Errorf("the version list while paused: 1.37.2 %+v, 1.38.0 %+v; want both partial, 1.38.0 the target", rv["1.37.2"], rv["1.38.0"])
	}
	hv := hosts()
	for _, h := range []string{"controller-0", "controller-1"} {
		if v := hv[h].Versions; v["control-plane"] != "1.38.0" || v["kubelet"] != "1.38.0" || hv[h].Labels["personality"] != "controller" {
			t.Errorf("%s while paused: %+v", h, hv[h])
		}
	}
	if v := hv["worker-2"].Versions; v["kubelet"] != "1.37.2" || v["control-plane"] != "" || hv["worker-2"].Target != "1.38.0" {
		t.Errorf("worker-2 while paused: %+v (want kubelet 1.37.2, no control plane, target 1.38.0)", hv["worker-2"])
	}
	if _, err := os.Stat(filepath.Join(state, "apps.locked")); err != nil {
		t.Errorf("application changes are not refused while the upgrade is paused: %v", err)
	}
	r := run(t, time.Minute, command("members", "--by-host", "--label", "personality"))
	t.Logf("ferry members --by-host --label personality, paused:\n%s", r.stdout)
	cpUIDs := podUIDs(t, env, "kube-system", "component=kube-apiserver")

	// ferry killed while paused; the cause fixed; a new ferry resumes
	// from the versions it finds running.
	_ = start.Process.Kill()
	<-started
	if err := os.Remove(filepath.Join(state, "fail", "worker-2")); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	if r := ferry("upgrade", "resume", "-q"); r.code != 0 || !strings.Contains(r.stdout, "state:    upgrade-complete (completed)") {
		t.Fatalf("resume: exit %d, want upgrade-complete", r.code)
	}
	t.Logf("resumed to the end in %s", time.Since(resumed).Round(time.Millisecond))
	if after := podUIDs(t, env, "kube-system", "component=kube-apiserver"); !slices.Equal(after, cpUIDs) {
		t.Errorf("the resume replaced a control plane pod again: %v, then %v", cpUIDs, after)
	}
	if _, err := os.Stat(filepath.Join(state, "apps.locked")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("application changes still refused after the upgrade: %v", err)
	}
	obs.stop()
	t.Logf("nodes cordoned at once, at most: controllers %d, workers %d", obs.most["controller"], obs.most["worker"])
	if obs.most["controller"] != 1 || obs.most["worker"] != 2 {
		t.Errorf("nodes cordoned at once: controllers %d (want 1: one at a time), workers %d (want 2: two at a time, in parallel): %s",
			obs.most["controller"], obs.most["worker"], obs.worst)
	}

	// The states in StarlingX's words and order, from the events.
	evs := events(t, command("events", "-o", "json"))
	var states []string
	for _, ev := range evs {
		if ev.Kind != "state" || !strings.HasPrefix(ev.Message, "state ") {
			continue // the upgrade's creation, its ending's undos
		}
		_, to, ok := strings.Cut(ev.Message, " → ")
		shown, _, _ := strings.Cut(to, " ")
		if ok && (len(states) == 0 || states[len(states)-1] != shown) {
			states = append(states, shown)
		}
	}
	want := []string{"upgrade-started", "upgrading-first-master", "upgraded-first-master", "upgrading-networking", "upgrading-second-master",
		"upgraded-second-master", "upgrading-kubelets", "upgrade-failed", "upgrading-kubelets", "upgrade-complete"}
	if !slices.Equal(states, want) {
		t.Errorf("states in the events:\n got  %v\n want %v", states, want)
	}
	// The steps in order: each control plane's move, the networking's
	// calls, then each host's kubelet, the controllers' before any
	// worker's.
	at := func(what string) int {
		i := slices.IndexFunc(evs, func(ev store.Event) bool { return strings.Contains(ev.Message, what) })
		if i < 0 {
			t.Errorf("no event says %q", what)
		}
		return i
	}
	first, net := at("start kube-apiserver.controller-0 on 1.38.0: done"), at("action networking of release 1.38.0: done")
	gate, second := at("gate of action networking of release 1.38.0: done"), at("start kube-apiserver.controller-1 on 1.38.0: done")
	c0, c1 := at("node controller-0 cordoned"), at("node controller-1 cordoned")
	w0 := at("node worker-0 cordoned")
	if !(first < net && net < gate && gate < second && second < c0 && c0 < c1 && c1 < w0) {
		t.Errorf("steps out of StarlingX's order: first control plane %d, networking %d, its gate %d, second control plane %d, controller-0's kubelet %d, controller-1's %d, worker-0's %d",
			first, net, gate, second, c0, c1, w0)
	}

	// The kubelet commands as the hosts saw them: each host upgraded
	// once, worker-2 after its failures, none again after the resume.
	log := readFile(t, filepath.Join(state, "kubehost.log"))
	for _, n := range []string{"controller-0", "controller-1", "worker-0", "worker-1", "worker-2", "worker-3"} {
		if c := strings.Count(log, "kubelet "+n+" 1.38.0 ok"); c != 1 {
			t.Errorf("%s's kubelet upgraded %d times, want once:\n%s", n, c, log)
		}
	}
	if !regexp.MustCompile(`kubelet worker-2 1.38.0 failed\n(.*\n)*.*kubelet worker-2 1.38.0 ok`).MatchString(log) {
		t.Errorf("worker-2 did not fail, then succeed:\n%s", log)
	}
	if c := strings.Count(log, "networking 1.38.0"); c != 1 {
		t.Errorf("the networking upgraded %d times, want once:\n%s", c, log)
	}
	finalVersions := func(v string) {
		t.Helper()
		hv := hosts()
		for _, h := range []string{"controller-0", "controller-1", "worker-0", "worker-1", "worker-2", "worker-3"} {
			want := map[string]string{"kubelet": v}
			if strings.HasPrefix(h, "controller-") {
				want["control-plane"] = v
			}
			if got := hv[h].Versions; !maps.Equal(got, want) {
				t.Errorf("%s runs %v, want %v", h, got, want)
			}
		}
		if nodes, _ := env.Kubectl("get", "nodes", "-o", "jsonpath={.items[*].spec.unschedulable}"); strings.Contains(nodes, "true") {
			t.Errorf("a node is left cordoned: %q", nodes)
		}
	}
	finalVersions("1.38.0")

	// A patch, then back to it: a downgrade to a listed earlier patch.
	// Across minor versions: refused, saying why.
	for _, v := range []string{"1.38.1", "1.38.0"} {
		if r := ferry("upgrade", "start", "--to", v, "-q"); r.code != 0 || !strings.Contains(r.stdout, "upgrade-complete") {
			t.Fatalf("upgrade to %s: exit %d", v, r.code)
		}
		finalVersions(v)
	}
	if r := ferry("upgrade", "start", "--to", "1.37.2", "-q"); r.code == 0 ||
		!strings.Contains(r.stderr, "a downgrade to 1.37.2 needs release 1.38.0 to list it in downgrade_to, which is empty (downgrades go only to an earlier patch of the same MAJOR.MINOR)") {
		t.Errorf("a downgrade across minor versions: exit %d, want refused naming downgrade_to", r.code)
	}
	r = run(t, time.Minute, command("releases", "list"))
	t.Logf("ferry releases list, at the end:\n%s", r.stdout)
	t.Logf("the whole example in %s", time.Since(began).Round(time.Millisecond))
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// events decodes ferry events -o json: one JSON object after another.
func events(t *testing.T, cmd *exec.Cmd) []store.Event {
	t.Helper()
	r := run(t, time.Minute, cmd)
	if r.code != 0 {
		t.Fatalf("ferry events: exit %d: %s", r.code, r.stderr)
	}
	var out []store.Event
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for {
		var ev store.Event
		if err := dec.Decode(&ev); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("ferry events: %v", err)
		}
		out = append(out, ev)
	}
}

// podUIDs are the UIDs of the pods of a selector, sorted.
func podUIDs(t *testing.T, env *kubetest.Env, ns, selector string) []string {
	t.Helper()
	out, err := env.Kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "jsonpath={.items[*].metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	uids := strings.Fields(out)
	slices.Sort(uids)
	return uids
}

// nodeObserver watches the nodes, apart from ferry, and keeps the most
// nodes of each personality cordoned at once.
type nodeObserver struct {
	mu    sync.Mutex
	most  map[string]int
	worst string
	stop  func()
}

// observeNodes starts a watch of every node: each transition is seen
// (a poll could miss a cordon kwok's fast nodes end within
// milliseconds).
func observeNodes(t *testing.T, env *kubetest.Env) *nodeObserver {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := &nodeObserver{most: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	o.stop = func() { cancel(); <-done }
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		nodes := map[string]corev1.Node{}
		for ctx.Err() == nil {
			list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			clear(nodes)
			for _, n := range list.Items {
				nodes[n.Name] = n
			}
			o.observe(nodes)
			w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				continue
			}
			once.Do(func() { close(synced) })
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(nodes, n.Name)
				} else {
					nodes[n.Name] = *n
				}
				o.observe(nodes)
			}
			w.Stop()
		}
	}()
	select {
	case <-synced:
	case <-time.After(time.Minute):
		t.Fatal("the nodes' watch did not begin within a minute")
	}
	return o
}

func (o *nodeObserver) observe(nodes map[string]corev1.Node) {
	count := map[string]int{}
	var cordoned []string
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			count[n.Labels["personality"]]++
			cordoned = append(cordoned, n.Name)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for p, c := range count {
		if c > o.most[p] {
			o.most[p] = c
			slices.Sort(cordoned)
			o.worst = p + ": " + strings.Join(cordoned, ", ") + " cordoned at once"
		}
	}
}

// TestStarlingXKubernetesExamplePlans: examples/starlingx-kubernetes
// validates and, with the members its driver would find on the
// README's six nodes (each with its node's labels), plans StarlingX's
// order: one controller's control plane, the other's after the
// networking, the controllers' kubelets one at a time by their label,
// the workers' two at a time; a downgrade across minor versions is
// refused. No control plane needed.
func TestStarlingXKubernetesExamplePlans(t *testing.T) {
	c, err := config.Load(filepath.FromSlash("../../../examples/starlingx-kubernetes/cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obs := plan.Observed{Version: map[string]string{}, Down: map[string]bool{}}
	for _, n := range []string{"controller-0", "controller-1", "worker-0", "worker-1", "worker-2", "worker-3"} {
		p, _, _ := strings.Cut(n, "-")
		labels := map[string]string{"personality": p} // as nodes.yaml labels them
		if p == "controller" {
			cp := c.Component("control-plane")
			cp.Members = append(cp.Members, config.Member{Name: "kube-apiserver." + n, Host: n, Labels: labels})
			obs.Version["kube-apiserver."+n] = "1.37.2"
		}
		k := c.Component("kubelet")
		k.Members = append(k.Members, config.Member{Name: n, Host: n, Labels: labels})
		obs.Version[n] = "1.37.2"
	}
	p, err := plan.Compute(c, obs, "1.38.0")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ph := range p.Phases {
		var bs []string
		for _, b := range ph.Batches {
			bs = append(bs, "["+strings.Join(b.Members, " ")+"]")
		}
		got = append(got, ph.Part+": "+strings.Join(bs, " "))
	}
	want := []string{"first-master: [kube-apiserver.controller-0]", "second-master: [kube-apiserver.controller-1]",
		"controller-kubelets: [controller-0] [controller-1]", "worker-kubelets: [worker-0] [worker-1 worker-2] [worker-3]"}
	if !slices.Equal(got, want) {
		t.Errorf("plan:\n got  %q\n want %q", got, want)
	}
	var flow []string
	for _, st := range p.Stages() {
		flow = append(flow, upgrade.StageState(st).String())
	}
	if want := []string{"upgrading-first-master", "action-networking", "upgrading-second-master", "upgrading-controller-kubelets", "upgrading-worker-kubelets"}; !slices.Equal(flow, want) {
		t.Errorf("flow %v, want %v", flow, want)
	}
	for n := range obs.Version {
		obs.Version[n] = "1.38.0"
	}
	if _, err := plan.ComputePath(c, obs, "1.37.2"); err == nil || !strings.Contains(err.Error(), "needs release 1.38.0 to list it in downgrade_to") {
		t.Errorf("a downgrade to 1.37.2: %v", err)
	}
}
