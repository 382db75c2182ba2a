package health

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	// Each case feeds results (+ pass, - fail), one a second from t0,
	// and lists the state after each: H or U, the second Since points
	// at, then passes/failures.
	for _, tc := range []struct {
		name             string
		success, failure int
		results          string
		want             []string
	}{
		{"starts unhealthy, one pass makes it healthy", 1, 1, "+",
			[]string{"H0 1/0"}},
		{"a first failure leaves it unhealthy since then", 1, 1, "--",
			[]string{"U0 0/1", "U0 0/2"}},
		{"thresholds of 1 follow every result", 1, 1, "+-+",
			[]string{"H0 1/0", "U1 0/1", "H2 1/0"}},
		{"success threshold 3", 3, 1, "++-+++",
			[]string{"U0 1/0", "U0 2/0", "U0 0/1", "U0 1/0", "U0 2/0", "H5 3/0"}},
		{"failure threshold 2 forgives one failure", 1, 2, "+-+--+",
			[]string{"H0 1/0", "H0 0/1", "H0 1/0", "H0 0/1", "U4 0/2", "H5 1/0"}},
		{"healthy stays healthy, Since unchanged", 2, 2, "+++++",
			[]string{"U0 1/0", "H1 2/0", "H1 3/0", "H1 4/0", "H1 5/0"}},
		{"thresholds below 1 count as 1", 0, -1, "+-",
			[]string{"H0 1/0", "U1 0/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			for i, c := range tc.results {
				r := Result{OK: c == '+', Detail: fmt.Sprintf("result %d", i)}
				st := tr.Observe("kv-1", r, at(i), tc.success, tc.failure)
				h := "U"
				if st.Healthy {
					h = "H"
				}
				got := fmt.Sprintf("%s%d %d/%d", h, int(st.Since.Sub(t0)/time.Second), st.Passes, st.Failures)
				if got != tc.want[i] {
					t.Errorf("after result %d (%c): %s, want %s", i, c, got, tc.want[i])
				}
				if st.Last != r {
					t.Errorf("after result %d: Last = %+v", i, st.Last)
				}
				if g, ok := tr.Get("kv-1"); !ok || g != st {
					t.Errorf("Get = %+v, %v; Observe returned %+v", g, ok, st)
				}
			}
		})
	}
}

func TestTrackerKeysAreApart(t *testing.T) {
	var tr Tracker
	now := time.Unix(100, 0)
	tr.Observe("kv-1", Result{OK: true, Detail: "ok"}, now, 1, 1)
	if st := tr.Observe("cluster:kv", Result{Detail: "no"}, now, 1, 1); st.Healthy {
		t.Errorf("cluster:kv healthy from kv-1's result")
	}
	if _, ok := tr.Get("kv-2"); ok {
		t.Errorf("kv-2 known without a result")
	}
	tr.Forget("kv-1")
	if st := tr.Observe("kv-1", Result{Detail: "down"}, now.Add(time.Second), 1, 1); st.Healthy || !st.Since.Equal(now.Add(time.Second)) {
		t.Errorf("after Forget: %+v, want unhealthy since the new result", st)
	}
}

// TestTrackerConcurrent is for the race detector: keys observed from
// many goroutines at once, each key's count exact.
func TestTrackerConcurrent(t *testing.T) {
	var tr Tracker
	var wg sync.WaitGroup
	now := time.Unix(0, 0)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				tr.Observe(fmt.Sprintf("m-%d", i%4), Result{OK: true, Detail: "ok"}, now, 3, 3)
				tr.Get(fmt.Sprintf("m-%d", g%4))
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		if st, _ := tr.Get(fmt.Sprintf("m-%d", i)); st.Passes != 400 || !st.Healthy {
			t.Errorf("m-%d: %+v, want healthy with 400 passes", i, st)
		}
	}
}
