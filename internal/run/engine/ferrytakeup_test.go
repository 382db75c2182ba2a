package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/sim"
)

// TestOlderFerryDoesNotTakeUp: an upgrade to a release that requires
// ferry 99.0.0, begun by that ferry, is not taken up by this one (a
// standby server not upgraded yet, an older CLI's resume): the engine
// stops before it acts, naming both versions, and the record is not
// written.
func TestOlderFerryDoesNotTakeUp(t *testing.T) {
	desc := strings.Replace(hostsDesc(""), "    flow: [{stage: hosts, components: [kv, api]}]\n", "    requires_ferry: 99.0.0\n", 1)
	c, err := config.Parse([]byte(desc), "newer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The plan, made as the newer ferry would (the simulator ignores
	// requires_ferry: it is no ferry of any release).
	plan, err := sim.Run(context.Background(), sim.Config{Cluster: c, To: "2.0.0", Seed: 1, Limit: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u := upgrade.New("upg-newer", plan.Plan, map[string]string{"kv-1": "1.0.0", "kv-2": "1.0.0", "kv-3": "1.0.0"}, nil, time.Now())
	u.Description = c.Digest
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
	want := "ferry understands release 2.0.0: release 2.0.0 requires ferry 99.0.0 or later; this is ferry " + buildinfo.Release()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v, want a refusal saying %q", err, want)
	}
	t.Log(err)
	if got, rev, err := st.Read("upg-newer"); err != nil || rev != 1 || got.State != upgrade.StateStarted {
		t.Fatalf("the record moved: revision %d, state %s (%v)", rev, got.State, err)
	}
}
