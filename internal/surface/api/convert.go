package api

import (
	"cmp"
	"maps"
	"slices"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// FromRecord is upgrade record u as the API shows it. It is the one
// place the record becomes the API's: what the record holds for the
// engine alone (its action sequence numbers, its actions in flight,
// when an engine last stepped it, its schema) stays out.
func FromRecord(u upgrade.Upgrade) Upgrade {
	out := Upgrade{
		APIVersion: APIVersion,
		ID:         u.ID, From: u.From, To: u.To,
		State:        u.State.String(),
		Plan:         fromPlan(u.Plan),
		Phase:        u.Phase,
		Batches:      []Batch{},
		Members:      make(map[string]Member, len(u.Members)),
		Waiting:      u.Waiting,
		Reason:       u.Reason,
		Pausing:      u.Pausing,
		Final:        u.Final,
		Pin:          u.Pin,
		Finalized:    u.Finalized,
		NoReturnHost: u.NoReturnHost,
		Downtime:     u.Downtime,
		Description:  u.Description,
		Bound: Bound{Batches: int64(u.Bound.Batches), Gates: int64(u.Bound.Gates), Stages: int64(u.Bound.Stages),
			Hooks: int64(u.Bound.Hooks)},
		Created: u.Created, Updated: u.Updated, Ended: u.Ended,
	}
	if sh := upgrade.Shown(&u); sh != out.State {
		out.ShownState = sh
	}
	if u.Rollback != nil {
		p := fromPlan(*u.Rollback)
		out.Rollback = &p
	}
	if !u.Ending.IsZero() {
		out.Ending = u.Ending.String()
	}
	if !u.NoReturn.IsZero() {
		out.NoReturn = u.NoReturn.String()
	}
	if u.Intent.Kind != "" {
		out.Intent = &Intent{Kind: string(u.Intent.Kind), Seq: u.Intent.Seq, Time: u.Intent.Time}
	}
	if u.Stage != (upgrade.Stage{}) {
		out.Stage = &Stage{Since: u.Stage.Since, Tries: u.Stage.Tries, Detail: u.Stage.Detail, Done: u.Stage.Done}
	}
	if f := u.Ferry; f != nil {
		out.Ferry = &FerryFirst{Requires: f.Requires, Binary: f.Binary, Done: f.Done, Tries: f.Tries, LastTry: f.LastTry, Failed: f.Failed}
	}
	if u.Outage != nil {
		out.Outage = &Outage{Since: u.Outage.Since, Detail: u.Outage.Detail}
	}
	if u.Held != nil {
		out.Held = &Held{Since: u.Held.Since, Until: u.Held.Until, Windows: u.Held.Windows}
	}
	if p := u.Pace(u.Updated); p.LowerBoundS > 0 {
		out.Pace = &Pace{WallS: p.WallS, LowerBoundS: p.LowerBoundS, BoundRatio: p.BoundRatio,
			BatchesS: p.Batches, GatesS: p.Gates, StagesS: p.Stages, HooksS: p.Hooks}
	}
	for _, b := range u.Batches {
		ab := Batch{Phase: b.Phase, Component: b.Component, Rollback: b.Rollback, Rollout: b.Rollout, Number: b.Number,
			Members: nonNil(b.Members), Hosts: b.Hosts, Size: b.Size, Why: b.Why, Began: b.Began, Ended: b.Ended,
			Waited: b.Waited, Bound: int64(b.Bound)}
		if o := b.Outcome; o.Size != 0 || o.Clean || o.Strained || o.Why != "" {
			ab.Outcome = &Outcome{Size: o.Size, Clean: o.Clean, Strained: o.Strained, Why: o.Why}
		}
		out.Batches = append(out.Batches, ab)
	}
	for _, n := range slices.Sorted(maps.Keys(u.Members)) {
		m := u.Members[n]
		if m == nil {
			continue
		}
		out.Members[n] = Member{Name: m.Name, Component: m.Component, From: m.From, Target: m.Target, Step: string(m.Step),
			Since: m.Since, Began: m.Began, HealthySince: m.HealthySince, Exits: m.Exits, CrashLoop: m.CrashLoop, Detail: m.Detail}
		out.Progress.Members++
		if m.Step == upgrade.StepDone {
			out.Progress.MembersDone++
		}
	}
	if len(u.Hosts) > 0 {
		out.Hosts = make(map[string]Host, len(u.Hosts))
		for n, h := range u.Hosts {
			if h != nil {
				out.Hosts[n] = Host{Name: h.Name, Step: string(h.Step), Since: h.Since, Tries: h.Tries, Detail: h.Detail}
			}
		}
	}
	if active := u.Active(); u.Phase < len(active.Phases) && !u.State.Terminal() {
		n, of := u.BatchOf()
		out.Progress.Phase = &PhaseProgress{Number: u.Phase + 1, Of: len(active.Phases), Component: active.Phases[u.Phase].Component,
			Part: active.Phases[u.Phase].Part, Rollback: u.RollingBack(), Batch: n, Batches: of}
	}
	for _, r := range u.Refusals {
		out.Refusals = append(out.Refusals, Refusal{Predicate: r.Predicate, Member: r.Member, Reason: r.Reason, Summary: r.String()})
	}
	for i := range u.Effects {
		e := &u.Effects[i]
		out.Effects = append(out.Effects, Effect{ID: e.ID, Key: e.Key, Scope: EffectScope{Kind: string(e.Scope.Kind), Name: e.Scope.Name},
			What: e.What, UndoWhat: e.UndoWhat, State: string(e.State), Opened: e.Opened, Undoing: e.Undoing, Tries: e.Tries,
			LastTry: e.LastTry, Error: e.Error, Abandoned: e.Abandoned, Summary: e.Detail()})
	}
	for _, o := range u.Overrides {
		out.Overrides = append(out.Overrides, Override{Predicate: o.Predicate, Member: o.Member, Effect: o.Effect,
			Component: o.Component, Phase: o.Phase, PhaseRollback: o.PhaseRollback, Until: o.Until, Revoke: o.Revoke,
			By: o.By, At: o.At, Reason: o.Reason, Summary: o.String()})
	}
	return out
}

func fromPlan(p plan.Plan) Plan {
	out := Plan{From: nonNil(p.From), To: p.To, Path: p.Path, Phases: []Phase{}}
	for _, s := range p.Flow {
		out.Flow = append(out.Flow, FlowStage{Kind: s.Kind, Component: s.Component, Name: s.Name, State: s.State, PointOfNoReturn: s.PointOfNoReturn})
	}
	for _, ph := range p.Phases {
		out.Phases = append(out.Phases, fromPhase(ph))
	}
	return out
}

func fromPhase(ph plan.Phase) Phase {
	out := Phase{Component: ph.Component, Strategy: cmp.Or(ph.Settings.Type, ph.Strategy), MaxUnavailable: ph.MaxUnavailable,
		Quorum: ph.Quorum, Batches: []PlanBatch{}, Note: ph.Note, Rollout: ph.Rollout, Part: ph.Part}
	for _, b := range ph.Batches {
		out.Batches = append(out.Batches, PlanBatch{Members: nonNil(b.Members), Hosts: b.Hosts})
	}
	for _, s := range ph.Skipped {
		out.Skipped = append(out.Skipped, Skipped{Member: s.Member, Reason: s.Reason})
	}
	if h := ph.Hosts; h != nil {
		hs := &PhaseHosts{Components: nonNil(h.Components), Parts: []Phase{}, MaxUnavailable: h.MaxUnavailable,
			MaxUnavailablePerDomain: h.MaxUnavailablePerDomain, On: h.On, Domains: h.Domains}
		if hs.On == nil {
			hs.On = map[string][]string{}
		}
		for _, part := range h.Parts {
			hs.Parts = append(hs.Parts, fromPhase(part))
		}
		out.Hosts = hs
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
