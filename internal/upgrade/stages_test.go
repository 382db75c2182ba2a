package upgrade

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/config"
)

// migrating is the test cluster with release 2.0.0 carrying every
// migration stage.
func migrating(finalize string) *config.Cluster {
	c := testCluster()
	call := func(p string) []config.Call { return []config.Call{{HTTP: "http://{{.Any}}/" + p, Method: "POST"}} }
	c.Releases = []config.Release{{Version: "1.0.0"}, {Version: "2.0.0", Migrations: config.Migrations{Component: "kv",
		Expand: call("expand"), Migrate: call("migrate"), Finalize: call("finalize"), Contract: call("contract"),
		Deadline: config.Duration(sec(60)), Interval: config.Duration(sec(1))}}}
	c.Policy.Finalize = finalize
	return c
}

func allDone(u *Upgrade) {
	for _, m := range u.Members {
		m.Step = StepDone
	}
	u.Phase, u.Batch = 2, 0
}

// TestStages walks the migration stages: expand before any member
// moves, migrate (retried, its progress kept) once all did, finalize
// (the point of no return, recorded before its call), contract.
func TestStages(t *testing.T) {
	c := migrating("auto")
	stage := func(u Upgrade, now float64) Decision { return Step(c, u, healthyAt("2.0.0"), t0.Add(sec(now))) }

	u := newUpgrade()
	u.State = StatePreflight
	d := Step(c, u, healthyAt("1.0.0"), t0)
	expect(t, d.Upgrade.State == StateExpanding, "after preflight: %s", d.Upgrade.State)
	expect(t, len(d.Actions) == 1 && d.Actions[0] == Action{Kind: ActStage, Stage: "expand", Version: "2.0.0"}, "actions %v", d.Actions)
	expect(t, d.Upgrade.Pin == "1.0.0", "pin %q", d.Upgrade.Pin)
	u = Finished(d.Upgrade, d.Actions[0], nil, t0)
	d = Step(c, u, healthyAt("1.0.0"), t0)
	expect(t, d.Upgrade.State == Upgrading("kv") && len(d.Actions) == 1 && d.Actions[0].Kind == ActPreStop, "after expand: %s %v", d.Upgrade.State, d.Actions)

	u = d.Upgrade
	allDone(&u)
	u.State = Upgraded("api")
	d = stage(u, 10)
	expect(t, d.Upgrade.State == StateMigrating && len(d.Actions) == 1 && d.Actions[0].Stage == "migrate", "after the phases: %s %v", d.Upgrade.State, d.Actions)
	u = Finished(d.Upgrade, d.Actions[0], errors.New("status 200, want done=true (body {\"done\":false,\"remaining\":120})"), t0.Add(sec(10)))
	expect(t, strings.Contains(u.Stage.Detail, "remaining\":120"), "progress kept: %q", u.Stage.Detail)
	d = stage(u, 10.5)
	expect(t, len(d.Actions) == 0 && strings.Contains(d.Upgrade.Waiting, "migrating: try 1") && d.After == sec(0.5), "between tries: %v %q %s", d.Actions, d.Upgrade.Waiting, d.After)
	d = stage(u, 11)
	expect(t, len(d.Actions) == 1 && d.Upgrade.Stage.Tries == 2, "second try: %v tries %d", d.Actions, d.Upgrade.Stage.Tries)
	u = Finished(d.Upgrade, d.Actions[0], nil, t0.Add(sec(11)))
	expect(t, NoAbort(&u) == "", "abort refused before finalize: %s", NoAbort(&u))

	d = stage(u, 11)
	expect(t, d.Upgrade.State == StateFinalizing && len(d.Actions) == 1 && d.Actions[0].Stage == "finalize", "after migrate: %s %v", d.Upgrade.State, d.Actions)
	expect(t, d.Upgrade.Finalized.Equal(t0.Add(sec(11))) && d.Upgrade.Pin == "2.0.0", "finalize recorded before its call: %s pin %s", d.Upgrade.Finalized, d.Upgrade.Pin)
	u = d.Upgrade
	expect(t, strings.Contains(NoAbort(&u), "passed its point of no return"), "NoAbort after finalize: %q", NoAbort(&u))

	// An abort now is refused, and says why.
	u.Intent = Intent{Kind: IntentAbort, Seq: 1}
	d = stage(u, 11.1)
	expect(t, !d.Upgrade.RollingBack() && strings.Contains(d.Upgrade.Waiting, "abort refused: upgrade u1 passed its point of no return"), "abort after finalize: %s %q", d.Upgrade.State, d.Upgrade.Waiting)

	u = Finished(u, Action{Kind: ActStage, Stage: "finalize"}, nil, t0.Add(sec(12)))
	d = stage(u, 12)
	expect(t, d.Upgrade.State == StateContracting && d.Actions[0].Stage == "contract", "after finalize: %s", d.Upgrade.State)
	u = Finished(d.Upgrade, d.Actions[0], nil, t0.Add(sec(13)))
	d = stage(u, 13)
	expect(t, d.Upgrade.State == StateCompleted, "after contract: %s", d.Upgrade.State)
}

func TestManualFinalize(t *testing.T) {
	c := migrating("manual")
	u := newUpgrade()
	allDone(&u)
	u.State, u.Stage = StateMigrating, Stage{Done: true}
	d := Step(c, u, healthyAt("2.0.0"), t0)
	expect(t, d.Upgrade.State == StateAwaitingFinalize && len(d.Actions) == 0, "state %s actions %v", d.Upgrade.State, d.Actions)
	expect(t, strings.Contains(d.Upgrade.Waiting, "'ferry upgrade finalize' passes the point of no return"), "waiting %q", d.Upgrade.Waiting)
	expect(t, NoFinalize(&d.Upgrade) == "", "NoFinalize %q", NoFinalize(&d.Upgrade))
	expect(t, strings.Contains(NoFinalize(&u), "finalize comes once every member runs 2.0.0"), "NoFinalize while migrating %q", NoFinalize(&u))
	u = d.Upgrade
	u.Intent = Intent{Kind: IntentFinalize, Seq: 1}
	d = Step(c, u, healthyAt("2.0.0"), t0.Add(sec(1)))
	expect(t, d.Upgrade.State == StateFinalizing && len(d.Actions) == 1 && !d.Upgrade.Finalized.IsZero(), "after the request: %s %v", d.Upgrade.State, d.Actions)
}

func TestStageFailures(t *testing.T) {
	c := migrating("auto")
	// A migration past its deadline rolls every member back.
	u := newUpgrade()
	allDone(&u)
	u.State, u.Stage = StateMigrating, Stage{Since: t0, LastTry: t0, Tries: 30, Detail: "try 30: remaining 5"}
	d := Step(c, u, healthyAt("2.0.0"), t0.Add(sec(61)))
	expect(t, d.Upgrade.RollingBack() && strings.Contains(d.Upgrade.Reason, "migrating: not done within 1m0s: try 30: remaining 5"), "state %s reason %q", d.Upgrade.State, d.Upgrade.Reason)
	n := 0
	for _, ph := range d.Upgrade.Rollback.Phases {
		for _, b := range ph.Batches {
			n += len(b.Members)
		}
	}
	expect(t, n == 7 && d.Upgrade.Rollback.Phases[0].Component == "api", "rollback of %d members, first %s", n, d.Upgrade.Rollback.Phases[0].Component)

	// After finalize a failure pauses: there is nothing to roll back to.
	u = newUpgrade()
	allDone(&u)
	u.State, u.Finalized, u.Pin = StateContracting, t0, "2.0.0"
	u.Stage = Stage{Since: t0, LastTry: t0, Tries: 9, Detail: "try 9: status 500"}
	d = Step(c, u, healthyAt("2.0.0"), t0.Add(sec(61)))
	expect(t, d.Upgrade.State == StatePaused && d.Upgrade.Rollback == nil && strings.Contains(d.Upgrade.Reason, "after finalize: no rollback"), "state %s reason %q", d.Upgrade.State, d.Upgrade.Reason)
	expect(t, d.Upgrade.ResumeTo == StateContracting, "resume_to %s", d.Upgrade.ResumeTo)
	// A stale stage outcome changes nothing.
	got := Finished(d.Upgrade, Action{Kind: ActStage, Stage: "migrate"}, nil, t0)
	expect(t, !got.Stage.Done, "a stale outcome marked the stage done")
}
