package api

import (
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// APIVersion is the version of the API's bodies this build speaks.
const APIVersion = "ferry.dev/v1"

// Upgrade is one upgrade as the API shows it: its plan, batches,
// members and hosts, what holds it, and what the operator switched
// off. Its fields keep the names the API gave them when it wrote the
// record itself, so that clients written then read it unchanged.
type Upgrade struct {
	APIVersion string `json:"api_version"`
	ID         string `json:"id"`
	From       string `json:"from"`
	To         string `json:"to"`
	// State is the state machine's state (upgrading-kv, paused, …);
	// ShownState, when the release's flow names its stage otherwise
	// (StarlingX's upgrading-controllers), the state as it names it.
	State      string `json:"state"`
	ShownState string `json:"shown_state,omitempty"`
	Plan       Plan   `json:"plan"`
	// Rollback is the plan that returns the members touched so far,
	// once a failure or an abort began it; Phase then points into it.
	Rollback *Plan `json:"rollback,omitempty"`
	// Phase is the index of the phase in progress (or next) of the
	// active plan, from 0.
	Phase int `json:"phase"`
	// Progress counts what is done, for status lines.
	Progress Progress `json:"progress"`
	// Batches are every batch formed so far, forward and rollback, in
	// order; the last one may be in progress (no Ended).
	Batches []Batch           `json:"batches"`
	Members map[string]Member `json:"members"`
	Hosts   map[string]Host   `json:"hosts,omitempty"`
	// Waiting says why the upgrade is not moving right now; Reason why
	// it failed, paused on a failure, or rolls back.
	Waiting  string    `json:"waiting,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Refusals []Refusal `json:"refusals,omitempty"`
	// Effects are the changes made outside the members whose undo is
	// owed, failed or was given up.
	Effects   []Effect   `json:"effects,omitempty"`
	Overrides []Override `json:"overrides,omitempty"`
	Outage    *Outage    `json:"outage,omitempty"`
	Held      *Held      `json:"held,omitempty"`
	// Ending is the terminal state being reached while the upgrade's
	// undos and post_upgrade hooks run.
	Ending string  `json:"ending,omitempty"`
	Intent *Intent `json:"intent,omitempty"`
	// Pausing: a pause was asked; no member is taken down any more.
	Pausing bool `json:"pausing,omitempty"`
	// Final is the end of a chain of upgrades when this is a step of it.
	Final string `json:"final,omitempty"`
	// Pin is the cluster's compatibility version; Finalized when
	// finalize was first attempted (no going back since); NoReturn the
	// flow's stage that passed the point of no return, if not finalize.
	Pin       string    `json:"pin,omitempty"`
	Finalized time.Time `json:"finalized,omitzero"`
	NoReturn  string    `json:"no_return,omitempty"`
	// NoReturnHost is the host whose lock passed it, when that stage is
	// a hosts stage.
	NoReturnHost string `json:"no_return_host,omitempty"`
	// Stage is the progress of the migration stage's calls.
	Stage *Stage `json:"stage,omitempty"`
	// Ferry is the upgrade's first step when its release asks for a
	// newer ferry than the agents run (ferry first).
	Ferry *FerryFirst `json:"ferry,omitempty"`
	// Downtime is the downtime the operator accepted at the start.
	Downtime string `json:"downtime,omitempty"`
	// Description is the SHA-256 of the cluster description it began
	// with.
	Description string `json:"description,omitempty"`
	// Bound is the lower bound of the upgrade under its policy as it
	// accumulates (nanoseconds per part); Pace, once there is one, its
	// wall time against it.
	Bound   Bound     `json:"bound"`
	Pace    *Pace     `json:"pace,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Terminal reports whether the upgrade has ended: completed, failed or
// rolled back.
func (u *Upgrade) Terminal() bool {
	st, err := upgrade.ParseState(u.State)
	return err == nil && st.Terminal()
}

// Active is the plan being carried out: the rollback once it began.
func (u *Upgrade) Active() Plan {
	if u.Rollback != nil {
		return *u.Rollback
	}
	return u.Plan
}

// Current is the batch in progress, if any.
func (u *Upgrade) Current() *Batch {
	if n := len(u.Batches); n > 0 && u.Batches[n-1].Ended.IsZero() {
		return &u.Batches[n-1]
	}
	return nil
}

// Progress is how far an upgrade went, counted from its record.
type Progress struct {
	// MembersDone of Members planned have finished their move.
	MembersDone int `json:"members_done"`
	Members     int `json:"members"`
	// Phase is the phase in progress of the active plan, while one is
	// and the upgrade has not ended.
	Phase *PhaseProgress `json:"phase,omitempty"`
}

// PhaseProgress is the phase in progress: its number (from 1) of the
// active plan's phases, its component, and its batch in progress (or
// next) of the batches it has, as far as is known.
type PhaseProgress struct {
	Number    int    `json:"number"`
	Of        int    `json:"of"`
	Component string `json:"component"`
	// Part names the phase when it moves a part of its component (a
	// flow's named phase: StarlingX's first-master).
	Part     string `json:"part,omitempty"`
	Rollback bool   `json:"rollback,omitempty"`
	Batch    int    `json:"batch"`
	Batches  int    `json:"batches"`
}

// Plan is an upgrade's order: its phases, one per component (or hosts
// stage), with the batches expected when every batch goes well.
type Plan struct {
	From   []string    `json:"from"`
	To     string      `json:"to"`
	Path   []string    `json:"path,omitempty"`
	Flow   []FlowStage `json:"flow,omitempty"`
	Phases []Phase     `json:"phases"`
}

// FlowStage is one stage of a release's own flow.
type FlowStage struct {
	Kind            string `json:"kind"`
	Component       string `json:"component,omitempty"`
	Name            string `json:"name,omitempty"`
	State           string `json:"state,omitempty"`
	PointOfNoReturn bool   `json:"point_of_no_return,omitempty"`
}

// Phase is one component's (or one hosts stage's) phase of a plan.
type Phase struct {
	Component      string      `json:"component"`
	Strategy       string      `json:"strategy"`
	MaxUnavailable int         `json:"max_unavailable"`
	Quorum         int         `json:"quorum,omitempty"`
	Batches        []PlanBatch `json:"batches"`
	Skipped        []Skipped   `json:"skipped,omitempty"`
	Note           string      `json:"note,omitempty"`
	Rollout        bool        `json:"rollout,omitempty"`
	Hosts          *PhaseHosts `json:"hosts,omitempty"`
	// Part names the phase when it moves a part of its component.
	Part string `json:"part,omitempty"`
}

// PlanBatch is a batch as planned: the members that move together (and
// in a hosts phase, the hosts locked together).
type PlanBatch struct {
	Members []string `json:"members"`
	Hosts   []string `json:"hosts,omitempty"`
}

// Skipped is a member a plan leaves alone, and why.
type Skipped struct {
	Member string `json:"member"`
	Reason string `json:"reason"`
}

// PhaseHosts is a hosts stage's phase: the components it moves host by
// host, each as its strategy makes its part, the hosts' members and
// failure domains, and the bounds on hosts locked at once.
type PhaseHosts struct {
	Components              []string            `json:"components"`
	Parts                   []Phase             `json:"parts"`
	MaxUnavailable          int                 `json:"max_unavailable"`
	MaxUnavailablePerDomain int                 `json:"max_unavailable_per_domain,omitempty"`
	On                      map[string][]string `json:"on"`
	Domains                 map[string]string   `json:"domains,omitempty"`
}

// Batch is one batch as it was formed and run.
type Batch struct {
	// Phase is its phase's index in its plan (the rollback's when
	// Rollback); Number counts its phase's batches from 1.
	Phase     int      `json:"phase"`
	Component string   `json:"component"`
	Rollback  bool     `json:"rollback,omitempty"`
	Rollout   bool     `json:"rollout,omitempty"`
	Number    int      `json:"number"`
	Members   []string `json:"members"`
	Hosts     []string `json:"hosts,omitempty"`
	// Size is what the strategy asked for and Why why; fewer may have
	// been admitted.
	Size    int       `json:"size"`
	Why     string    `json:"why,omitempty"`
	Began   time.Time `json:"began"`
	Ended   time.Time `json:"ended,omitzero"`
	Waited  bool      `json:"waited,omitempty"`
	Outcome *Outcome  `json:"outcome,omitempty"`
	// Bound is its slowest member's time (ns): its part of the lower
	// bound.
	Bound int64 `json:"bound,omitempty"`
}

// Outcome is how a finished batch went: what adaptive sizing reads.
type Outcome struct {
	Size     int    `json:"size"`
	Clean    bool   `json:"clean,omitempty"`
	Strained bool   `json:"strained,omitempty"`
	Why      string `json:"why,omitempty"`
}

// Member is one planned member's move.
type Member struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	// From is the version it ran when planned, Target the one it moves
	// to; Step where it is in its move (pending, draining, stopping,
	// starting, soaking, rejoining, done, failed) since Since.
	From         string    `json:"from"`
	Target       string    `json:"target"`
	Step         string    `json:"step"`
	Since        time.Time `json:"since,omitzero"`
	Began        time.Time `json:"began,omitzero"`
	HealthySince time.Time `json:"healthy_since,omitzero"`
	// Exits counts its exits on the target since its first start in
	// this move; CrashLoop is set when its move failed on a crash loop.
	Exits     int    `json:"exits,omitempty"`
	CrashLoop bool   `json:"crash_loop,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Host is one host's progress in a hosts stage.
type Host struct {
	Name   string    `json:"name"`
	Step   string    `json:"step"`
	Since  time.Time `json:"since,omitzero"`
	Tries  int       `json:"tries,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Refusal is an admission predicate refusing a member (or a host) now.
type Refusal struct {
	Predicate string `json:"predicate"`
	Member    string `json:"member"`
	Reason    string `json:"reason"`
	// Summary says it in words: "quorum refused kv-3 (…)".
	Summary string `json:"summary"`
}

// Effect is a change ferry made outside a member's own process whose
// undo is owed (open), failed past the policy's undo deadline, or was
// given up by the operator (abandoned).
type Effect struct {
	ID       string      `json:"id"`
	Key      string      `json:"key"`
	Scope    EffectScope `json:"scope"`
	What     string      `json:"what"`
	UndoWhat string      `json:"undo_what,omitempty"`
	State    string      `json:"state"`
	Opened   time.Time   `json:"opened"`
	Undoing  time.Time   `json:"undoing,omitzero"`
	Tries    int         `json:"tries,omitempty"`
	LastTry  time.Time   `json:"last_try,omitzero"`
	Error    string      `json:"error,omitempty"`
	// Abandoned says who gave up on it.
	Abandoned string `json:"abandoned,omitempty"`
	// Summary says it in one line: what it did, its undo, the undo's
	// last failure and who abandoned it.
	Summary string `json:"summary"`
}

// EffectScope is what an effect's undo is owed with: a member's move,
// a host's lock, a phase or the upgrade.
type EffectScope struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
}

// String is the scope in words: "member api-2", "upgrade".
func (s EffectScope) String() string {
	if s.Name == "" {
		return s.Kind
	}
	return s.Kind + " " + s.Name
}

// Override is one predicate (or one effect's undo) the operator
// switched off, or an entry withdrawing one (Revoke), with who and
// when. By is who the server or the controller authenticated (a
// token's name, a Kubernetes user), never what a client said.
type Override struct {
	Predicate     string    `json:"predicate,omitempty"`
	Member        string    `json:"member,omitempty"`
	Effect        string    `json:"effect,omitempty"`
	Component     string    `json:"component,omitempty"`
	Phase         int       `json:"phase,omitempty"`
	PhaseRollback bool      `json:"phase_rollback,omitempty"`
	Until         time.Time `json:"until,omitzero"`
	Revoke        bool      `json:"revoke,omitempty"`
	By            string    `json:"by"`
	At            time.Time `json:"at"`
	Reason        string    `json:"reason,omitempty"`
	// Summary says its scope in words: "predicate quorum for member
	// kv-3 until …", "revoked: …".
	Summary string `json:"summary"`
}

// Outage is a time the substrate did not answer.
type Outage struct {
	Since  time.Time `json:"since"`
	Detail string    `json:"detail"`
}

// Held is set while the upgrade holds outside its policy's maintenance
// windows: it goes on by itself at Until.
type Held struct {
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	Windows string    `json:"windows"`
}

// Intent is the operator's last request (pause, resume, abort,
// finalize), numbered.
type Intent struct {
	Kind string    `json:"kind"`
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
}

// FerryFirst is ferry first's step: the agents re-executed on the
// ferry a release asks for, before any member moves.
type FerryFirst struct {
	// Requires is the release's requires_ferry; Binary the ferry binary
	// it names ("" for the ferry that runs the upgrade).
	Requires string    `json:"requires,omitempty"`
	Binary   string    `json:"binary,omitempty"`
	Done     time.Time `json:"done,omitzero"`
	Tries    int       `json:"tries,omitempty"`
	LastTry  time.Time `json:"last_try,omitzero"`
	// Failed says why it could not be done: the upgrade failed on it.
	Failed string `json:"failed,omitempty"`
}

// Stage is the progress of a migration stage's calls.
type Stage struct {
	Since  time.Time `json:"since,omitzero"`
	Tries  int       `json:"tries,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Done   bool      `json:"done,omitempty"`
}

// Bound is the lower bound of an upgrade under its policy, in
// nanoseconds per part.
type Bound struct {
	Batches int64 `json:"batches,omitempty"`
	Gates   int64 `json:"gates,omitempty"`
	Stages  int64 `json:"stages,omitempty"`
	Hooks   int64 `json:"hooks,omitempty"`
}

// Pace is an upgrade's wall time against its lower bound, in seconds
// (BoundRatio 1.0 would be no overhead at all).
type Pace struct {
	WallS       float64 `json:"wall_s"`
	LowerBoundS float64 `json:"lower_bound_s"`
	BoundRatio  float64 `json:"bound_ratio"`
	BatchesS    float64 `json:"batches_s"`
	GatesS      float64 `json:"gates_s"`
	StagesS     float64 `json:"stages_s"`
	HooksS      float64 `json:"hooks_s"`
}
