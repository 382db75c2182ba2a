package engine

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	bolt, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Store: bolt}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	u := upgrade.Upgrade{ID: "upg-1", State: upgrade.Upgrading("api"), Members: map[string]*upgrade.Member{
		"api-1": {Name: "api-1", Component: "api", From: "1.0.0", Target: "2.0.0", Step: upgrade.StepStarting},
	}, Created: now, Updated: now}
	fence, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.CreateAt(u, fence)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{c: &config.Cluster{}, cfg: Config{Store: st, Clock: RealClock{}, Logger: slog.New(slog.DiscardHandler)}}
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
	l.answer(queued(l.journal, <-l.journal))
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
