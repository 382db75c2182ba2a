package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Bounds of what an action may take beyond its own calls' timeouts.
const (
	actionMargin     = 5 * time.Second
	driverOpMargin   = 30 * time.Second
	driverUndoBound  = time.Minute
	maxDetailInEvent = 1024
)

// timeout is action a's deadline: every action has one, so that none
// can hold an upgrade (or a pause, or an abort) forever.
func (e *Engine) timeout(u upgrade.Upgrade, a upgrade.Action) time.Duration {
	sum := func(calls []config.Call) time.Duration {
		d := actionMargin
		for _, c := range calls {
			d += c.Timeout.D()
		}
		return d
	}
	switch a.Kind {
	case upgrade.ActHooks:
		return sum(e.hookCalls(a))
	case upgrade.ActStop:
		return e.members[a.Member].comp.Run.StopTimeout.D() + driverOpMargin
	case upgrade.ActStart:
		comp := e.members[a.Member].comp
		d := comp.Deadline.D() + comp.Run.StopTimeout.D() + driverOpMargin
		if w := comp.Workload; w != nil && w.DrainTimeout > 0 {
			d += w.DrainTimeout.D()
		}
		return d
	case upgrade.ActStage:
		return sum(e.stageCalls(a))
	case upgrade.ActBackup, upgrade.ActRestore:
		if info, ok := e.members[a.Member]; ok && info.comp.Backup != nil {
			return backupTimeout(info.comp.Backup, a)
		}
	case upgrade.ActPrune:
		if comp := e.c.Component(a.Component); comp != nil && comp.Backup != nil {
			return backupTimeout(comp.Backup, a)
		}
	case upgrade.ActLock:
		if calls, driverOp := e.hostTimeout(a.Host, true); !driverOp {
			return sum(calls)
		}
		return e.hostCommandTimeout(a.Host, config.HostLock)
	case upgrade.ActReinstall:
		return e.hostCommandTimeout(a.Host, config.HostReinstall)
	case upgrade.ActMigrateHost:
		return e.hostCommandTimeout(a.Host, config.HostMigrate)
	case upgrade.ActFerry:
		return e.ferryTimeout()
	case upgrade.ActUndo:
		if i := u.Effects.ByID(a.Effect); i >= 0 {
			if h := u.Effects[i].Undo.Unlock; h != "" {
				if calls, driverOp := e.hostTimeout(h, false); !driverOp {
					return sum(calls)
				}
				return e.hostCommandTimeout(h, config.HostUnlock)
			}
			if h := u.Effects[i].Undo.Hook; h != nil && h.To != "" {
				return sum(e.hookCalls(upgrade.Action{Hooks: h.List, Component: h.Component}))
			}
			if h := u.Effects[i].Undo.Hook; h != nil {
				if c := e.undoCall(h); c != nil {
					return sum([]config.Call{*c})
				}
			}
		}
		return driverUndoBound
	}
	return time.Minute
}

// do performs one action; detail says what its calls answered. u holds
// what an action reads of the record (actionRecord).
func (e *Engine) do(ctx context.Context, u upgrade.Upgrade, a upgrade.Action) (string, error) {
	switch a.Kind {
	case upgrade.ActStage:
		return e.stage(ctx, a)
	case upgrade.ActUndo:
		return e.undo(ctx, u, a)
	case upgrade.ActHooks:
		return e.runHooks(ctx, u, a)
	case upgrade.ActLock:
		return e.lockHost(ctx, a.Host, a.Version, a.Pin, true)
	case upgrade.ActRestore:
		return e.restore(ctx, a)
	case upgrade.ActPrune:
		return e.pruneBackups(ctx, a)
	case upgrade.ActReinstall, upgrade.ActMigrateHost:
		return "", e.reinstallHost(ctx, u.ID, a.Host, a.Version, a.Kind == upgrade.ActMigrateHost)
	case upgrade.ActFerry:
		return e.ferryFirst(ctx, u, a)
	}
	info, ok := e.members[a.Member]
	if !ok {
		return "", fmt.Errorf("unknown member %q", a.Member)
	}
	switch a.Kind {
	case upgrade.ActStop:
		if r, ok := e.cfg.Driver.(driver.Replacer); ok && r.StartReplaces(info.spec) {
			return "left to its start, which replaces it", nil
		}
		return "", e.cfg.Driver.Stop(ctx, info.spec)
	case upgrade.ActStart:
		art, err := e.artifact(info.comp.Name, a.Version)
		if err != nil {
			return "", err
		}
		spec, err := e.specWithPin(a.Member, a.Pin)
		if err != nil {
			return "", err
		}
		return "", e.cfg.Driver.Start(ctx, spec, art)
	}
	return "", fmt.Errorf("unknown action %q", a.Kind)
}

// specWithPin is member n's run spec rendered with pin as .Pin: the
// record's pin when the engine starts it, so that a member started
// after a rollout or finalize moved the pin carries the new one. The
// spec rendered at New (pin unknown, "") serves every other use.
func (e *Engine) specWithPin(n, pin string) (driver.Member, error) {
	info, ok := e.members[n]
	if !ok {
		return driver.Member{}, fmt.Errorf("unknown member %q", n)
	}
	if pin == "" {
		return info.spec, nil
	}
	data := info.data
	data.Pin = pin
	return renderSpec(e.c, info.comp, info.member, data)
}

// hookCalls are the calls of hook action a.
func (e *Engine) hookCalls(a upgrade.Action) []config.Call {
	if a.Member != "" {
		return e.members[a.Member].comp.Hooks.List(a.Hooks)
	}
	if a.Component != "" {
		if comp := e.c.Component(a.Component); comp != nil {
			return comp.Hooks.List(a.Hooks)
		}
		return nil
	}
	return e.c.Hooks.List(a.Hooks)
}

// callData is the template data of a call made for member (one of
// component's, any running member's for a phase's hooks, nothing for
// the upgrade's own).
func (e *Engine) callData(member, component, version string) config.TemplateData {
	var data config.TemplateData
	switch {
	case member != "":
		data = e.members[member].data
		e.mu.Lock()
		data.PID = e.lastSnap.Statuses[member].PID
		e.mu.Unlock()
	case component != "":
		if comp := e.c.Component(component); comp != nil {
			data = e.c.DataFor(comp, nil)
			data.Any = e.anyRunning(comp)
		}
	}
	data.Version = version
	return data
}

// runHooks makes the calls of a hook list, in order, stopping at the
// first that fails; their answers (bounded) are the detail.
func (e *Engine) runHooks(ctx context.Context, u upgrade.Upgrade, a upgrade.Action) (string, error) {
	version := a.Version
	if m := u.Members[a.Member]; m != nil {
		version = m.Target
	}
	data := e.callData(a.Member, a.Component, version)
	data.Pin, data.To = a.Pin, a.To
	return e.callList(ctx, a.Hooks, e.hookCalls(a), data)
}

// callList makes the calls of hook list name, in order, stopping at
// the first that fails; their answers (bounded) are the detail.
func (e *Engine) callList(ctx context.Context, name string, calls []config.Call, data config.TemplateData) (string, error) {
	var out []string
	for i, c := range calls {
		r := e.prober.Do(ctx, c, data)
		out = append(out, r.Detail)
		if !r.OK {
			return bounded(strings.Join(out, " | ")), fmt.Errorf("%s hook %d: %s", name, i+1, r.Detail)
		}
	}
	return bounded(strings.Join(out, " | ")), nil
}

// undoCall is the undo of the hook call h names.
func (e *Engine) undoCall(h *effect.Hook) *config.Call {
	var calls []config.Call
	switch {
	case h.Member != "":
		if info, ok := e.members[h.Member]; ok {
			calls = info.comp.Hooks.List(h.List)
		}
	case h.Component != "":
		if comp := e.c.Component(h.Component); comp != nil {
			calls = comp.Hooks.List(h.List)
		}
	default:
		calls = e.c.Hooks.List(h.List)
	}
	if h.Index < 0 || h.Index >= len(calls) {
		return nil
	}
	return calls[h.Index].Undo
}

// undo undoes one effect of the journal: a hook's undo call, rendered
// now from the description the upgrade is locked to, or the driver's.
func (e *Engine) undo(ctx context.Context, u upgrade.Upgrade, a upgrade.Action) (string, error) {
	i := u.Effects.ByID(a.Effect)
	if i < 0 {
		return "", nil // undone already
	}
	ef := u.Effects[i]
	if h := ef.Undo.Unlock; h != "" {
		return e.lockHost(ctx, h, u.To, u.Pin, false)
	}
	if h := ef.Undo.Hook; h != nil && h.To != "" {
		// A handover's undo: the same list, made with .To the member
		// that held what it handed over.
		data := e.callData("", h.Component, u.To)
		data.Pin, data.To = u.Pin, h.To
		detail, err := e.callList(ctx, h.List, e.hookCalls(upgrade.Action{Hooks: h.List, Component: h.Component}), data)
		if err != nil {
			return detail, fmt.Errorf("undo of %s: %w", ef.ID, err)
		}
		return detail, nil
	}
	if h := ef.Undo.Hook; h != nil {
		c := e.undoCall(h)
		if c == nil {
			return "", fmt.Errorf("effect %s: the description has no undo for %s hook %d of %s", ef.ID, h.List, h.Index+1, firstNonEmpty(h.Member, h.Component, "the cluster"))
		}
		version := u.To
		if m := u.Members[h.Member]; m != nil {
			version = m.Target
		}
		data := e.callData(h.Member, h.Component, version)
		data.Pin = u.Pin
		r := e.prober.Do(ctx, *c, data)
		if !r.OK {
			return bounded(r.Detail), fmt.Errorf("undo of %s: %s", ef.ID, r.Detail)
		}
		return bounded(r.Detail), nil
	}
	ud, ok := e.cfg.Driver.(driver.Undoer)
	if !ok {
		return "", fmt.Errorf("effect %s (%s): the %s driver cannot undo it", ef.ID, ef.What, e.c.Substrate)
	}
	return "", ud.Undo(ctx, ef.Key, ef.Undo.Driver)
}

// stageCalls are the calls of migration stage (or registered kind's
// stage, an action) a.
func (e *Engine) stageCalls(a upgrade.Action) []config.Call {
	r := e.c.Release(a.Version)
	if r == nil {
		return nil
	}
	_, calls := r.StageCalls(a.Stage, a.Name, a.Gate)
	return calls
}

// stage makes the calls of a migration stage (or a flow's action, or
// its gate) of the release a names, against a running member of the
// stage's component (.Any).
func (e *Engine) stage(ctx context.Context, a upgrade.Action) (string, error) {
	r := e.c.Release(a.Version)
	if r == nil {
		return "", fmt.Errorf("release %s is not in the catalog", a.Version)
	}
	name, calls := r.StageCalls(a.Stage, a.Name, a.Gate)
	comp := e.c.Component(name)
	if comp == nil {
		return "", fmt.Errorf("release %s: the component %q of its %s stage is not in the description", a.Version, name, a.Stage)
	}
	if calls == nil {
		return "", fmt.Errorf("unknown migration stage %q", a.Stage)
	}
	data := e.callData("", comp.Name, a.Version)
	data.Pin = a.Pin
	var out []string
	for i, c := range calls {
		res := e.prober.Do(ctx, c, data)
		out = append(out, res.Detail)
		if !res.OK {
			return bounded(strings.Join(out, " | ")), fmt.Errorf("%s call %d: %s", a.Stage, i+1, res.Detail)
		}
	}
	return bounded(strings.Join(out, " | ")), nil
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

// journalEffect is a driver's effect on its way to the record.
type journalEffect struct {
	effect.Effect
}

// journaler is the journal a driver call records its effects in: each
// is written to the upgrade's record by the engine's loop, before the
// driver goes on to make the change.
type journaler struct {
	l      *loop
	ctx    context.Context
	seq    int
	member string
}

func withJournal(ctx context.Context, l *loop, a upgrade.Action) context.Context {
	return driver.WithJournal(ctx, &journaler{l: l, ctx: ctx, seq: a.Seq, member: a.Member})
}

func (j *journaler) send(r journalReq) error {
	r.reply = make(chan error, 1)
	select {
	case j.l.journal <- r:
	case <-j.ctx.Done():
		return fmt.Errorf("the effect was not recorded: %w", j.ctx.Err())
	}
	select {
	case err := <-r.reply:
		return err
	case <-j.ctx.Done():
		return fmt.Errorf("the effect may not be recorded: %w", j.ctx.Err())
	}
}

// actionEvent adds ev to the upgrade's events from an action in
// flight: through the run's loop, under its fence and in order with its
// saves.
func actionEvent(ctx context.Context, ev store.Event) error {
	j, ok := driver.JournalFrom(ctx).(*journaler)
	if !ok {
		return errors.New("engine: an event of an action outside a run")
	}
	return j.send(journalReq{seq: j.seq, member: j.member, output: &ev})
}

func (j *journaler) Record(_ context.Context, de driver.Effect) error {
	scope := effect.Member(j.member)
	if de.Workload {
		scope = effect.Phase(j.l.e.members[j.member].comp.Name)
	}
	return j.send(journalReq{seq: j.seq, member: j.member, effect: journalEffect{effect.Effect{Key: de.Key, Scope: scope, What: de.What,
		UndoWhat: "undone by the " + j.l.e.c.Substrate + " driver", Undo: effect.Undo{Driver: de.Undo}}}})
}

func (j *journaler) Done(_ context.Context, key string) error {
	return j.send(journalReq{seq: j.seq, member: j.member, done: key})
}

// KeepOutput keeps the output of an instance the driver is about to
// replace as an event of the upgrade (driver.OutputKeeper), through the
// loop like the effects, so that events stay in order.
func (j *journaler) KeepOutput(_ context.Context, o driver.KeptOutput) error {
	ev := KeptOutputEvent(j.member, o)
	return j.send(journalReq{seq: j.seq, member: j.member, output: &ev})
}

// record writes drivers' effects into the record (or drops those they
// undid themselves), with their events, before the drivers act; and
// adds the output they kept to the events. Requests waiting together
// are written together: a batch of a hundred pods keeps their output
// and opens their effects in one write, not a hundred in a row, each
// waiting on the disk before its pod may go. One error answers them
// all: none of them was written.
func (l *loop) record(rs ...journalReq) error {
	now := l.e.now()
	var evs []store.Event
	changed := false
	for _, r := range rs {
		var ev store.Event
		switch {
		case r.output != nil:
			ev = *r.output
			ev.Time = now
		case r.done != "":
			u, ef, ok := upgrade.Undone(l.u, r.done, now)
			if !ok {
				continue
			}
			l.u, changed = u, true
			ev = store.Event{Kind: "effect", Member: r.member, Message: fmt.Sprintf("effect %s closed: %s (undone by its own step)", ef.ID, ef.What)}
		default:
			u, added := upgrade.Record(l.u, r.effect.Effect, now)
			if !added {
				continue
			}
			l.u, changed = u, true
			ef := l.u.Effects[l.u.Effects.Find(r.effect.Key)]
			ev = store.Event{Kind: "effect", Member: r.member, Message: fmt.Sprintf("effect %s opened: %s", ef.ID, ef.What)}
		}
		ev.Component = l.e.componentOf(upgrade.Action{Member: r.member})
		evs = append(evs, ev)
	}
	if !changed {
		if len(evs) > 0 {
			l.emit(l.u, evs...) // under the run's fence, as a save's events
		}
		return l.deposed
	}
	return l.save(now, l.u, evs)
}

// answer records rs and answers each.
func (l *loop) answer(rs []journalReq) {
	err := l.record(rs...)
	for _, r := range rs {
		r.reply <- err
	}
}

// crashLoopOutput adds, for each member whose move just failed on a
// crash loop, its exit and the last lines of its output to the events
// (from the driver, when it keeps them).
func (l *loop) crashLoopOutput(ctx context.Context, a, b upgrade.Upgrade) {
	lg, ok := l.e.cfg.Driver.(driver.Logger)
	for _, n := range upgrade.Touched(a, b) {
		mb, ma := b.Members[n], a.Members[n]
		if !mb.CrashLoop || (ma != nil && ma.CrashLoop) {
			continue
		}
		target := mb.Target
		if ma != nil {
			target = ma.Target // a rollback may have begun in the same step
		}
		msg := fmt.Sprintf("%s: crash loop on %s: exited %d times, the last: %s", n, target, mb.Exits, orDash(mb.ExitDetail))
		if ok {
			cctx, cancel := l.e.cfg.Clock.WithTimeout(ctx, 3*time.Second)
			out, err := lg.Logs(cctx, l.e.members[n].spec, false, 20)
			cancel()
			switch {
			case err != nil:
				msg += fmt.Sprintf("; its output could not be read: %v", err)
			case strings.TrimSpace(out) != "":
				msg += "; its last output:\n" + bounded(out)
			}
		}
		l.emit(b, store.Event{Kind: "output", Member: n, Component: mb.Component, Message: msg})
	}
}

// bounded keeps what an event quotes of a call's answer or a member's
// output short.
func bounded(s string) string {
	if len(s) <= maxDetailInEvent {
		return s
	}
	return s[:maxDetailInEvent] + "…"
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

var _ = errors.New
var _ = health.DefaultTimeout
