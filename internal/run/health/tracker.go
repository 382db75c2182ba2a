package health

import (
	"sync"
	"time"
)

// State is a key's verdict after the results observed so far.
type State struct {
	Healthy bool
	// Since is when the current Healthy value began: the result that
	// crossed the threshold, or the first result for a key that has
	// never been healthy.
	Since time.Time
	// Last is the latest result.
	Last Result
	// Passes and Failures count the consecutive results of each kind
	// up to and including Last; one of them is 0.
	Passes, Failures int
}

// Tracker applies success/failure thresholds to results, per key (a
// member name, or "cluster:<component>"). The zero value is ready to
// use; a Tracker is safe for concurrent use. It reads no clock: the
// time of each result is passed in.
type Tracker struct {
	mu   sync.Mutex
	keys map[string]State
}

// Observe folds result r, seen at now, into key's state and returns the
// new state. A key starts unhealthy; it becomes healthy after success
// consecutive passes and unhealthy after failure consecutive failures
// (thresholds below 1 count as 1).
func (t *Tracker) Observe(key string, r Result, now time.Time, success, failure int) State {
	success, failure = max(1, success), max(1, failure)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[string]State{}
	}
	st, ok := t.keys[key]
	if !ok {
		st = State{Since: now}
	}
	if r.OK {
		st.Passes, st.Failures = st.Passes+1, 0
		if !st.Healthy && st.Passes >= success {
			st.Healthy, st.Since = true, now
		}
	} else {
		st.Passes, st.Failures = 0, st.Failures+1
		if st.Healthy && st.Failures >= failure {
			st.Healthy, st.Since = false, now
		}
	}
	st.Last = r
	t.keys[key] = st
	return st
}

// Get returns key's state, and whether anything was observed for it.
func (t *Tracker) Get(key string) (State, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.keys[key]
	return st, ok
}

// Forget drops key's state: its next result starts it afresh,
// unhealthy (a member removed, or replaced by a new process that must
// earn its verdict).
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}
