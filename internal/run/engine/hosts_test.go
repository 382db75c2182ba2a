package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/sim"
)

// hostsDesc is three hosts, kv and api on each, upgraded host by host
// (one host locked at a time); lockCalls are the hosts' lock calls,
// "" for none.
func hostsDesc(lockCalls string) string {
	return `cluster: hosted
hosts:
  - {name: h1, agent: 127.0.0.1:7101}
  - {name: h2, agent: 127.0.0.1:7102}
  - {name: h3, agent: 127.0.0.1:7103}
` + lockCalls + `
components:
  - name: kv
    order: 1
    strategy: {type: one-at-a-time, quorum: 2}
    soak: 2s
    deadline: 60s
    members:
      - {name: kv-1, host: h1, address: 127.0.0.1:8101}
      - {name: kv-2, host: h2, address: 127.0.0.1:8102}
      - {name: kv-3, host: h3, address: 127.0.0.1:8103}
  - name: api
    order: 2
    strategy: {type: canary, max_batch: 2, max_unavailable: 2}
    soak: 2s
    deadline: 60s
    members:
      - {name: api-1, host: h1, address: 127.0.0.1:8201}
      - {name: api-2, host: h2, address: 127.0.0.1:8202}
      - {name: api-3, host: h3, address: 127.0.0.1:8203}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: "1111111111111111111111111111111111111111111111111111111111111111"}}
  - version: 2.0.0
    upgrade_from: ["1.0.x"]
    artifacts: {"*": {path: bin/a-2, sha256: "2222222222222222222222222222222222222222222222222222222222222222"}}
    flow: [{stage: hosts, components: [kv, api]}]
`
}

const lockCalls = `host_defaults:
  lock: [{http: "http://lb/hosts/{{.Host}}/drain", method: POST}]
  unlock: [{http: "http://lb/hosts/{{.Host}}/enable", method: POST}]`

func simulateHosts(t *testing.T, locks string, cfg sim.Config) sim.Result {
	t.Helper()
	c, err := config.Parse([]byte(hostsDesc(locks)), "hosted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster, cfg.To = c, "2.0.0"
	res, err := sim.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b := res.Broken(); len(b) > 0 {
		t.Fatalf("invariants broken: %v", b)
	}
	return res
}

// hostEvents counts the lock actions done and the host effects undone,
// and returns the host steps in order.
func hostEvents(evs []store.Event) (locks, unlocks int, steps []string) {
	for _, ev := range evs {
		switch {
		case ev.Kind == "action" && strings.HasPrefix(ev.Message, "lock host ") && strings.Contains(ev.Message, ": done"):
			locks++
		case ev.Kind == "effect" && strings.Contains(ev.Message, " undone: host "):
			unlocks++
		case ev.Kind == "host":
			steps = append(steps, ev.Message)
		}
	}
	return locks, unlocks, steps
}

// TestHostsLockedOneAtATime: the engine locks each host through its
// calls, moves its members, unlocks it (the undo of the lock's effect),
// one host after the other: 3 locks, 3 unlocks, nothing owed at the end.
func TestHostsLockedOneAtATime(t *testing.T) {
	res := simulateHosts(t, lockCalls, sim.Config{Seed: 3, Faults: &sim.Faults{}})
	if res.State != upgrade.StateCompleted || len(res.Record.Effects) > 0 {
		t.Fatalf("ended %s (%s), effects owed %v", res.State, res.Reason, res.Record.Effects)
	}
	locks, unlocks, steps := hostEvents(res.Events)
	if locks != 3 || unlocks != 3 {
		t.Errorf("%d locks, %d unlocks; want 3 of each\n%s", locks, unlocks, strings.Join(steps, "\n"))
	}
	// Never two hosts locked at once: each host is done before the next
	// is locked.
	locked := 0
	for _, s := range steps {
		switch {
		case strings.HasSuffix(s, "→ locking"):
			locked++
			if locked > 1 {
				t.Fatalf("two hosts locked at once:\n%s", strings.Join(steps, "\n"))
			}
		case strings.HasSuffix(s, "→ done"):
			locked--
		}
	}
	t.Logf("completed in %s: %d locks, %d unlocks; %s", res.Took.Round(time.Millisecond), locks, unlocks, strings.Join(steps, "; "))
}

// TestHostsAbortUnlocks: an abort while a host is locked rolls its
// members back with the host locked, then unlocks it from the journal:
// rolled back, as many unlocks as locks, nothing owed.
func TestHostsAbortUnlocks(t *testing.T) {
	res := simulateHosts(t, lockCalls, sim.Config{Seed: 4, Faults: &sim.Faults{}, Requests: []sim.Request{{At: 12 * time.Second, Kind: upgrade.IntentAbort}}})
	if res.State != upgrade.StateRolledBack || len(res.Record.Effects) > 0 {
		t.Fatalf("ended %s (%s), effects owed %v; want rolled-back with none", res.State, res.Reason, res.Record.Effects)
	}
	locks, unlocks, steps := hostEvents(res.Events)
	if locks == 0 || unlocks == 0 {
		t.Fatalf("%d locks, %d unlocks: the abort came when no host was locked\n%s", locks, unlocks, strings.Join(steps, "\n"))
	}
	t.Logf("rolled back: %d locks, %d unlocks; %s", locks, unlocks, strings.Join(steps, "; "))
}

// TestHostsWithoutLockRefused: a hosts stage on a substrate that
// cannot lock a host itself needs lock calls: without them the upgrade
// is refused before anything moves, by the capability's name and the
// host.
func TestHostsWithoutLockRefused(t *testing.T) {
	c, err := config.Parse([]byte(hostsDesc("")), "hosted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sim.Config{Cluster: c, To: "2.0.0", Seed: 1, Faults: &sim.Faults{}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Err, "cannot lock a host (capability lock-host), which hosts[0]") || len(res.Record.Batches) > 0 {
		t.Fatalf("err %q, %d batches; want the refusal by lock-host, naming hosts[0], before any batch", res.Err, len(res.Record.Batches))
	}
	t.Logf("refused: %s", res.Err)
}
