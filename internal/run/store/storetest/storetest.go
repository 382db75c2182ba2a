// Package storetest is the one suite every store of upgrade records
// passes (store.Records: the bbolt store, the etcd store, the
// controller's status store, the simulation's memory): saves at the
// revision read, one winner per revision among concurrent writers, a
// stale revision refused, a writer whose claim was taken over, or whose
// lease expired, refused, its saves and its appends of events alike,
// and a refused write writing nothing. Each store's own tests call Run
// with how to reach it.
package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Subject is one store under test, empty.
type Subject struct {
	// Writer returns a new writer on the store, as another process (or
	// replica) named name would have one.
	Writer func(t *testing.T, name string) store.Records
	// TakeOver makes writer name the holder of the store's lease, as a
	// successor's leader election does; nil when a writer's Fence
	// takes the store by itself (bbolt, memory).
	TakeOver func(t *testing.T, name string)
	// Expire ends the current holder's lease with no successor; nil
	// when the store's claims do not expire, saying why in NoExpiry.
	Expire   func(t *testing.T)
	NoExpiry string
}

// Writers and Rounds size the concurrent writers' test.
const (
	Writers = 4
	Rounds  = 6
)

// Run runs the suite, each test on a subject of its own from open.
func Run(t *testing.T, open func(t *testing.T) Subject) {
	t.Run("SavesAtTheRevisionRead", func(t *testing.T) { savesAtTheRevisionRead(t, open(t)) })
	t.Run("StaleRevisionRefused", func(t *testing.T) { staleRevisionRefused(t, open(t)) })
	t.Run("ConcurrentWritersOneWinsEachRevision", func(t *testing.T) { concurrentWriters(t, open(t)) })
	t.Run("TakenOverWriterRefused", func(t *testing.T) { takenOver(t, open(t)) })
	t.Run("ExpiredLeaseRefused", func(t *testing.T) { expired(t, open(t)) })
}

// Record is the suite's record: small, in a state every store takes.
func Record(id, waiting string) upgrade.Upgrade {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return upgrade.Upgrade{ID: id, From: "1.0.0", To: "2.0.0", State: upgrade.Upgrading("kv"), Waiting: waiting,
		Members: map[string]*upgrade.Member{"kv-1": {Name: "kv-1", Component: "kv", From: "1.0.0", Target: "2.0.0", Step: upgrade.StepPending}},
		Created: now, Updated: now}
}

// begin claims the store for writer name and creates the suite's
// record: the writer, its fence, the record's revision.
func begin(t *testing.T, s Subject, name string) (store.Records, store.Fence, store.Revision) {
	t.Helper()
	w := s.Writer(t, name)
	if s.TakeOver != nil {
		s.TakeOver(t, name)
	}
	f, err := w.Fence()
	if err != nil {
		t.Fatalf("%s: Fence: %v", name, err)
	}
	rev, err := w.CreateAt(Record("upg-suite", "created by "+name), f)
	if err != nil {
		t.Fatalf("%s: CreateAt: %v", name, err)
	}
	if rev != 1 {
		t.Fatalf("CreateAt: revision %d, want 1", rev)
	}
	return w, f, rev
}

// stored reads the record and wants it at revision want, saying what.
func stored(t *testing.T, w store.Records, want store.Revision, waiting string) {
	t.Helper()
	u, rev, err := w.Read("upg-suite")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if rev != want || u.Waiting != waiting {
		t.Fatalf("stored: revision %d saying %q, want revision %d saying %q", rev, u.Waiting, want, waiting)
	}
}

func savesAtTheRevisionRead(t *testing.T, s Subject) {
	w, f, rev := begin(t, s, "a")
	stored(t, w, 1, "created by a")
	if _, err := w.CreateAt(Record("upg-other", "second"), f); !errors.Is(err, store.ErrActive) {
		t.Fatalf("a second upgrade while one runs: %v, want store.ErrActive", err)
	}
	for i := range 3 {
		next, evs, err := w.SaveAt(Record("upg-suite", fmt.Sprint("save ", i)), rev, f,
			[]store.Event{{Kind: "step", Message: fmt.Sprint("event ", i)}})
		if err != nil {
			t.Fatalf("save %d at revision %d: %v", i, rev, err)
		}
		if next != rev+1 || len(evs) != 1 || evs[0].Seq == 0 {
			t.Fatalf("save %d: revision %d (want %d), events %+v", i, next, rev+1, evs)
		}
		rev = next
	}
	stored(t, w, 4, "save 2")
	evs, err := w.Append(f, store.Event{Upgrade: "upg-suite", Kind: "output", Message: "appended"})
	if err != nil || len(evs) != 1 || evs[0].Seq == 0 {
		t.Fatalf("an append under the store's fence: %+v %v", evs, err)
	}
	if _, _, err := w.Read("upg-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read of no such upgrade: %v, want store.ErrNotFound", err)
	}
}

func staleRevisionRefused(t *testing.T, s Subject) {
	w, f, _ := begin(t, s, "a")
	if _, _, err := w.SaveAt(Record("upg-suite", "saved at 1"), 1, f, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := w.SaveAt(Record("upg-suite", "stale"), 1, f, []store.Event{{Kind: "step", Message: "stale"}})
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) || ce.Read != 1 || ce.Stored != 2 {
		t.Fatalf("a save at revision 1 after 2: %v, want a *store.ConflictError of 1 and 2", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "revision 1") || !strings.Contains(msg, "revision 2") {
		t.Fatalf("the refusal names both revisions: %s", msg)
	}
	t.Log(err)
	stored(t, w, 2, "saved at 1")
}

// concurrentWriters: Writers writers, each with a handle of its own
// under the one fence, save Rounds times each at the revision they
// read, all at once: every revision is won by one save, every other
// save of it is refused as stale, and the record is the last winner's.
func concurrentWriters(t *testing.T, s Subject) {
	_, f, _ := begin(t, s, "a")
	type win struct {
		writer, round int
	}
	var mu sync.Mutex
	wins := map[store.Revision]win{}
	conflicts := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, Writers)
	for i := range Writers {
		w := s.Writer(t, "a")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for r := range Rounds {
				_, rev, err := w.Read("upg-suite")
				if err != nil {
					errs <- err
					return
				}
				next, _, err := w.SaveAt(Record("upg-suite", fmt.Sprintf("writer %d round %d", i, r)), rev, f, nil)
				mu.Lock()
				switch {
				case err == nil:
					if prev, dup := wins[next]; dup {
						errs <- fmt.Errorf("revision %d won twice: by writer %d round %d and writer %d round %d", next, prev.writer, prev.round, i, r)
					}
					wins[next] = win{i, r}
				case errors.Is(err, store.ErrConflict):
					conflicts++
				default:
					errs <- fmt.Errorf("writer %d round %d: %w", i, r, err)
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	last := store.Revision(1 + len(wins))
	for rev := store.Revision(2); rev <= last; rev++ {
		if _, ok := wins[rev]; !ok {
			t.Fatalf("revision %d was won by no save (%d wins, up to %d)", rev, len(wins), last)
		}
	}
	if len(wins)+conflicts != Writers*Rounds || len(wins) == 0 {
		t.Fatalf("%d wins and %d conflicts of %d saves", len(wins), conflicts, Writers*Rounds)
	}
	w := wins[last]
	stored(t, s.Writer(t, "a"), last, fmt.Sprintf("writer %d round %d", w.writer, w.round))
	t.Logf("%d writers × %d rounds: %d saves won (revisions 2..%d, one each), %d refused as stale", Writers, Rounds, len(wins), last, conflicts)
}

// takenOver: once b claimed the store, a's save, create and append are
// refused naming a's fence, and write nothing (b's next event follows
// a's last: the refused append numbered none).
func takenOver(t *testing.T, s Subject) {
	a, fa, rev := begin(t, s, "a")
	before, err := a.Append(fa, store.Event{Upgrade: "upg-suite", Kind: "step", Message: "a, while it holds the store"})
	if err != nil {
		t.Fatalf("a's append: %v", err)
	}
	b := s.Writer(t, "b")
	if s.TakeOver != nil {
		s.TakeOver(t, "b")
	}
	fb, err := b.Fence()
	if err != nil {
		t.Fatalf("b: Fence: %v", err)
	}
	if fb == fa || fb.Term <= fa.Term {
		t.Fatalf("b's fence %s after a's %s: want a later term", fb, fa)
	}
	_, _, err = a.SaveAt(Record("upg-suite", "a, deposed"), rev, fa, []store.Event{{Kind: "step", Message: "deposed"}})
	var fe *store.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, store.ErrFenced) || fe.Yours != fa {
		t.Fatalf("a's save after b took over: %v, want a *store.FencedError with a's fence", err)
	}
	if !strings.Contains(err.Error(), fa.String()) {
		t.Fatalf("the refusal names a's fence %s: %v", fa, err)
	}
	t.Log(err)
	stored(t, b, rev, "created by a")
	if _, err := a.CreateAt(Record("upg-a", "a again"), fa); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's create after b took over: %v, want store.ErrFenced", err)
	}
	evs, err := a.Append(fa, store.Event{Upgrade: "upg-suite", Kind: "output", Message: "a, deposed"})
	if !errors.As(err, &fe) || fe.Yours != fa || len(evs) != 0 {
		t.Fatalf("a's append after b took over: %+v %v, want a *store.FencedError with a's fence, and no event", evs, err)
	}
	t.Log(err)
	if _, _, err := b.SaveAt(Record("upg-suite", "b"), rev, fb, nil); err != nil {
		t.Fatalf("b's save: %v", err)
	}
	stored(t, a, rev+1, "b")
	next, err := b.Append(fb, store.Event{Upgrade: "upg-suite", Kind: "step", Message: "b"})
	if err != nil || len(next) != 1 || next[0].Seq != before[0].Seq+1 {
		t.Fatalf("b's append: %+v %v, want the event after a's last (%d): a's refused append numbered none", next, err, before[0].Seq)
	}
}

func expired(t *testing.T, s Subject) {
	if s.Expire == nil {
		t.Skip(s.NoExpiry)
	}
	a, fa, rev := begin(t, s, "a")
	s.Expire(t)
	_, _, err := a.SaveAt(Record("upg-suite", "a, expired"), rev, fa, nil)
	if !errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a save after the lease expired: %v, want store.ErrFenced saying it expired", err)
	}
	t.Log(err)
	stored(t, a, rev, "created by a")
	if _, err := a.Append(fa, store.Event{Upgrade: "upg-suite", Kind: "output", Message: "a, expired"}); !errors.Is(err, store.ErrFenced) ||
		!strings.Contains(err.Error(), "expired") {
		t.Fatalf("an append after the lease expired: %v, want store.ErrFenced saying it expired", err)
	}
}
