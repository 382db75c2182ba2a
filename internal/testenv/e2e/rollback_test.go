package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestBadReleasesRollBack upgrades one live cluster, under client
// traffic, to three bad releases in turn (one exits at start, one
// never passes readiness, one passes it and crashes four seconds later,
// within the five-second min_healthy_time), then to the good one. Each
// bad one ends rolled-back with every member on 1.0.0 and the cluster
// healthy; the good one completes; no acknowledged write is lost.
func TestBadReleasesRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 5 * time.Second, Deadline: 12 * time.Second, GateDeadline: 15 * time.Second},
		"2.0.0", "2.0.0-bad.exit", "2.0.0-bad.never", "2.0.0-bad.crash")
	stopTraffic := clientTraffic(cl, 42)
	obs := watch(cl)
	for _, tc := range []struct {
		to, want, cause string
	}{
		{"2.0.0-bad.exit", "rolled-back", "crash loop: exited 2 times since its start"},
		{"2.0.0-bad.never", "rolled-back", "fault: never-ready"},
		// It crashes within its soak, is started again, crashes again:
		// a crash loop. On a machine slow enough (load 40) the second
		// crash comes after the 12 s deadline, which then names the
		// first exit: rolled back all the same.
		{"2.0.0-bad.crash", "rolled-back", "crash loop: exited 2 times since its start|within healthy_deadline 12s: .*exited with status 2"},
		{"2.0.0", "completed", ""},
	} {
		t.Run(tc.to, func(t *testing.T) {
			var events []store.Event
			e, st, err := cl.Engine(nil, func(ev store.Event) { events = append(events, ev) })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if _, err := e.Begin(ctx, tc.to); err != nil {
				t.Fatalf("begin: %v", err)
			}
			u, err := e.Run(ctx)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Logf("%s: %s in %s: %s", tc.to, u.State, u.Ended.Sub(u.Created).Round(time.Millisecond), u.Reason)
			if u.State.String() != tc.want {
				t.Fatalf("ended %s (%s), want %s", u.State, u.Reason, tc.want)
			}
			if !regexp.MustCompile(tc.cause).MatchString(u.Reason) {
				t.Errorf("reason %q, want it to name %q", u.Reason, tc.cause)
			}
			want := "1.0.0"
			if tc.want == "completed" {
				want = "2.0.0"
			}
			expectAllOn(t, cl, want)
			if pf := e.RunPreflight(ctx, ""); !pf.OK() {
				t.Errorf("cluster not healthy after %s: %+v", u.State, pf.Failed())
			}
			if tc.want == "rolled-back" {
				sawRollback := false
				for _, ev := range events {
					if ev.Kind == "state" && strings.Contains(ev.Message, "→ "+upgrade.StateRollingBack.String()) {
						sawRollback = true
					}
				}
				if !sawRollback {
					t.Errorf("no rolling-back state event among %d events", len(events))
				}
				if u.Rollback == nil || len(u.Rollback.Phases) == 0 {
					t.Errorf("no rollback plan recorded")
				}
			}
			if tc.to == "2.0.0-bad.exit" {
				// A crash loop fails fast: the rollback begins within 10s
				// of the first start, and the events say how the member
				// exited and what it wrote last.
				var first, rolling time.Time
				var output string
				for _, ev := range events {
					switch {
					case first.IsZero() && ev.Kind == "action" && strings.HasPrefix(ev.Message, "start ") && strings.Contains(ev.Message, "on 2.0.0-bad.exit: started"):
						first = ev.Time
					case rolling.IsZero() && ev.Kind == "state" && strings.Contains(ev.Message, "→ rolling-back"):
						rolling = ev.Time
					case ev.Kind == "output":
						output = ev.Message
					}
				}
				t.Logf("first start %s, rollback %s later; output event: %s", first.Format(time.TimeOnly), rolling.Sub(first).Round(time.Millisecond), output)
				if first.IsZero() || rolling.IsZero() || rolling.Sub(first) > 10*time.Second {
					t.Errorf("the rollback began %s after the first start (want within 10s)", rolling.Sub(first))
				}
				if !strings.Contains(output, "exited with status 1") || !strings.Contains(output, "exiting at start") {
					t.Errorf("no event with the exit status and the member's last output: %q", output)
				}
			}
			_ = st
		})
		if t.Failed() {
			break
		}
	}
	obs.check(t)
	checkWrites(t, cl, stopTraffic())
}
