package upgrade

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// TestSimulatedWorlds runs many seeded upgrades against simulated
// worlds with random clusters, bad releases, hooks that fail, members
// that die and come back, outages of the substrate and operators who
// pause, resume and abort at random moments, and checks at every step
// that ferry never takes a member down beyond its budgets (component,
// failure domain) or below its quorum, and at the end that every
// upgrade ended where it should with nothing left drained, flagged or
// owed. FERRY_SIM_SEED=N replays one run; FERRY_SIM_RUNS sets how many.
func TestSimulatedWorlds(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 50
	}
	if v, err := strconv.Atoi(os.Getenv("FERRY_SIM_RUNS")); err == nil {
		runs = v
	}
	base := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("FERRY_SIM_SEED"), 10, 64); err == nil {
		base, runs = v, 1
	}
	t.Logf("seeds %d..%d (FERRY_SIM_SEED=N replays one)", base, base+uint64(runs)-1)
	ended := map[string]int{}
	for i := range runs {
		seed := base + uint64(i)
		end := simulate(t, seed)
		ended[end]++
		if t.Failed() {
			t.Fatalf("seed %d failed (FERRY_SIM_SEED=%d replays it)", seed, seed)
		}
	}
	t.Logf("ended: %v", ended)
}

func simulate(t *testing.T, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 11))
	desc, domains := simCluster(rng)
	c, err := config.Parse([]byte(desc+scriptReleases), "sim.yaml")
	if err != nil {
		t.Fatalf("seed %d: %v\n%s", seed, err, desc)
	}
	w := newWorld(c, "1.0.0")
	// The checks of every step (world.pure, report) on one seed in
	// eight, or on all with FERRY_SIM_CHECK=1: they cost five times
	// the run.
	w.unchecked = raceDetector || seed%8 != 0 && os.Getenv("FERRY_SIM_CHECK") == ""
	w.took = time.Duration(5+rng.IntN(50)) * time.Millisecond
	w.ready = time.Duration(50+rng.IntN(500)) * time.Millisecond
	w.gateTook = time.Duration(5+rng.IntN(300)) * time.Millisecond
	switch rng.IntN(8) {
	case 0:
		w.faults[pick(rng, w.order)] = "exit"
	case 1:
		w.faults[pick(rng, w.order)] = "never-ready"
	case 2:
		w.faults[pick(rng, w.order)] = "crash-after"
	}
	if rng.IntN(4) == 0 {
		w.faults["hook:pre_stop"] = "fail-once"
	}
	if err := w.begin("2.0.0"); err != nil {
		t.Fatalf("seed %d: begin: %v", seed, err)
	}
	var killed string
	var healAt, outageEnd time.Time
	limit := w.now.Add(30 * time.Minute)
	for w.now.Before(limit) && !w.u.State.Terminal() {
		// Trouble and operators, now and then.
		switch r := rng.IntN(400); {
		case r == 0 && killed == "":
			n := pick(rng, w.order)
			if m := w.u.Members[n]; m != nil && !m.Step.InFlight() && w.members[n].running {
				killed = n
				w.exit(w.members[n], "killed")
				healAt = w.now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			}
		case r == 1 && !w.outage:
			w.outage = true
			outageEnd = w.now.Add(time.Duration(1+rng.IntN(90)) * time.Second)
		case r == 2:
			w.u.Intent = Intent{Kind: IntentAbort, Seq: w.u.Intent.Seq + 1, Time: w.now}
		case r == 3:
			w.u.Intent = Intent{Kind: IntentPause, Seq: w.u.Intent.Seq + 1, Time: w.now}
		}
		if killed != "" && !w.now.Before(healAt) {
			m := w.members[killed]
			if !m.running {
				m.running, m.healthy, m.healthySince, m.started = true, true, w.now, w.now
			}
			killed = ""
		}
		if w.outage && !w.now.Before(outageEnd) {
			w.outage = false
		}
		if w.u.State == StatePaused && rng.IntN(20) == 0 {
			w.u.Intent = Intent{Kind: IntentResume, Seq: w.u.Intent.Seq + 1, Time: w.now}
		}
		d := w.step()
		checkAdmissions(t, seed, w, d, domains)
		checkOneDomain(t, seed, w, domains)
		if w.u.State.Terminal() {
			break
		}
		w.advance(d.After)
		w.finish()
	}
	if os.Getenv("FERRY_SIM_SEED") != "" {
		t.Logf("trace:\n%s\n%s", w.trace.String(), w.status())
	}
	if !w.u.State.Terminal() {
		t.Errorf("seed %d: still %s after 30 simulated minutes: %s", seed, w.u.State, w.u.Waiting)
		return w.u.State.String()
	}
	checkEnd(t, seed, w)
	return w.u.State.String()
}

// checkAdmissions: for every stop about to be made, the member's
// component keeps its budgets (counting members down for any reason)
// and its quorum.
func checkAdmissions(t *testing.T, seed uint64, w *world, d Decision, domains map[string]string) {
	for _, a := range d.Actions {
		if a.Kind != ActStop {
			continue
		}
		comp, _ := w.c.MemberOf(a.Member)
		s := comp.Strategy
		down, healthy, inDomain := 0, 0, 0
		for _, m := range comp.Members {
			if m.Name == a.Member {
				continue
			}
			wm, r := w.members[m.Name], w.u.Members[m.Name]
			out := !wm.running || !wm.healthy || r != nil && r.Step.InFlight() && r.Step != step.Rejoining
			if out {
				down++
				if domains[m.Name] != "" && domains[m.Name] == domains[a.Member] {
					inDomain++
				}
			} else {
				healthy++
			}
		}
		if !w.members[a.Member].healthy {
			continue // stopping a member already down costs nothing
		}
		if down+1 > s.MaxUnavailable {
			t.Errorf("seed %d: %s stopped with %d others of %s down (max_unavailable %d)", seed, a.Member, down, comp.Name, s.MaxUnavailable)
		}
		if s.MaxUnavailablePerDomain > 0 && inDomain+1 > s.MaxUnavailablePerDomain {
			t.Errorf("seed %d: %s stopped with %d others of its domain %s down", seed, a.Member, inDomain, domains[a.Member])
		}
		if q := strategyQuorum(comp); q > 0 && healthy < q {
			t.Errorf("seed %d: %s stopped leaving %d healthy of quorum %d", seed, a.Member, healthy, q)
		}
	}
}

// checkOneDomain: a by-domain component never has members of two
// failure domains in flight.
func checkOneDomain(t *testing.T, seed uint64, w *world, domains map[string]string) {
	for i := range w.c.Components {
		comp := &w.c.Components[i]
		if comp.Strategy.Type != config.StrategyType(strategy.ByDomain) {
			continue
		}
		zones := map[string][]string{}
		for _, m := range comp.Members {
			if r := w.u.Members[m.Name]; r != nil && r.Step.InFlight() {
				zones[domains[m.Name]] = append(zones[domains[m.Name]], m.Name)
			}
		}
		if len(zones) > 1 {
			t.Errorf("seed %d: %s (by-domain) has members of %d domains in flight: %v", seed, comp.Name, len(zones), zones)
		}
	}
}

func strategyQuorum(comp *config.Component) int {
	st, ok := strategy.Lookup(string(comp.Strategy.Type))
	if !ok {
		return 0
	}
	return st.Quorum(comp.Strategy.Settings(), len(comp.Members))
}

// checkEnd: an upgrade that ended left nothing drained, flagged or
// owed, and its members where its state says.
func checkEnd(t *testing.T, seed uint64, w *world) {
	if len(w.u.Effects) > 0 {
		t.Errorf("seed %d: ended %s with effects owed: %v", seed, w.u.State, w.u.Effects)
	}
	if len(w.drained) > 0 || len(w.flags) > 0 {
		t.Errorf("seed %d: ended %s with drained %v, flags %v", seed, w.u.State, w.drained, w.flags)
	}
	want := ""
	switch w.u.State {
	case StateCompleted:
		want = "2.0.0"
	case StateRolledBack:
		want = "1.0.0"
	}
	if want == "" {
		return
	}
	for _, n := range w.order {
		m := w.members[n]
		if m.version != want && w.u.Members[n] != nil {
			t.Errorf("seed %d: ended %s with %s on %s", seed, w.u.State, n, m.version)
		}
		if r := w.u.Members[n]; r != nil && r.Target != m.version {
			t.Errorf("seed %d: ended %s with %s's target %s while it runs %s", seed, w.u.State, n, r.Target, m.version)
		}
	}
}

// simCluster draws a description: a raft-like kv tier (one at a time,
// leader last) and an api tier (canary or, across zones, by-domain;
// drained with an undo, maybe in failure domains, maybe with a
// phase-long flag).
func simCluster(rng *rand.Rand) (string, map[string]string) {
	var b strings.Builder
	domains := map[string]string{}
	b.WriteString("cluster: sim\nhosts:\n")
	zones := 1 + rng.IntN(3)
	for z := range zones {
		fmt.Fprintf(&b, "  - {name: h%d, agent: 127.0.0.1:%d, domain: zone-%d}\n", z, 7100+z, z)
	}
	b.WriteString("components:\n")
	nkv := 3 + 2*rng.IntN(2)
	b.WriteString("  - name: kv\n    order: 1\n    strategy: {type: one-at-a-time}\n    soak: 1s\n    deadline: 20s\n    gate_deadline: 2m\n")
	b.WriteString("    health:\n      member: {http: \"http://{{.Address}}/ready\"}\n      cluster: {http: \"http://{{.Any}}/cluster\"}\n")
	b.WriteString("    role: {name: leader, check: {http: \"http://{{.Address}}/role\"}}\n")
	b.WriteString("    hooks:\n      pre_stop: [{http: \"http://{{.Address}}/step-down\", method: POST}]\n    members:\n")
	for i := range nkv {
		z := rng.IntN(zones)
		n := fmt.Sprintf("kv-%d", i+1)
		domains[n] = fmt.Sprintf("zone-%d", z)
		fmt.Fprintf(&b, "      - {name: %s, host: h%d, address: 127.0.0.1:%d}\n", n, z, 8100+i)
	}
	napi := 2 + rng.IntN(9)
	maxU := 1 + rng.IntN(min(4, napi))
	maxB := 1 + rng.IntN(maxU)
	perDomain := ""
	if zones > 1 && rng.IntN(2) == 0 {
		perDomain = ", max_unavailable_per_domain: 1"
	}
	typ := strategy.Canary
	if zones > 1 && rng.IntN(3) == 0 {
		typ = strategy.ByDomain
	}
	fmt.Fprintf(&b, "  - name: api\n    order: 2\n    strategy: {type: %s, max_batch: %d, max_unavailable: %d%s}\n    soak: 1s\n    deadline: 20s\n    gate_deadline: 2m\n", typ, maxB, maxU, perDomain)
	b.WriteString("    health:\n      member: {http: \"http://{{.Address}}/ready\"}\n")
	b.WriteString("    hooks:\n      pre_stop: [{http: \"http://lb/{{.Name}}/drain\", method: POST, undo: {http: \"http://lb/{{.Name}}/enable\", method: POST}}]\n")
	if rng.IntN(2) == 0 {
		b.WriteString("      pre_phase: [{exec: [set-noout], undo: {exec: [unset-noout]}}]\n")
	}
	b.WriteString("    members:\n")
	for i := range napi {
		z := rng.IntN(zones)
		n := fmt.Sprintf("api-%d", i+1)
		domains[n] = fmt.Sprintf("zone-%d", z)
		fmt.Fprintf(&b, "      - {name: %s, host: h%d, address: 127.0.0.1:%d}\n", n, z, 8200+i)
	}
	if rng.IntN(3) == 0 {
		b.WriteString("hooks:\n  pre_upgrade: [{exec: [freeze], undo: {exec: [thaw]}}]\n")
	}
	if rng.IntN(4) == 0 {
		b.WriteString("policy: {on_failure: pause}\n")
	}
	return b.String(), domains
}

func pick(rng *rand.Rand, ns []string) string { return ns[rng.IntN(len(ns))] }
