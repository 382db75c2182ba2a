package upgrade

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// world is a simulated cluster for the pure machine: members take a
// random time to become healthy after a start, hooks fail now and
// then, and members ferry is not touching go down and come back by
// themselves. It lets the invariants be checked over many seeded runs.
type world struct {
	rng     *rand.Rand
	now     time.Time
	members map[string]*simMember
	comp    map[string]string
	// bad is how release 2.0.0 misbehaves: "" (it does not), "exit"
	// (exits at start), "never" (never healthy), "crash" (healthy for
	// less than the soak, then gone).
	bad string
}

type simMember struct {
	running   bool
	version   string
	healthyAt time.Time
	outageEnd time.Time // an outage ferry did not cause
	crashAt   time.Time // a bad release's crash
}

func newWorld(seed uint64) *world {
	w := &world{rng: rand.New(rand.NewPCG(seed, 7)), now: t0, members: map[string]*simMember{}, comp: map[string]string{}}
	for _, n := range allMembers {
		w.members[n] = &simMember{running: true, version: "1.0.0", healthyAt: t0.Add(-time.Hour)}
		w.comp[n] = "api"
		if n[:2] == "kv" {
			w.comp[n] = "kv"
		}
	}
	return w
}

func (w *world) observe() Observation {
	o := Observation{Members: map[string]MemberHealth{}, Gates: map[string]Gate{}}
	kvHealthy := 0
	for n, m := range w.members {
		if !m.crashAt.IsZero() && !w.now.Before(m.crashAt) {
			m.running = false
		}
		up := m.running && w.now.After(m.outageEnd)
		h := up && !w.now.Before(m.healthyAt)
		o.Members[n] = MemberHealth{Running: up, Version: m.version, Healthy: h, HealthySince: m.healthyAt}
		if h && w.comp[n] == "kv" {
			kvHealthy++
		}
	}
	o.Gates["kv"] = Gate{Healthy: kvHealthy >= 2, Detail: fmt.Sprintf("%d healthy", kvHealthy)}
	return o
}

func (w *world) apply(a Action) error {
	m := w.members[a.Member]
	switch a.Kind {
	case ActPreStop, ActPostStart:
		if w.rng.IntN(10) == 0 {
			return fmt.Errorf("hook refused")
		}
	case ActStop:
		m.running = false
	case ActStart:
		m.running, m.version = true, a.Version
		m.outageEnd, m.crashAt = time.Time{}, time.Time{}
		m.healthyAt = w.now.Add(time.Duration(100+w.rng.IntN(1900)) * time.Millisecond)
		if a.Version == "2.0.0" {
			switch w.bad {
			case "exit":
				m.running = false
			case "never":
				m.healthyAt = w.now.Add(time.Hour)
			case "crash":
				m.crashAt = m.healthyAt.Add(300 * time.Millisecond)
			}
		}
	}
	return nil
}

// maybeOutage takes an untouched, healthy api member down for a while.
func (w *world) maybeOutage(u Upgrade) {
	if w.rng.IntN(40) != 0 {
		return
	}
	n := allMembers[3+w.rng.IntN(4)]
	if r := u.Members[n]; r != nil && r.Step.InFlight() {
		return
	}
	w.members[n].outageEnd = w.now.Add(time.Duration(500+w.rng.IntN(2500)) * time.Millisecond)
	w.members[n].healthyAt = w.members[n].outageEnd
}

// TestSimulatedUpgrades runs the machine against many seeded worlds and
// checks: every upgrade completes with every member on the target; no
// member is taken down while max_unavailable (counting members down
// for any reason) would be exceeded; no kv member is stopped unless two
// others are healthy (quorum 2).
func TestSimulatedUpgrades(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (rerun one world: change seed here)", seed)
	for run := uint64(0); run < 200; run++ {
		w := newWorld(seed + run)
		u := simulate(t, seed+run, w, newUpgrade(), nil)
		if u.State != StateCompleted {
			t.Fatalf("seed %d: ended %s (%s), waiting %q", seed+run, u.State, u.Reason, u.Waiting)
		}
		for n, m := range w.members {
			if m.version != "2.0.0" {
				t.Fatalf("seed %d: %s on %s after completion", seed+run, n, m.version)
			}
		}
	}
}

func checkAdmission(t *testing.T, seed uint64, u Upgrade, obs Observation, comp map[string]string, maxU map[string]int, member string) {
	t.Helper()
	c := comp[member]
	down, healthy := 0, 0
	for n, cn := range comp {
		if cn != c || n == member {
			continue
		}
		if r := u.Members[n]; (r != nil && r.Step.InFlight()) || !obs.Members[n].Healthy {
			down++
		} else {
			healthy++
		}
	}
	if obs.Members[member].Healthy && down+1 > maxU[c] {
		t.Fatalf("seed %d: %s taken down with %d others of %s down (max_unavailable %d)", seed, member, down, c, maxU[c])
	}
	if c == "kv" && obs.Members[member].Healthy && healthy < 2 {
		t.Fatalf("seed %d: %s taken down leaving %d healthy kv members (quorum 2)", seed, member, healthy)
	}
}

// BenchmarkStep is the pure decision cost of one engine iteration on
// the demo's cluster, mid-phase.
func BenchmarkStep(b *testing.B) {
	c := testCluster()
	u := inPhase(func(u *Upgrade) {
		u.State, u.Phase, u.Batch = Upgrading("api"), 1, 1
		for _, n := range []string{"kv-1", "kv-2", "kv-3", "api-1"} {
			u.Members[n].Step = StepDone
		}
		u.Members["api-2"].Step, u.Members["api-2"].Began = StepStarting, t0
		u.Members["api-3"].Step, u.Members["api-3"].Began = StepStarting, t0
	})
	obs := healthyAt("1.0.0")
	obs.Members["api-2"] = MemberHealth{Running: true, Version: "2.0.0"}
	obs.Members["api-3"] = MemberHealth{Running: true, Version: "2.0.0"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = Step(c, u, obs, t0.Add(time.Second))
	}
}

// simulate steps u in world w until it ends (or 20000 steps), checking
// admission on every member taken down, and calls each(u) after every
// step. It returns the final record.
func simulate(t *testing.T, seed uint64, w *world, u Upgrade, each func(prev, next Upgrade) Upgrade) Upgrade {
	t.Helper()
	c := testCluster()
	maxU := map[string]int{"kv": 1, "api": 2}
	for i := 0; i < 20000 && !u.State.Terminal(); i++ {
		w.maybeOutage(u)
		obs := w.observe()
		d := Step(c, u, obs, w.now)
		for n, m := range d.Upgrade.Members {
			if u.Members[n].Step == StepPending && m.Step != StepPending && m.Step != StepDone {
				checkAdmission(t, seed, d.Upgrade, obs, w.comp, maxU, n)
			}
		}
		prev := u
		u = d.Upgrade
		for _, a := range d.Actions {
			if a.Kind == ActStop {
				checkAdmission(t, seed, u, obs, w.comp, maxU, a.Member)
			}
		}
		for _, a := range d.Actions {
			u = Finished(u, a, w.apply(a), w.now)
		}
		if each != nil {
			u = each(prev, u)
		}
		step := 100 * time.Millisecond
		if len(d.Actions) > 0 {
			step = 5 * time.Millisecond
		} else if d.After > 0 && d.After < step {
			step = d.After
		}
		w.now = w.now.Add(step)
	}
	return u
}

func versionsOf(w *world, v string) string {
	var off []string
	for _, n := range allMembers {
		if m := w.members[n]; m.version != v {
			off = append(off, n+" on "+m.version)
		}
	}
	return fmt.Sprint(off)
}

// TestSimulatedRollbacks: a 2.0.0 that exits at start, never becomes
// healthy, or crashes within its soak is rolled back: every run ends
// rolled-back with every member on 1.0.0, and the admission invariants
// hold through the rollback too.
func TestSimulatedRollbacks(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, bad := range []string{"exit", "never", "crash"} {
		for run := uint64(0); run < 40; run++ {
			w := newWorld(seed + run)
			w.bad = bad
			u := simulate(t, seed+run, w, newUpgrade(), nil)
			if u.State != StateRolledBack {
				t.Fatalf("bad=%s seed %d: ended %s (%s), waiting %q", bad, seed+run, u.State, u.Reason, u.Waiting)
			}
			if off := versionsOf(w, "1.0.0"); off != "[]" {
				t.Fatalf("bad=%s seed %d: rolled back but %s", bad, seed+run, off)
			}
			if u.Reason == "" {
				t.Fatalf("bad=%s seed %d: rolled back without a reason", bad, seed+run)
			}
		}
	}
}

// TestSimulatedOperator sends random pause, resume and abort requests
// to upgrades of a good release: while pausing or paused no member is
// taken down; an aborted upgrade ends rolled-back on 1.0.0, any other
// completes on 2.0.0.
func TestSimulatedOperator(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for run := uint64(0); run < 100; run++ {
		w := newWorld(seed + run)
		seq, aborted := 0, false
		u := simulate(t, seed+run, w, newUpgrade(), func(prev, next Upgrade) Upgrade {
			resuming := prev.Intent.Seq > prev.IntentSeen && prev.Intent.Kind != IntentPause
			if (prev.Pausing || prev.State == StatePaused) && !resuming {
				for n, m := range next.Members {
					if prev.Members[n].Step == StepPending && m.Step.InFlight() {
						t.Fatalf("seed %d: %s taken down while %s (pausing %v)", seed+run, n, prev.State, prev.Pausing)
					}
				}
			}
			if w.rng.IntN(30) != 0 {
				return next
			}
			seq++
			kind := []IntentKind{IntentPause, IntentResume, IntentResume, IntentAbort}[w.rng.IntN(4)]
			if kind == IntentAbort {
				if w.rng.IntN(4) != 0 {
					kind = IntentResume
				} else if NoAbort(&next) == "" {
					aborted = true
				}
			}
			next.Intent = Intent{Kind: kind, Seq: seq, Time: w.now}
			return next
		})
		for i := 0; u.State == StatePaused && i < 2; i++ { // a last resume
			seq++
			u.Intent = Intent{Kind: IntentResume, Seq: seq}
			u = simulate(t, seed+run, w, u, nil)
		}
		want, v := StateCompleted, "2.0.0"
		if aborted {
			want, v = StateRolledBack, "1.0.0"
		}
		if u.State != want {
			t.Fatalf("seed %d: ended %s (%s), want %s", seed+run, u.State, u.Reason, want)
		}
		if off := versionsOf(w, v); off != "[]" {
			t.Fatalf("seed %d: %s but %s", seed+run, u.State, off)
		}
	}
}
