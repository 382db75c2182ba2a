package driver

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestOnceEach: ten callers of one key run its job once; a failed job
// is run again by the next caller; Forget runs it again.
func TestOnceEach(t *testing.T) {
	var o OnceEach
	var runs atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Do("h1\x00sum", func() error { runs.Add(1); return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Errorf("the job ran %d times for ten callers, want 1", n)
	}
	boom := errors.New("boom")
	if err := o.Do("h2", func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failed job: %v", err)
	}
	if err := o.Do("h2", func() error { runs.Add(1); return nil }); err != nil || runs.Load() != 2 {
		t.Errorf("after a failure the job runs again: %v, %d runs", err, runs.Load())
	}
	o.Forget("h1\x00sum")
	_ = o.Do("h1\x00sum", func() error { runs.Add(1); return nil })
	if runs.Load() != 3 {
		t.Errorf("after Forget the job runs again: %d runs, want 3", runs.Load())
	}
}
