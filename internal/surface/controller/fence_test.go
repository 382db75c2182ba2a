package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/controller"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// seen is the Upgrade's status as one watch event showed it.
type seen struct {
	rv       string
	revision uint64
	fence    store.Fence
	record   string
}

// watchUpgrade records every version of Upgrade name the apiserver
// sends, until stop.
func watchUpgrade(t *testing.T, env *kubetest.Env, name string) (get func() []seen, stop func()) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := controller.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &controller.UpgradeList{}, client.InNamespace("ferry-system"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var all []seen
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*controller.Upgrade)
			if !ok || u.Name != name {
				continue
			}
			mu.Lock()
			all = append(all, seen{u.ResourceVersion, u.Status.Revision, u.Status.Fence, string(u.Status.Record)})
			mu.Unlock()
		}
	}()
	return func() []seen {
			mu.Lock()
			defer mu.Unlock()
			return append([]seen(nil), all...)
		}, func() {
			w.Stop()
			cancel()
			<-done
		}
}

// TestStoppedLeaderWritesNothing: the leading controller is SIGSTOPped
// in the middle of an upgrade, past its lease (4 s); a second one takes
// the lease and the upgrade up; the first is SIGCONTed. It writes
// nothing more: every version of the Upgrade the apiserver sends from
// the second's claim on carries the second's fence, the record's
// revision never goes back, and the record never changes without its
// revision moving. The first says it stopped, and the upgrade
// completes.
func TestStoppedLeaderWritesNothing(t *testing.T) {
	env, sa := storageCluster(t)
	first := startController(t, sa, "controller-a")
	versions, stopWatch := watchUpgrade(t, env, "storage-stop")
	defer stopWatch()
	if err := env.Apply(upgradeResource("storage-stop", description("2s"), "2.0.0")); err != nil {
		t.Fatal(err)
	}
	var fa store.Fence
	err := env.WaitUntil(3*time.Minute, "the first controller's engine saving", func() (bool, string, error) {
		u := getUpgrade(t, env, "storage-stop")
		fa = u.Status.Fence
		return fa.Term > 0 && u.Status.Revision >= 5, fmt.Sprintf("fence %s, revision %d, state %s", fa, u.Status.Revision, u.Status.State), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := getUpgrade(t, env, "storage-stop")
	t.Logf("SIGSTOPped the first controller (fence %s) at revision %d, state %s", fa, stopped.Status.Revision, stopped.Status.State)
	second := startController(t, sa, "controller-b")
	var fb store.Fence
	err = env.WaitUntil(2*time.Minute, "the second controller's engine saving", func() (bool, string, error) {
		u := getUpgrade(t, env, "storage-stop")
		fb = u.Status.Fence
		return fb.Term > fa.Term && u.Status.Revision > stopped.Status.Revision+2,
			fmt.Sprintf("fence %s, revision %d", fb, u.Status.Revision), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resumedAt := getUpgrade(t, env, "storage-stop").Status.Revision
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("the second controller claimed %s; SIGCONTed the first at revision %d", fb, resumedAt)
	select {
	case <-first.done:
	case <-time.After(time.Minute):
		t.Fatalf("the first controller did not stop within a minute of its SIGCONT:\n%s", first.output())
	}
	err = env.WaitUntil(4*time.Minute, "the upgrade completed", func() (bool, string, error) {
		u := getUpgrade(t, env, "storage-stop")
		if u.Status.State == "failed" || u.Status.State == "rolled-back" {
			return false, "", fmt.Errorf("ended %s: %s", u.Status.State, u.Status.Reason)
		}
		return u.Status.State == "completed", fmt.Sprintf("state %s revision %d", u.Status.State, u.Status.Revision), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stopWatch()
	all := versions()
	claimed, byFirst, records := -1, 0, 0
	for i, v := range all {
		if claimed < 0 && v.fence == fb {
			claimed = i
		}
		if claimed >= 0 && v.fence != fb {
			t.Errorf("version %s (revision %d) after the second's claim carries fence %s", v.rv, v.revision, v.fence)
		}
		if v.fence == fa && claimed >= 0 {
			byFirst++
		}
		if i == 0 {
			continue
		}
		prev := all[i-1]
		if v.revision < prev.revision {
			t.Errorf("the record's revision went back from %d to %d (version %s)", prev.revision, v.revision, v.rv)
		}
		if v.record != prev.record {
			records++
			if v.revision == prev.revision {
				t.Errorf("the record changed at revision %d without its revision moving (version %s)", v.revision, v.rv)
			}
		}
	}
	if claimed < 0 {
		t.Fatalf("the watch never saw the second's fence %s in %d versions", fb, len(all))
	}
	out := first.output()
	said := strings.Contains(out, "stops acting at once") || strings.Contains(out, "leader election lost")
	if !said {
		t.Errorf("the first controller did not say it stopped:\n%s", out)
	}
	last := all[len(all)-1]
	t.Logf("%d versions watched, %d record writes; the second's claim at version %d of them; revisions %d → %d; "+
		"written under the first's fence after the claim: %d; the first said it stopped: %v",
		len(all), records, claimed+1, all[0].revision, last.revision, byFirst, said)
	if !strings.Contains(second.output(), "controller: starting") {
		t.Errorf("the second controller did not say it started:\n%s", second.output())
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "stops acting") || strings.Contains(line, "leader election") || strings.Contains(line, "deposed") {
			t.Logf("first controller: %s", line)
		}
	}
}
