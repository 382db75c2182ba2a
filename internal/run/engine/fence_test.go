package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/sim"
)

// TestDeposedEngineStopsAtOnce: another engine claims the store in the
// middle of an upgrade (the sim's TakeOver, at 30 s of virtual time, a
// host locked and members moving): the running engine's next save is
// refused, and it writes nothing more: the record's revision and the
// last event are where the claim found them, and the run ends deposed,
// not completed.
func TestDeposedEngineStopsAtOnce(t *testing.T) {
	c, err := config.Parse([]byte(hostsDesc(lockCalls)), "hosted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sim.Config{Cluster: c, To: "2.0.0", Seed: 1,
		Requests: []sim.Request{{At: 30 * time.Second, Kind: sim.TakeOver}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TakenOver) != 1 {
		t.Fatalf("%d claims, want 1", len(res.TakenOver))
	}
	claim := res.TakenOver[0]
	if !strings.Contains(res.Err, "deposed") || !strings.Contains(res.Err, "fence") {
		t.Fatalf("the run ended with %q, want deposed by the fence", res.Err)
	}
	if claim.Revision < 10 || res.Revision != claim.Revision {
		t.Fatalf("the record was at revision %d when claimed and is at %d at the end: want no save after the claim (and some before)", claim.Revision, res.Revision)
	}
	var after []string
	for _, ev := range res.Events {
		if ev.Seq > claim.Seq {
			after = append(after, ev.Kind+": "+ev.Message)
		}
	}
	if len(after) > 0 {
		t.Fatalf("%d events stored after the claim: %q", len(after), after)
	}
	if res.State.Terminal() {
		t.Fatalf("the deposed run's record ended %s", res.State)
	}
	t.Logf("claimed at revision %d (event %d), state %s; the engine: %s", claim.Revision, claim.Seq, res.State, res.Err)
}

// TestRecordNotUnderstoodStopsTheEngine: a record naming a strategy
// this build does not have (one a newer ferry wrote) stops the engine
// before it acts, saying so; the record is not written (its revision
// stays), where an older engine would have failed the upgrade.
func TestRecordNotUnderstoodStopsTheEngine(t *testing.T) {
	desc := strings.Replace(hostsDesc(""), "    flow: [{stage: hosts, components: [kv, api]}]\n", "", 1)
	c, err := config.Parse([]byte(desc), "plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sim.Run(context.Background(), sim.Config{Cluster: c, To: "2.0.0", Seed: 1, Limit: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u := upgrade.New("upg-newer", plan.Plan, map[string]string{"kv-1": "1.0.0", "kv-2": "1.0.0", "kv-3": "1.0.0"}, nil, time.Now())
	u.Description = c.Digest
	if len(u.Plan.Phases) != 2 || u.Plan.Phases[1].Hosts != nil {
		t.Fatalf("planned %+v, want kv's and api's phases", u.Plan.Phases)
	}
	u.Plan.Phases[1].Settings.Type = "blue-green"
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Create(u); err != nil {
		t.Fatal(err)
	}
	d, err := substrate.New(c, substrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Cluster: c, Driver: d, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = e.Run(ctx)
	if !errors.Is(err, upgrade.ErrRecord) || !strings.Contains(err.Error(), `strategy "blue-green"`) {
		t.Fatalf("Run: %v, want upgrade.ErrRecord naming the strategy", err)
	}
	t.Log(err)
	got, rev, err := st.Read("upg-newer")
	if err != nil {
		t.Fatal(err)
	}
	if rev != 1 || got.State != upgrade.StateStarted {
		t.Fatalf("the record moved: revision %d, state %s", rev, got.State)
	}
}
