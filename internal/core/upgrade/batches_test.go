package upgrade

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// describe builds a description of one component n members strong.
func describe(comp, strategy string, n int, extra string, member func(i int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: t\nhosts:\n  - {name: h1, agent: 127.0.0.1:7101, domain: zone-a}\n  - {name: h2, agent: 127.0.0.1:7102, domain: zone-b}\n  - {name: h3, agent: 127.0.0.1:7103, domain: zone-c}\n")
	fmt.Fprintf(&b, "components:\n  - name: %s\n    strategy: %s\n    soak: 1s\n    deadline: 30s\n", comp, strategy)
	fmt.Fprintf(&b, "    health:\n      member: {http: \"http://{{.Address}}/ready\"}\n%s    members:\n", extra)
	for i := range n {
		fmt.Fprintf(&b, "      - {name: %s-%d, address: 127.0.0.1:%d, %s}\n", comp, i+1, 8000+i, member(i))
	}
	return b.String()
}

// onThreeHosts places member i on host h1, h2 or h3 in turn (zones a,
// b and c in describe's hosts).
func onThreeHosts(i int) string { return fmt.Sprintf("host: h%d", i%3+1) }

// describedWorld is the simulated world of description desc (with
// scriptReleases), every member running 1.0.0.
func describedWorld(tb testing.TB, desc string) *world {
	tb.Helper()
	c, err := config.Parse([]byte(desc+scriptReleases), "t.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return newWorld(c, "1.0.0")
}

// TestBatches runs whole upgrades against the simulated world and
// checks the batches the machine formed: their sizes (adaptive growth
// and shrinkage), their members (failure domains, role order).
func TestBatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		desc  string
		setup func(w *world)
		// then is applied once at says so (trouble in the middle).
		at    func(w *world) bool
		then  func(w *world)
		sizes []int
		check func(t *testing.T, w *world)
	}{
		{name: "canary doubles after clean batches, capped",
			desc:  describe("api", "{type: canary, max_batch: 4, max_unavailable: 4}", 12, "", onThreeHosts),
			sizes: []int{1, 2, 4, 4, 1}},
		{name: "halves after a strained batch, grows again after a clean one",
			desc: describe("api", "{type: canary, max_batch: 8, max_unavailable: 8}", 20, "    hooks: {pre_stop: [{http: \"http://lb/{{.Name}}/drain\", method: POST}]}\n", onThreeHosts),
			// The 4th batch (8) strains: each drain needs a retry.
			at:    func(w *world) bool { return len(w.u.Batches) >= 4 },
			then:  func(w *world) { w.faults["hook:pre_stop"] = "fail-once" },
			sizes: []int{1, 2, 4, 8, 4, 1}},
		{name: "halves after a batch that hurt the clients",
			desc: describe("api", "{type: canary, max_batch: 4, max_unavailable: 4}", 8, "", onThreeHosts),
			// The traffic verdict judges the second batch impacted
			// (policy on_impact: continue): the third is 1, not 4.
			setup: func(w *world) {
				w.judge = func(b Batch) string {
					if b.Number == 2 {
						return "p99 93ms against 10.7ms"
					}
					return ""
				}
			},
			sizes: []int{1, 2, 1, 2, 2},
			check: func(t *testing.T, w *world) {
				if o := w.u.Batches[1].Outcome; !o.Strained || o.Clean || !strings.Contains(o.Why, "hurt the clients") {
					t.Errorf("the impacted batch's outcome %+v, want strained because it hurt the clients", o)
				}
			}},
		{name: "one-at-a-time stays at one",
			desc:  describe("kv", "{type: one-at-a-time}", 5, "", onThreeHosts),
			sizes: []int{1, 1, 1, 1, 1}},
		{name: "one member per zone at most",
			desc:  describe("api", "{type: canary, max_batch: 3, max_unavailable: 3, max_unavailable_per_domain: 1}", 9, "", onThreeHosts),
			sizes: []int{1, 2, 3, 3},
			check: func(t *testing.T, w *world) {
				for _, b := range w.u.Batches {
					zones := map[string]bool{}
					for _, n := range b.Members {
						_, m := w.c.MemberOf(n)
						if zones[m.Domain] {
							t.Errorf("%s has two members of %s: %v", b.Name(), m.Domain, b.Members)
						}
						zones[m.Domain] = true
					}
				}
			}},
		{name: "a zone with a member down waits",
			desc: describe("api", "{type: canary, max_batch: 3, max_unavailable: 3, max_unavailable_per_domain: 1}", 6, "", onThreeHosts),
			// api-1 (zone-a) dies once the upgrade began: it goes first.
			at:    func(w *world) bool { return w.u.State == Upgrading("api") },
			then:  func(w *world) { w.exit(w.members["api-1"], "killed") },
			sizes: []int{1, 2, 3},
			check: func(t *testing.T, w *world) {
				if first := w.u.Batches[0].Members; !reflect.DeepEqual(first, []string{"api-1"}) {
					t.Errorf("the first batch %v, want the member down first", first)
				}
			}},
		{name: "the leader goes last",
			desc:  describe("kv", "{type: one-at-a-time}", 3, "    role: {name: leader, check: {http: \"http://{{.Address}}/role\"}}\n", onThreeHosts),
			setup: func(w *world) { w.leader = "kv-1" },
			sizes: []int{1, 1, 1},
			check: func(t *testing.T, w *world) {
				var order []string
				for _, b := range w.u.Batches {
					order = append(order, b.Members...)
				}
				if !reflect.DeepEqual(order, []string{"kv-2", "kv-3", "kv-1"}) || w.leaderChanges != 1 {
					t.Errorf("order %v, leadership moved %d times; want kv-1 last, one move", order, w.leaderChanges)
				}
			}},
		{name: "the order follows the leader it finds",
			desc:  describe("kv", "{type: one-at-a-time}", 3, "    role: {name: leader, check: {http: \"http://{{.Address}}/role\"}}\n", onThreeHosts),
			setup: func(w *world) { w.leader = "kv-2" },
			sizes: []int{1, 1, 1},
			check: func(t *testing.T, w *world) {
				var order []string
				for _, b := range w.u.Batches {
					order = append(order, b.Members...)
				}
				if order[2] != "kv-2" || w.leaderChanges != 1 {
					t.Errorf("order %v, leadership moved %d times; want kv-2 last, one move", order, w.leaderChanges)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := describedWorld(t, tc.desc)
			if tc.setup != nil {
				tc.setup(w)
			}
			if err := w.begin("2.0.0"); err != nil {
				t.Fatal(err)
			}
			if tc.then != nil {
				w.run(10*time.Minute, func() bool { return tc.at(w) })
				tc.then(w)
			}
			w.run(10*time.Minute, nil)
			if w.u.State != StateCompleted {
				t.Fatalf("ended %s: %s\n%s", w.u.State, w.u.Reason, w.trace.String())
			}
			var sizes []int
			for _, b := range w.u.Batches {
				sizes = append(sizes, len(b.Members))
			}
			if !reflect.DeepEqual(sizes, tc.sizes) {
				t.Errorf("batch sizes %v, want %v", sizes, tc.sizes)
			}
			if tc.check != nil {
				tc.check(t, w)
			}
		})
	}
}

// BenchmarkStep is the pure decision cost of one engine iteration in
// the middle of a phase, for a small cluster and a thousand members.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			k := min(n, 100)
			w := describedWorld(b, describe("api", fmt.Sprintf("{type: canary, max_batch: %d, max_unavailable: %d}", k, k), n, "", onThreeHosts))
			if err := w.begin("2.0.0"); err != nil {
				b.Fatal(err)
			}
			w.run(time.Hour, func() bool { return len(w.u.Batches) >= 3 && w.u.Current() != nil })
			obs := w.observe(map[int]bool{})
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_ = Step(w.c, w.u, obs, w.now)
			}
		})
	}
}
