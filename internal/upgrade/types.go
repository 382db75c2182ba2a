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

	// The release's migration stages (Glance, Ironic): expand before any
	// member runs the release; migrate once all do; finalize moves the
	// pin to the release, the point of no return; contract after it.
	StateExpanding        State = "expanding"
	StateMigrating        State = "migrating"
	StateAwaitingFinalize State = "awaiting-finalize" // policy finalize: manual
	StateFinalizing       State = "finalizing"
	StateContracting      State = "contracting"
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
	// Reason says why the upgrade failed, paused on a failure, or
	// began to roll back.
	Reason string `json:"reason,omitempty"`
	// Rollback is the plan that returns the members touched so far to
	// their previous version, in reverse order; set once a failure or
	// an abort began it. Phase and Batch then point into it.
	Rollback *plan.Plan `json:"rollback,omitempty"`
	// Intent is the operator's last request (pause, resume, abort). The
	// operator's commands own it: the store keeps the stored one when the
	// engine saves. IntentSeen is the Seq of the last one acted on.
	Intent     Intent `json:"intent,omitzero"`
	IntentSeen int    `json:"intent_seen,omitempty"`
	// Pausing is set by a pause request: no member is taken down any
	// more, and the upgrade pauses once none is in flight.
	Pausing bool `json:"pausing,omitempty"`
	// ResumeTo is the state a paused upgrade returns to on resume.
	ResumeTo State `json:"resume_to,omitempty"`
	// Final is the end of a chain of upgrades (plan.Path) when this
	// one is a step of it: once this completes, the next is planned.
	Final string `json:"final,omitempty"`
	// Pin is the cluster's compatibility version: From until finalize,
	// To after. Finalized is when finalize was first attempted: from
	// then on there is no going back (no abort, no rollback).
	Pin       string    `json:"pin,omitempty"`
	Finalized time.Time `json:"finalized,omitzero"`
	// Stage is the progress of the current migration stage.
	Stage Stage `json:"stage,omitzero"`
	// Description is the SHA-256 of the cluster description the upgrade
	// was started with: while it runs, the description is locked.
	Description string `json:"description,omitempty"`

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
	// AdmitSince is when the member was first refused admission (it
	// may not be taken down yet); the wait fails at the gate deadline.
	AdmitSince time.Time `json:"admit_since,omitzero"`
	// HealthySince is when the member became healthy on its target.
	HealthySince time.Time `json:"healthy_since,omitzero"`
	// LastTry is when the current step's action was last tried, and
	// Tries how often; a failed action is retried after a backoff
	// until the deadline.
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// Stage is the progress of one migration stage: its calls are made
// until they pass (a migration reports its progress in Detail).
type Stage struct {
	Since   time.Time `json:"since,omitzero"`
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Done    bool      `json:"done,omitempty"`
}

// IntentKind names an operator's request to a running upgrade.
type IntentKind string

const (
	IntentPause  IntentKind = "pause"
	IntentResume IntentKind = "resume"
	IntentAbort  IntentKind = "abort"
	// IntentFinalize lets an upgrade that awaits it (policy finalize:
	// manual) pass its point of no return.
	IntentFinalize IntentKind = "finalize"
)

// Intent is one request of the operator; Seq grows with each request,
// so that the machine acts on each exactly once.
type Intent struct {
	Kind IntentKind `json:"kind"`
	Seq  int        `json:"seq"`
	Time time.Time  `json:"time"`
}

// RollingBack reports whether the upgrade is returning members to
// their previous version (possibly paused while doing so).
func (u *Upgrade) RollingBack() bool { return u.Rollback != nil }

// Active is the plan being carried out: the rollback once it began,
// the upgrade's plan before.
func (u *Upgrade) Active() plan.Plan {
	if u.Rollback != nil {
		return *u.Rollback
	}
	return u.Plan
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
	ActStage     ActionKind = "stage"      // run the target release's calls of Stage
)

// Action is one thing for the engine to do to one member.
type Action struct {
	Kind    ActionKind `json:"kind"`
	Member  string     `json:"member,omitempty"`
	Version string     `json:"version,omitempty"`
	// Stage is the migration stage of an ActStage action: expand,
	// migrate, finalize or contract.
	Stage string `json:"stage,omitempty"`
}
