package upgrade

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestByDomain runs whole upgrades of a by-domain component whose
// members are in three failure domains against the simulated world,
// and checks at every step of the machine that the members in flight
// are of one domain at most; at the end, the domains' order (the one
// with a member down first, the leader's last) and the batches'
// growth within each domain.
func TestByDomain(t *testing.T) {
	// Hosts h1, h2, h3 are zones a, b, c: api-1, 4, 7 in zone-a,
	// api-2, 5, 8 in zone-b, api-3, 6 in zone-c.
	role := "    role: {name: leader, check: {http: \"http://{{.Address}}/role\"}}\n"
	for _, tc := range []struct {
		name  string
		extra string
		setup func(w *world)
		// kill is a member that dies once the batches formed are
		// killAfter.
		kill      string
		killAfter int
		// the domains in the order they moved, and the batches.
		zones   []string
		batches [][]string
	}{
		{name: "in the description's order",
			zones:   []string{"zone-a", "zone-b", "zone-c"},
			batches: [][]string{{"api-1"}, {"api-4", "api-7"}, {"api-2"}, {"api-5", "api-8"}, {"api-3"}, {"api-6"}}},
		{name: "the domain with a member down next",
			// api-6 dies while zone-a's second batch moves: zone-c
			// goes before zone-b, api-6 first.
			kill: "api-6", killAfter: 2,
			zones:   []string{"zone-a", "zone-c", "zone-b"},
			batches: [][]string{{"api-1"}, {"api-4", "api-7"}, {"api-6"}, {"api-3"}, {"api-2"}, {"api-5", "api-8"}}},
		{name: "the leader's domain last, the leader last in it",
			extra:   role,
			setup:   func(w *world) { w.leader = "api-4" },
			zones:   []string{"zone-b", "zone-c", "zone-a"},
			batches: [][]string{{"api-2"}, {"api-5", "api-8"}, {"api-3"}, {"api-6"}, {"api-1"}, {"api-7", "api-4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := describedWorld(t, describe("api", "{type: by-domain, max_batch: 2, max_unavailable: 2}", 8, tc.extra, onThreeHosts))
			domain := func(n string) string { _, m := w.c.MemberOf(n); return m.Domain }
			if tc.setup != nil {
				tc.setup(w)
			}
			if err := w.begin("2.0.0"); err != nil {
				t.Fatal(err)
			}
			steps, most := 0, 0
			w.run(10*time.Minute, func() bool {
				steps++
				if tc.kill != "" && len(w.u.Batches) == tc.killAfter && w.members[tc.kill].running {
					w.exit(w.members[tc.kill], "killed")
				}
				var inFlight []string
				zones := map[string]bool{}
				for _, n := range sortedNames(w.u.Members) {
					if w.u.Members[n].Step.InFlight() {
						inFlight = append(inFlight, n)
						zones[domain(n)] = true
					}
				}
				most = max(most, len(inFlight))
				if len(zones) > 1 {
					t.Fatalf("at %s members of %d domains in flight: %v\n%s", w.at(), len(zones), inFlight, w.trace.String())
				}
				return false
			})
			if w.u.State != StateCompleted {
				t.Fatalf("ended %s: %s\n%s", w.u.State, w.u.Reason, w.trace.String())
			}
			if most < 2 {
				t.Errorf("never more than %d member in flight in %d steps: the check saw nothing", most, steps)
			}
			var batches [][]string
			var zones []string
			for _, b := range w.u.Batches {
				batches = append(batches, b.Members)
				if z := domain(b.Members[0]); !slices.Contains(zones, z) {
					zones = append(zones, z)
				} else if zones[len(zones)-1] != z {
					t.Errorf("%s went back to %s after %s", b.Name(), z, zones[len(zones)-1])
				}
			}
			if !reflect.DeepEqual(zones, tc.zones) || !reflect.DeepEqual(batches, tc.batches) {
				t.Errorf("domains %v, batches %v\nwant %v, %v", zones, batches, tc.zones, tc.batches)
			}
			for _, b := range w.u.Batches {
				if !strings.Contains(b.Why, "domain zone-") {
					t.Errorf("%s: why %q names no domain", b.Name(), b.Why)
				}
			}
		})
	}
}
