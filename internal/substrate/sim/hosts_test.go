package sim

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
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

// TestHostsByDomain: a hosts stage whose strategy is by-domain locks
// one zone's hosts at a time. The hosts of testdata/hosts.yaml are
// listed zone-a, zone-b, zone-c, zone-a, … (the default order would
// lock h1 and h3 together), with two hosts at once and two per zone:
// every host of a zone is locked before any of the next, and no lock
// finds a host of another zone locked. No faults: the order is the
// stage's alone.
func TestHostsByDomain(t *testing.T) {
	c, err := config.Load("testdata/hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]config.Host{}
	for _, h := range c.Hosts {
		byName[h.Name] = h
	}
	c.Hosts = nil
	for _, n := range []string{"h1", "h3", "h5", "h2", "h4", "h6"} {
		c.Hosts = append(c.Hosts, byName[n])
	}
	r := c.Release("2.0.0")
	i := slices.IndexFunc(r.Flow, func(st config.FlowStage) bool { return st.Stage == config.StageHosts })
	st := &r.Flow[i]
	st.Strategy, st.MaxUnavailable, st.MaxUnavailablePerDomain = strategy.ByDomain, config.HostBudget{Count: 2}, 2
	res, err := Run(context.Background(), Config{Cluster: c, To: "2.0.0", Seed: 1, Faults: &Faults{}})
	if err != nil {
		t.Fatal(err)
	}
	if b := res.Broken(); len(b) > 0 || res.State.String() != "completed" {
		t.Fatalf("ended %s (%s) %s; broken: %v", res.State, res.Reason, res.Err, b)
	}
	var zones []string // the zone of each lock, in order
	for _, ev := range res.Events {
		var h, from string
		if _, err := fmt.Sscanf(ev.Message, "host %s %s → locking", &h, &from); ev.Kind == "host" && err == nil {
			zones = append(zones, byName[strings.TrimSuffix(h, ":")].Domain)
		}
	}
	want := []string{"zone-a", "zone-a", "zone-b", "zone-b", "zone-c", "zone-c"}
	if !slices.Equal(zones, want) {
		t.Errorf("hosts locked in the zones %v; want %v (one zone at a time)", zones, want)
	}
	if batches := res.Plan.Phases[1].Batches; len(batches) != 3 || !slices.Equal(batches[0].Hosts, []string{"h1", "h2"}) {
		t.Errorf("the plan's host batches %+v; want h1 h2, then zone-b's, then zone-c's", batches)
	}
}
