package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/config"
	"github.com/ferry-upgrade/ferry/internal/health"
	"github.com/ferry-upgrade/ferry/internal/store"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// Run drives the current upgrade until it ends (completed, failed) or
// ctx is cancelled. It may be called by a new process after a crash:
// it starts from the stored record and what it observes. An upgrade
// that is a step of a chain (Final) is followed, once completed, by the
// next step, planned from what then runs.
func (e *Engine) Run(ctx context.Context) (upgrade.Upgrade, error) {
	for {
		u, err := e.run(ctx)
		if err != nil || u.State != upgrade.StateCompleted || u.Final == "" || u.Final == u.To {
			return u, err
		}
		if _, err := e.Begin(ctx, u.Final); err != nil {
			return u, fmt.Errorf("engine: the next step towards %s: %w", u.Final, err)
		}
	}
}

func (e *Engine) run(ctx context.Context) (upgrade.Upgrade, error) {
	u, ok, err := e.cfg.Store.Current()
	if err != nil {
		return u, err
	}
	if !ok {
		return u, errors.New("engine: no upgrade to run; start one with 'ferry upgrade start'")
	}
	if err := CheckLock(u, e.c.Digest, e.c.File); err != nil {
		return u, err
	}
	tick := e.c.Policy.Tick.D()
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	var lastObsErr string
	health := map[string]bool{} // last reported verdicts, for events
	for !u.State.Terminal() {
		if err := ctx.Err(); err != nil {
			return u, err
		}
		if e.cfg.ExitOnPause && u.State == upgrade.StatePaused {
			return u, nil
		}
		snap, err := e.Observe(ctx)
		now := e.cfg.Now()
		if err != nil {
			if msg := err.Error(); msg != lastObsErr {
				lastObsErr = msg
				e.emit(now, u, store.Event{Kind: "error", Message: msg})
			}
			if !sleep(ctx, tick) {
				return u, ctx.Err()
			}
			continue
		}
		lastObsErr = ""
		e.mu.Lock()
		e.lastSnap = snap
		e.mu.Unlock()
		// The operator's requests arrive through the store, from
		// whichever process took them.
		if cur, err := e.cfg.Store.Get(u.ID); err == nil && cur.Intent.Seq > u.Intent.Seq {
			u.Intent = cur.Intent
		}
		evs := e.healthEvents(snap, health)
		d := upgrade.Step(e.c, u, snap.Obs, now)
		if e.cfg.Judge != nil {
			if from, name, ok := batchEnded(u, d.Upgrade); ok {
				ev := store.Event{Kind: "impact", Message: name + ": no impact on the clients"}
				if why := e.cfg.Judge(from, now); why != "" {
					ev.Message = name + " hurt the clients: " + why
					if nu, changed := upgrade.Impacted(e.c, d.Upgrade, why, now); changed {
						d.Upgrade, d.Actions = nu, nil
					}
				}
				evs = append(evs, ev)
			}
		}
		evs = append(evs, changes(u, d.Upgrade)...)
		evs = append(evs, e.overheads(u, d, now)...)
		for _, a := range d.Actions {
			evs = append(evs, store.Event{Kind: "action", Member: a.Member, Component: e.componentOf(a),
				Message: describe(a) + ": started"})
		}
		// Write before acting: the record names what is about to happen.
		if err := e.save(now, d.Upgrade, evs); err != nil {
			return u, err
		}
		u = d.Upgrade
		if len(d.Actions) > 0 {
			u, err = e.act(ctx, u, d.Actions)
			if err != nil {
				return u, err
			}
			continue
		}
		wait := tick
		if d.After > 0 && d.After < wait {
			wait = d.After
		}
		if !sleep(ctx, wait) {
			return u, ctx.Err()
		}
	}
	return u, nil
}

func (e *Engine) save(now time.Time, u upgrade.Upgrade, evs []store.Event) error {
	for i := range evs {
		evs[i].Time = now
		evs[i].Upgrade = u.ID
	}
	stored, err := e.cfg.Store.SaveWithEvents(u, evs)
	if err != nil {
		return fmt.Errorf("engine: save upgrade %s: %w", u.ID, err)
	}
	e.publish(stored)
	return nil
}

// act runs the actions of one decision, concurrently (they are for
// distinct members of one batch), folds their outcomes into the
// record and saves it.
func (e *Engine) act(ctx context.Context, u upgrade.Upgrade, actions []upgrade.Action) (upgrade.Upgrade, error) {
	type outcome struct {
		a   upgrade.Action
		err error
		dur time.Duration
	}
	outs := make([]outcome, len(actions))
	var wg sync.WaitGroup
	for i, a := range actions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := e.do(ctx, u, a)
			outs[i] = outcome{a: a, err: err, dur: time.Since(start)}
		}()
	}
	wg.Wait()
	now := e.cfg.Now()
	var evs []store.Event
	before := u
	for _, o := range outs {
		u = upgrade.Finished(u, o.a, o.err, now)
		ev := store.Event{Kind: "action", Member: o.a.Member, Component: e.componentOf(o.a),
			DurationMS: float64(o.dur.Microseconds()) / 1000}
		if o.err != nil && o.a.Kind == upgrade.ActStage && o.a.Stage == "migrate" {
			// A migration not done yet is progress, not trouble.
			ev.Kind = "stage"
			ev.Message = fmt.Sprintf("%s: not done yet: %v", describe(o.a), o.err)
		} else if o.err != nil {
			ev.Kind = "error"
			ev.Message = fmt.Sprintf("%s: failed after %s: %v", describe(o.a), o.dur.Round(time.Millisecond), o.err)
		} else {
			ev.Message = fmt.Sprintf("%s: done in %s", describe(o.a), o.dur.Round(time.Millisecond))
		}
		evs = append(evs, ev)
	}
	evs = append(evs, changes(before, u)...)
	if err := e.save(now, u, evs); err != nil {
		return u, err
	}
	return u, nil
}

// componentOf names the component an action is about.
func (e *Engine) componentOf(a upgrade.Action) string {
	if info, ok := e.members[a.Member]; ok {
		return info.comp.Name
	}
	if r := e.c.Release(a.Version); r != nil {
		return r.Migrations.Component
	}
	return ""
}

// stage makes the calls of a migration stage of the release a names,
// against a running member of the migrations' component (.Any).
func (e *Engine) stage(ctx context.Context, a upgrade.Action) error {
	r := e.c.Release(a.Version)
	if r == nil {
		return fmt.Errorf("release %s is not in the catalog", a.Version)
	}
	m := &r.Migrations
	comp := e.c.Component(m.Component)
	if comp == nil {
		return fmt.Errorf("release %s: migrations.component %q is not in the description", a.Version, m.Component)
	}
	var calls []config.Call
	switch a.Stage {
	case "expand":
		calls = m.Expand
	case "migrate":
		calls = m.Migrate
	case "finalize":
		calls = m.Finalize
	case "contract":
		calls = m.Contract
	default:
		return fmt.Errorf("unknown migration stage %q", a.Stage)
	}
	data := e.c.DataFor(comp, nil)
	data.Version = a.Version
	data.Any = e.anyRunning(comp)
	for i, c := range calls {
		if r := health.Do(ctx, c, data); !r.OK {
			return fmt.Errorf("%s call %d: %s", a.Stage, i+1, r.Detail)
		}
	}
	return nil
}

// anyRunning is the address of a member of comp last seen healthy (or
// running), the first member's otherwise.
func (e *Engine) anyRunning(comp *config.Component) string {
	e.mu.Lock()
	snap := e.lastSnap
	e.mu.Unlock()
	best := ""
	for i := range comp.Members {
		m := &comp.Members[i]
		if snap.Obs.Members[m.Name].Healthy {
			return m.Address
		}
		if best == "" && snap.Statuses[m.Name].Running {
			best = m.Address
		}
	}
	if best == "" && len(comp.Members) > 0 {
		best = comp.Members[0].Address
	}
	return best
}

// do performs one action.
func (e *Engine) do(ctx context.Context, u upgrade.Upgrade, a upgrade.Action) error {
	if a.Kind == upgrade.ActStage {
		return e.stage(ctx, a)
	}
	info, ok := e.members[a.Member]
	if !ok {
		return fmt.Errorf("unknown member %q", a.Member)
	}
	switch a.Kind {
	case upgrade.ActPreStop, upgrade.ActPostStart:
		calls := info.comp.Hooks.PreStop
		if a.Kind == upgrade.ActPostStart {
			calls = info.comp.Hooks.PostStart
		}
		data := info.data
		data.Version = u.Members[a.Member].Target
		for i, c := range calls {
			if r := health.Do(ctx, c, data); !r.OK {
				return fmt.Errorf("%s hook %d: %s", a.Kind, i+1, r.Detail)
			}
		}
		return nil
	case upgrade.ActStop:
		return e.cfg.Driver.Stop(ctx, info.spec)
	case upgrade.ActStart:
		art, err := e.artifact(info.comp.Name, a.Version)
		if err != nil {
			return err
		}
		return e.cfg.Driver.Start(ctx, info.spec, art)
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func describe(a upgrade.Action) string {
	switch a.Kind {
	case upgrade.ActStart:
		return fmt.Sprintf("start %s on %s", a.Member, a.Version)
	case upgrade.ActStop:
		return "stop " + a.Member
	case upgrade.ActStage:
		return fmt.Sprintf("%s of release %s", a.Stage, a.Version)
	default:
		return fmt.Sprintf("%s hooks of %s", a.Kind, a.Member)
	}
}

// changes describes, as events, how record b differs from record a:
// the upgrade's state, each member's step, what it waits on.
func changes(a, b upgrade.Upgrade) []store.Event {
	var evs []store.Event
	if a.State != b.State {
		msg := fmt.Sprintf("state %s → %s", a.State, b.State)
		if b.Reason != "" && (b.State == upgrade.StateFailed || b.State == upgrade.StateRollingBack || b.State == upgrade.StatePaused) {
			msg += ": " + b.Reason
		}
		evs = append(evs, store.Event{Kind: "state", Message: msg})
	}
	for _, n := range sortedKeys(b.Members) {
		mb := b.Members[n]
		ma := a.Members[n]
		if ma == nil || ma.Step != mb.Step {
			from := upgrade.MemberStep("")
			if ma != nil {
				from = ma.Step
			}
			msg := fmt.Sprintf("%s: %s → %s", n, from, mb.Step)
			if mb.Step == upgrade.StepFailed || mb.Step == upgrade.StepDone && mb.Detail != "" {
				msg += " (" + mb.Detail + ")"
			}
			evs = append(evs, store.Event{Kind: "step", Member: n, Component: mb.Component, Message: msg})
		}
	}
	if a.Waiting != b.Waiting && b.Waiting != "" {
		evs = append(evs, store.Event{Kind: "wait", Message: "waiting: " + b.Waiting})
	}
	return evs
}

// healthEvents reports members and gates whose verdict changed.
func (e *Engine) healthEvents(snap Snapshot, last map[string]bool) []store.Event {
	var evs []store.Event
	for _, n := range e.order {
		mh := snap.Obs.Members[n]
		if prev, ok := last[n]; !ok || prev != mh.Healthy {
			last[n] = mh.Healthy
			verdict := "healthy"
			if !mh.Healthy {
				verdict = "unhealthy"
			}
			evs = append(evs, store.Event{Kind: "health", Member: n, Component: e.members[n].comp.Name,
				Message: fmt.Sprintf("%s %s on %s: %s", n, verdict, orDash(mh.Version), orDash(mh.Detail))})
		}
	}
	for _, c := range sortedKeys(snap.Obs.Gates) {
		g := snap.Obs.Gates[c]
		key := "cluster:" + c
		if prev, ok := last[key]; !ok || prev != g.Healthy {
			last[key] = g.Healthy
			verdict := "green"
			if !g.Healthy {
				verdict = "red"
			}
			evs = append(evs, store.Event{Kind: "health", Component: c,
				Message: fmt.Sprintf("cluster gate %s %s: %s", c, verdict, orDash(g.Detail))})
		}
	}
	return evs
}

// overheads measures the engine's own delay: for each member whose
// soak ended before this decision, the time from the end of its soak
// (its health gate passing) to this decision's action.
func (e *Engine) overheads(a upgrade.Upgrade, d upgrade.Decision, now time.Time) []store.Event {
	if len(d.Actions) == 0 {
		return nil
	}
	var evs []store.Event
	for _, n := range sortedKeys(d.Upgrade.Members) {
		ma, mb := a.Members[n], d.Upgrade.Members[n]
		if ma == nil || ma.Step != upgrade.StepSoaking || mb.Step == upgrade.StepSoaking || mb.Step == upgrade.StepStarting {
			continue
		}
		passed := ma.HealthySince.Add(e.members[n].comp.Soak.D())
		if over := now.Sub(passed); over >= 0 {
			evs = append(evs, store.Event{Kind: "overhead", Member: n, Component: mb.Component,
				DurationMS: float64(over.Microseconds()) / 1000,
				Message:    fmt.Sprintf("%s passed its gate; next action %s later", n, over.Round(time.Microsecond))})
		}
	}
	return evs
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// batchEnded reports whether the batch record a was in has ended in
// record b, with when it began (its first member's drain) and its name.
func batchEnded(a, b upgrade.Upgrade) (time.Time, string, bool) {
	if a.RollingBack() || b.RollingBack() || a.Phase >= len(a.Plan.Phases) {
		return time.Time{}, "", false
	}
	ph := a.Plan.Phases[a.Phase]
	if a.Batch >= len(ph.Batches) || (b.Phase == a.Phase && b.Batch == a.Batch) {
		return time.Time{}, "", false
	}
	var from time.Time
	for _, n := range ph.Batches[a.Batch].Members {
		if m := b.Members[n]; m != nil && !m.Began.IsZero() && (from.IsZero() || m.Began.Before(from)) {
			from = m.Began
		}
	}
	if from.IsZero() {
		return time.Time{}, "", false // every member was already there
	}
	return from, fmt.Sprintf("%s batch %d", ph.Component, a.Batch+1), true
}
