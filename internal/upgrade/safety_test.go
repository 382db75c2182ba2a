package upgrade

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/config"
	"github.com/ferry-upgrade/ferry/internal/plan"
)

// TestFailuresAndIntents covers what follows a failure under each
// policy, and the operator's pause, resume and abort.
func TestFailuresAndIntents(t *testing.T) {
	kvDone := func(u *Upgrade) {
		for _, n := range []string{"kv-1", "kv-2", "kv-3"} {
			u.Members[n].Step = StepDone
		}
	}
	unhealthyKV1 := func() Observation {
		o := healthyAt("1.0.0")
		o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Detail: "status 503"}
		return o
	}
	pausePolicy := func(c *config.Cluster) { c.Policy.OnFailure = "pause" }
	cases := []struct {
		name    string
		cluster func(*config.Cluster)
		u       Upgrade
		obs     Observation
		now     time.Time
		check   func(t *testing.T, d Decision)
	}{
		{
			name:    "policy pause: a failed member pauses the upgrade where it was",
			cluster: pausePolicy,
			u:       inPhase(func(u *Upgrade) { u.Members["kv-1"].Step, u.Members["kv-1"].Began = StepStarting, t0 }),
			obs:     unhealthyKV1(), now: t0.Add(sec(31)),
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == StatePaused, "state %s, want paused", u.State)
				expect(t, u.ResumeTo == Upgrading("kv"), "resume_to %s", u.ResumeTo)
				expect(t, u.Members["kv-1"].Step == StepFailed, "kv-1 %s", u.Members["kv-1"].Step)
				expect(t, strings.Contains(u.Reason, "healthy_deadline"), "reason %q", u.Reason)
				expect(t, strings.Contains(u.Waiting, "ferry upgrade resume"), "waiting %q", u.Waiting)
				expect(t, len(d.Actions) == 0, "actions %v", d.Actions)
			},
		},
		{
			name: "resume after a failure-pause tries the failed member again from its start",
			u: inPhase(func(u *Upgrade) {
				u.State, u.ResumeTo, u.Reason = StatePaused, Upgrading("kv"), "member kv-1: ..."
				u.Members["kv-1"].Step, u.Members["kv-1"].Began = StepFailed, t0
				u.Intent = Intent{Kind: IntentResume, Seq: 1}
			}),
			obs: unhealthyKV1(), now: t0.Add(sec(40)),
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == Upgrading("kv"), "state %s", u.State)
				expect(t, u.Reason == "", "reason %q kept", u.Reason)
				expect(t, u.IntentSeen == 1, "intent_seen %d", u.IntentSeen)
				// kv-1 already runs 2.0.0: it goes straight to waiting for health.
				expect(t, u.Members["kv-1"].Step == StepStarting && u.Members["kv-1"].Began.Equal(t0.Add(sec(40))),
					"kv-1 %s began %s", u.Members["kv-1"].Step, u.Members["kv-1"].Began)
			},
		},
		{
			name: "a paused upgrade without a new request stays paused",
			u: inPhase(func(u *Upgrade) {
				u.State, u.ResumeTo = StatePaused, Upgrading("kv")
				u.Intent, u.IntentSeen = Intent{Kind: IntentResume, Seq: 3}, 3
			}),
			obs: healthyAt("1.0.0"), now: t0.Add(sec(40)),
			check: func(t *testing.T, d Decision) {
				expect(t, d.Upgrade.State == StatePaused && len(d.Actions) == 0, "state %s actions %v", d.Upgrade.State, d.Actions)
			},
		},
		{
			name: "pause: the member in flight goes on, the next one is not admitted",
			u: inPhase(func(u *Upgrade) {
				u.Members["kv-1"].Step, u.Members["kv-1"].Began, u.Members["kv-1"].HealthySince = StepSoaking, t0, t0
				u.Intent = Intent{Kind: IntentPause, Seq: 1}
			}),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Healthy: true, HealthySince: t0}
				return o
			}(), now: t0.Add(sec(2)),
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.Members["kv-1"].Step == StepRejoining || u.Members["kv-1"].Step == StepDraining || u.Members["kv-1"].Step == StepDone, "kv-1 %s", u.Members["kv-1"].Step)
				expect(t, u.Members["kv-2"].Step == StepPending, "kv-2 %s", u.Members["kv-2"].Step)
				expect(t, u.Pausing || u.State == StatePaused, "not pausing: %s", u.State)
			},
		},
		{
			name: "pause: once nothing is in flight the upgrade is paused",
			u: inPhase(func(u *Upgrade) {
				u.Members["kv-1"].Step = StepDone
				u.Batch = 1
				u.Pausing = true
			}),
			obs: healthyAt("1.0.0"), now: t0,
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == StatePaused && u.ResumeTo == Upgrading("kv"), "state %s resume_to %s", u.State, u.ResumeTo)
				expect(t, u.Members["kv-2"].Step == StepPending && len(d.Actions) == 0, "kv-2 %s, actions %v", u.Members["kv-2"].Step, d.Actions)
			},
		},
		{
			name: "abort in the api phase rolls back api's touched members, then kv's in reverse",
			u: inPhase(func(u *Upgrade) {
				kvDone(u)
				u.State, u.Phase, u.Batch = Upgrading("api"), 1, 1
				u.Members["api-1"].Step = StepDone
				u.Intent = Intent{Kind: IntentAbort, Seq: 1}
			}),
			obs: healthyAt("2.0.0"), now: t0,
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == StateRollingBack, "state %s", u.State)
				expect(t, u.Reason == "aborted by the operator", "reason %q", u.Reason)
				var order []string
				for _, ph := range u.Rollback.Phases {
					for _, b := range ph.Batches {
						order = append(order, strings.Join(b.Members, "+"))
					}
				}
				expect(t, strings.Join(order, ",") == "api-1,kv-3,kv-2,kv-1", "rollback order %v", order)
				expect(t, u.Members["api-1"].Target == "1.0.0" && u.Members["api-2"].Target == "2.0.0", "targets %s %s", u.Members["api-1"].Target, u.Members["api-2"].Target)
				expect(t, len(d.Actions) == 1 && d.Actions[0] == Action{Kind: ActPreStop, Member: "api-1"}, "actions %v", d.Actions)
			},
		},
		{
			name: "the failed member goes first in its batch",
			u: inPhase(func(u *Upgrade) {
				kvDone(u)
				u.State, u.Phase, u.Batch = Upgrading("api"), 1, 1
				u.Members["api-1"].Step = StepDone
				u.Members["api-2"].Step, u.Members["api-2"].Began, u.Members["api-2"].HealthySince = StepSoaking, t0.Add(sec(30)), t0.Add(sec(30))
				u.Members["api-3"].Step, u.Members["api-3"].Began = StepStarting, t0
			}),
			obs: func() Observation {
				o := healthyAt("2.0.0")
				o.Members["api-3"] = MemberHealth{Running: false, Version: "2.0.0", Detail: "exited"}
				return o
			}(), now: t0.Add(sec(31)),
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == StateRollingBack, "state %s", u.State)
				b := u.Rollback.Phases[0].Batches[0].Members
				expect(t, strings.Join(b, ",") == "api-3,api-2", "first rollback batch %v", b)
			},
		},
		{
			name: "the last rolled-back member done and the gate green: rolled-back",
			u: inPhase(func(u *Upgrade) {
				u.State, u.Reason = StateRollingBack, "member kv-1: ..."
				u.Rollback = &plan.Plan{To: "1.0.0", Phases: []plan.Phase{{Component: "kv", MaxUnavailable: 1, Quorum: 2,
					Batches: []plan.Batch{{Members: []string{"kv-1"}}}}}}
				u.Members["kv-1"].Step, u.Members["kv-1"].Target = StepDone, "1.0.0"
				u.Batch = 1
			}),
			obs: healthyAt("1.0.0"), now: t0,
			check: func(t *testing.T, d Decision) {
				expect(t, d.Upgrade.State == StateRolledBack && !d.Upgrade.Ended.IsZero(), "state %s", d.Upgrade.State)
				expect(t, d.Upgrade.Reason == "member kv-1: ...", "reason %q", d.Upgrade.Reason)
			},
		},
		{
			name: "a failure while rolling back ends in failed, with both reasons",
			u: inPhase(func(u *Upgrade) {
				u.State, u.Reason = StateRollingBack, "member kv-1: never healthy"
				u.Rollback = &plan.Plan{To: "1.0.0", Phases: []plan.Phase{{Component: "kv", MaxUnavailable: 1, Quorum: 2,
					Batches: []plan.Batch{{Members: []string{"kv-1"}}}}}}
				u.Members["kv-1"].Step, u.Members["kv-1"].Target, u.Members["kv-1"].Began = StepStarting, "1.0.0", t0
			}),
			obs: healthyAt("2.0.0"), now: t0.Add(sec(31)),
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == StateFailed, "state %s", u.State)
				expect(t, strings.HasPrefix(u.Reason, "rollback failed: member kv-1") && strings.Contains(u.Reason, "never healthy"), "reason %q", u.Reason)
			},
		},
		{
			name: "a member down for a reason ferry did not cause holds the next one back, then fails the step at the gate deadline",
			u: inPhase(func(u *Upgrade) {
				u.Members["kv-1"].AdmitSince = t0
			}),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-3"] = MemberHealth{Running: false, Version: "1.0.0", Detail: "killed"}
				return o
			}(), now: t0.Add(sec(21)),
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == StateRolledBack || u.State == StateRollingBack, "state %s", u.State)
				expect(t, strings.Contains(u.Reason, "could not be taken down for 20s") && strings.Contains(u.Reason, "kv-3 down"), "reason %q", u.Reason)
				expect(t, len(d.Actions) == 0, "actions %v", d.Actions)
			},
		},
		{
			name: "... and waits, saying why, before the deadline",
			u:    inPhase(nil),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-3"] = MemberHealth{Running: false, Version: "1.0.0", Detail: "killed"}
				return o
			}(), now: t0,
			check: func(t *testing.T, d Decision) {
				u := d.Upgrade
				expect(t, u.State == Upgrading("kv") && u.Members["kv-1"].AdmitSince.Equal(t0), "state %s admit_since %s", u.State, u.Members["kv-1"].AdmitSince)
				expect(t, strings.Contains(u.Waiting, "max_unavailable 1 reached (kv-3 down)"), "waiting %q", u.Waiting)
				expect(t, d.After == sec(20)+time.Millisecond, "after %s", d.After)
			},
		},
		{
			name: "preflight failing fails the upgrade: nothing to roll back",
			u:    newUpgrade(),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Gates["kv"] = Gate{Detail: "no quorum"}
				return o
			}(), now: t0,
			check: func(t *testing.T, d Decision) {
				u2 := d.Upgrade
				u2.State, u2.GateSince = StatePreflight, t0
				d2 := Step(testCluster(), u2, Observation{Members: healthyAt("1.0.0").Members, Gates: map[string]Gate{"kv": {Detail: "no quorum"}}}, t0.Add(sec(21)))
				expect(t, d2.Upgrade.State == StateFailed && d2.Upgrade.Rollback == nil, "state %s", d2.Upgrade.State)
			},
		},
		{
			name: "abort is refused once the upgrade ended",
			u:    newUpgrade(),
			check: func(t *testing.T, d Decision) {
				u := newUpgrade()
				u.State = StateCompleted
				expect(t, strings.Contains(NoAbort(&u), "has ended (completed)"), "NoAbort %q", NoAbort(&u))
				u.State, u.Rollback = StateRollingBack, &plan.Plan{}
				expect(t, strings.Contains(NoAbort(&u), "already rolling back"), "NoAbort %q", NoAbort(&u))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster()
			if tc.cluster != nil {
				tc.cluster(c)
			}
			if tc.obs.Members == nil {
				tc.obs = healthyAt("1.0.0")
			}
			if tc.now.IsZero() {
				tc.now = t0
			}
			before := tc.u.Clone()
			d := Step(c, tc.u, tc.obs, tc.now)
			tc.check(t, d)
			for n, m := range tc.u.Members {
				if *m != *before.Members[n] {
					t.Errorf("Step mutated its input: %s", n)
				}
			}
		})
	}
}

func expect(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}
