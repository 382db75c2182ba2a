// Package kubebench measures ferry against Kubernetes' own rollout on
// a thousand kwok nodes: a DaemonSet upgraded by ferry (canary batches
// 1, 2, 4, ... capped at the same max unavailable) and the same
// DaemonSet upgraded by its RollingUpdate strategy, timed in the same
// run on the same control plane, with ferry's memory while it runs.
//
//	FERRY_KUBE=1 go test ./internal/testenv/kubebench/ -run '^$' -bench DaemonSet -benchtime 1x -timeout 30m
package kubebench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
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
	sha1           = "1111111111111111111111111111111111111111111111111111111111111111"
	sha2           = "2222222222222222222222222222222222222222222222222222222222222222"
)

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
		if d, err := rolled(ctx, cs, name, 5*time.Minute); err != nil {
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
		began := time.Now()
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"registry.local/agent:%s"}]}}}}`, version)
		if _, err := cs.AppsV1().DaemonSets("bench").Patch(ctx, "native", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := rolled(ctx, cs, "native", 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		native := time.Since(began)

		// ferry: canary 1, 2, 4, ... up to 100 at a time.
		began = time.Now()
		peak, err := ferryUpgrade(b, env, version)
		if err != nil {
			b.Fatal(err)
		}
		ferry := time.Since(began)
		b.ReportMetric(native.Seconds(), "native-s")
		b.ReportMetric(ferry.Seconds(), "ferry-s")
		b.ReportMetric(ferry.Seconds()/native.Seconds(), "ferry/native")
		b.ReportMetric(float64(peak.heap)/(1<<20), "ferry-heap-MiB")
		b.ReportMetric(float64(peak.sys)/(1<<20), "ferry-sys-MiB")
		b.Logf("%d nodes, max unavailable %d: Kubernetes RollingUpdate %s, ferry %s (×%.2f); ferry's peak Go heap %.0f MiB (runtime total %.0f MiB)",
			nodes, maxUnavailable, native.Round(time.Millisecond), ferry.Round(time.Millisecond), ferry.Seconds()/native.Seconds(),
			float64(peak.heap)/(1<<20), float64(peak.sys)/(1<<20))
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

// ferryUpgrade runs ferry's engine in this process on the "ferry"
// DaemonSet, from 1.0.0 (its pods' tag) to to, and returns the peak of
// the Go heap while it ran. One iteration: -benchtime 1x.
func ferryUpgrade(b *testing.B, env *kubetest.Env, to string) (memPeak, error) {
	dir := b.TempDir()
	desc := fmt.Sprintf(`cluster: bench
substrate: kubernetes
kubernetes: {kubeconfig: %q}
components:
  - name: agent
    order: 1
    workload: {kind: DaemonSet, namespace: bench, name: ferry}
    strategy: {type: canary, max_unavailable: %d, max_batch: %d}
    deadline: 5m
releases:
  - version: 1.0.0
    artifacts: {agent: {image: "registry.local/agent:1.0.0", sha256: "%s"}}
  - version: %s
    upgrade_from: [1.0.0]
    artifacts: {agent: {image: "registry.local/agent:%s", sha256: "%s"}}
policy: {tick: 200ms}
`, env.Kubeconfig, maxUnavailable, maxUnavailable, sha1, to, to, sha2)
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(desc), 0o600); err != nil {
		return memPeak{}, err
	}
	c, err := config.Load(path)
	if err != nil {
		return memPeak{}, err
	}
	d, err := kubernetes.New(kubernetes.Config{Kubeconfig: env.Kubeconfig})
	if err != nil {
		return memPeak{}, err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := engine.Discover(ctx, c, d); err != nil {
		return memPeak{}, err
	}
	st, err := store.Open(filepath.Join(dir, "ferry"))
	if err != nil {
		return memPeak{}, err
	}
	e, err := engine.New(engine.Config{Cluster: c, Driver: d, Store: st})
	if err != nil {
		return memPeak{}, err
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
			if path := os.Getenv("FERRY_BENCH_HEAPPROFILE"); path != "" && ms.HeapInuse > profiled*3/2 && ms.HeapInuse > 256<<20 {
				// A heap profile each time the heap grows by half past
				// 256 MiB: where ferry's memory goes at its peak.
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
	if _, err := e.Begin(ctx, to); err != nil {
		return peak, err
	}
	u, err := e.Run(ctx)
	if err != nil {
		return peak, err
	}
	if u.State != upgrade.StateCompleted {
		return peak, fmt.Errorf("ferry's upgrade ended %s: %s", u.State, u.Reason)
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
	return peak, nil
}
