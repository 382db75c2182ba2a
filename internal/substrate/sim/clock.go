package sim

import (
	"container/heap"
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
)

// Epoch is where every simulation's virtual time begins.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a virtual clock (engine.Clock). Its time moves only in
// Advance, to the next timer, once the process is idle.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
	ops    atomic.Uint64 // every operation, so that a settle sees activity between two looks
	// together fires every timer due at one instant at once, the sim's
	// own with the engine's (an estimate's: members with the same
	// durations end their moves together, and the engine folds their
	// outcomes in one step). The order the engine then sees them in is
	// the scheduler's: a run is no longer replayed exactly.
	together bool
}

var _ engine.Clock = (*Clock)(nil)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Timer kinds, in the order timers due at the same instant fire.
const (
	kindEngine = iota // the engine's own timers: they fire together
	kindFunc          // context deadlines: one at a time
	kindSim           // the simulated world's, labelled: one at a time
)

type timer struct {
	c     *Clock
	when  time.Time
	seq   uint64
	kind  int
	label string
	ch    chan time.Time
	f     func()
	index int // in the heap; -1 when not armed
}

func (c *Clock) Now() time.Time {
	c.ops.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer is an engine timer: it fires with the other engine timers
// due at the same instant.
func (c *Clock) NewTimer(d time.Duration) engine.Timer {
	t := &timer{c: c, kind: kindEngine, ch: make(chan time.Time, 1), index: -1}
	t.Reset(d)
	return t
}

// afterFunc calls f in the clock's goroutine once d has passed.
func (c *Clock) afterFunc(d time.Duration, kind int, label string, f func()) *timer {
	t := &timer{c: c, kind: kind, label: label, f: f, index: -1}
	t.Reset(d)
	return t
}

// simTimer is a timer of the simulated world, labelled.
func (c *Clock) simTimer(d time.Duration, label string) *timer {
	t := &timer{c: c, kind: kindSim, label: label, ch: make(chan time.Time, 1), index: -1}
	t.Reset(d)
	return t
}

// sleep waits d of virtual time, or until ctx ends (false).
func (c *Clock) sleep(ctx context.Context, d time.Duration, label string) bool {
	t := c.simTimer(d, label)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.ch:
		return true
	}
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Reset(d time.Duration) bool {
	c := t.c
	c.ops.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.stopLocked()
	t.when = c.now.Add(max(d, 0))
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
	return was
}

func (t *timer) Stop() bool {
	t.c.ops.Add(1)
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.stopLocked()
}

func (t *timer) stopLocked() bool {
	was := t.index >= 0
	if was {
		heap.Remove(&t.c.timers, t.index)
	}
	if t.ch != nil {
		select { // no stale value after a Stop or a Reset
		case <-t.ch:
		default:
		}
	}
	return was
}

// deadlineCtx ends with context.DeadlineExceeded when its virtual
// deadline passes. It shows no Deadline: a virtual time would mean
// nothing to code that compares it with the wall clock.
type deadlineCtx struct {
	context.Context
	expired atomic.Bool
}

func (d *deadlineCtx) Err() error {
	err := d.Context.Err()
	if err != nil && d.expired.Load() {
		return context.DeadlineExceeded
	}
	return err
}

func (c *Clock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	dc := &deadlineCtx{Context: ctx}
	if d <= 0 {
		dc.expired.Store(true)
		cancel()
		return dc, cancel
	}
	t := c.afterFunc(d, kindFunc, "", func() {
		if ctx.Err() == nil {
			dc.expired.Store(true)
		}
		cancel()
	})
	return dc, func() { t.Stop(); cancel() }
}

// next pops what fires next: every engine timer due at the earliest
// instant, or else one context deadline, or else one timer of the
// world, and moves the time to it. It returns false when no timer is
// armed.
func (c *Clock) next() ([]*timer, bool) {
	c.ops.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return nil, false
	}
	first := heap.Pop(&c.timers).(*timer)
	if first.when.After(c.now) {
		c.now = first.when
	}
	out := []*timer{first}
	if first.kind == kindEngine || c.together {
		for len(c.timers) > 0 && (c.together || c.timers[0].kind == kindEngine) && !c.timers[0].when.After(first.when) {
			out = append(out, heap.Pop(&c.timers).(*timer))
		}
	}
	return out, true
}

// Advance waits until the process is idle, then fires what is due next
// (moving the time to it). It returns false when nothing is armed.
func (c *Clock) Advance() bool {
	c.Settle()
	ts, ok := c.next()
	if !ok {
		return false
	}
	now := c.Now()
	for _, t := range ts {
		if t.f != nil {
			t.f()
			continue
		}
		select {
		case t.ch <- now:
		default:
		}
	}
	return true
}

var idleSamples = []metrics.Sample{{Name: "/sched/goroutines/running:goroutines"}, {Name: "/sched/goroutines/runnable:goroutines"}}

var samplesMu sync.Mutex

// quiet reports whether no goroutine but the caller runs or is ready to.
func quiet() bool {
	samplesMu.Lock()
	defer samplesMu.Unlock()
	metrics.Read(idleSamples)
	return idleSamples[0].Value.Uint64() <= 1 && idleSamples[1].Value.Uint64() == 0
}

// Settle returns once every goroutine but the caller is blocked: seen
// quiet twice, with a yield between and no operation of the clock.
func (c *Clock) Settle() {
	for spins := 0; ; spins++ {
		ops := c.ops.Load()
		if quiet() {
			runtime.Gosched()
			if quiet() && c.ops.Load() == ops {
				return
			}
		}
		if spins < 64 {
			runtime.Gosched()
		} else {
			// Someone runs: look again shortly (a poll of a condition,
			// not a wait that hopes).
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// timerHeap orders timers by time, then kind, then label, then seq.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.when.Equal(b.when) {
		return a.when.Before(b.when)
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.label != b.label {
		return a.label < b.label
	}
	return a.seq < b.seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
