// Package kubebench measures ferry against Kubernetes' own rollout on
// a thousand kwok nodes: a DaemonSet upgraded by ferry (canary batches
// 1, 2, 4, ... capped at the same max unavailable) and the same
// DaemonSet upgraded by its RollingUpdate strategy, timed in the same
// run on the same control plane, with ferry's memory while it runs and
// the requests it sent the API server per node. Then ferry again, to a
// third version, with a member check (an HTTP check per member, served
// by the bench: kwok's pods run nothing) and a 1 s soak: that figure is
// printed, not compared (Kubernetes' rollout has neither). Last, ferry
// to a fourth version with update: in-place, gates off: each pod's
// image changed where it runs (kwok's stage pod-container-image-changed stands for the
// kubelet's container restart), no pod deleted or created.
//
// It prints too the controller manager's own requests during each
// rollout: Kubernetes' makes two per pod (the DaemonSet controller's
// delete and create), ferry's one (the create; ferry deletes), and
// that client's rate limit (20 a second by default) bounds both.
// FERRY_KUBE_KCM_QPS=N runs the controller manager with N a second
// instead; FERRY_BENCH_TIMELINE=1 says, batch by batch, when ferry's
// pods were deleted, gone, created, bound and ready.
//
//	FERRY_KUBE=1 go test ./internal/testenv/kubebench/ -run '^$' -bench DaemonSet -benchtime 1x -timeout 30m
package kubebench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

const (
	nodes          = 1000
	maxUnavailable = 100 // 10 %, Kubernetes' own rollout and ferry's cap alike
)

// digest is the sha256 the bench's catalog gives an image version
// (kwok pulls nothing: any 64 hex digits do, one per version).
func digest(version string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(version))) }

func daemonSet(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: %[1]s, namespace: bench}
spec:
  selector: {matchLabels: {app: %[1]s}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: %[2]d}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: agent, image: "registry.local/agent:1.0.0"}]
`, name, maxUnavailable)
}

func BenchmarkDaemonSet1000(b *testing.B) {
	env := kubetest.Start(b, kubetest.Options{Nodes: nodes, Scale: true})
	rc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	if err := env.Apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n---\n" + daemonSet("native") + "---\n" + daemonSet("ferry")); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"native", "ferry"} {
		if d, err := rolled(ctx, cs, name, 15*time.Minute); err != nil {
			b.Fatal(err)
		} else {
			b.Logf("DaemonSet %s: %d pods available after %s", name, nodes, d.Round(time.Millisecond))
		}
	}

	if b.N > 1 {
		b.Skip("one rollout per control plane: run with -benchtime 1x")
	}
	for i := 0; i < b.N; i++ {
		// Kubernetes' own RollingUpdate, maxUnavailable 100.
		version := fmt.Sprintf("2.0.%d", i)
		kcm := func() map[string]float64 {
			m, err := controllerRequests(env, rc)
			if err != nil {
				b.Logf("the controller manager's requests not read: %v", err)
			}
			return m
		}
		kcmBefore := kcm()
		began := time.Now()
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"registry.local/agent:%s"}]}}}}`, version)
		if _, err := cs.AppsV1().DaemonSets("bench").Patch(ctx, "native", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := rolled(ctx, cs, "native", 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		native := time.Since(began)
		kcmNative := kcm()

		// ferry: canary 1, 2, 4, ... up to 100 at a time, gates off.
		var tl *timeline
		if os.Getenv("FERRY_BENCH_TIMELINE") == "1" {
			tl = watchTimeline(b, cs)
		}
		began = time.Now()
		run, err := ferryUpgrade(b, env, "1.0.0", version, "", "")
		if err != nil {
			b.Fatal(err)
		}
		ferry := time.Since(began)
		kcmFerry := kcm()
		nNative, nFerry := requestsSince(kcmBefore, kcmNative), requestsSince(kcmNative, kcmFerry)
		qps := controllerQPS()
		b.Logf("the controller manager's requests to the API server: %s during Kubernetes' rollout, %s during ferry's; "+
			"at its client's %g a second they take %.1f s and %.1f s: ferry's rollout, whose pods the DaemonSet controller creates, "+
			"can be no faster than ×%.2f of Kubernetes' while that limit binds",
			nNative, nFerry, qps, nNative.total/qps, nFerry.total/qps, nFerry.total/nNative.total)
		b.ReportMetric(nFerry.total/nNative.total, "controller-requests-ferry/native")
		if tl != nil {
			tl.report(b, run.record)
		}
		b.ReportMetric(native.Seconds(), "native-s")
		b.ReportMetric(ferry.Seconds(), "ferry-s")
		b.ReportMetric(ferry.Seconds()/native.Seconds(), "ferry/native")
		b.ReportMetric(float64(run.peak.heap)/(1<<20), "ferry-heap-MiB")
		b.ReportMetric(float64(run.peak.sys)/(1<<20), "ferry-sys-MiB")
		b.ReportMetric(float64(run.requests)/nodes, "ferry-requests/node")
		b.Logf("%d nodes, max unavailable %d: Kubernetes RollingUpdate %s, ferry %s (×%.2f); ferry's peak Go heap %.0f MiB (runtime total %.0f MiB); %d API requests, %.2f per node (%v); its store: %s",
			nodes, maxUnavailable, native.Round(time.Millisecond), ferry.Round(time.Millisecond), ferry.Seconds()/native.Seconds(),
			float64(run.peak.heap)/(1<<20), float64(run.peak.sys)/(1<<20), run.requests, float64(run.requests)/nodes, run.byMethod, run.store)

		// ferry again, with a member check and a soak.
		checks := 0
		var checksMu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			checksMu.Lock()
			checks++
			checksMu.Unlock()
		}))
		began = time.Now()
		gated, err := ferryUpgrade(b, env, version, "3.0.0", "", fmt.Sprintf(`
    health: {member: {http: "%s/ready/{{.Name}}", expect_status: 200}}
    soak: 1s`, srv.URL))
		srv.Close()
		if err != nil {
			b.Fatal(err)
		}
		withGates := time.Since(began)
		b.ReportMetric(withGates.Seconds(), "ferry-gated-s")
		b.ReportMetric(withGates.Seconds()/native.Seconds(), "ferry-gated/native")
		checksMu.Lock()
		b.Logf("with a member check (%d checks answered) and a 1 s soak: ferry %s (×%.2f of the native rollout above); peak Go heap %.0f MiB; %d API requests, %.2f per node (%v); its store: %s",
			checks, withGates.Round(time.Millisecond), withGates.Seconds()/native.Seconds(), float64(gated.peak.heap)/(1<<20),
			gated.requests, float64(gated.requests)/nodes, gated.byMethod, gated.store)
		checksMu.Unlock()

		// ferry again, each pod's image changed where it runs
		// (update: in-place): the controller manager creates nothing.
		kcmBefore = kcm()
		began = time.Now()
		inPlace, err := ferryUpgrade(b, env, "3.0.0", "3.1.0", ", update: in-place", "")
		if err != nil {
			b.Fatal(err)
		}
		inPlaceTook := time.Since(began)
		if n := inPlace.byMethod["DELETE"]; n != 0 {
			b.Fatalf("update: in-place deleted %d pods, want none", n)
		}
		nInPlace := requestsSince(kcmBefore, kcm())
		b.ReportMetric(inPlaceTook.Seconds(), "ferry-in-place-s")
		b.ReportMetric(inPlaceTook.Seconds()/native.Seconds(), "ferry-in-place/native")
		b.Logf("with update: in-place: ferry %s (×%.2f of the native rollout above, gates off); peak Go heap %.0f MiB; %d API requests, %.2f per node (%v); the controller manager's requests %s; its store: %s",
			inPlaceTook.Round(time.Millisecond), inPlaceTook.Seconds()/native.Seconds(), float64(inPlace.peak.heap)/(1<<20),
			inPlace.requests, float64(inPlace.requests)/nodes, inPlace.byMethod, nInPlace, inPlace.store)
	}
}

// rolled waits until every pod of the DaemonSet runs its template and
// is available.
func rolled(ctx context.Context, cs *k8s.Clientset, name string, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	for {
		ds, err := cs.AppsV1().DaemonSets("bench").Get(ctx, name, metav1.GetOptions{})
		if err == nil && done(ds) {
			return time.Since(began), nil
		}
		if time.Since(began) > limit {
			return 0, fmt.Errorf("DaemonSet %s not rolled after %s: %+v", name, limit, ds.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func done(ds *appsv1.DaemonSet) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled == nodes &&
		s.UpdatedNumberScheduled == nodes && s.NumberAvailable == nodes && s.NumberUnavailable == 0
}

type memPeak struct{ heap, sys uint64 }

// timedStore is the embedded store with the engine's writes and reads
// of it counted and timed: how much of an upgrade's time ferry spends
// in its own store (the engine waits on each write before it acts).
type timedStore struct {
	*store.Store
	saves, reads       atomic.Int64
	saveTime, readTime atomic.Int64 // nanoseconds
}

func (s *timedStore) SaveAt(u upgrade.Upgrade, at store.Revision, f store.Fence, evs []store.Event) (store.Revision, []store.Event, error) {
	defer s.took(&s.saves, &s.saveTime, time.Now())
	return s.Store.SaveAt(u, at, f, evs)
}

func (s *timedStore) Read(id string) (upgrade.Upgrade, store.Revision, error) {
	defer s.took(&s.reads, &s.readTime, time.Now())
	return s.Store.Read(id)
}

func (s *timedStore) ReadRequests(id string) (store.Requests, error) {
	defer s.took(&s.reads, &s.readTime, time.Now())
	return s.Store.ReadRequests(id)
}

func (s *timedStore) took(n, total *atomic.Int64, began time.Time) {
	n.Add(1)
	total.Add(int64(time.Since(began)))
}

func (s *timedStore) String() string {
	d := func(ns *atomic.Int64) time.Duration { return time.Duration(ns.Load()).Round(time.Millisecond) }
	return fmt.Sprintf("%d saves in %s, %d reads in %s", s.saves.Load(), d(&s.saveTime), s.reads.Load(), d(&s.readTime))
}

// ferryRun is what one of ferry's upgrades cost: the peak of its Go
// heap and its requests to the API server (discovery included).
type ferryRun struct {
	peak     memPeak
	requests int64
	byMethod map[string]int64
	// store says how many writes and reads of its store the engine
	// made and the time it spent in them.
	store string
	// record is the upgrade as it ended.
	record upgrade.Upgrade
}

// ferryUpgrade runs ferry's engine in this process on the "ferry"
// DaemonSet, from from (its pods' version) to to, with component
// (indented YAML of the component's fields) added, and returns the
// peak of the Go heap while it ran and the requests it sent. One
// iteration: -benchtime 1x.
func ferryUpgrade(b *testing.B, env *kubetest.Env, from, to, workload, component string) (ferryRun, error) {
	dir := b.TempDir()
	desc := fmt.Sprintf(`cluster: bench
substrate: kubernetes
kubernetes: {kubeconfig: %[1]q}
components:
  - name: agent
    order: 1
    workload: {kind: DaemonSet, namespace: bench, name: ferry%[9]s}
    strategy: {type: canary, max_unavailable: %[2]d, max_batch: %[3]d}
    deadline: 5m%[8]s
releases:
  - version: %[4]s
    artifacts: {agent: {image: "registry.local/agent:%[4]s", sha256: "%[5]s"}}
  - version: %[6]s
    upgrade_from: [%[4]s]
    artifacts: {agent: {image: "registry.local/agent:%[6]s", sha256: "%[7]s"}}
policy: {tick: 200ms}
`, env.Kubeconfig, maxUnavailable, maxUnavailable, from, digest(from), to, digest(to), component, workload)
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(desc), 0o600); err != nil {
		return ferryRun{}, err
	}
	c, err := config.Load(path)
	if err != nil {
		return ferryRun{}, err
	}
	d, err := kubernetes.New(kubernetes.Config{Kubeconfig: env.Kubeconfig})
	if err != nil {
		return ferryRun{}, err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := engine.Discover(ctx, c, d); err != nil {
		return ferryRun{}, err
	}
	bolt, err := store.Open(filepath.Join(dir, "ferry"))
	if err != nil {
		return ferryRun{}, err
	}
	st := &timedStore{Store: bolt}
	e, err := engine.New(engine.Config{Cluster: c, Driver: d, Store: st})
	if err != nil {
		return ferryRun{}, err
	}
	var peak memPeak
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		var profiled uint64
		for {
			runtime.ReadMemStats(&ms)
			if path := os.Getenv("FERRY_BENCH_HEAPPROFILE"); path != "" && ms.HeapInuse > profiled*3/2 && ms.HeapInuse > 64<<20 {
				// A heap profile each time the heap grows by half past
				// 64 MiB: where ferry's memory goes at its peak.
				profiled = ms.HeapInuse
				if f, err := os.Create(path); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
			mu.Lock()
			peak.heap, peak.sys = max(peak.heap, ms.HeapInuse), max(peak.sys, ms.Sys)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-sampled }()
	if path := os.Getenv("FERRY_BENCH_CPUPROFILE"); path != "" {
		// Where ferry's CPU goes while it upgrades (one file per run:
		// the target version in its name).
		f, err := os.Create(path + "." + to)
		if err != nil {
			return ferryRun{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return ferryRun{}, err
		}
		defer pprof.StopCPUProfile()
	}
	if _, err := e.Begin(ctx, to); err != nil {
		return ferryRun{peak: peak}, err
	}
	u, err := e.Run(ctx)
	if err != nil {
		return ferryRun{peak: peak}, err
	}
	if u.State != upgrade.StateCompleted {
		return ferryRun{peak: peak}, fmt.Errorf("ferry's upgrade ended %s: %s", u.State, u.Reason)
	}
	batches := 0
	for _, ph := range u.Plan.Phases {
		batches += len(ph.Batches)
		var sizes []string
		for _, bt := range ph.Batches {
			sizes = append(sizes, fmt.Sprint(len(bt.Members)))
		}
		b.Logf("ferry's batches: %s", strings.Join(sizes, ", "))
	}
	mu.Lock()
	defer mu.Unlock()
	return ferryRun{peak: peak, requests: d.Requests().Total(), byMethod: d.Requests().ByMethod(), store: st.String(), record: u}, nil
}
