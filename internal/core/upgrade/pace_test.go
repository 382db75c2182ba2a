package upgrade

import (
	"testing"
	"time"
)

// TestCoarseSubstrateClock: with a substrate whose times are whole
// seconds (Kubernetes' start times and Ready conditions), no member is
// down for a negative time and the upgrade's pace is never below ×1 of
// its lower bound. Taken as they were, a member ready within the second
// of its stop was "down for -27ms", and a soak counted from a truncated
// time ended before the lower bound said it could (×0.96).
func TestCoarseSubstrateClock(t *testing.T) {
	drain := "    hooks: {pre_stop: [{http: \"http://lb/{{.Name}}/drain\", method: POST}]}\n"
	for _, tc := range []struct {
		name  string
		desc  string
		ready time.Duration
	}{
		{"canary, ready at once", describe("api", "{type: canary, max_batch: 4, max_unavailable: 4}", 12, "", onThreeHosts), 5 * time.Millisecond},
		{"canary, drained first", describe("api", "{type: canary, max_batch: 4, max_unavailable: 4}", 12, drain, onThreeHosts), 300 * time.Millisecond},
		{"one at a time, drained first", describe("kv", "{type: one-at-a-time}", 5, drain, onThreeHosts), 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := describedWorld(t, tc.desc)
			w.coarse, w.ready = true, tc.ready
			// Start in the middle of a second, as a real clock does.
			w.now = w.now.Add(700 * time.Millisecond)
			if err := w.begin("2.0.0"); err != nil {
				t.Fatal(err)
			}
			w.run(10*time.Minute, nil)
			if w.u.State != StateCompleted {
				t.Fatalf("ended %s: %s\n%s", w.u.State, w.u.Reason, w.trace.String())
			}
			for _, n := range sortedKeys(w.u.Members) {
				m := w.u.Members[n]
				if down := m.HealthySince.Sub(m.Stopped); m.Stopped.IsZero() || down < 0 {
					t.Errorf("%s: stopped %s, healthy since %s: down for %s, want a stop and no negative time", n, m.Stopped.Format(time.StampMilli), m.HealthySince.Format(time.StampMilli), down)
				}
			}
			if p := w.u.Pace(w.now); p.BoundRatio < 1 {
				t.Errorf("pace %.3fs against a lower bound of %.3fs: ×%.3f, below 1", p.WallS, p.LowerBoundS, p.BoundRatio)
			}
		})
	}
}
