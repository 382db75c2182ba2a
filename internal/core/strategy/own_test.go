package strategy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestOwnIsAShortcut: a view that has its component's members apart
// (View.Own) gets from every predicate the answer it gets without
// them, on seeded random views of three components over shared hosts
// and domains (members down, in flight, admitted, pending, holding the
// role, unknown), at admission and at a stop.
func TestOwnIsAShortcut(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	comps := []string{"kv", "api", "worker"}
	for run := range 500 {
		var ms []Member
		own := map[string][2]int{}
		for _, c := range comps {
			from := len(ms)
			for i := range 1 + rng.IntN(8) {
				ms = append(ms, Member{Name: fmt.Sprintf("%s-%d", c, i), Component: c,
					Host: fmt.Sprintf("h%d", rng.IntN(3)), Domain: fmt.Sprintf("zone-%d", rng.IntN(2)),
					Healthy: rng.IntN(5) > 0, InFlight: rng.IntN(6) == 0, Unknown: rng.IntN(40) == 0,
					Role: rng.IntN(8) == 0, Pending: rng.IntN(2) == 0})
			}
			own[c] = [2]int{from, len(ms)}
		}
		comp := comps[rng.IntN(len(comps))]
		v := &View{Component: comp, Members: ms, Quorum: rng.IntN(3), Stopping: rng.IntN(2) == 0, Admitted: map[string]bool{},
			Settings: Settings{MaxUnavailable: 1 + rng.IntN(3), MaxUnavailablePerHost: rng.IntN(3), MaxUnavailablePerDomain: rng.IntN(3)}}
		for _, m := range ms {
			if rng.IntN(8) == 0 {
				v.Admitted[m.Name] = true
			}
		}
		withOwn := *v
		r := own[comp]
		withOwn.Own = ms[r[0]:r[1]]
		for _, c := range ms[r[0]:r[1]] {
			if got, want := Admit(&withOwn, c, nil), Admit(v, c, nil); !reflect.DeepEqual(got, want) {
				t.Fatalf("run %d (seed %d), %s: with Own %v, without %v", run, seed, c.Name, got, want)
			}
		}
	}
}
