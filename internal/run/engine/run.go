package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
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
		// The next step takes the downtime the operator accepted for
		// the first one (the same description, the same strategies).
		if _, err := e.BeginWith(ctx, u.Final, BeginOptions{AcceptDowntime: u.Downtime != ""}); err != nil {
			return u, fmt.Errorf("engine: the next step towards %s: %w", u.Final, err)
		}
	}
}

// outcome is an action's result, as its goroutine hands it back.
type outcome struct {
	a      upgrade.Action
	err    error
	detail string
	took   time.Duration
	// sums are a backup's files' checksums (upgrade.ActBackup).
	sums string
}

// journalReq is a driver's effect to record (or to drop, done) before
// it goes on.
type journalReq struct {
	seq    int
	member string
	effect journalEffect
	done   string // the key of an effect the driver undid itself
	// output is a replaced instance's output the driver kept: an
	// event, no change of the record.
	output *store.Event
	reply  chan error
}

// loop is one run of an upgrade: the record, what is in flight, and
// the channels the observer and the actions wake it with.
type loop struct {
	e        *Engine
	u        upgrade.Upgrade
	ob       *observer
	inflight map[int]context.CancelFunc
	outcomes chan outcome
	journal  chan journalReq
	wg       sync.WaitGroup
	health   map[string]bool // last reported verdicts, for events
	roles    map[string]bool
	answers  map[string]upgrade.Answer // the system's last reported answers
	reported uint64                    // the observer's gen those were reported at
	// saved is when the record was last written: it is written at
	// least every heartbeat, so that its Alive says when ferry last
	// watched.
	saved time.Time
	// fence is this run's claim on the store, rev the record's revision
	// as this run last read or wrote it: every save carries both.
	fence store.Fence
	rev   store.Revision
	// deposed is the store's refusal of a save (store.ErrConflict,
	// store.ErrFenced): another engine acts on the upgrade, and this one
	// writes nothing more; outcomes still arriving are dropped.
	deposed error
}

// heartbeat is how often a running engine writes its record at least:
// after a crash, the time since the record's Alive is time no engine
// watched (deadlines move by it), overstated by at most this.
const heartbeat = time.Second

// stalled is how much longer than a tick a pass of the loop may come
// after the one before before the gap counts as time ferry could not
// watch (a SIGSTOP, a starved process).
func stalled(tick time.Duration) time.Duration { return max(10*tick, 2*time.Second) }

// run drives the current upgrade. It is level-triggered: every pass
// takes the latest observation and the record, asks the machine what to
// do, writes the record (with the effects about to be made) and only
// then acts. Actions run in their own goroutines, each with a deadline:
// observation goes on while they run, and a pause or an abort is read
// while they are in flight.
func (e *Engine) run(ctx context.Context) (upgrade.Upgrade, error) {
	u, _, err := e.takeUp()
	if err != nil || u.State.Terminal() {
		return u, err
	}
	// Claimed only once it is known this engine can act on the record
	// (a build that cannot deposes no one), and read again under the
	// claim: a record read before it could be saved by the engine the
	// claim deposes meanwhile.
	fence, err := e.cfg.Store.Fence()
	if err != nil {
		return u, fmt.Errorf("engine: %w", err)
	}
	u, rev, err := e.takeUp()
	if err != nil || u.State.Terminal() {
		return u, err
	}
	octx, stopObserving := context.WithCancel(ctx)
	l := &loop{e: e, u: u, ob: e.newObserver(), inflight: map[int]context.CancelFunc{},
		outcomes: make(chan outcome, 16), journal: make(chan journalReq), health: map[string]bool{}, roles: map[string]bool{},
		answers: map[string]upgrade.Answer{}, fence: fence, rev: rev}
	// A first look before anything is decided: a member not asked yet
	// is not known, which the machine would take for an outage.
	l.ob.pollStatuses(octx)
	observed := l.ob.start(octx)
	actx, cancelActions := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		// Nothing is left running: actions in flight are cancelled and
		// waited for (their outcome folded in and saved when it can be).
		cancelActions()
		l.drain()
		stopObserving()
		<-observed
		l.ob.asks.Wait()
	}()
	return l.run(ctx, actx)
}

// takeUp reads the current record and refuses to act on it when the
// description changed since it began (CheckLock), or when it names what
// this build does not know (upgrade.Understood).
func (e *Engine) takeUp() (upgrade.Upgrade, store.Revision, error) {
	u, rev, err := e.cfg.Store.Read("")
	if errors.Is(err, store.ErrNotFound) {
		return u, 0, errors.New("engine: no upgrade to run; start one with 'ferry upgrade start'")
	}
	if err != nil {
		return u, 0, err
	}
	if err := CheckLock(u, e.c.Digest, e.c.File); err != nil {
		return u, 0, err
	}
	if u.State.Terminal() {
		return u, rev, nil
	}
	if err := upgrade.Understood(u); err != nil {
		return u, 0, fmt.Errorf("engine: %w", err)
	}
	if r := e.c.Release(u.To); r != nil && r.RequiresFerry != "" {
		// A newer ferry began it: this one moves nothing of it.
		if name, ok, detail := FerryUnderstands(u.To, r.RequiresFerry); !ok {
			return u, 0, fmt.Errorf("engine: upgrade %s: %s: %s", u.ID, name, detail)
		}
	}
	return u, rev, nil
}

// requestsReader is a store that reads the operator's requests of an
// upgrade without its record (store.Store keeps them beside it): the
// engine reads them each tick, and a record of thousands of members
// costs milliseconds to decode.
type requestsReader interface {
	ReadRequests(id string) (store.Requests, error)
}

// requests reads the operator's requests of upgrade id and its
// record's revision.
func (e *Engine) requests(id string) (store.Requests, error) {
	if rr, ok := e.cfg.Store.(requestsReader); ok {
		return rr.ReadRequests(id)
	}
	u, rev, err := e.cfg.Store.Read(id)
	return store.Requests{Intent: u.Intent, Overrides: u.Overrides, Revision: rev}, err
}

func (l *loop) run(ctx, actx context.Context) (upgrade.Upgrade, error) {
	e := l.e
	tick := l.ob.tick
	var lastIntent, lastPass time.Time
	timer := e.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return l.u, err
		}
		now := e.now()
		if !lastPass.IsZero() && now.Sub(lastPass) > stalled(tick) {
			// Far more time passed than a tick: the engine itself was
			// stopped or starved. That time was not watched.
			e.cfg.Logger.Warn("the engine's loop stalled; every member is checked again", "for", now.Sub(lastPass).Round(time.Millisecond))
			l.ob.returned(now)
		}
		lastPass = now
		// The operator's requests arrive through the store, from
		// whichever process took them.
		if now.Sub(lastIntent) >= tick {
			lastIntent = now
			if cur, err := e.requests(l.u.ID); err == nil {
				if cur.Revision != l.rev {
					// Another engine saved the record: it acts on the
					// upgrade, and this one must not, from now on.
					return l.u, l.depose(&store.ConflictError{Upgrade: l.u.ID, Read: l.rev, Stored: cur.Revision})
				}
				if cur.Intent.Seq > l.u.Intent.Seq {
					l.u.Intent = cur.Intent
					// What runs now, not what ran before the request:
					// a resume admits no one on an older observation.
					l.ob.kick("status")
				}
				if len(cur.Overrides) > len(l.u.Overrides) {
					l.u.Overrides = cur.Overrides
				}
			}
		}
		snap := l.ob.snapshot()
		e.mu.Lock()
		e.lastSnap = snap
		e.mu.Unlock()
		snap.Obs.Judging = e.cfg.Judge != nil
		snap.Obs.Acting = make(map[int]bool, len(l.inflight))
		for seq := range l.inflight {
			snap.Obs.Acting[seq] = true
		}
		var evs []store.Event
		if snap.gen != l.reported {
			// Verdicts change only with the observation.
			evs = e.healthEvents(snap, l.health, l.roles)
			evs = append(evs, e.answerEvents(snap, l.answers)...)
			l.reported = snap.gen
		}
		d := upgrade.Step(e.c, l.u, snap.Obs, now)
		if e.cfg.Judge != nil {
			for _, i := range batchesEnded(l.u, d.Upgrade) {
				b := d.Upgrade.Batches[i]
				why, judged := e.cfg.Judge(b.Began, now)
				if !judged {
					continue
				}
				ev := store.Event{Kind: "impact", Component: b.Component, Message: b.Name() + ": no impact on the clients"}
				if why != "" {
					ev.Message = b.Name() + " hurt the clients: " + why
					var stop bool
					if d.Upgrade, stop = upgrade.Impacted(e.c, d.Upgrade, i, why, now); stop {
						d.Actions = nil
					}
				}
				evs = append(evs, ev)
			}
		}
		evs = append(evs, changes(l.u, d.Upgrade)...)
		evs = append(evs, e.overheads(l.u, d, now)...)
		for _, a := range d.Actions {
			evs = append(evs, store.Event{Kind: "action", Member: a.Member, Component: e.componentOf(a),
				Message: upgrade.Describe(a) + ": started"})
		}
		// Write before acting: the record names what is about to
		// happen, and the effects it is about to make.
		if len(evs) > 0 || !upgrade.Same(l.u, d.Upgrade) || now.Sub(l.saved) >= heartbeat {
			if err := l.save(now, d.Upgrade, evs); err != nil {
				return l.u, err
			}
			l.saved = now
		}
		l.crashLoopOutput(actx, l.u, d.Upgrade)
		if l.deposed != nil {
			return l.u, l.deposed // its events were refused: nothing is started
		}
		l.ob.setMoving(d.Upgrade, upgrade.Touched(l.u, d.Upgrade))
		l.u = d.Upgrade
		for _, seq := range d.Cancel {
			if cancel := l.inflight[seq]; cancel != nil {
				cancel()
			}
		}
		for _, a := range d.Actions {
			l.dispatch(actx, a)
		}
		for _, c := range d.Probe {
			l.ob.kick("gate:" + c)
		}
		l.ob.ask(d.Ask)
		l.ob.askCapacity(d.AskHosts)
		if l.u.State.Terminal() {
			return l.u, nil
		}
		if e.cfg.ExitOnPause && l.u.State == upgrade.StatePaused && len(l.inflight) == 0 {
			return l.u, nil
		}
		wait := tick
		if d.After > 0 && d.After < wait {
			wait = d.After
		}
		timer.Reset(wait)
		// Wait for news: an observation, an action's end, a driver's
		// effect to record, or the time the machine asked for.
		select {
		case <-ctx.Done():
			return l.u, ctx.Err()
		case <-l.ob.changed:
		case o := <-l.outcomes:
			if err := l.finishedAll(queued(l.outcomes, o)); err != nil {
				return l.u, err
			}
		case r := <-l.journal:
			l.answer(queued(l.journal, r))
			if l.deposed != nil {
				return l.u, l.deposed
			}
		case <-timer.C():
		}
		timer.Stop()
	}
}

// dispatch starts action a in its own goroutine, with its deadline and
// the upgrade's journal in its context.
func (l *loop) dispatch(actx context.Context, a upgrade.Action) {
	ctx, cancel := l.e.cfg.Clock.WithTimeout(actx, l.e.timeout(l.u, a))
	ctx = withJournal(ctx, l, a)
	l.inflight[a.Seq] = cancel
	u := actionRecord(l.u, a)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cancel()
		start := l.e.now()
		var detail, sums string
		var err error
		if a.Kind == upgrade.ActBackup {
			detail, sums, err = l.e.backup(ctx, a)
		} else {
			detail, err = l.e.do(ctx, u, a)
		}
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("%w (its deadline of %s passed)", err, l.e.timeout(u, a))
		}
		l.outcomes <- outcome{a: a, err: err, detail: detail, took: l.e.since(start), sums: sums}
	}()
}

// actionRecord is what action a reads of record u (do, timeout): the
// upgrade's target and pin, the action's member, and for an undo its
// effect and that effect's member. An action runs for a while, and a
// thousand in flight, each holding the whole record of its own step,
// kept as many ten-thousand-member maps alive.
func actionRecord(u upgrade.Upgrade, a upgrade.Action) upgrade.Upgrade {
	r := upgrade.Upgrade{ID: u.ID, From: u.From, To: u.To, Pin: u.Pin, Members: map[string]*upgrade.Member{}}
	keep := func(n string) {
		if m := u.Members[n]; m != nil {
			r.Members[n] = m
		}
	}
	keep(a.Member)
	if a.Kind != upgrade.ActUndo {
		return r
	}
	if i := u.Effects.ByID(a.Effect); i >= 0 {
		r.Effects = effect.Journal{u.Effects[i]}
		if h := u.Effects[i].Undo.Hook; h != nil {
			keep(h.Member)
		}
	}
	return r
}

// maxFolded bounds the outcomes folded into one write.
const maxFolded = 4096

// queued is first and what waits on ch behind it already (at most
// maxFolded in all): folded together, a batch of a thousand members
// whose starts return at once is one write and one step, not a
// thousand; the effects and outputs its drivers journal at once, one
// write (loop.answer).
func queued[T any](ch <-chan T, first T) []T {
	out := []T{first}
	for len(out) < maxFolded {
		select {
		case x := <-ch:
			out = append(out, x)
		default:
			return out
		}
	}
	return out
}

// finishedAll folds the outcomes into the record and saves it once: a
// backup's each on its own (its verification is its own fold,
// upgrade.BackedUp), the others together (upgrade.FinishedAll).
func (l *loop) finishedAll(os []outcome) error {
	rest := make([]outcome, 0, len(os))
	for _, o := range os {
		if o.a.Kind == upgrade.ActBackup {
			if err := l.finished(o); err != nil {
				return err
			}
			continue
		}
		rest = append(rest, o)
	}
	if len(rest) == 0 {
		return nil
	}
	return l.fold(rest)
}

// finished folds an action's outcome into the record and saves it.
func (l *loop) finished(o outcome) error { return l.fold([]outcome{o}) }

// fold folds outcomes into the record, a backup's alone, and saves it
// with their events and what they changed.
func (l *loop) fold(os []outcome) error {
	now := l.e.now()
	before := l.u
	if o := os[0]; len(os) == 1 && o.a.Kind == upgrade.ActBackup {
		l.u = upgrade.BackedUp(l.u, o.a, o.sums, o.err, o.took, now)
	} else {
		outs := make([]upgrade.Outcome, len(os))
		for i, o := range os {
			outs[i] = upgrade.Outcome{Action: o.a, Err: o.err, Took: o.took}
		}
		l.u = upgrade.FinishedAll(l.u, outs, now)
	}
	evs := make([]store.Event, 0, len(os)+1)
	for _, o := range os {
		delete(l.inflight, o.a.Seq)
		if errors.Is(o.err, driver.ErrNotTrusted) {
			l.ob.refuse(o.err) // the upgrade stops on it: no retry as an outage
		}
		evs = append(evs, l.actionEvent(o))
	}
	evs = append(evs, changes(before, l.u)...)
	l.ob.setMoving(l.u, upgrade.Touched(before, l.u))
	l.saved = now
	return l.save(now, l.u, evs)
}

// actionEvent is the event of an action's outcome.
func (l *loop) actionEvent(o outcome) store.Event {
	e := l.e
	ev := store.Event{Kind: "action", Member: o.a.Member, Component: e.componentOf(o.a),
		DurationMS: float64(o.took.Microseconds()) / 1000}
	what := upgrade.Describe(o.a)
	switch {
	case o.err != nil && o.a.Kind == upgrade.ActStage && (o.a.Stage == config.StageMigrate || o.a.Gate):
		// A migration (or a gate) not done yet is progress, not trouble.
		ev.Kind = "stage"
		ev.Message = fmt.Sprintf("%s: not done yet: %v", what, o.err)
	case o.err != nil:
		ev.Kind = "error"
		ev.Message = fmt.Sprintf("%s: failed after %s: %v", what, o.took.Round(time.Millisecond), o.err)
	default:
		ev.Message = fmt.Sprintf("%s: done in %s", what, o.took.Round(time.Millisecond))
		if o.detail != "" {
			ev.Message += ": " + o.detail
		}
	}
	return ev
}

// drain waits for the actions in flight (cancelled by then) and folds
// in what they did, best effort: the record is what a resume starts
// from, and an action not recorded done is simply taken again.
func (l *loop) drain() {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	bound := l.e.cfg.Clock.NewTimer(30 * time.Second)
	defer bound.Stop()
	for {
		select {
		case o := <-l.outcomes:
			if err := l.finished(o); err != nil && l.deposed == nil {
				l.e.cfg.Logger.Error("saving an action's outcome", "err", err)
			}
		case r := <-l.journal:
			l.answer(queued(l.journal, r))
		case <-done:
			for {
				select {
				case o := <-l.outcomes:
					_ = l.finished(o)
				default:
					return
				}
			}
		case <-bound.C():
			l.e.cfg.Logger.Error("actions still running 30s after their cancellation; leaving them")
			return
		}
	}
}

// save writes the record and its events in one transaction, at the
// revision last read or written, under the run's fence. A refusal of
// either deposes the run (depose).
func (l *loop) save(now time.Time, u upgrade.Upgrade, evs []store.Event) error {
	if l.deposed != nil {
		// Whatever it would say is another engine's to find (it
		// observes), not this one's to write over its record.
		return l.deposed
	}
	for i := range evs {
		evs[i].Time = now
		evs[i].Upgrade = u.ID
	}
	rev, stored, err := l.e.cfg.Store.SaveAt(u, l.rev, l.fence, evs)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrFenced) {
		return l.depose(err)
	}
	if err != nil {
		return fmt.Errorf("engine: save upgrade %s: %w", u.ID, err)
	}
	l.rev = rev
	l.e.publish(stored)
	return nil
}

// emit stores events of no save (a crash loop's output) under the
// run's fence: a refusal deposes the run, as a save's does.
func (l *loop) emit(u upgrade.Upgrade, evs ...store.Event) {
	if l.deposed != nil {
		return
	}
	if err := l.e.emit(l.fence, l.e.now(), u, evs...); err != nil {
		l.depose(err)
	}
}

// ErrDeposed is matched (errors.Is) by the error a run ends with when
// the store refused its save: another engine acts on the upgrade.
var ErrDeposed = errors.New("engine: deposed: another engine acts on the upgrade; this one stopped acting")

// depose stops the run for good on the store's refusal why: nothing
// more is saved or started, the actions in flight are cancelled (run's
// deferred drain), and it says so, once.
func (l *loop) depose(why error) error {
	if l.deposed == nil {
		l.deposed = fmt.Errorf("%w: upgrade %s: %w", ErrDeposed, l.u.ID, why)
		l.e.cfg.Logger.Error("this engine no longer holds the upgrade's record and stops acting at once", "upgrade", l.u.ID, "err", why)
	}
	return l.deposed
}

// componentOf names the component an action is about.
func (e *Engine) componentOf(a upgrade.Action) string {
	if info, ok := e.members[a.Member]; ok {
		return info.comp.Name
	}
	if a.Component != "" {
		return a.Component
	}
	if r := e.c.Release(a.Version); r != nil && a.Kind == upgrade.ActStage {
		comp, _ := r.StageCalls(a.Stage, a.Name, a.Gate)
		return comp
	}
	return ""
}

// batchesEnded returns the indexes in b.Batches of the forward batches
// that ended between records a and b.
func batchesEnded(a, b upgrade.Upgrade) []int {
	var out []int
	for i, bb := range b.Batches {
		if bb.Rollback || bb.Ended.IsZero() || bb.Outcome.Size == 0 { // a batch a rollback cut short is not judged
			continue
		}
		if i < len(a.Batches) && !a.Batches[i].Ended.IsZero() {
			continue
		}
		out = append(out, i)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
