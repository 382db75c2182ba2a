package upgrade

import (
	"time"

	"github.com/ferry-upgrade/ferry/internal/plan"
)

// State is the upgrade's state, named after the seeds' states.
type State string

const (
	StateStarted     State = "upgrade-started"
	StatePreflight   State = "preflight"
	StateCompleted   State = "completed"
	StateFailed      State = "failed"
	StatePaused      State = "paused"
	StateRollingBack State = "rolling-back"
	StateRolledBack  State = "rolled-back"
)

// Upgrading is the state while component c's phase runs.
func Upgrading(c string) State { return State("upgrading-" + c) }

// Upgraded is the state once component c's phase passed its gate.
func Upgraded(c string) State { return State("upgraded-" + c) }

// Terminal reports whether no further step will be taken.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateRolledBack
}

// MemberStep is where one member is in its move to its target version.
type MemberStep string

const (
	StepPending   MemberStep = "pending"
	StepDraining  MemberStep = "draining"  // pre-stop hooks: out of rotation, leadership away
	StepStopping  MemberStep = "stopping"  // graceful stop
	StepStarting  MemberStep = "starting"  // started on the target, waiting to be healthy
	StepSoaking   MemberStep = "soaking"   // healthy, staying healthy for min_healthy_time
	StepRejoining MemberStep = "rejoining" // post-start hooks: back into rotation
	StepDone      MemberStep = "done"
	StepFailed    MemberStep = "failed"
)

// InFlight reports whether a member in this step is (or may be) out of
// service because of ferry.
func (s MemberStep) InFlight() bool {
	switch s {
	case StepDraining, StepStopping, StepStarting, StepSoaking, StepRejoining:
		return true
	}
	return false
}

// Upgrade is the record of one upgrade, persisted before every action.
type Upgrade struct {
	ID    string    `json:"id"`
	From  string    `json:"from"`
	To    string    `json:"to"`
	State State     `json:"state"`
	Plan  plan.Plan `json:"plan"`
	// Phase and Batch point at the batch in progress (or next).
	Phase int `json:"phase"`
	Batch int `json:"batch"`
	// GateSince is when the engine began waiting on the cluster gate
	// that must pass before the batch at (Phase, Batch) may start; zero
	// when not waiting on a gate.
	GateSince time.Time `json:"gate_since,omitzero"`
	// Members holds each planned member's progress, by name.
	Members map[string]*Member `json:"members"`
	// Waiting says, in words, why the upgrade is not moving right now.
	Waiting string `json:"waiting,omitempty"`
	// Reason says why the upgrade failed.
	Reason  string    `json:"reason,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Member is one member's progress.
type Member struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	// From is the version the member ran when it was planned; Target
	// the version it is moving to.
	From   string     `json:"from"`
	Target string     `json:"target"`
	Step   MemberStep `json:"step"`
	// Since is when the current step began.
	Since time.Time `json:"since,omitzero"`
	// Began is when the member's move began (its drain): the
	// healthy_deadline counts from here.
	Began time.Time `json:"began,omitzero"`
	// HealthySince is when the member became healthy on its target.
	HealthySince time.Time `json:"healthy_since,omitzero"`
	// LastTry is when the current step's action was last tried, and
	// Tries how often; a failed action is retried after a backoff
	// until the deadline.
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// Observation is what the engine saw of the cluster, just now.
type Observation struct {
	Members map[string]MemberHealth
	// Gates holds each component's cluster gate. A component with no
	// cluster check is absent and counts as passing.
	Gates map[string]Gate
}

// MemberHealth is one member as observed.
type MemberHealth struct {
	Running bool
	Version string
	// Healthy is the member check's verdict with its thresholds
	// applied; HealthySince is when it last became healthy.
	Healthy      bool
	HealthySince time.Time
	Detail       string
}

// Gate is a component's cluster check as observed.
type Gate struct {
	Healthy bool
	Detail  string
}

// ActionKind names what an action does.
type ActionKind string

const (
	ActPreStop   ActionKind = "pre-stop"   // run the member's pre_stop hooks
	ActStop      ActionKind = "stop"       // stop the member gracefully
	ActStart     ActionKind = "start"      // start the member on Version
	ActPostStart ActionKind = "post-start" // run the member's post_start hooks
)

// Action is one thing for the engine to do to one member.
type Action struct {
	Kind    ActionKind `json:"kind"`
	Member  string     `json:"member"`
	Version string     `json:"version,omitempty"`
}
