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
