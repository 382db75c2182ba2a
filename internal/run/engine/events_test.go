package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
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
		{"healthy again after its soak broke: said already (its first healthy check ended its time down)",
			upgrade.Member{Step: upgrade.StepStarting, Stopped: stopped, SoakBroke: true},
			upgrade.Member{Step: upgrade.StepSoaking, Stopped: stopped, HealthySince: healthy.Add(time.Second), SoakBroke: true}, 0},
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

// TestEffectChanges: the walk of two journals in step finds what a
// search of each effect of one in the other finds, on seeded random
// journals: effects opened, undone, changed in state and, now and
// then, a journal out of its order.
func TestEffectChanges(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	states := []effect.State{effect.StateOpen, effect.StateFailed, effect.StateAbandoned}
	n := 0
	for range 2000 {
		var a effect.Journal
		for range rng.IntN(8) {
			n++
			a = append(a, effect.Effect{ID: fmt.Sprintf("e%d", n), Scope: effect.Member(fmt.Sprintf("m%d", rng.IntN(4))), State: states[rng.IntN(3)]})
		}
		var b effect.Journal
		for _, e := range a {
			switch rng.IntN(4) {
			case 0: // undone
			case 1:
				e.State = states[rng.IntN(3)]
				b = append(b, e)
			default:
				b = append(b, e)
			}
		}
		for range rng.IntN(3) {
			n++
			b = append(b, effect.Effect{ID: fmt.Sprintf("e%d", n), State: effect.StateOpen})
		}
		if len(b) > 1 && rng.IntN(5) == 0 {
			i, j := rng.IntN(len(b)), rng.IntN(len(b))
			b[i], b[j] = b[j], b[i]
		}
		var got []string
		for _, ev := range effectChanges(a, b, false) {
			f := strings.Fields(ev.Message) // "effect e7 opened ...", "effect e7 failed: ..."
			got = append(got, f[1]+" "+strings.TrimSuffix(f[2], ":"))
		}
		if want := journalChanges(a, b); !slices.Equal(got, want) {
			t.Fatalf("seed %d: %v to %v:\ngot  %v\nwant %v", seed, a, b, got, want)
		}
	}
}

// journalChanges says, the long way, what changed from journal a to
// b: each effect of b searched for in all of a (opened, or its new
// state), then each of a in all of b (undone).
func journalChanges(a, b effect.Journal) []string {
	var out []string
	for _, eb := range b {
		switch i := a.ByID(eb.ID); {
		case i < 0:
			out = append(out, eb.ID+" opened")
		case a[i].State != eb.State:
			out = append(out, eb.ID+" "+string(eb.State))
		}
	}
	for _, ea := range a {
		if b.ByID(ea.ID) < 0 {
			out = append(out, ea.ID+" undone")
		}
	}
	return out
}
