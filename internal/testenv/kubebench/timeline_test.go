package kubebench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// timeline watches the pods of the "ferry" DaemonSet while ferry
// upgrades it and says, batch by batch, where the time went: from the
// batch's start to its pods' deletion, their going, their replacements'
// creation, binding and readiness, and the batch's end as ferry saw it
// (FERRY_BENCH_TIMELINE=1): what a batch waits on besides ferry.
type timeline struct {
	mu     sync.Mutex
	byNode map[string]*nodeTimes
	stop   func()
	done   chan struct{}
}

type nodeTimes struct {
	deleting, gone, created, bound, ready time.Time
	old                                   string // the pod that was there first
}

func watchTimeline(b *testing.B, cs *k8s.Clientset) *timeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &timeline{byNode: map[string]*nodeTimes{}, stop: cancel, done: make(chan struct{})}
	w, err := cs.CoreV1().Pods("bench").Watch(ctx, metav1.ListOptions{LabelSelector: "app=ferry"})
	if err != nil {
		b.Fatal(err)
	}
	first := map[string]string{}
	if l, err := cs.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=ferry"}); err == nil {
		for _, p := range l.Items {
			first[p.Spec.NodeName] = p.Name
		}
	}
	go func() {
		defer close(tl.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			node := podNode(p)
			tl.mu.Lock()
			t := tl.byNode[node]
			if t == nil {
				t = &nodeTimes{old: first[node]}
				tl.byNode[node] = t
			}
			if p.Name == t.old {
				if p.DeletionTimestamp != nil && t.deleting.IsZero() {
					t.deleting = now
				}
				if ev.Type == watch.Deleted && t.gone.IsZero() {
					t.gone = now
				}
			} else {
				if t.created.IsZero() {
					t.created = now
				}
				if p.Spec.NodeName != "" && t.bound.IsZero() {
					t.bound = now
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && t.ready.IsZero() {
						t.ready = now
					}
				}
			}
			tl.mu.Unlock()
		}
	}()
	return tl
}

// podNode is the node a DaemonSet's pod is for: its node, or before it
// is bound the one its affinity names.
func podNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// report logs, for each batch of u, when (after the batch began) its
// last old pod was marked deleting and was gone, its last new pod was
// created, bound and ready, and the batch ended.
func (tl *timeline) report(b *testing.B, u upgrade.Upgrade) {
	tl.stop()
	<-tl.done
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var prevEnd time.Time
	for _, bt := range u.Batches {
		var last nodeTimes
		var firstDel time.Time
		for _, m := range bt.Members {
			t := tl.byNode[strings.TrimPrefix(m, "ferry.")]
			if t == nil {
				continue
			}
			if firstDel.IsZero() || (!t.deleting.IsZero() && t.deleting.Before(firstDel)) {
				firstDel = t.deleting
			}
			for _, p := range []struct {
				last *time.Time
				t    time.Time
			}{{&last.deleting, t.deleting}, {&last.gone, t.gone},
				{&last.created, t.created}, {&last.bound, t.bound}, {&last.ready, t.ready}} {
				if p.t.After(*p.last) {
					*p.last = p.t
				}
			}
		}
		ms := func(t time.Time) string { return fmt.Sprintf("%5d", t.Sub(bt.Began).Milliseconds()) }
		gap := ""
		if !prevEnd.IsZero() {
			gap = fmt.Sprintf("%d ms after the last ended", bt.Began.Sub(prevEnd).Milliseconds())
		}
		b.Logf("batch %2d (%3d): first deleting %s, last deleting %s, gone %s, created %s, bound %s, ready %s, ended %s ms; began %s",
			bt.Number, len(bt.Members), ms(firstDel), ms(last.deleting), ms(last.gone), ms(last.created), ms(last.bound), ms(last.ready), ms(bt.Ended), gap)
		prevEnd = bt.Ended
	}
}
