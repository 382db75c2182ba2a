package engine

import (
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// TestDownEvent: a member's time down is said once, when its move
// records that it became healthy, whichever step one write took it to
// (a busy loop can take it from stopping past soaking at once).
func TestDownEvent(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	stopped, healthy := t0, t0.Add(150*time.Millisecond)
	for _, tc := range []struct {
		name     string
		from, to upgrade.Member
		want     int // down events
	}{
		{"starting to soaking",
			upgrade.Member{Step: upgrade.StepStarting, Stopped: stopped},
			upgrade.Member{Step: upgrade.StepSoaking, Stopped: stopped, HealthySince: healthy}, 1},
		{"stopping to soaking in one write",
			upgrade.Member{Step: upgrade.StepStopping},
			upgrade.Member{Step: upgrade.StepSoaking, Stopped: stopped, HealthySince: healthy}, 1},
		{"starting past soaking to rejoining in one write",
			upgrade.Member{Step: upgrade.StepStarting, Stopped: stopped},
			upgrade.Member{Step: upgrade.StepRejoining, Stopped: stopped, HealthySince: healthy}, 1},
		{"starting to done in one write",
			upgrade.Member{Step: upgrade.StepStarting, Stopped: stopped},
			upgrade.Member{Step: upgrade.StepDone, Stopped: stopped, HealthySince: healthy}, 1},
		{"soaking to rejoining: said already",
			upgrade.Member{Step: upgrade.StepSoaking, Stopped: stopped, HealthySince: healthy},
			upgrade.Member{Step: upgrade.StepRejoining, Stopped: stopped, HealthySince: healthy}, 0},
		{"never stopped (done without a move)",
			upgrade.Member{Step: upgrade.StepPending},
			upgrade.Member{Step: upgrade.StepDone}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := tc.from, tc.to
			from.Name, to.Name = "kv-1", "kv-1"
			a := upgrade.Upgrade{Members: map[string]*upgrade.Member{"kv-1": &from}}
			b := upgrade.Upgrade{Members: map[string]*upgrade.Member{"kv-1": &to}}
			var downs []float64
			for _, ev := range changes(a, b) {
				if ev.Kind == "down" {
					downs = append(downs, ev.DurationMS)
				}
			}
			if len(downs) != tc.want || (tc.want == 1 && downs[0] != 150) {
				t.Errorf("down events %v, want %d of 150 ms", downs, tc.want)
			}
		})
	}
}
