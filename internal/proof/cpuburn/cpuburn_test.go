package cpuburn

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBurnsAndStops: the workers spin (more busy time than one burst's
// shortest), Stop returns with them gone, and String names the seed.
func TestBurnsAndStops(t *testing.T) {
	cfg := Config{Workers: 2, Seed: 42, Burst: 40 * time.Millisecond, Pause: 20 * time.Millisecond}
	b := Start(context.Background(), cfg)
	t.Log(b.Config())
	deadline := time.Now().Add(10 * time.Second)
	for b.bursts.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	st := b.Stop()
	t.Logf("%d bursts, %s busy", st.Bursts, st.Busy)
	if st.Bursts < 4 || st.Busy < 4*20*time.Millisecond {
		t.Errorf("burned %d bursts, %s busy; want at least 4 bursts of at least 20ms", st.Bursts, st.Busy)
	}
	after := b.bursts.Load()
	if again := b.Stop(); again.Bursts != after {
		t.Errorf("bursts went on after Stop: %d then %d", after, again.Bursts)
	}
	if s := b.Config().String(); !strings.Contains(s, "seed 42") || !strings.Contains(s, "2 workers") {
		t.Errorf("String() = %q", s)
	}
}

// TestLimitEndsIt: a burner nobody stops ends at its limit.
func TestLimitEndsIt(t *testing.T) {
	b := Start(context.Background(), Config{Workers: 1, Seed: 7, Burst: 10 * time.Millisecond, Pause: 10 * time.Millisecond, Limit: 100 * time.Millisecond})
	ended := make(chan struct{})
	go func() { b.wg.Wait(); close(ended) }() // not Stop: the limit alone
	select {
	case <-ended:
		t.Logf("%d bursts before the limit", b.Stop().Bursts)
	case <-time.After(10 * time.Second):
		b.Stop()
		t.Fatal("a burner with a 100ms limit still ran after 10s")
	}
}
