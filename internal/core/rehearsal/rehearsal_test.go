package rehearsal

import (
	"slices"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

var sample = []Component{{Name: "kv", Members: []string{"kv-1", "kv-2", "kv-3"}}, {Name: "api", Members: []string{"api-1", "api-2", "api-3", "api-4"}}}

// ironic is Ironic's flow: the unpin (a rollout) is the point of no
// return, so no abort may come after it.
var ironic = []Stage{
	{Kind: config.StageExpand},
	{Kind: config.StagePhase, Component: "conductor"},
	{Kind: config.StagePhase, Component: "api"},
	{Kind: config.StageRollout, Component: "conductor", PointOfNoReturn: true},
	{Kind: config.StageMigrate},
}

func TestChooseCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flow      []Stage
		stages    []string // the checkpoints' Stage
		after     []int
		abortable []string
	}{
		{"default flow", DefaultFlow([]string{"kv", "api"}), []string{"after phase kv", "after phase api"}, []int{1, 2},
			[]string{StageBefore, "after phase kv", "after phase api"}},
		{"api before kv", []Stage{{Kind: config.StagePhase, Component: "api"}, {Kind: config.StagePhase, Component: "kv"}},
			[]string{"after phase api", "after phase kv"}, []int{0, 1}, []string{StageBefore, "after phase api", "after phase kv"}},
		{"ironic: nothing after the unpin", ironic, []string{"after phase conductor", "after phase api", "after rollout conductor"}, []int{1, 2, 3},
			[]string{StageBefore, "after phase conductor", "after phase api"}},
		{"hosts stage", []Stage{{Kind: config.StageHosts, Name: "hosts", Components: []string{"kv", "api"}}, {Kind: config.StageFinalize}},
			[]string{"after hosts hosts"}, []int{0}, []string{StageBefore, "after hosts hosts"}},
		{"a component in parts: each part checked after it", []Stage{{Kind: config.StagePhase, Component: "kv", Name: "first"}, {Kind: "action", Name: "net"},
			{Kind: config.StagePhase, Component: "kv", Name: "rest"}, {Kind: config.StagePhase, Component: "api"}},
			[]string{"after phase kv (first)", "after phase kv (rest)", "after phase api"}, []int{0, 2, 3},
			[]string{StageBefore, "after phase kv (first)", "after phase kv (rest)", "after phase api"}},
		{"finalize marked early", []Stage{{Kind: config.StagePhase, Component: "kv", PointOfNoReturn: true}, {Kind: config.StagePhase, Component: "api"}},
			[]string{"after phase kv", "after phase api"}, []int{0, 1}, []string{StageBefore}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]int{}
			for seed := uint64(1); seed <= 400; seed++ {
				s, err := Choose(Input{Seed: seed, Flow: tc.flow, Components: sample})
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				var stages []string
				var after []int
				for i, cp := range s.Checkpoints {
					stages, after = append(stages, cp.Stage), append(after, cp.After)
					if want := "rehearse-" + string(rune('1'+i)); cp.Name != want {
						t.Errorf("seed %d: checkpoint %d named %q, want %q", seed, i, cp.Name, want)
					}
				}
				if !slices.Equal(stages, tc.stages) || !slices.Equal(after, tc.after) {
					t.Fatalf("seed %d: checkpoints %v after %v, want %v after %v", seed, stages, after, tc.stages, tc.after)
				}
				if s.AbortAt != "" && !slices.Contains(tc.abortable, s.AbortAt) {
					t.Fatalf("seed %d: abort at %q, past the point of no return (allowed: %v)", seed, s.AbortAt, tc.abortable)
				}
				seen[s.AbortAt]++
			}
			// Every allowed moment, and no abort, each drawn in 400 seeds.
			for _, a := range append([]string{""}, tc.abortable...) {
				if seen[a] == 0 {
					t.Errorf("abort at %q never chosen in 400 seeds: %v", a, seen)
				}
			}
		})
	}
}

func TestChooseOrderIsAPermutationAndSeeded(t *testing.T) {
	firsts := map[string]bool{}
	for seed := uint64(1); seed <= 200; seed++ {
		s, err := Choose(Input{Seed: seed, Flow: DefaultFlow([]string{"kv", "api"}), Components: sample})
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Choose(Input{Seed: seed, Flow: DefaultFlow([]string{"kv", "api"}), Components: sample})
		if s.String() != again.String() {
			t.Fatalf("seed %d: two schedules:\n%s\n%s", seed, s, again)
		}
		for i, c := range s.Order {
			got := slices.Sorted(slices.Values(c.Members))
			if c.Name != sample[i].Name || !slices.Equal(got, sample[i].Members) {
				t.Fatalf("seed %d: order of %s is %v, not a permutation of %v", seed, c.Name, c.Members, sample[i].Members)
			}
		}
		firsts[s.Order[1].Members[0]] = true
	}
	if len(firsts) != 4 {
		t.Errorf("in 200 seeds only %v went first among api's 4 members", firsts)
	}
	// Seeds typed by hand are nearby: 1 to 8 still put at least three
	// different api members first.
	few := map[string]bool{}
	for seed := uint64(1); seed <= 8; seed++ {
		s, _ := Choose(Input{Seed: seed, Flow: DefaultFlow([]string{"kv", "api"}), Components: sample})
		few[s.Order[1].Members[0]] = true
	}
	if len(few) < 3 {
		t.Errorf("seeds 1 to 8 put only %v first", few)
	}
}

func TestStagesAndAbort(t *testing.T) {
	cps := []Checkpoint{{Stage: "after phase kv"}, {Stage: "after phase api"}}
	for _, tc := range []struct {
		abortAt string
		want    []string
	}{
		{"", []string{"before", "after phase kv", "after phase api", "after finalize"}},
		{"before", []string{"before", "after rollback", "after phase kv", "after phase api", "after finalize"}},
		{"after phase kv", []string{"before", "after phase kv", "after rollback", "after phase kv", "after phase api", "after finalize"}},
		{"after phase api", []string{"before", "after phase kv", "after phase api", "after rollback", "after phase kv", "after phase api", "after finalize"}},
	} {
		s := Schedule{Checkpoints: cps, AbortAt: tc.abortAt}
		if got := s.Stages(); !slices.Equal(got, tc.want) {
			t.Errorf("abort at %q: stages %v, want %v", tc.abortAt, got, tc.want)
		}
		for _, st := range []string{"before", "after phase kv", "after phase api"} {
			want := st == tc.abortAt
			if got := s.AbortAfter(st, false); got != want {
				t.Errorf("abort at %q: AbortAfter(%q) = %v", tc.abortAt, st, got)
			}
			if s.AbortAfter(st, true) {
				t.Errorf("abort at %q: AbortAfter(%q) once rolled back", tc.abortAt, st)
			}
		}
	}
}

func TestChooseRefuses(t *testing.T) {
	for _, tc := range []struct {
		flow []Stage
		want string
	}{
		{nil, "no stage"},
		{[]Stage{{Kind: config.StageExpand}, {Kind: config.StageFinalize}}, "moves no member"},
	} {
		if _, err := Choose(Input{Seed: 1, Flow: tc.flow, Components: sample}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("flow %v: err %v, want %q", tc.flow, err, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	s := Schedule{Seed: 42, Order: []Component{{Name: "kv", Members: []string{"kv-2", "kv-1"}}, {Name: "api", Members: []string{"api-1"}}},
		Checkpoints: []Checkpoint{{Stage: "after phase kv"}, {Stage: "after phase api"}}, AbortAt: "after phase kv"}
	want := "seed 42; plan: order kv: kv-2, kv-1; api: api-1; checks: before → after phase kv → abort → after rollback → upgrade again → after phase kv → after phase api → after finalize"
	if got := s.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestFromConfig(t *testing.T) {
	got := FromConfig([]config.FlowStage{{Stage: config.StageRollout, Component: "api", PointOfNoReturn: true}, {Stage: config.StageHosts, Name: "h", Components: []string{"kv"}}})
	want := []Stage{{Kind: config.StageRollout, Component: "api", PointOfNoReturn: true}, {Kind: config.StageHosts, Name: "h", Components: []string{"kv"}}}
	if len(got) != 2 || got[0].Kind != want[0].Kind || !got[0].PointOfNoReturn || got[1].Name != "h" || !slices.Equal(got[1].Components, want[1].Components) {
		t.Errorf("FromConfig = %+v, want %+v", got, want)
	}
}
