package etcdstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/run/store/etcdstore"
	"github.com/ferry-upgrade/ferry/internal/run/store/storetest"
	"github.com/ferry-upgrade/ferry/internal/testenv/etcdtest"
)

// subject is the suite's store on etcd at endpoints: each test under a
// prefix of its own, each writer a Store (a client, a lease) of its
// own, the takeover a revoke of the holder's lease (as its expiry
// would) and the successor's campaign.
func subject(endpoints []string) func(t *testing.T) storetest.Subject {
	var n int
	var nmu sync.Mutex
	return func(t *testing.T) storetest.Subject {
		nmu.Lock()
		n++
		prefix := fmt.Sprintf("/ferry-suite/%d/", n)
		nmu.Unlock()
		var mu sync.Mutex
		writers := map[string]*etcdstore.Store{}
		var holder *etcdstore.Store
		open := func(t *testing.T, name string) *etcdstore.Store {
			s, err := etcdstore.Open(etcdstore.Config{Endpoints: endpoints, Prefix: prefix, Name: name, TTL: 5})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return storetest.Subject{
			Writer: func(t *testing.T, name string) store.Records {
				s := open(t, name)
				mu.Lock()
				if writers[name] == nil {
					writers[name] = s
				}
				mu.Unlock()
				return s
			},
			TakeOver: func(t *testing.T, name string) {
				mu.Lock()
				w, prev := writers[name], holder
				mu.Unlock()
				if prev != nil && prev != w {
					if err := prev.Revoke(); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := w.Campaign(t.Context(), name); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				holder = w
				mu.Unlock()
			},
			Expire: func(t *testing.T) {
				mu.Lock()
				h := holder
				mu.Unlock()
				if err := h.Revoke(); err != nil {
					t.Fatal(err)
				}
			},
		}
	}
}

// TestSingleMember runs the store suite on one real etcd member.
func TestSingleMember(t *testing.T) {
	c := etcdtest.Start(t, 1, 2101)
	storetest.Run(t, subject(c.Endpoints))
}

// TestThreeMembers runs it on a real three-member etcd cluster, each
// writer's client given the members in another order.
func TestThreeMembers(t *testing.T) {
	c := etcdtest.Start(t, 3, 2103)
	storetest.Run(t, subject(c.Endpoints))
}

// TestOperatorAndEvents: on one real etcd member, the operator's
// requests and overrides are read with the record but move no revision
// (an engine's save at the revision it read still lands, and keeps
// them); events appended at once by several writers get distinct
// sequence numbers, read back in order, filtered by upgrade and
// bounded by limit; a finished upgrade is cleared and is the last.
func TestOperatorAndEvents(t *testing.T) {
	c := etcdtest.Start(t, 1, 2107)
	open := func(name string) *etcdstore.Store {
		s, err := etcdstore.Open(etcdstore.Config{Endpoints: c.Endpoints, Prefix: "/ferry-ops/", Name: name, TTL: 5})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	w := open("engine")
	if _, err := w.Campaign(t.Context(), "engine"); err != nil {
		t.Fatal(err)
	}
	f, err := w.Fence()
	if err != nil {
		t.Fatal(err)
	}
	rec := storetest.Record("upg-ops", "created")
	if _, err := w.CreateAt(rec, f); err != nil {
		t.Fatal(err)
	}
	op := open("operator")
	now := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	if _, err := op.Request("upg-ops", upgrade.IntentPause, now, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Override("upg-ops", upgrade.Override{Predicate: "max_unavailable", By: "ops", At: now}, nil); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by check")
	if _, err := op.Request("upg-ops", upgrade.IntentResume, now, func(upgrade.Upgrade) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("a request its check refuses: %v", err)
	}
	u, rev, err := op.Read("upg-ops")
	if err != nil {
		t.Fatal(err)
	}
	if rev != 1 || u.Intent.Kind != upgrade.IntentPause || u.Intent.Seq != 1 || len(u.Overrides) != 1 {
		t.Fatalf("after a pause and an override: revision %d, intent %+v, overrides %+v; want revision 1, pause 1, one override", rev, u.Intent, u.Overrides)
	}
	rec.Waiting = "saved by the engine"
	if _, _, err := w.SaveAt(rec, 1, f, nil); err != nil {
		t.Fatalf("the engine's save at the revision it read, after the operator's requests: %v", err)
	}
	if u, rev, _ = op.Read("upg-ops"); rev != 2 || u.Intent.Kind != upgrade.IntentPause || len(u.Overrides) != 1 {
		t.Fatalf("after the engine's save: revision %d, intent %+v, overrides %d: the operator's were lost", rev, u.Intent, len(u.Overrides))
	}
	// What the engine reads each tick, without the record.
	if r, err := w.ReadRequests("upg-ops"); err != nil || r.Revision != 2 || r.Intent.Kind != upgrade.IntentPause || r.Intent.Seq != 1 || len(r.Overrides) != 1 {
		t.Fatalf("ReadRequests: %+v %v, want revision 2, pause 1, one override", r, err)
	}
	if _, err := w.ReadRequests("upg-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadRequests of no upgrade: %v, want store.ErrNotFound", err)
	}

	const writers, each = 4, 10
	var wg sync.WaitGroup
	for i := range writers {
		s := open(fmt.Sprint("appender ", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if _, err := s.Append(f, store.Event{Upgrade: fmt.Sprint("upg-", i%2), Kind: "step", Message: fmt.Sprint(i, "/", j)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	all, err := op.Events("", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*each+2 { // + the pause's and the override's
		t.Fatalf("%d events, want %d", len(all), writers*each+2)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("event %d has seq %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
	some, err := op.Events("upg-1", all[10].Seq, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != 5 || some[0].Seq <= all[10].Seq || some[0].Upgrade != "upg-1" {
		t.Fatalf("5 events of upg-1 after seq %d: %+v", all[10].Seq, some)
	}
	t.Logf("%d writers × %d appends at once: seqs %d..%d, each once, in order", writers, each, all[0].Seq, all[len(all)-1].Seq)

	if _, err := op.ClearCurrent(); !errors.Is(err, store.ErrActive) {
		t.Fatalf("clear a running upgrade: %v, want store.ErrActive", err)
	}
	rec.State = upgrade.StateCompleted
	if _, _, err := w.SaveAt(rec, 2, f, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := op.ClearCurrent(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := op.Current(); ok || err != nil {
		t.Fatalf("current after the clear: %v %v", ok, err)
	}
	if last, ok, err := op.Last(); !ok || err != nil || last.ID != "upg-ops" {
		t.Fatalf("the last upgrade: %s %v %v", last.ID, ok, err)
	}
}

// BenchmarkTickRead1000 is what the engine reads of an etcd store each
// tick, on a record of 1,000 members: the record itself ("Read", which
// it read before) or the operator's requests and the revision alone
// ("ReadRequests").
func BenchmarkTickRead1000(b *testing.B) {
	c := etcdtest.Start(b, 1, 2111)
	s, err := etcdstore.Open(etcdstore.Config{Endpoints: c.Endpoints, Prefix: "/ferry-bench/", Name: "engine", TTL: 5})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Campaign(b.Context(), "engine"); err != nil {
		b.Fatal(err)
	}
	f, err := s.Fence()
	if err != nil {
		b.Fatal(err)
	}
	u := storetest.Record("upg-big", "a thousand members")
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		n := fmt.Sprintf("agent-kwok-node-%d", i)
		u.Members[n] = &upgrade.Member{Name: n, Component: "kv", From: "1.0.0", Target: "2.0.0", Step: upgrade.StepDone,
			Since: t0, Began: t0, HealthySince: t0, Started: t0, StartDone: t0, Stopped: t0, LastTry: t0, Tries: 1, Acted: true}
	}
	if _, err := s.CreateAt(u, f); err != nil {
		b.Fatal(err)
	}
	b.Run("Read", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Read("upg-big"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadRequests", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.ReadRequests("upg-big"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
