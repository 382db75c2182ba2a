package proof

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// TestBaselineReadWhileItEnds: the request that starts an upgrade ends
// the baseline while GET /v1/traffic (and the engine's judge) read it;
// under -race this failed as a data race on the baseline's end (the
// server's TestDashboardDrivesAnUpgrade once).
func TestBaselineReadWhileItEnds(t *testing.T) {
	s := Start(context.Background(), &config.Traffic{Baseline: config.Duration(20 * time.Millisecond)}, Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sawEnd := make(chan time.Time, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s.BaselineDone() {
				select {
				case sawEnd <- s.BaselineEnd():
				default:
				}
			}
		}
	}()
	err := s.WaitBaseline(context.Background())
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !s.BaselineDone() || s.BaselineEnd().Sub(s.Began()) < 20*time.Millisecond {
		t.Fatalf("baseline done %v, ended %s after it began; want done, 20ms or more", s.BaselineDone(), s.BaselineEnd().Sub(s.Began()))
	}
	select {
	case end := <-sawEnd:
		if !end.Equal(s.BaselineEnd()) {
			t.Errorf("a reader saw the baseline end at %s, it ended at %s", end, s.BaselineEnd())
		}
	default: // the reader did not come round after the end: nothing to compare
	}
}
