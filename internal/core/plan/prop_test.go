package plan

import (
	"errors"
	"reflect"
	"regexp"
	"sort"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"pgregory.net/rapid"
)

// tester is what both *testing.T and *rapid.T offer.
type tester interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// checkInvariants checks what every plan keeps, whatever the input.
func checkInvariants(t tester, c *config.Cluster, obs Observed, p Plan) {
	t.Helper()
	comps := c.ComponentsInOrder()
	if len(p.Phases) != len(comps) {
		t.Fatalf("%d phases for %d components", len(p.Phases), len(comps))
	}
	// Phases follow component order: by order, then by name.
	for i := 1; i < len(comps); i++ {
		a, b := comps[i-1], comps[i]
		if a.Order > b.Order || (a.Order == b.Order && a.Name > b.Name) {
			t.Fatalf("components out of order: %s (%d) before %s (%d)", a.Name, a.Order, b.Name, b.Order)
		}
	}
	seen := map[string]int{}
	versions := map[string]bool{}
	for i, ph := range p.Phases {
		comp := comps[i]
		if ph.Component != comp.Name {
			t.Fatalf("phase %d is %s, want %s", i, ph.Component, comp.Name)
		}
		maxU := max(1, comp.Strategy.MaxUnavailable)
		maxBatch := comp.Strategy.MaxBatch
		if maxBatch < 1 {
			maxBatch = maxU
		}
		downAtTarget := 0
		index := map[string]int{}
		for j, m := range comp.Members {
			index[m.Name] = j
			if obs.Version[m.Name] == p.To && obs.Down[m.Name] {
				downAtTarget++
			}
			if v := obs.Version[m.Name]; v != "" {
				versions[v] = true
			}
		}
		limit := max(1, maxU-downAtTarget)

		// Every member of the component, exactly once, in this phase.
		var planned []string
		for j, b := range ph.Batches {
			if len(b.Members) == 0 {
				t.Fatalf("%s: batch %d is empty", ph.Component, j+1)
			}
			switch ph.Strategy {
			case string(typeOneAtATime):
				if len(b.Members) != 1 {
					t.Fatalf("%s: one-at-a-time batch %d has %d members", ph.Component, j+1, len(b.Members))
				}
			case string(typeCanary):
				if len(b.Members) > maxBatch {
					t.Fatalf("%s: batch %d has %d members, max_batch %d", ph.Component, j+1, len(b.Members), maxBatch)
				}
				if len(b.Members) > limit {
					t.Fatalf("%s: batch %d has %d members, max_unavailable %d with %d down at the target",
						ph.Component, j+1, len(b.Members), maxU, downAtTarget)
				}
				// Growth: 1, then doubling up to the limit; only the last may fall short.
				want := 1
				if j > 0 {
					want = min(2*len(ph.Batches[j-1].Members), maxBatch, limit)
				}
				if len(b.Members) != want && j != len(ph.Batches)-1 {
					t.Fatalf("%s: batch %d has %d members, want %d", ph.Component, j+1, len(b.Members), want)
				}
			default:
				t.Fatalf("%s: strategy %q", ph.Component, ph.Strategy)
			}
			planned = append(planned, b.Members...)
		}
		// Down members first; description order within each group.
		for j := 1; j < len(planned); j++ {
			a, b := planned[j-1], planned[j]
			if obs.Down[a] == obs.Down[b] && index[a] > index[b] {
				t.Fatalf("%s: %s planned before %s", ph.Component, a, b)
			}
			if !obs.Down[a] && obs.Down[b] {
				t.Fatalf("%s: %s (down) planned after %s (up)", ph.Component, b, a)
			}
		}
		for _, name := range planned {
			if obs.Version[name] == p.To {
				t.Fatalf("%s is planned but already at %s", name, p.To)
			}
			seen[name]++
		}
		for _, s := range ph.Skipped {
			if obs.Version[s.Member] != p.To {
				t.Fatalf("%s is skipped at %q, not %s", s.Member, obs.Version[s.Member], p.To)
			}
			seen[s.Member]++
		}
		for _, m := range comp.Members {
			if _, ok := index[m.Name]; !ok || seen[m.Name] != 1 {
				t.Fatalf("%s appears %d times in the plan", m.Name, seen[m.Name])
			}
		}
		if ph.Strategy == string(typeOneAtATime) && ph.Quorum != comp.Strategy.QuorumOf(len(comp.Members)) {
			t.Fatalf("%s: quorum %d, want %d", ph.Component, ph.Quorum, comp.Strategy.QuorumOf(len(comp.Members)))
		}
		if ph.MaxUnavailable != maxU {
			t.Fatalf("%s: max_unavailable %d, want %d", ph.Component, ph.MaxUnavailable, maxU)
		}
	}
	if len(seen) != memberCount(c) {
		t.Fatalf("%d members in the plan, %d in the cluster", len(seen), memberCount(c))
	}
	var from []string
	for v := range versions {
		from = append(from, v)
	}
	if len(from) != len(p.From) || !sort.SliceIsSorted(p.From, func(i, j int) bool { return compareVersions(p.From[i], p.From[j]) < 0 }) {
		t.Fatalf("From = %q, observed %q", p.From, from)
	}
	for _, v := range p.From {
		if !versions[v] {
			t.Fatalf("From has %q, not observed", v)
		}
	}
}

func memberCount(c *config.Cluster) int {
	n := 0
	for _, comp := range c.Components {
		n += len(comp.Members)
	}
	return n
}

// The versions a random member may run: the target, three it may
// upgrade from, unknown, and one it may not upgrade from.
var (
	goodVersions = []string{"2.0.0", "1.0.0", "1.0.7", "1.0.10", ""}
	badVersion   = "0.9.0"
)

// drawCluster draws 1–4 components of 1–40 members with random
// strategies, and what is observed of them.
func drawCluster(t *rapid.T, allowBad bool) (*config.Cluster, Observed) {
	names := []string{"kv", "api", "mon", "osd"}
	n := rapid.IntRange(1, 4).Draw(t, "components")
	c := &config.Cluster{Name: "prop", Releases: releases()}
	obs := Observed{Version: map[string]string{}, Down: map[string]bool{}}
	for i := range n {
		size := rapid.IntRange(1, 40).Draw(t, "members")
		s := config.Strategy{
			Type:           rapid.SampledFrom([]config.StrategyType{typeOneAtATime, typeCanary, ""}).Draw(t, "type"),
			Quorum:         rapid.IntRange(0, size).Draw(t, "quorum"),
			MaxBatch:       rapid.IntRange(0, 10).Draw(t, "max_batch"),
			MaxUnavailable: rapid.IntRange(0, 10).Draw(t, "max_unavailable"),
		}
		cp := comp(names[i], rapid.IntRange(0, 3).Draw(t, "order"), s, size)
		downRate := rapid.IntRange(0, 100).Draw(t, "down%")
		for _, m := range cp.Members {
			v := rapid.SampledFrom(goodVersions).Draw(t, "version")
			if allowBad && rapid.IntRange(0, 99).Draw(t, "bad") == 0 {
				v = badVersion
			}
			down := rapid.IntRange(1, 100).Draw(t, "down") <= downRate
			if v == "" && !allowBad {
				down = true // a running member with no version is refused
			}
			obs.Version[m.Name] = v
			if down {
				obs.Down[m.Name] = true
			}
		}
		c.Components = append(c.Components, cp)
	}
	return c, obs
}

func TestComputeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, obs := drawCluster(t, false)
		p, err := Compute(c, obs, "2.0.0")
		if err != nil {
			t.Fatalf("Compute: %v", err)
		}
		checkInvariants(t, c, obs, p)
		if again, _ := Compute(c, obs, "2.0.0"); !reflect.DeepEqual(p, again) {
			t.Fatalf("two plans from the same input differ")
		}
	})
}

// TestComputePropertiesRefusal: the plan is refused exactly when some
// member cannot upgrade, and the refusal names that member.
func TestComputePropertiesRefusal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, obs := drawCluster(t, true)
		var bad []string
		for _, comp := range c.Components {
			for _, m := range comp.Members {
				v := obs.Version[m.Name]
				if v == badVersion || (v == "" && !obs.Down[m.Name]) {
					bad = append(bad, m.Name)
				}
			}
		}
		p, err := Compute(c, obs, "2.0.0")
		switch {
		case len(bad) == 0 && err != nil:
			t.Fatalf("Compute: %v", err)
		case len(bad) == 0:
			checkInvariants(t, c, obs, p)
		case !errors.Is(err, ErrNotUpgradable):
			t.Fatalf("members %q cannot upgrade, yet error = %v", bad, err)
		case len(bad) <= maxNamed && !containsAll(err.Error(), bad):
			t.Fatalf("error %q does not name all of %q", err, bad)
		}
	})
}

// containsAll reports whether s names every one of names (api-1 is not
// named by api-10).
func containsAll(s string, names []string) bool {
	for _, n := range names {
		if !regexp.MustCompile(`(^|[ ,])` + regexp.QuoteMeta(n) + `([ ,]|$)`).MatchString(s) {
			return false
		}
	}
	return true
}

func BenchmarkCompute(b *testing.B) {
	c := &config.Cluster{Name: "bench", Releases: releases()}
	for i, name := range []string{"kv", "mon", "osd", "api", "worker"} {
		s := canary(16, 8)
		if i < 2 {
			s = config.Strategy{Type: typeOneAtATime, MaxUnavailable: 1}
		}
		c.Components = append(c.Components, comp(name, i, s, 200))
	}
	obs := world(c, "1.0.0", nil)
	for i := 0; i < 1000; i += 7 {
		comp := c.Components[i/200]
		m := comp.Members[i%200].Name
		switch i % 3 {
		case 0:
			obs.Version[m] = "2.0.0"
		case 1:
			obs.Down[m] = true
		default:
			obs.Version[m] = "1.0.3"
		}
	}
	if memberCount(c) != 1000 {
		b.Fatalf("%d members", memberCount(c))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(c, obs, "2.0.0"); err != nil {
			b.Fatal(err)
		}
	}
}
