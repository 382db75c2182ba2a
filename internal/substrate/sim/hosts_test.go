package sim

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// TestHostsSeeds runs seeded upgrades of testdata/hosts.yaml (kv in a
// phase, then api and worker host by host, two hosts locked at once and
// one per zone) through the real engine, with the faults each seed
// draws, and wants every invariant held, the hosts' among them, checked
// at every lock: 3 seeds of a 52-member description in make test (the
// race detector runs it too); FERRY_SIM_SEED=N replays one.
func TestHostsSeeds(t *testing.T) {
	c, err := config.Load("testdata/hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{"kv": 4, "api": 16, "worker": 32}
	c, err = ScaleEach(c, func(comp *config.Component) int { return n[comp.Name] })
	if err != nil {
		t.Fatal(err)
	}
	runs, base := 3, uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("FERRY_SIM_SEED"), 10, 64); err == nil {
		base, runs = v, 1
	}
	t.Logf("seeds %d..%d (FERRY_SIM_SEED=N replays one)", base, base+uint64(runs)-1)
	for i := range runs {
		seed := base + uint64(i)
		res, err := Run(context.Background(), Config{Cluster: c, To: "2.0.0", Seed: seed})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if b := res.Broken(); len(b) > 0 || res.Err != "" || !res.State.Terminal() && res.State.String() != "paused" {
			t.Fatalf("seed %d (FERRY_SIM_SEED=%d replays it): faults %s; ended %s (%s) %s; broken: %v", seed, seed, res.Faults, res.State, res.Reason, res.Err, b)
		}
		locks := 0
		for _, inv := range res.Invariants {
			if inv.Name == InvHosts {
				locks = inv.Checks
			}
		}
		if res.State.String() == "completed" && locks == 0 {
			t.Fatalf("seed %d: completed without a host lock checked", seed)
		}
		t.Logf("seed %d: %s in %s, %d host locks checked (faults: %s)", seed, res.State, res.Took.Round(time.Second), locks, res.Faults)
	}
}

// TestHostsInvariantCatchesBreaches: the hosts' invariant finds a
// third host locked with max_unavailable 2, and a second of one zone
// with max_unavailable_per_domain 1.
func TestHostsInvariantCatchesBreaches(t *testing.T) {
	c, err := config.Load("testdata/hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		lock   []string
		broken int
	}{
		{"two hosts of two zones", []string{"h1", "h3"}, 0},
		{"two hosts of zone-a", []string{"h1", "h2"}, 1},
		{"three hosts", []string{"h1", "h3", "h5"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(NewClock(), c, 1, DefaultTiming, Faults{}, "1.0.0", true)
			w.hosts = newHosts(c, "2.0.0")
			w.mu.Lock()
			for _, h := range tc.lock {
				w.hostCall(callLock, h)
			}
			w.mu.Unlock()
			i := slices.IndexFunc(w.inv.List(), func(inv Invariant) bool { return inv.Name == InvHosts })
			inv := w.inv.List()[i]
			if len(inv.Broken) != tc.broken {
				t.Errorf("%s: broken %q, want %d breach(es)", InvHosts, inv.Broken, tc.broken)
			}
		})
	}
}
