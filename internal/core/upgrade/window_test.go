package upgrade

import (
	"strings"
	"testing"
	"time"
)

// TestHeldOutsideWindows: the world's clock starts at Monday 12:00 UTC
// and the windows are 12:00-12:01 and 12:05-24:00. The machine forms
// no batch from 12:01 to 12:05, says why and until when, asks to be
// stepped when it opens, and forms the next batch then, by itself.
func TestHeldOutsideWindows(t *testing.T) {
	windows := "policy:\n  windows:\n    - {days: [daily], start: \"12:00\", end: \"12:01\"}\n    - {days: [mon], start: \"12:05\", end: \"24:00\", zone: UTC}\n"
	w := describedWorld(t, windows+describe("kv", "{type: one-at-a-time}", 12, "", onThreeHosts))
	w.ready = 10 * time.Second
	closes, opens := w.t0.Add(time.Minute), w.t0.Add(5*time.Minute)
	if err := w.begin("2.0.0"); err != nil {
		t.Fatal(err)
	}
	var heldSaid string
	w.run(time.Hour, func() bool {
		if w.u.Held != nil && heldSaid == "" {
			heldSaid = w.u.Waiting
		}
		return false
	})
	if w.u.State != StateCompleted {
		t.Fatalf("ended %s: %s\n%s", w.u.State, w.u.Reason, w.trace.String())
	}
	first := time.Time{}
	for _, b := range w.u.Batches {
		if !b.Began.Before(closes) && b.Began.Before(opens) {
			t.Errorf("%s began at %s, outside the windows", b.Name(), b.Began.Format(time.TimeOnly))
		}
		if !b.Began.Before(opens) && first.IsZero() {
			first = b.Began
		}
	}
	if !first.Equal(opens) {
		t.Errorf("the first batch after the hold began at %s, want %s", first.Format(time.TimeOnly), opens.Format(time.TimeOnly))
	}
	want := "kv: not starting the next batch: outside the maintenance windows (daily 12:00-12:01 UTC; mon 12:05-24:00 UTC): holding until the next opens at 2026-11-23T12:05:00Z"
	if !strings.Contains(heldSaid, want) {
		t.Errorf("held saying %q, want %q", heldSaid, want)
	}
	if w.u.Held != nil {
		t.Errorf("still held at the end: %+v", w.u.Held)
	}
}
