package upgrade

import (
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// TestFlowStates: a flow's states are written as one word and read
// back as the same value, and each finds its stage in the flow (the
// stage done, or awaiting finalize, included).
func TestFlowStates(t *testing.T) {
	flow := []plan.Stage{{Kind: "expand"}, {Kind: "phase", Component: "kv"}, {Kind: "action", Name: "net"},
		{Kind: "rollout", Component: "kv"}, {Kind: "migrate"}, {Kind: "finalize"}}
	for _, tc := range []struct {
		st   State
		word string
		at   int
	}{
		{StatePreflight, "preflight", -1},
		{StateExpanding, "expanding", 0},
		{Upgrading("kv"), "upgrading-kv", 1},
		{Upgraded("kv"), "upgraded-kv", 1},
		{Acting("net"), "action-net", 2},
		{RollingOut("kv"), "rolling-out-kv", 3},
		{RolledOut("kv"), "rolled-out-kv", 3},
		{StateMigrating, "migrating", 4},
		{StateAwaitingFinalize, "awaiting-finalize", 5},
		{StateFinalizing, "finalizing", 5},
		{RollingOut("back"), "rolling-out-back", -1},
	} {
		if got := tc.st.String(); got != tc.word {
			t.Errorf("%#v written %q, want %q", tc.st, got, tc.word)
		}
		back, err := ParseState(tc.word)
		if err != nil || back != tc.st {
			t.Errorf("ParseState(%q) = %#v, %v; want %#v", tc.word, back, err, tc.st)
		}
		if got := flowAt(flow, tc.st); got != tc.at {
			t.Errorf("flowAt(%s) = %d, want %d", tc.st, got, tc.at)
		}
	}
	if st, err := ParseState("rolling-back"); err != nil || st != StateRollingBack {
		t.Errorf("rolling-back read as %#v, %v", st, err)
	}
}

// TestRegisteredStageStatesAreTheirOwn: a registered stage kind's state
// word is no built-in state's and no prefix of one ("upgrading-x"
// would read back as another kind), and its named states read back as
// themselves.
func TestRegisteredStageStatesAreTheirOwn(t *testing.T) {
	n := 0
	for _, name := range config.StageKinds() {
		k, ok := config.LookupStageKind(name)
		if !ok {
			continue
		}
		n++
		for _, b := range kinds {
			if string(b) == k.State || strings.HasPrefix(string(b), k.State+"-") || strings.HasPrefix(k.State, string(b)+"-") {
				t.Errorf("stage kind %s's state %q cannot be told from the state %q", k.Name, k.State, b)
			}
		}
		st := StageState(plan.Stage{Kind: k.Name, Name: "x"})
		if back, err := ParseState(st.String()); err != nil || back != st || back.Kind != Kind(k.State) {
			t.Errorf("stage kind %s: state %q read back as %#v, %v", k.Name, st, back, err)
		}
	}
	if n == 0 {
		t.Fatal("no stage kind registered (the action is)")
	}
}

// TestShownStates: a stage's state: is what the operator sees while it
// runs (several stages may show one: StarlingX's upgrading-controllers
// for controller-1's and controller-0's), the machine's own word beside
// it; a stage without one, and every state outside the flow, shows the
// machine's.
func TestShownStates(t *testing.T) {
	flow := []plan.Stage{{Kind: "hosts", Name: "controller-1", State: "upgrading-controllers"}, {Kind: "hosts", Name: "controller-0", State: "upgrading-controllers"},
		{Kind: "hosts", Name: "storage"}, {Kind: "action", Name: "activate", State: "activating"}}
	for _, tc := range []struct {
		st         State
		shown, wit string
	}{
		{StatePreflight, "preflight", "preflight"},
		{Upgrading("controller-1"), "upgrading-controllers", "upgrading-controllers (upgrading-controller-1)"},
		{Upgraded("controller-1"), "upgrading-controllers", "upgrading-controllers (upgraded-controller-1)"},
		{Upgrading("controller-0"), "upgrading-controllers", "upgrading-controllers (upgrading-controller-0)"},
		{Upgrading("storage"), "upgrading-storage", "upgrading-storage"},
		{Acting("activate"), "activating", "activating (action-activate)"},
		{StateRollingBack, "rolling-back", "rolling-back"},
		{StateCompleted, "completed", "completed"},
	} {
		u := &Upgrade{State: tc.st, Plan: plan.Plan{Flow: flow}}
		if got, with := Shown(u), ShownWith(u); got != tc.shown || with != tc.wit {
			t.Errorf("%s shown %q, %q; want %q, %q", tc.st, got, with, tc.shown, tc.wit)
		}
	}
}

// TestShownReleaseStates: a release's states name the upgrade's own
// states (StarlingX's upgrade-complete), and paused-on-failure names a
// pause a failure made apart from the operator's (StarlingX's
// upgrade-failed); a stage's own state: wins, and every key but
// paused-on-failure is a state of the machine, without a component.
func TestShownReleaseStates(t *testing.T) {
	flow := []plan.Stage{{Kind: "phase", Component: "control-plane", Name: "first-master"}, {Kind: "action", Name: "networking", State: "upgrading-networking"}}
	states := map[string]string{"completed": "upgrade-complete", config.StatePausedOnFailure: "upgrade-failed", "paused": "held"}
	for _, tc := range []struct {
		st            State
		reason, shown string
	}{
		{StateStarted, "", "upgrade-started"},
		{Upgrading("first-master"), "", "upgrading-first-master"},
		{Upgraded("first-master"), "", "upgraded-first-master"},
		{Acting("networking"), "", "upgrading-networking"},
		{StateCompleted, "", "upgrade-complete"},
		{StatePaused, "member k-w1: start did not succeed", "upgrade-failed"},
		{StatePaused, "", "held"},
		{StateRollingBack, "aborted by the operator", "rolling-back"},
	} {
		u := &Upgrade{State: tc.st, Reason: tc.reason, Plan: plan.Plan{Flow: flow, States: states}}
		if got := Shown(u); got != tc.shown {
			t.Errorf("%s (reason %q) shown %q, want %q", tc.st, tc.reason, got, tc.shown)
		}
	}
	for _, k := range config.ShownStateKeys {
		if k == config.StatePausedOnFailure {
			continue
		}
		if st, err := ParseState(k); err != nil || st.Component != "" || st.String() != k {
			t.Errorf("key %q of a release's states is no state of the machine without a component: %v, %v", k, st, err)
		}
	}
}
