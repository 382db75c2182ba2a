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

// These tests drive the engine on the sim substrate's virtual clock
// (engine.Config.Clock): its deadlines, outages and probes' bounds are
// minutes of virtual time that pass in milliseconds, on the real engine,
// state machine and observer.

const desc = `cluster: clocked
hosts:
  - {name: h1, agent: 127.0.0.1:7101, domain: a}
  - {name: h2, agent: 127.0.0.1:7102, domain: b}
components:
  - name: api
    order: 1
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    soak: 2s
    deadline: 60s
    health:
      member: {http: "http://{{.Address}}/ready", interval: 30s, timeout: 1s}
    members:
      - {name: api-1, host: h1, address: 127.0.0.1:8201}
      - {name: api-2, host: h2, address: 127.0.0.1:8202}
      - {name: api-3, host: h1, address: 127.0.0.1:8203}
releases:
  - version: 1.0.0
    artifacts: {api: {path: bin/api-1, sha256: "1111111111111111111111111111111111111111111111111111111111111111"}}
  - version: 2.0.0
    upgrade_from: ["1.0.x"]
    artifacts: {api: {path: bin/api-2, sha256: "2222222222222222222222222222222222222222222222222222222222222222"}}
`

func simulate(t *testing.T, cfg sim.Config) sim.Result {
	t.Helper()
	c, err := config.Parse([]byte(desc), "clocked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster, cfg.To = c, "2.0.0"
	res, err := sim.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != "" {
		t.Fatalf("the simulation did not finish: %s", res.Err)
	}
	if b := res.Broken(); len(b) > 0 {
		t.Fatalf("invariants broken: %v", b)
	}
	return res
}

func at(ev store.Event) time.Duration { return ev.Time.Sub(sim.Epoch) }

// TestActionTimesOut: a start the substrate never answers is ended by
// its deadline on the engine's clock (the component's deadline 60 s,
// its stop timeout 10 s and the driver's margin 30 s: 100 s of virtual
// time, to the instant), and its
// outcome is recorded as a timeout, not as an answer.
func TestActionTimesOut(t *testing.T) {
	res := simulate(t, sim.Config{Seed: 1, Faults: &sim.Faults{HangStart: map[string]string{"api-1": "2.0.0"}}})
	var began, failed store.Event
	for _, ev := range res.Events {
		if ev.Member != "api-1" || ev.Kind != "action" && ev.Kind != "error" {
			continue
		}
		switch {
		case began.Time.IsZero() && strings.HasPrefix(ev.Message, "start") && strings.HasSuffix(ev.Message, ": started"):
			began = ev
		case failed.Time.IsZero() && ev.Kind == "error":
			failed = ev
		}
	}
	if began.Time.IsZero() || failed.Time.IsZero() {
		t.Fatalf("no start of api-1 that failed: %v", res.Events)
	}
	if !strings.Contains(failed.Message, "its deadline of 1m40s passed") {
		t.Errorf("the start's outcome is %q, want its deadline named", failed.Message)
	}
	// Its deadline fired when the virtual clock passed it.
	if took := failed.Time.Sub(began.Time); took != 100*time.Second {
		t.Errorf("the start failed %s after it began, want 1m40s", took)
	}
	t.Logf("start of api-1 began at %s, failed at %s: %s; upgrade %s", at(began), at(failed), failed.Message, res.State)
}

// TestOutage: while the substrate answers nothing (60 s from the 5th
// second, while api-1 starts), nothing is admitted nor acted on, and
// once it answers again every deadline has moved by the outage's
// length: api-1, healthy within its 60 s deadline only if the outage
// does not count, is done and the upgrade completes.
func TestOutage(t *testing.T) {
	res := simulate(t, sim.Config{Seed: 2, Faults: &sim.Faults{Outages: []sim.Outage{{At: 5 * time.Second, For: 60 * time.Second}}}})
	if res.State != upgrade.StateCompleted {
		t.Fatalf("ended %s (%s), want completed: the outage's time counted against a deadline", res.State, res.Reason)
	}
	var from, to time.Duration
	for _, ev := range res.Events {
		if ev.Kind == "outage" {
			if from == 0 {
				from = at(ev)
			} else {
				to = at(ev)
				if !strings.Contains(ev.Message, "every deadline moved") {
					t.Errorf("the outage's end says %q", ev.Message)
				}
			}
		}
	}
	if from == 0 || to == 0 || to-from < 59*time.Second {
		t.Fatalf("the outage was seen from %s to %s, want about 60 s", from, to)
	}
	for _, ev := range res.Events {
		if ev.Kind == "action" && strings.HasSuffix(ev.Message, ": started") && at(ev) > from && at(ev) < to {
			t.Errorf("%s during the outage (%s to %s): %s", at(ev), from, to, ev.Message)
		}
	}
	t.Logf("outage seen from %s to %s; completed in %s", from, to, res.Took)
}

// TestProbeCutOff: a member check slower than its timeout (1 s; the
// simulated member answers after 5 s) is cut off at its timeout on the
// engine's clock and says so: the preflight refuses, naming the member
// and the bound, one virtual second after it asked.
func TestProbeCutOff(t *testing.T) {
	c, err := config.Parse([]byte(desc), "clocked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sim.Config{Cluster: c, To: "2.0.0", Seed: 3, MemberChecks: true,
		Faults: &sim.Faults{SlowProbe: map[string]time.Duration{"api-1": 5 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Err, "api-1 healthy: 1.0.0: http sim:member: no answer within 1s") {
		t.Fatalf("the preflight says %q, want api-1's check cut off at 1s", res.Err)
	}
	if len(res.Events) > 0 || res.State.Kind != "" {
		t.Errorf("an upgrade was recorded (%s) though the preflight failed", res.State)
	}
	t.Logf("refused: %s", res.Err)
}

// TestVerdictBeforeStart: a member healthy on its old process, whose
// new one never becomes healthy, is not taken for healthy on the old
// process's verdict (its check runs every 30 s, so that verdict is the
// latest for a while): its step fails, the upgrade rolls back.
func TestVerdictBeforeStart(t *testing.T) {
	res := simulate(t, sim.Config{Seed: 4, MemberChecks: true, Faults: &sim.Faults{NeverReady: map[string]string{"api-1": "2.0.0"}}})
	if res.State != upgrade.StateRolledBack {
		t.Fatalf("ended %s (%s), want rolled-back: api-1 was taken for healthy", res.State, res.Reason)
	}
	if !strings.Contains(res.Reason, "api-1") {
		t.Errorf("the rollback's reason %q does not name api-1", res.Reason)
	}
	t.Logf("rolled back: %s", res.Reason)
}
