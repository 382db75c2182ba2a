package etcdstore_test

import (
	"fmt"
	"sync"
	"testing"

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
