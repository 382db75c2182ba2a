package strategy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestBudgetIndexedCountsAlike: with an Index, each budget predicate
// answers exactly as without one, over seeded random views (members
// down, in flight, admitted, on hosts and in domains).
func TestBudgetIndexedCountsAlike(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for round := range 300 {
		n := 1 + r.IntN(40)
		v := &View{Component: "api", Settings: Settings{MaxUnavailable: 1 + r.IntN(5), MaxUnavailablePerHost: r.IntN(3), MaxUnavailablePerDomain: r.IntN(3)},
			Admitted: map[string]bool{}}
		for i := range n {
			comp := "api"
			if r.IntN(4) == 0 {
				comp = "kv"
			}
			v.Members = append(v.Members, Member{Name: fmt.Sprintf("m%d", i), Component: comp, Host: fmt.Sprintf("h%d", r.IntN(4)),
				Domain: fmt.Sprintf("z%d", r.IntN(3)), Healthy: r.IntN(5) > 0, InFlight: r.IntN(6) == 0})
			if r.IntN(4) == 0 {
				v.Admitted[v.Members[i].Name] = r.IntN(6) > 0
			}
		}
		v.Admitted["not-a-member"] = true
		indexed := *v
		indexed.Index = map[string]int{}
		for i, m := range v.Members {
			indexed.Index[m.Name] = i
		}
		for _, c := range v.Members {
			for _, p := range []func(*View, Member) string{maxUnavailable, perHost, perDomain} {
				if a, b := p(v, c), p(&indexed, c); a != b {
					t.Fatalf("seed %d round %d, %s: %q without the index, %q with it", seed, round, c.Name, a, b)
				}
			}
		}
	}
}

// TestTallyCountsAlike: with a Tally kept through Change as members
// change, and members admitted through Admit, the budgets, the quorum
// and the substrate predicate answer exactly as when they walk the
// members, over seeded random views (members down, in flight, not
// known, admitted, of two components, on hosts and in domains); a
// Tally kept through changes counts as one made anew, and one that
// Verify finds wrong panics.
func TestTallyCountsAlike(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	random := func(i int) Member {
		comp := "api"
		if r.IntN(4) == 0 {
			comp = "kv"
		}
		return Member{Name: fmt.Sprintf("m%d", i), Component: comp, Host: fmt.Sprintf("h%d", r.IntN(4)),
			Domain: fmt.Sprintf("z%d", r.IntN(3)), Healthy: r.IntN(5) > 0, InFlight: r.IntN(6) == 0, Unknown: r.IntN(30) == 0}
	}
	checks := map[string]func(*View, Member) string{"substrate": substrate, "max_unavailable": maxUnavailable, "per_host": perHost,
		"per_domain": perDomain, "quorum": quorum}
	for round := range 300 {
		n := 1 + r.IntN(40)
		walk := &View{Component: "api", Quorum: r.IntN(n + 1), Index: map[string]int{},
			Settings: Settings{MaxUnavailable: 1 + r.IntN(5), MaxUnavailablePerHost: r.IntN(3), MaxUnavailablePerDomain: r.IntN(3)}}
		for i := range n {
			walk.Members = append(walk.Members, random(i))
			walk.Index[walk.Members[i].Name] = i
		}
		walk.Tally = NewTally(walk.Members)
		// Members change after the count, as the machine's do.
		for range r.IntN(n) {
			i := r.IntN(n)
			was := walk.Members[i]
			walk.Members[i] = random(i)
			walk.Tally.Change(was, walk.Members[i])
		}
		if !walk.Tally.Equal(NewTally(walk.Members)) {
			t.Fatalf("seed %d round %d: the tally kept through changes differs from one made anew", seed, round)
		}
		walk.ResetAdmitted()
		for i := range n {
			if r.IntN(4) == 0 {
				walk.Admit(walk.Members[i].Name)
			}
		}
		walk.Admit("not-a-member")
		tallied := *walk
		walk.Tally = nil
		if !tallied.counted() || walk.counted() {
			t.Fatalf("seed %d round %d: counted %v with a tally, %v without", seed, round, tallied.counted(), walk.counted())
		}
		for _, c := range walk.Members {
			for name, p := range checks {
				if a, b := p(walk, c), p(&tallied, c); a != b {
					t.Fatalf("seed %d round %d, %s of %s: %q walking, %q from the tally", seed, round, name, c.Name, a, b)
				}
			}
		}
	}

	// A tally that is wrong is found by Verify.
	v := &View{Component: "api", Settings: Settings{MaxUnavailable: 1}, Index: map[string]int{"a": 0, "b": 1}, Verify: true,
		Members: []Member{{Name: "a", Component: "api", Healthy: true}, {Name: "b", Component: "api", Healthy: true}}}
	v.Tally = NewTally([]Member{{Name: "a", Component: "api"}, {Name: "b", Component: "api"}}) // both counted down
	v.ResetAdmitted()
	defer func() {
		if recover() == nil {
			t.Error("a wrong tally under Verify did not panic")
		}
	}()
	maxUnavailable(v, v.Members[0])
}

// TestAdmittedWrittenDirectlyIsWalked: an Admitted map written to
// without Admit is not counted from the tally (the members are walked).
func TestAdmittedWrittenDirectlyIsWalked(t *testing.T) {
	ms := []Member{{Name: "a", Component: "api", Healthy: true}, {Name: "b", Component: "api", Healthy: true}}
	v := &View{Component: "api", Settings: Settings{MaxUnavailable: 1}, Members: ms, Index: map[string]int{"a": 0, "b": 1}, Tally: NewTally(ms)}
	v.ResetAdmitted()
	v.Admitted["b"] = true // not through Admit
	if v.counted() {
		t.Fatal("counted from the tally with a member admitted behind its back")
	}
	if why := maxUnavailable(v, ms[0]); why != "1 of 1 already down: b admitted" {
		t.Errorf("a beside b admitted: %q", why)
	}
	v.Admitted = map[string]bool{"b": true} // another map of the same length
	v.admitted.n = 1
	if v.counted() {
		t.Fatal("counted from the tally with Admitted another map")
	}
}
