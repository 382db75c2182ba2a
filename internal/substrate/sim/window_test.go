package sim

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestWindowClosesMidUpgrade: the policy's windows are 00:00-00:01 and
// 00:10-24:00 UTC, and the simulated upgrade begins at the sim's epoch,
// 2030-01-01 00:00 UTC, on its virtual clock. The window closes during
// the upgrade: the batch in flight finishes, no batch begins from 00:01
// to 00:10, the upgrade holds saying so and when the next window opens
// (in its record and an event), and goes on by itself at 00:10 to
// complete.
func TestWindowClosesMidUpgrade(t *testing.T) {
	src, err := os.ReadFile("testdata/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src) + `policy:
  windows:
    - {days: [daily], start: "00:00", end: "00:01"}
    - {days: [daily], start: "00:10", end: "24:00", zone: UTC}
`
	c, err := config.Parse([]byte(text), "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	closes, opens := Epoch.Add(time.Minute), Epoch.Add(10*time.Minute)
	res, err := Run(context.Background(), Config{Cluster: c, To: "2.0.0", Seed: 1, Faults: &Faults{}})
	if err != nil || res.Err != "" {
		t.Fatalf("%v %s", err, res.Err)
	}
	if res.State != upgrade.StateCompleted {
		t.Fatalf("ended %s: %s", res.State, res.Reason)
	}
	if b := res.Broken(); len(b) > 0 {
		t.Fatalf("invariants broken: %v", b)
	}
	var before, after, inFlight int
	for _, b := range res.Record.Batches {
		switch {
		case b.Began.Before(closes):
			before++
			if b.Ended.After(closes) {
				inFlight++ // the batch in flight as the window closed finished after
			}
		case b.Began.Before(opens):
			t.Errorf("%s began at %s, outside the windows", b.Name(), b.Began.Format(time.TimeOnly))
		default:
			after++
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("%d batches before the window closed, %d after it opened again: the window did not close mid-upgrade", before, after)
	}
	want := "outside the maintenance windows (daily 00:00-00:01 UTC; daily 00:10-24:00 UTC): holding until the next opens at 2030-01-01T00:10:00Z"
	var heldAt, resumedAt time.Time
	for _, ev := range res.Events {
		if ev.Kind == "wait" && strings.Contains(ev.Message, want) && heldAt.IsZero() {
			heldAt = ev.Time
		}
		if strings.Contains(ev.Message, "opened at 2030-01-01T00:10:00Z: going on") && resumedAt.IsZero() {
			resumedAt = ev.Time
		}
	}
	if heldAt.Before(closes) || !heldAt.Before(opens) {
		t.Fatalf("the hold's event at %s, want one from %s to %s saying %q", heldAt, closes, opens, want)
	}
	if !resumedAt.Equal(opens) {
		t.Fatalf("resumed at %s, want %s", resumedAt, opens)
	}
	if res.Record.Held != nil {
		t.Errorf("still held at the end: %+v", res.Record.Held)
	}
	t.Logf("%d batches before 00:01 (%d in flight as it closed, finished after), %d from 00:10; held from %s, resumed at %s; took %s", before, inFlight, after, heldAt.Format(time.TimeOnly), resumedAt.Format(time.TimeOnly), res.Took)
}
