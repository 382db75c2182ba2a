package rehearse

import (
	"context"
	"testing"
	"time"
)

// TestControl: the control's handler answers its clients from the
// start, every request succeeds, and stopping it stops both (run under
// the race detector in make test: the handler, the clients and the
// recorder are goroutines of their own).
func TestControl(t *testing.T) {
	rec, stop, err := startControl(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.Samples()) < 20 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the control made %d requests in 10s, want 20 (50/s)", len(rec.Samples()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop() // returns once the clients have stopped and the server is closed
	for _, s := range rec.Samples() {
		if !s.OK {
			t.Errorf("a control request failed: %s", s.Err)
		}
	}
}
