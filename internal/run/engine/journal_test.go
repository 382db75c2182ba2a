package engine

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// countingStore counts the engine's writes of its store.
type countingStore struct {
	*store.Store
	writes atomic.Int64
}

func (s *countingStore) SaveAt(u upgrade.Upgrade, at store.Revision, f store.Fence, evs []store.Event) (store.Revision, []store.Event, error) {
	s.writes.Add(1)
	return s.Store.SaveAt(u, at, f, evs)
}

func (s *countingStore) Append(f store.Fence, evs ...store.Event) ([]store.Event, error) {
	s.writes.Add(1)
	return s.Store.Append(f, evs...)
}

// TestJournalWritesWaitingRequestsAtOnce: the effects and kept outputs
// of a batch's drivers that wait on the journal together are written in
// one write (group commit), each answered, in the order they came: a
// hundred pods replaced at once wait on one fsync, not on a hundred in
// a row. Effects opened and outputs kept alike.
func TestJournalWritesWaitingRequestsAtOnce(t *testing.T) {
	dir := t.TempDir()
	sum := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("{path: %s, sha256: %x}", p, sha256.Sum256([]byte(name)))
	}
	c, err := config.Parse([]byte(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: api
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: api-1, host: h1, address: 127.0.0.1:8201}, {name: api-2, host: h1, address: 127.0.0.1:8202}]
releases:
  - version: 1.0.0
    artifacts: {"*": `+sum("a-1")+`}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    artifacts: {"*": `+sum("a-2")+`}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bolt, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Store: bolt}
	e, err := New(Config{Cluster: c, Driver: &watchingDriver{changed: make(chan struct{})}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	began, err := e.Begin(context.Background(), "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	fence, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	u, rev, err := st.Read(began.ID)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	l := &loop{e: e, u: u, fence: fence, rev: rev, journal: make(chan journalReq, n)}
	var replies []chan error
	for i := range n {
		r := journalReq{member: "api-1", reply: make(chan error, 1)}
		if i%2 == 0 {
			ev := KeptOutputEvent("api-1", driver.KeptOutput{Instance: fmt.Sprint("instance ", i), Why: "replaced", Output: "x\n", Lines: 1})
			r.output = &ev
		} else {
			r.effect = journalEffect{effect.Effect{Key: fmt.Sprint("key-", i), Scope: effect.Member("api-1"), What: fmt.Sprint("change ", i)}}
		}
		l.journal <- r
		replies = append(replies, r.reply)
	}
	before := st.writes.Load()
	l.answer(l.waiting(<-l.journal))
	if w := st.writes.Load() - before; w != 1 {
		t.Errorf("%d requests waiting together took %d writes, want 1", n, w)
	}
	for i, r := range replies {
		select {
		case err := <-r:
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		default:
			t.Errorf("request %d not answered", i)
		}
	}
	if got := len(l.u.Effects); got != n/2 {
		t.Errorf("%d effects in the record, want %d", got, n/2)
	}
	evs, err := st.Events(u.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ev := range evs {
		if ev.Kind == EventKeptOutput || ev.Kind == "effect" {
			order = append(order, ev.Message)
		}
	}
	if len(order) != n {
		t.Fatalf("%d events stored, want %d: %q", len(order), n, order)
	}
	for i, m := range order {
		if want := fmt.Sprint(i); !strings.Contains(m, "instance "+want+",") && !strings.Contains(m, "change "+want) {
			t.Errorf("event %d is %q: out of order", i, m)
		}
	}
}
