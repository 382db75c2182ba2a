package upgrade

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/config"
	"github.com/ferry-upgrade/ferry/internal/plan"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func sec(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

// testCluster is the demo's shape: kv (3, one at a time, quorum 2,
// pre-stop hook) then api (4, canary max_batch 2, max_unavailable 2,
// pre-stop and post-start hooks).
func testCluster() *config.Cluster {
	hook := []config.Call{{HTTP: "http://{{.Address}}/hook", Method: "POST"}}
	c := &config.Cluster{Name: "t", Components: []config.Component{
		{Name: "kv", Order: 1, Strategy: config.Strategy{Type: config.OneAtATime, Quorum: 2, MaxUnavailable: 1},
			Soak: config.Duration(sec(1)), Deadline: config.Duration(sec(30)), GateDeadline: config.Duration(sec(20)),
			Hooks: config.Hooks{PreStop: hook}},
		{Name: "api", Order: 2, Strategy: config.Strategy{Type: config.Canary, MaxBatch: 2, MaxUnavailable: 2},
			Soak: config.Duration(sec(1)), Deadline: config.Duration(sec(30)), GateDeadline: config.Duration(sec(20)),
			Hooks: config.Hooks{PreStop: hook, PostStart: hook}},
	}}
	for i, n := range []string{"kv-1", "kv-2", "kv-3"} {
		_ = i
		c.Components[0].Members = append(c.Components[0].Members, config.Member{Name: n, Host: "h"})
	}
	for _, n := range []string{"api-1", "api-2", "api-3", "api-4"} {
		c.Components[1].Members = append(c.Components[1].Members, config.Member{Name: n, Host: "h"})
	}
	return c
}

func testPlan() plan.Plan {
	return plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Phases: []plan.Phase{
		{Component: "kv", Strategy: "one-at-a-time", MaxUnavailable: 1, Quorum: 2,
			Batches: []plan.Batch{{Members: []string{"kv-1"}}, {Members: []string{"kv-2"}}, {Members: []string{"kv-3"}}}},
		{Component: "api", Strategy: "canary", MaxUnavailable: 2,
			Batches: []plan.Batch{{Members: []string{"api-1"}}, {Members: []string{"api-2", "api-3"}}, {Members: []string{"api-4"}}}},
	}}
}

var allMembers = []string{"kv-1", "kv-2", "kv-3", "api-1", "api-2", "api-3", "api-4"}

// healthyAt observes every member running version v, healthy since t0-1h.
func healthyAt(v string) Observation {
	o := Observation{Members: map[string]MemberHealth{}, Gates: map[string]Gate{"kv": {Healthy: true}}}
	for _, n := range allMembers {
		o.Members[n] = MemberHealth{Running: true, Version: v, Healthy: true, HealthySince: t0.Add(-time.Hour)}
	}
	return o
}

func newUpgrade() Upgrade {
	v := map[string]string{}
	for _, n := range allMembers {
		v[n] = "1.0.0"
	}
	return New("u1", testPlan(), v, nil, t0)
}

// inPhase returns an upgrade already past preflight, in kv's phase.
func inPhase(mutate func(u *Upgrade)) Upgrade {
	u := newUpgrade()
	u.State = Upgrading("kv")
	if mutate != nil {
		mutate(&u)
	}
	return u
}

func TestStep(t *testing.T) {
	type want struct {
		state   State
		actions []Action
		steps   map[string]MemberStep
		waiting string // substring
		reason  string // substring
		after   time.Duration
	}
	cases := []struct {
		name string
		u    Upgrade
		obs  Observation
		now  time.Time
		want want
	}{
		{
			name: "a healthy cluster goes from started through preflight to the first member's drain",
			u:    newUpgrade(), obs: healthyAt("1.0.0"), now: t0,
			want: want{state: Upgrading("kv"), actions: []Action{{Kind: ActPreStop, Member: "kv-1"}},
				steps: map[string]MemberStep{"kv-1": StepDraining, "kv-2": StepPending}},
		},
		{
			name: "preflight waits while a member is down",
			u:    newUpgrade(),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["api-3"] = MemberHealth{Running: false, Version: "1.0.0", Detail: "exited with status 1"}
				return o
			}(),
			now:  t0,
			want: want{state: StatePreflight, waiting: "api-3 not healthy (exited with status 1)"},
		},
		{
			name: "preflight fails once the gate stayed red past its deadline",
			u: func() Upgrade {
				u := newUpgrade()
				u.State, u.GateSince = StatePreflight, t0
				return u
			}(),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Gates["kv"] = Gate{Healthy: false, Detail: "quorum = false, want true"}
				return o
			}(),
			now:  t0.Add(sec(21)),
			want: want{state: StateFailed, reason: "cluster gate kv red (quorum = false, want true)"},
		},
		{
			name: "quorum: kv-1 waits while kv-2 is down, because 1 of quorum 2 would remain",
			u:    inPhase(nil),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-2"] = MemberHealth{Running: false, Version: "1.0.0"}
				return o
			}(),
			now:  t0,
			want: want{state: Upgrading("kv"), waiting: "kv-1: max_unavailable 1 reached (kv-2 down)", steps: map[string]MemberStep{"kv-1": StepPending}},
		},
		{
			name: "max_unavailable counts a member down for another reason: one of api-2, api-3 waits",
			u: inPhase(func(u *Upgrade) {
				u.State, u.Phase, u.Batch = Upgrading("api"), 1, 1
				for _, n := range []string{"kv-1", "kv-2", "kv-3", "api-1"} {
					u.Members[n].Step = StepDone
				}
			}),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				for _, n := range []string{"kv-1", "kv-2", "kv-3", "api-1"} {
					o.Members[n] = MemberHealth{Running: true, Version: "2.0.0", Healthy: true}
				}
				o.Members["api-4"] = MemberHealth{Running: false, Version: "1.0.0", Detail: "killed"}
				return o
			}(),
			now: t0,
			want: want{state: Upgrading("api"), actions: []Action{{Kind: ActPreStop, Member: "api-2"}},
				waiting: "api-3: max_unavailable 2 reached (api-2 in progress, api-4 down)",
				steps:   map[string]MemberStep{"api-2": StepDraining, "api-3": StepPending}},
		},
		{
			name: "canary batch of two moves both members at once",
			u: inPhase(func(u *Upgrade) {
				u.State, u.Phase, u.Batch = Upgrading("api"), 1, 1
			}),
			obs: healthyAt("1.0.0"), now: t0,
			want: want{state: Upgrading("api"), actions: []Action{{Kind: ActPreStop, Member: "api-2"}, {Kind: ActPreStop, Member: "api-3"}}},
		},
		{
			name: "resume: a member recorded stopping and seen down on the old version is started on the target",
			u:    inPhase(func(u *Upgrade) { u.Members["kv-1"].Step, u.Members["kv-1"].Began = StepStopping, t0 }),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: false, Version: "1.0.0"}
				return o
			}(),
			now:  t0.Add(sec(1)),
			want: want{state: Upgrading("kv"), actions: []Action{{Kind: ActStart, Member: "kv-1", Version: "2.0.0"}}, steps: map[string]MemberStep{"kv-1": StepStarting}},
		},
		{
			name: "resume: a member recorded draining that already runs the target healthy goes on to soak",
			u:    inPhase(func(u *Upgrade) { u.Members["kv-1"].Step, u.Members["kv-1"].Began = StepDraining, t0 }),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Healthy: true, HealthySince: t0.Add(sec(2))}
				return o
			}(),
			now:  t0.Add(sec(2.5)),
			want: want{state: Upgrading("kv"), steps: map[string]MemberStep{"kv-1": StepSoaking}, after: sec(0.5)},
		},
		{
			name: "a member that does not become healthy within healthy_deadline begins the rollback, with itself",
			u:    inPhase(func(u *Upgrade) { u.Members["kv-1"].Step, u.Members["kv-1"].Began = StepStarting, t0 }),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Detail: "status 503, want 200"}
				return o
			}(),
			now: t0.Add(sec(31)),
			want: want{state: StateRollingBack, reason: "member kv-1: not healthy on 2.0.0 within healthy_deadline 30s: status 503, want 200",
				steps: map[string]MemberStep{"kv-1": StepDraining, "kv-2": StepPending}, actions: []Action{{Kind: ActPreStop, Member: "kv-1"}}},
		},
		{
			name: "a member that turns unhealthy during its soak starts its soak again",
			u: inPhase(func(u *Upgrade) {
				m := u.Members["kv-1"]
				m.Step, m.Began, m.HealthySince = StepSoaking, t0, t0.Add(sec(1))
			}),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: false, Version: "2.0.0", Detail: "exited with status 2"}
				return o
			}(),
			now:  t0.Add(sec(1.5)),
			want: want{state: Upgrading("kv"), actions: []Action{{Kind: ActStart, Member: "kv-1", Version: "2.0.0"}}, steps: map[string]MemberStep{"kv-1": StepStarting}},
		},
		{
			name: "after its soak a member without post-start hooks is done and the next batch waits for nothing",
			u: inPhase(func(u *Upgrade) {
				m := u.Members["kv-1"]
				m.Step, m.Began, m.HealthySince = StepSoaking, t0, t0.Add(sec(1))
			}),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Healthy: true, HealthySince: t0.Add(sec(1))}
				return o
			}(),
			now:  t0.Add(sec(2)),
			want: want{state: Upgrading("kv"), actions: []Action{{Kind: ActPreStop, Member: "kv-2"}}, steps: map[string]MemberStep{"kv-1": StepDone, "kv-2": StepDraining}},
		},
		{
			name: "the next batch waits for a red cluster gate",
			u: inPhase(func(u *Upgrade) {
				u.Members["kv-1"].Step, u.Batch = StepDone, 1
			}),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Healthy: true}
				o.Gates["kv"] = Gate{Healthy: false, Detail: "no leader"}
				return o
			}(),
			now:  t0,
			want: want{state: Upgrading("kv"), waiting: "before kv batch 2: waiting for health: cluster gate kv red (no leader)", steps: map[string]MemberStep{"kv-2": StepPending}},
		},
		{
			name: "a member already on the target is done without being touched",
			u:    inPhase(nil),
			obs: func() Observation {
				o := healthyAt("1.0.0")
				o.Members["kv-1"] = MemberHealth{Running: true, Version: "2.0.0", Healthy: true}
				return o
			}(),
			now:  t0,
			want: want{state: Upgrading("kv"), actions: []Action{{Kind: ActPreStop, Member: "kv-2"}}, steps: map[string]MemberStep{"kv-1": StepDone}},
		},
		{
			name: "a failed action is retried only after its backoff",
			u: inPhase(func(u *Upgrade) {
				m := u.Members["kv-1"]
				m.Step, m.Began, m.Tries, m.LastTry = StepDraining, t0, 1, t0
			}),
			obs: healthyAt("1.0.0"), now: t0.Add(sec(0.2)),
			want: want{state: Upgrading("kv"), steps: map[string]MemberStep{"kv-1": StepDraining}, after: sec(0.3)},
		},
		{
			name: "the last phase's gate passing records upgraded-api",
			u: inPhase(func(u *Upgrade) {
				u.State, u.Phase, u.Batch = Upgrading("api"), 1, 3
				for _, m := range u.Members {
					m.Step = StepDone
				}
			}),
			obs: healthyAt("2.0.0"), now: t0,
			want: want{state: Upgraded("api")},
		},
		{
			name: "after the last component the upgrade completes",
			u: inPhase(func(u *Upgrade) {
				u.State, u.Phase, u.Batch = Upgraded("api"), 1, 3
				for _, m := range u.Members {
					m.Step = StepDone
				}
			}),
			obs: healthyAt("2.0.0"), now: t0,
			want: want{state: StateCompleted},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.u.Clone()
			d := Step(testCluster(), tc.u, tc.obs, tc.now)
			got := d.Upgrade
			if got.State != tc.want.state {
				t.Errorf("state = %s, want %s (waiting %q, reason %q)", got.State, tc.want.state, got.Waiting, got.Reason)
			}
			if !equalActions(d.Actions, tc.want.actions) {
				t.Errorf("actions = %+v, want %+v", d.Actions, tc.want.actions)
			}
			for n, st := range tc.want.steps {
				if got.Members[n].Step != st {
					t.Errorf("%s step = %s, want %s", n, got.Members[n].Step, st)
				}
			}
			if !strings.Contains(got.Waiting, tc.want.waiting) {
				t.Errorf("waiting = %q, want it to contain %q", got.Waiting, tc.want.waiting)
			}
			if !strings.Contains(got.Reason, tc.want.reason) {
				t.Errorf("reason = %q, want it to contain %q", got.Reason, tc.want.reason)
			}
			if tc.want.after != 0 && d.After != tc.want.after {
				t.Errorf("after = %s, want %s", d.After, tc.want.after)
			}
			// Step is pure: the input record is untouched.
			for n, m := range tc.u.Members {
				if *m != *before.Members[n] {
					t.Errorf("Step mutated its input: %s %+v, was %+v", n, *m, *before.Members[n])
				}
			}
		})
	}
}

func equalActions(a, b []Action) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFinished(t *testing.T) {
	cases := []struct {
		name   string
		step   MemberStep
		act    ActionKind
		err    error
		want   MemberStep
		detail string
	}{
		{"pre-stop hooks done: stop next", StepDraining, ActPreStop, nil, StepStopping, ""},
		{"stopped: start next", StepStopping, ActStop, nil, StepStarting, ""},
		{"post-start hooks done: member done", StepRejoining, ActPostStart, nil, StepDone, ""},
		{"start leaves the member starting until it is seen healthy", StepStarting, ActStart, nil, StepStarting, ""},
		{"a failed hook keeps the step and says why", StepDraining, ActPreStop, errString("connection refused"), StepDraining, "pre-stop failed (try 0): connection refused"},
		{"a stale outcome does not move a member that moved on", StepSoaking, ActStop, nil, StepSoaking, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpgrade()
			u.Members["kv-1"].Step = tc.step
			got := Finished(u, Action{Kind: tc.act, Member: "kv-1"}, tc.err, t0)
			if got.Members["kv-1"].Step != tc.want {
				t.Errorf("step = %s, want %s", got.Members["kv-1"].Step, tc.want)
			}
			if got.Members["kv-1"].Detail != tc.detail {
				t.Errorf("detail = %q, want %q", got.Members["kv-1"].Detail, tc.detail)
			}
			if u.Members["kv-1"].Step != tc.step {
				t.Errorf("Finished mutated its input")
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }
