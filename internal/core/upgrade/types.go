package upgrade

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// MemberStep is where one member is in its move (package step has the
// move as data).
type MemberStep = step.Name

// The member steps, as package step names them.
const (
	StepPending   = step.Pending
	StepDraining  = step.Draining
	StepStopping  = step.Stopping
	StepStarting  = step.Starting
	StepSoaking   = step.Soaking
	StepRejoining = step.Rejoining
	StepDone      = step.Done
	StepFailed    = step.Failed
)

// Upgrade is the record of one upgrade, persisted before every action.
type Upgrade struct {
	// Schema is the format the record was written in (schema.go): a
	// newer ferry migrates an older record as it reads it, and an older
	// one refuses a newer record instead of guessing at it.
	Schema int `json:"schema,omitempty"`

	ID    string    `json:"id"`
	From  string    `json:"from"`
	To    string    `json:"to"`
	State State     `json:"state"`
	Plan  plan.Plan `json:"plan"`
	// Phase points at the phase in progress (or next) of the active
	// plan (the rollback once it began).
	Phase int `json:"phase"`
	// Batches are every batch formed so far, forward and rollback, in
	// order; the last one may be in progress.
	Batches []Batch `json:"batches,omitempty"`
	// PhaseHooks says how far the current phase's own hooks went: its
	// pre_phase hooks ran (open), its end's undos and post_phase hooks
	// ran (closed).
	PhaseHooks HookProgress `json:"phase_hooks,omitzero"`
	// UpgradeHooks is the same for the upgrade's pre_upgrade and
	// post_upgrade hooks.
	UpgradeHooks HookProgress `json:"upgrade_hooks,omitzero"`
	// Downtime is the downtime the operator accepted when the upgrade
	// began (--accept-downtime), in words: its phases that take their
	// component down (strategy offline).
	Downtime string `json:"downtime,omitempty"`
	// PrunedBackups are the components whose backups were pruned to
	// their backup.keep as the upgrade completed.
	PrunedBackups []string `json:"pruned_backups,omitempty"`
	// Hook is the hook list being run for the cluster or a phase.
	Hook *HookRun `json:"hook,omitempty"`
	// GateSince is when the engine began waiting on a cluster gate (the
	// preflight's, or the one after a phase); zero when not waiting.
	GateSince time.Time `json:"gate_since,omitzero"`
	// WaitSince is when the next batch was first refused admission
	// (every candidate refused by a predicate); the wait fails at the
	// component's gate deadline.
	WaitSince time.Time `json:"wait_since,omitzero"`
	// WaitRefused is set when, while it waited (WaitSince), a predicate
	// other than the gate refused a member, or the strategy chose none:
	// the batch formed then waited for its admission (not clean). A wait
	// on the gate alone is the cluster recovering from the batch before
	// (Ceph's placement groups after OSDs restarted): the check between
	// batches, which leaves the next batch clean.
	WaitRefused bool `json:"wait_refused,omitempty"`
	// Boundary is when the last batch (or the phase before) ended: a
	// cluster gate must have been checked after it to admit the next.
	Boundary time.Time `json:"boundary,omitzero"`
	// Members holds each planned member's progress, by name.
	Members map[string]*Member `json:"members"`
	// Hosts holds each host's progress in a hosts stage (its lock, its
	// members' moves, its unlock), by name.
	Hosts map[string]*HostMove `json:"hosts,omitempty"`
	// Waiting says, in words, why the upgrade is not moving right now.
	Waiting string `json:"waiting,omitempty"`
	// Refusals are the admission predicates refusing the next members
	// right now, by name.
	Refusals []strategy.Refusal `json:"refusals,omitempty"`
	// Reason says why the upgrade failed, paused on a failure, or
	// began to roll back.
	Reason string `json:"reason,omitempty"`
	// Rollback is the plan that returns the members touched so far to
	// their previous version, in reverse order; set once a failure or
	// an abort began it. Phase then points into it.
	Rollback *plan.Plan `json:"rollback,omitempty"`
	// Intent is the operator's last request (pause, resume, abort,
	// finalize). The operator's commands own it: the store keeps the
	// stored one when the engine saves. IntentSeen is the Seq of the
	// last one acted on.
	Intent     Intent `json:"intent,omitzero"`
	IntentSeen int    `json:"intent_seen,omitempty"`
	// Overrides are the predicates (and effects) the operator switched
	// off for this upgrade; like Intent, they are the operator's.
	Overrides []Override `json:"overrides,omitempty"`
	// Pausing is set by a pause request: no member is taken down any
	// more, and the upgrade pauses once none is in flight.
	Pausing bool `json:"pausing,omitempty"`
	// ResumeTo is the state a paused upgrade returns to on resume.
	ResumeTo State `json:"resume_to,omitzero"`
	// Resumed is when the operator last resumed it. A pause is when
	// operators change things by hand: no member is admitted on an
	// observation made before the resume.
	Resumed time.Time `json:"resumed,omitzero"`
	// Ending is the terminal state being reached, while the upgrade's
	// owed undos and post_upgrade hooks run.
	Ending State `json:"ending,omitzero"`
	// Final is the end of a chain of upgrades (plan.Path) when this
	// one is a step of it: once this completes, the next is planned.
	Final string `json:"final,omitempty"`
	// Pin is the cluster's compatibility version: From until finalize,
	// To after. Finalized is when finalize was first attempted: from
	// then on there is no going back (no abort, no rollback).
	Pin       string    `json:"pin,omitempty"`
	Finalized time.Time `json:"finalized,omitzero"`
	// NoReturn is the flow's stage marked as the point of no return
	// whose beginning set Finalized (zero when that was finalize): an
	// abort is refused naming it.
	NoReturn State `json:"no_return,omitzero"`
	// NoReturnHost is the host whose lock passed it, when that stage is
	// a hosts stage (its first lock, not its beginning).
	NoReturnHost string `json:"no_return_host,omitempty"`
	// Stage is the progress of the current migration stage.
	Stage Stage `json:"stage,omitzero"`
	// Description is the SHA-256 of the cluster description the upgrade
	// was started with: while it runs, the description is locked.
	Description string `json:"description,omitempty"`
	// Effects is the journal: every change made outside a member's own
	// process whose undo is still owed. EffectSeq numbers them.
	Effects   effect.Journal `json:"effects,omitempty"`
	EffectSeq int            `json:"effect_seq,omitempty"`
	// ActionSeq numbers the actions: an action's outcome is folded in
	// only into the step that asked for it.
	ActionSeq int `json:"action_seq,omitempty"`
	// Outage is set while the substrate does not answer: nothing is
	// admitted and no deadline runs until it does.
	Outage *Outage `json:"outage,omitempty"`
	// Held is set while the upgrade holds outside its policy's
	// maintenance windows: when the next one opens.
	Held *Held `json:"held,omitempty"`
	// Ferry is the upgrade's first step when its release asks for a
	// newer ferry than the agents run (ferry first); nil when it has
	// none.
	Ferry *FerryFirst `json:"ferry,omitempty"`
	// Alive is when an engine last stepped the record (saved at least
	// every few seconds): from it to the watch of the next engine (or
	// of the same one back from a stall), ferry could not check, and no
	// deadline ran.
	Alive time.Time `json:"alive,omitzero"`
	// Bound accumulates the lower bound of the upgrade under its policy.
	Bound Bound `json:"bound,omitzero"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Ended   time.Time `json:"ended,omitzero"`

	// from is the members map of the record this one was made from,
	// once the machine copied it to change members (Upgrade.own), and
	// changed the members it copied: what Touched answers from without
	// a pass over the members. Not part of what the record says.
	from    map[string]*Member
	changed []string
	// ownJournal: Effects is this record's own to change (journal);
	// a clone shares its journal with the record it was made from.
	ownJournal bool
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
	// Began is when the member's move began (its admission): the
	// healthy_deadline counts from here.
	Began time.Time `json:"began,omitzero"`
	// HealthySince is when the member became healthy on its target;
	// HealthyPID and HealthyStarted name the process that did: its
	// soak goes on only on that process (ferry away meanwhile).
	HealthySince   time.Time `json:"healthy_since,omitzero"`
	HealthyPID     int       `json:"healthy_pid,omitempty"`
	HealthyStarted time.Time `json:"healthy_started,omitzero"`
	// LastTry is when the current step's action was last tried, and
	// Tries how often; a failed action is retried after a backoff
	// until the deadline. Acted is set once it succeeded; Acting is
	// the sequence number of the action in flight.
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Acted   bool      `json:"acted,omitempty"`
	Acting  int       `json:"acting,omitempty"`
	// Retries counts the failed tries of this move's actions, and
	// SoakBroke is set when its soak broke: the batch was strained.
	Retries   int  `json:"retries,omitempty"`
	SoakBroke bool `json:"soak_broke,omitempty"`
	// Started is when it was first started on its target in this move
	// (the crash-loop window counts from there); Exits counts its exits
	// on the target since (LastExit: the start time of the last
	// instance counted, RestartsSeen the substrate's restart count last
	// seen), ExitDetail how the last one ended.
	Started      time.Time `json:"started,omitzero"`
	Exits        int       `json:"exits,omitempty"`
	LastExit     time.Time `json:"last_exit,omitzero"`
	RestartsSeen int       `json:"restarts_seen,omitempty"`
	ExitDetail   string    `json:"exit_detail,omitempty"`
	// StartDone is when its last start action returned; Stopped when
	// its stop began (its time down runs from there).
	StartDone time.Time `json:"start_done,omitzero"`
	Stopped   time.Time `json:"stopped,omitzero"`
	// StopTook and StartTook are how long its last stop and start
	// actions took: what the next plan's estimate takes them to need.
	StopTook  time.Duration `json:"stop_took,omitempty"`
	StartTook time.Duration `json:"start_took,omitempty"`
	// Busy is the time its move needed so far, waits left out: its
	// actions, becoming healthy, its soak (the lower bound's part).
	Busy time.Duration `json:"busy,omitempty"`
	// Restart: this move restarts the member even where it runs its
	// target already (a rollout: the pin moved); ReplacesPID and
	// ReplacesStarted name the process it replaces, seen at its
	// admission: the move is on its target once another process runs.
	Restart         bool      `json:"restart,omitempty"`
	ReplacesPID     int       `json:"replaces_pid,omitempty"`
	ReplacesStarted time.Time `json:"replaces_started,omitzero"`
	// CrashLoop is set when its move failed on a crash loop.
	CrashLoop bool   `json:"crash_loop,omitempty"`
	Detail    string `json:"detail,omitempty"`
	// Refused is why its step's last action was refused in a way no
	// retry mends (a backup that does not verify): the move fails on it.
	Refused string `json:"refused,omitempty"`
	// Backup is the member's backup in this upgrade (its component's
	// backup:), recorded before it is taken; replaced whole, never
	// changed in place (records share it).
	Backup MemberBackup `json:"backup,omitzero"`
}

// Batch is one batch as it was formed and run.
type Batch struct {
	// Phase is the index of its phase in its plan (the rollback's when
	// Rollback); Number counts the batches of that phase from 1.
	Phase     int    `json:"phase"`
	Component string `json:"component"`
	Rollback  bool   `json:"rollback,omitempty"`
	// Rollout: a batch of a flow's rollout (members restarted on the
	// release they run).
	Rollout bool     `json:"rollout,omitempty"`
	Number  int      `json:"number"`
	Members []string `json:"members"`
	// Hosts are a hosts stage's batch's hosts, locked together; Members
	// every member to move on them.
	Hosts []string `json:"hosts,omitempty"`
	// Size is what the strategy asked for, and Why says why; fewer may
	// have been admitted.
	Size  int       `json:"size"`
	Why   string    `json:"why,omitempty"`
	Began time.Time `json:"began"`
	Ended time.Time `json:"ended,omitzero"`
	// Waited is set when it was refused admission at first (a budget, a
	// predicate other than the gate: Upgrade.WaitRefused; in a hosts
	// stage, any refusal).
	Waited  bool             `json:"waited,omitempty"`
	Outcome strategy.Outcome `json:"outcome,omitzero"`
	// Bound is its slowest member's Busy: its part of the lower bound.
	Bound time.Duration `json:"bound,omitempty"`
	// Before are the extra steps its strategy added before its moves
	// (a switchover), in order: its members move once they are done.
	Before []BatchStep `json:"before,omitempty"`
}

// Name names the batch for the operator: "api batch 2".
func (b Batch) Name() string {
	if b.Rollback {
		return b.Component + " rollback batch " + itoa(b.Number)
	}
	if b.Rollout {
		return b.Component + " rollout batch " + itoa(b.Number)
	}
	return b.Component + " batch " + itoa(b.Number)
}

// HookProgress says how far a phase's (or the upgrade's) own hooks went.
type HookProgress struct {
	Opened  bool `json:"opened,omitempty"`  // its pre_ hooks ran
	Closing bool `json:"closing,omitempty"` // its end was reached: its undos and post_ hooks run
	Closed  bool `json:"closed,omitempty"`  // its undos and post_ hooks ran
}

// HookRun is one cluster or phase hook list being run.
type HookRun struct {
	// List is pre_upgrade, post_upgrade, pre_phase or post_phase;
	// Component is the phase's ("" for the upgrade's).
	List      string    `json:"list"`
	Component string    `json:"component,omitempty"`
	Since     time.Time `json:"since"`
	LastTry   time.Time `json:"last_try,omitzero"`
	Tries     int       `json:"tries,omitempty"`
	Acting    int       `json:"acting,omitempty"`
	Done      bool      `json:"done,omitempty"`
	Detail    string    `json:"detail,omitempty"`
}

// Stage is the progress of one migration stage: its calls are made
// until they pass (a migration reports its progress in Detail).
type Stage struct {
	Since   time.Time `json:"since,omitzero"`
	LastTry time.Time `json:"last_try,omitzero"`
	Tries   int       `json:"tries,omitempty"`
	Acting  int       `json:"acting,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Done    bool      `json:"done,omitempty"`
	// Called: an action's calls passed; its gate is checked next.
	Called bool `json:"called,omitempty"`
}

// Outage is a time the substrate did not answer.
type Outage struct {
	Since  time.Time `json:"since"`
	Detail string    `json:"detail"`
}

// Bound is the lower bound of an upgrade under its policy, as it
// accumulates: the batches' slowest members (their drain, stop, start,
// time to healthy, soak, rejoin), each gate's first passing check at a
// boundary, the migration stages, and the cluster and phase hooks and
// undos. Total is their sum; the upgrade's wall time over it is how
// much ferry itself added.
type Bound struct {
	Batches time.Duration `json:"batches,omitempty"`
	Gates   time.Duration `json:"gates,omitempty"`
	Stages  time.Duration `json:"stages,omitempty"`
	Hooks   time.Duration `json:"hooks,omitempty"`
}

// Total is the lower bound.
func (b Bound) Total() time.Duration { return b.Batches + b.Gates + b.Stages + b.Hooks }

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

// Override is the operator switching off one admission predicate for
// the current upgrade (for one member, or all), or giving up on one
// effect's undo; never all safety at once.
type Override struct {
	// Predicate is a predicate's name (package strategy), or "" with
	// Effect set.
	Predicate string `json:"predicate,omitempty"`
	// Member limits it to one member ("" for every member).
	Member string `json:"member,omitempty"`
	// Effect is the ID of an effect whose undo the operator gave up on.
	Effect string `json:"effect,omitempty"`
	// Component limits it to the members of one component; Phase to one
	// phase of the active plan (its number, from 1; PhaseRollback: of
	// the rollback's plan). Zero: every component, every phase.
	Component     string `json:"component,omitempty"`
	Phase         int    `json:"phase,omitempty"`
	PhaseRollback bool   `json:"phase_rollback,omitempty"`
	// Until is when it expires (zero: it lasts the upgrade).
	Until time.Time `json:"until,omitzero"`
	// Revoke: this entry withdraws the earlier overrides with the same
	// predicate (or effect), member, component and phase. The list only
	// grows: the engine's saves keep the operator's entries by count.
	Revoke bool      `json:"revoke,omitempty"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// sameScope reports whether o and x switch off the same thing for the
// same members.
func (o Override) sameScope(x Override) bool {
	return o.Predicate == x.Predicate && o.Effect == x.Effect && o.Member == x.Member && o.Component == x.Component &&
		o.Phase == x.Phase && o.PhaseRollback == x.PhaseRollback
}

// ActiveOverrides are the overrides in force at now: each not revoked
// by a later entry, nor expired.
func (u *Upgrade) ActiveOverrides(now time.Time) []Override {
	var out []Override
	for _, o := range u.Overrides {
		if o.Revoke {
			out = slices.DeleteFunc(out, o.sameScope)
			continue
		}
		out = append(out, o)
	}
	return slices.DeleteFunc(out, func(o Override) bool { return !o.Until.IsZero() && !now.Before(o.Until) })
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

// Current returns the batch in progress, if any.
func (u *Upgrade) Current() *Batch {
	if n := len(u.Batches); n > 0 && u.Batches[n-1].Ended.IsZero() {
		return &u.Batches[n-1]
	}
	return nil
}

// PhaseBatches returns the batches formed so far in phase i of the
// active plan.
func (u *Upgrade) PhaseBatches(i int) []Batch {
	var out []Batch
	for _, b := range u.Batches {
		if b.Phase == i && b.Rollback == u.RollingBack() {
			out = append(out, b)
		}
	}
	return out
}

// Observation is what the engine saw of the cluster, just now.
type Observation struct {
	Members map[string]MemberHealth
	// Gates holds each component's cluster gate. A component with no
	// cluster check is absent and counts as passing.
	Gates map[string]Gate
	// Acting holds the sequence numbers of the actions in flight in
	// the engine that observed: an action recorded as acting but not
	// in flight was lost with a process and may be taken again.
	Acting map[int]bool
	// Since is when the engine that observed began watching without a
	// gap: its start, or its return from a stall (a SIGSTOP). Zero for
	// an observation that is not an engine's watch.
	Since time.Time
	// Judging: the engine judges each batch as it ends (the traffic
	// verdict, Impacted), so a Step stops at a batch's end and the
	// next batch is sized from the judged outcome.
	Judging bool
	// Answers holds the system's latest answer about each member it
	// was asked about (Decision.Ask; a component's ok_to_stop call).
	Answers map[string]Answer
	// Capacity holds the latest answer of each host's capacity call
	// it was asked (Decision.AskHosts).
	Capacity map[string]Answer
	// Refused says why the substrate is refused (a host presented a key
	// that is not the one its known_hosts holds, with both
	// fingerprints): not an outage to wait out but a stop, the upgrade
	// paused with the reason until an operator resumes it.
	Refused string

	// summary is what Summarize found among the members, if it ran.
	summary *summary
}

// summary is what the machine looks for among every member of an
// observation at each step, found once.
type summary struct {
	// unknown and unchecked name the members the substrate does not
	// answer for, and those not checked since the watch began, in order.
	unknown, unchecked []string
	// oldestSeen is the earliest Seen of a member the substrate answers
	// for (zero if none).
	oldestSeen time.Time
	// admission is the admission view's members as of this
	// observation, kept from step to step (admission.go).
	admission *admission
}

// Summarize returns obs with what the machine looks for among all its
// members at every step (those not known, those not checked since the
// watch began, the oldest look) found once, for an observer that hands
// one observation to many steps (the engine's, between two changes of
// what it sees): ten thousand members are then looked at once per
// observation, not once per step. obs's members and Since must not
// change after; a copy that changes them is to be summarized again.
// The machine's decisions are the same with or without it.
func (obs Observation) Summarize() Observation {
	sum := &summary{}
	seen := false
	for n, o := range obs.Members {
		sum.note(n, o, obs.Since, &seen)
	}
	sum.sort()
	obs.summary = sum
	return obs
}

// note counts member n, observed o, in the summary (seen: a member
// known was noted before).
func (sum *summary) note(n string, o MemberHealth, since time.Time, seen *bool) {
	switch {
	case o.Unknown:
		sum.unknown = append(sum.unknown, n)
	case !*seen || o.Seen.Before(sum.oldestSeen):
		sum.oldestSeen, *seen = o.Seen, true
	}
	if unchecked(since, o) {
		sum.unchecked = append(sum.unchecked, n)
	}
}

func (sum *summary) sort() {
	slices.Sort(sum.unknown)
	slices.Sort(sum.unchecked)
}

// SummarizeAfter is Summarize for an observation of the same members
// that follows prev, which is not to be stepped again: the admission
// view prev's summary carries is taken over, what it says of the
// record kept and what was observed of each member said anew, instead
// of built again (once a second, for ten thousand members).
func (obs Observation) SummarizeAfter(prev Observation) Observation {
	if prev.summary == nil || prev.summary.admission == nil {
		return obs.Summarize()
	}
	a := prev.summary.admission
	prev.summary.admission = nil
	// The summary is made as the admission's members are said anew,
	// when they are every member observed (else from the members).
	if sum, all := a.observe(obs); all {
		obs.summary = sum
	} else {
		obs = obs.Summarize()
	}
	obs.summary.admission = a
	return obs
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
	// Unknown: the substrate did not answer for it.
	Unknown bool
	// Started is when its current (or last) process started, PID its
	// id where the substrate has one; Restarts counts the substrate's
	// own restarts of it.
	Started  time.Time
	PID      int
	Restarts int
	// Role: it holds its component's role (the leader) right now.
	Role bool
	// Seen is when the substrate was last asked about it; Checked when
	// the verdict above was formed (the earlier of that and its
	// check's start; zero if not checked at all).
	Seen    time.Time
	Checked time.Time
}

// Gate is a component's cluster check as observed.
type Gate struct {
	Healthy bool
	Detail  string
	// Checked is when the check that gave this verdict began, and Took
	// how long it took.
	Checked time.Time
	Took    time.Duration
}

// ActionKind names what an action does.
type ActionKind string

const (
	ActHooks ActionKind = "hooks" // run a hook list: a member's (pre_stop, post_start), a phase's or the upgrade's
	ActStop  ActionKind = "stop"  // stop the member gracefully
	ActStart ActionKind = "start" // start the member on Version
	ActUndo  ActionKind = "undo"  // undo an effect of the journal
	ActStage ActionKind = "stage" // run the target release's calls of Stage
	ActLock  ActionKind = "lock"  // lock Host: its lock calls (its unlock is the undo of its effect)
	// ActBackup backs the member's data up into Backup and verifies it;
	// ActRestore restores it from there, its Files checked first;
	// ActPrune keeps the newest backups of Component's members, as many
	// as its backup.keep, once the upgrade completes.
	ActBackup  ActionKind = "backup"
	ActRestore ActionKind = "restore"
	ActPrune   ActionKind = "prune-backups"
	// ActReinstall reinstalls Host with Version (its reinstall command);
	// ActMigrateHost migrates its data to Version (its migrate command).
	ActReinstall   ActionKind = "reinstall"
	ActMigrateHost ActionKind = "migrate-host"
	// ActFerry moves every agent older than the ferry Version's
	// release asks for onto it, one host at a time (ferry first).
	ActFerry ActionKind = "ferry-first"
)

// Action is one thing for the engine to do.
type Action struct {
	// Seq identifies the action: its outcome is folded in only where
	// it is still awaited.
	Seq     int        `json:"seq"`
	Kind    ActionKind `json:"kind"`
	Member  string     `json:"member,omitempty"`
	Version string     `json:"version,omitempty"`
	// Hooks names the hook list of an ActHooks action; Component the
	// phase's component for pre_phase and post_phase.
	Hooks     string `json:"hooks,omitempty"`
	Component string `json:"component,omitempty"`
	// Effect is the ID of the effect an ActUndo undoes.
	Effect string `json:"effect,omitempty"`
	// Host is the host an ActLock locks (an ActReinstall reinstalls,
	// an ActMigrateHost migrates).
	Host string `json:"host,omitempty"`
	// Stage is the migration stage of an ActStage action: expand,
	// migrate, finalize or contract; or the kind of a flow's registered
	// stage (action), named in Name, its calls or (Gate) its gate.
	Stage string `json:"stage,omitempty"`
	Name  string `json:"name,omitempty"`
	Gate  bool   `json:"gate,omitempty"`
	// Pin is the record's pin when the action was decided: a start
	// renders the member's run (.Pin) with it, so that members started
	// after a rollout or finalize moved it carry the new one.
	Pin string `json:"pin,omitempty"`
	// Step names the extra step of the current batch an ActHooks action
	// is for (a switchover), To the member it hands the role to.
	Step step.Name `json:"step,omitempty"`
	To   string    `json:"to,omitempty"`
	// Backup is the backup's directory of an ActBackup or ActRestore;
	// Sums, an ActRestore's, the checksums recorded when it was taken.
	Backup string `json:"backup,omitempty"`
	Sums   string `json:"sums,omitempty"`
}

// Decision is what Step decided: the record to persist, the actions to
// take once it is persisted, the gates to check now (a batch waits on a
// check begun after the record's Boundary: one in flight that began
// before it will not do), the members to ask the system about now
// (their component's ok_to_stop call; one asked already and not
// answered yet need not be asked twice), the actions in flight to
// cancel (an abort), and when to look again if nothing happens sooner
// (zero: at the engine's next tick).
type Decision struct {
	Upgrade Upgrade
	Actions []Action
	Probe   []string
	Ask     []string
	Cancel  []int
	After   time.Duration

	// AskHosts are the hosts whose capacity call is to be made now.
	AskHosts []string
}

// BatchOf says which batch of the current phase is in progress (or
// comes next) and how many batches the phase has in all, as far as is
// known: its plan's expected batches, or more when sizes adapted down.
func (u *Upgrade) BatchOf() (n, of int) {
	active := u.Active()
	if u.Phase >= len(active.Phases) {
		return 0, 0
	}
	formed := len(u.PhaseBatches(u.Phase))
	n = formed
	if u.Current() == nil {
		n++
	}
	of = max(len(active.Phases[u.Phase].Batches), n)
	if n > of {
		n = of
	}
	return n, of
}

// Pace is an upgrade's wall time against the lower bound of its plan
// under its policy (see Bound); the ratio is what ferry itself added
// (1.0 would be no overhead at all).
type Pace struct {
	WallS       float64 `json:"wall_s"`
	LowerBoundS float64 `json:"lower_bound_s"`
	BoundRatio  float64 `json:"bound_ratio"`
	// Bound is the lower bound's parts.
	Batches float64 `json:"batches_s"`
	Gates   float64 `json:"gates_s"`
	Stages  float64 `json:"stages_s"`
	Hooks   float64 `json:"hooks_s"`
}

// Pace measures upgrade u from its creation to its end (or to end,
// while it runs).
func (u *Upgrade) Pace(end time.Time) Pace {
	if !u.Ended.IsZero() {
		end = u.Ended
	}
	b := u.Bound
	p := Pace{WallS: end.Sub(u.Created).Seconds(), LowerBoundS: b.Total().Seconds(),
		Batches: b.Batches.Seconds(), Gates: b.Gates.Seconds(), Stages: b.Stages.Seconds(), Hooks: b.Hooks.Seconds()}
	if p.LowerBoundS > 0 {
		p.BoundRatio = p.WallS / p.LowerBoundS
	}
	return p
}

// CheckOverride says why override o may not be applied to upgrade u,
// or "" if it may: it names one known predicate (optionally for one of
// the upgrade's members) or one effect whose undo is owed, never all
// of them, and only while the upgrade runs.
func CheckOverride(u *Upgrade, o Override, known func(predicate string) bool, predicates string) string {
	if o.Revoke {
		for _, x := range u.ActiveOverrides(o.At) {
			if x.sameScope(o) {
				return ""
			}
		}
		return "no override in force matches " + o.String() + " ('ferry upgrade status' lists them)"
	}
	switch {
	case o.Component != "" && !slices.ContainsFunc(slices.Collect(maps.Values(u.Members)), func(m *Member) bool { return m.Component == o.Component }):
		return fmt.Sprintf("component %q has no member in upgrade %s", o.Component, u.ID)
	case o.Phase < 0 || o.Phase > len(u.Active().Phases):
		return fmt.Sprintf("phase %d is not one of the %d of the active plan", o.Phase, len(u.Active().Phases))
	case !o.Until.IsZero() && !o.Until.After(o.At):
		return "it would expire before it begins"
	}
	switch {
	case u.State.Terminal():
		return fmt.Sprintf("upgrade %s has ended (%s): nothing to override", u.ID, u.State)
	case o.Predicate == "" && o.Effect == "":
		return "name one predicate (" + predicates + "), or one effect with --effect"
	case o.Predicate != "" && o.Effect != "":
		return "one thing at a time: a predicate, or an effect"
	case o.Predicate == "*" || strings.EqualFold(o.Predicate, "all"):
		return "never all safety at once: name one predicate (" + predicates + ")"
	case o.Predicate != "" && !known(o.Predicate):
		return fmt.Sprintf("unknown predicate %q; known: %s", o.Predicate, predicates)
	case o.Member != "" && u.Members[o.Member] == nil && u.Hosts[o.Member] == nil:
		return fmt.Sprintf("member %q is not in upgrade %s (nor a host of its hosts stages)", o.Member, u.ID)
	}
	if o.Effect != "" {
		i := u.Effects.ByID(o.Effect)
		if i < 0 {
			return fmt.Sprintf("upgrade %s owes no undo of an effect %q (ferry upgrade status lists those owed)", u.ID, o.Effect)
		}
		if u.Effects[i].State == "abandoned" {
			return fmt.Sprintf("the undo of %s is already abandoned", o.Effect)
		}
	}
	for _, x := range u.ActiveOverrides(o.At) {
		if x.Predicate == o.Predicate && x.Effect == o.Effect && (x.Member == "" || x.Member == o.Member) &&
			(x.Component == "" || x.Component == o.Component) && (x.Phase == 0 || x.Phase == o.Phase && x.PhaseRollback == o.PhaseRollback) && x.Until.IsZero() {
			return "already overridden"
		}
	}
	return ""
}

// String says what an override switches off.
// Act says the operator's act in words, for events and summaries:
// "override: predicate quorum for member kv-3 switched off by ann", or
// "override: predicate quorum for member kv-3 revoked by ann", with the reason
// when one was given.
func (o Override) Act() string {
	verb := "switched off"
	if o.Revoke {
		verb = "revoked"
	}
	msg := fmt.Sprintf("override: %s %s by %s", o.what(), verb, o.By)
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	return msg
}

func (o Override) String() string {
	if o.Revoke {
		return "revoked: " + o.what()
	}
	return o.what()
}

// what is the override's scope in words: what it switches off, for
// which members, in which phase, until when.
func (o Override) what() string {
	what := "predicate " + o.Predicate
	if o.Effect != "" {
		what = "the undo of effect " + o.Effect
	}
	switch {
	case o.Member != "":
		what += " for member " + o.Member
	case o.Component != "":
		what += " for component " + o.Component
	case o.Predicate != "":
		what += " for every member"
	}
	if o.Phase > 0 {
		plan := "plan"
		if o.PhaseRollback {
			plan = "rollback"
		}
		what += fmt.Sprintf(" in phase %d of the %s", o.Phase, plan)
	}
	if !o.Until.IsZero() {
		what += " until " + o.Until.UTC().Format(time.RFC3339)
	}
	return what
}
