package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Cluster up and down: every member of the description started at one
// release, or stopped, through the substrate; not an upgrade (no
// record, no plan of batches), but the same order, the same health
// checks and the same refusal while an upgrade runs. It is how an
// operator brings a described cluster to life at release N, so that
// ferry can take it to N+1.

// Errors of Up and Down, for the CLI's exit codes and the server's
// statuses (errors.Is).
var (
	// ErrVersionsDiffer: members run a release other than the one asked
	// for; Up changed nothing (moving them is an upgrade's work).
	ErrVersionsDiffer = errors.New("members run another release")
	// ErrNotHealthy: members were started but did not become healthy
	// (or a cluster gate green) within their component's deadline.
	ErrNotHealthy = errors.New("not healthy in time")
	// ErrIncapable: the description's substrate cannot do what was
	// asked (bring a cluster up: Kubernetes runs its own workloads);
	// nothing was touched. The error says which capability, by name.
	ErrIncapable = substrate.ErrIncapable
	// ErrArtifact: an artifact of the release is missing or not what
	// its sha256 says; Up started nothing.
	ErrArtifact = errors.New("artifact not usable")
	// ErrPinned: the catalog does not allow the release from the one
	// the cluster was last finalized at (its data may be in a format
	// the release cannot read); Up started nothing.
	ErrPinned = errors.New("release not allowed from the finalized pin")
)

// ClusterMember is what Up or Down did with one member.
type ClusterMember struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	// Action: started (Up started it), kept (it ran the release,
	// healthy, and was left alone), stopped (Down stopped it), down (it
	// was not running).
	Action string `json:"action"`
	// Version is what it runs after Up (what it ran, for Down).
	Version string `json:"version,omitempty"`
	// Adopted: its process was found running, not started by ferry.
	Adopted bool `json:"adopted,omitempty"`
	// Healthy is how long it took, from its start, to pass its check.
	HealthyAfterS float64 `json:"healthy_after_s,omitempty"`
}

// ClusterReport is the outcome of Up or Down.
type ClusterReport struct {
	Operation string          `json:"operation"` // up or down
	Version   string          `json:"version,omitempty"`
	Members   []ClusterMember `json:"members"`
	DurationS float64         `json:"duration_s"`
}

// Progress receives a line for the operator at each step of Up and
// Down; nil says nothing.
type Progress func(msg string)

// together reports whether a component's members start together: a
// component whose strategy keeps a quorum, or whose members hold a
// role, bootstraps as a group (a raft cluster elects a leader only once
// a majority runs), so waiting for one before starting the next would
// wait forever.
func together(comp *config.Component) bool {
	if comp.Role != nil {
		return true
	}
	st, ok := strategy.Lookup(string(comp.Strategy.Type))
	return ok && st.Quorum(comp.Strategy.Settings(), len(comp.Members)) > 0
}

// refuseDuringUpgrade refuses while an upgrade has not ended: its
// members are the upgrade's to move.
func (e *Engine) refuseDuringUpgrade(what string) error {
	cur, ok, err := e.cfg.Store.Current()
	if err != nil {
		return err
	}
	if ok && !cur.State.Terminal() {
		return fmt.Errorf("%w: %s refused: upgrade %s is %s (%s → %s); let it end, or abort it", store.ErrActive, what, cur.ID, cur.State, cur.From, cur.To)
	}
	return nil
}

// finalizedStore is a store that keeps the upgrades that ended, as the
// embedded one does: the last finalized says what the cluster's data
// may have become.
type finalizedStore interface {
	LastFinalized() (upgrade.Upgrade, bool, error)
}

// refuseBelowPin refuses release version when the catalog does not
// allow it from the release the cluster was last finalized at: after a
// finalize there is no going back, and a cluster stopped and started
// again is no way around it.
func (e *Engine) refuseBelowPin(version string) error {
	fs, ok := e.cfg.Store.(finalizedStore)
	if !ok {
		return nil
	}
	u, ok, err := fs.LastFinalized()
	if err != nil || !ok {
		return err
	}
	pin := cmp.Or(u.Pin, u.To)
	if plan.Allowed(e.c, pin, version) {
		return nil
	}
	why := fmt.Sprintf("release %s upgrades from [%s]", version, strings.Join(e.c.Release(version).UpgradeFrom, ", "))
	if config.CompareVersions(version, pin) < 0 {
		why = fmt.Sprintf("release %s is not in the catalog", pin)
		if r := e.c.Release(pin); r != nil {
			why = fmt.Sprintf("release %s goes down to [%s] only (its downgrade_to)", pin, strings.Join(r.DowngradeTo, ", "))
		}
	}
	return fmt.Errorf("%w: cluster up at %s refused, nothing was started: upgrade %s finalized %s at %s (no going back: the cluster's data may be in a format %s cannot read), and the catalog does not allow %s from %s: %s; bring it up at %s",
		ErrPinned, version, u.ID, pin, u.Finalized.UTC().Format(time.RFC3339), version, version, pin, why, pin)
}

// Up starts every member of the description at release version, in
// the plan's order (components by order), and waits for each to be
// healthy (and its component's cluster gate green) within its
// component's deadline (gate_deadline for the gate). Members of a
// component that bootstraps together (its strategy keeps a quorum, or it has a role)
// are started together and then waited for; the others one at a time.
// Members that run version already (started by ferry or adopted) are
// left alone. It refuses, changing nothing, while an upgrade runs, at a
// release the catalog does not allow from the one last finalized
// (ErrPinned), when a member runs another release (that is an upgrade),
// and when an artifact is missing or has the wrong checksum.
func (e *Engine) Up(ctx context.Context, version string, progress Progress) (ClusterReport, error) {
	began := e.now()
	rep := ClusterReport{Operation: "up", Version: version}
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	if err := e.Require(substrate.ClusterUp); err != nil {
		return rep, fmt.Errorf("cluster up: %w", err)
	}
	if err := e.refuseDuringUpgrade("cluster up"); err != nil {
		return rep, err
	}
	if e.c.Release(version) == nil {
		return rep, fmt.Errorf("release %s is not in the catalog; known: %s", version, strings.Join(e.releaseNames(), ", "))
	}
	if err := e.refuseBelowPin(version); err != nil {
		return rep, err
	}
	for _, comp := range e.c.ComponentsInOrder() {
		a, err := e.artifact(comp.Name, version)
		if err != nil {
			return rep, fmt.Errorf("%w: %v", ErrArtifact, err)
		}
		if err := e.checkLoad(ctx, comp.Name, version, a).Refusal(); err != nil {
			return rep, fmt.Errorf("%w: artifact of %s %s: %v; nothing was started", ErrArtifact, comp.Name, version, err)
		}
	}
	snap, err := e.Observe(ctx)
	if err != nil {
		return rep, err
	}
	var other []string
	for _, n := range e.order {
		st := snap.Statuses[n]
		switch {
		case st.Running && st.Adopted && st.Version == "":
			other = append(other, fmt.Sprintf("%s (adopted; its version is not known: %s)", n, orDash(st.Detail)))
		case st.Running && st.Version != version:
			other = append(other, fmt.Sprintf("%s runs %s", n, st.Version))
		}
	}
	if len(other) > 0 {
		return rep, fmt.Errorf("%w: %s; nothing was started: cluster up starts members, it does not move them (ferry upgrade start --to %s does)",
			ErrVersionsDiffer, strings.Join(other, ", "), version)
	}

	octx, stop := context.WithCancel(ctx)
	o := e.newObserver()
	o.pollStatuses(octx)
	done := o.start(octx)
	defer func() { stop(); <-done }()

	for _, comp := range e.c.ComponentsInOrder() {
		a, _ := e.artifact(comp.Name, version)
		var start, kept []string
		for _, m := range comp.Members {
			if snap.Statuses[m.Name].Running {
				kept = append(kept, m.Name)
			} else {
				start = append(start, m.Name)
			}
		}
		started := map[string]time.Time{}
		var mu sync.Mutex
		startOne := func(n string) error {
			t := e.now()
			spec, err := e.specWithPin(n, version) // a cluster brought up at a release is pinned to it
			if err != nil {
				return err
			}
			if err := e.cfg.Driver.Start(ctx, spec, a); err != nil {
				return fmt.Errorf("start %s on %s: %w", n, version, err)
			}
			mu.Lock()
			started[n] = t
			mu.Unlock()
			o.kick("status")
			return nil
		}
		if len(kept) > 0 {
			say("%s: %s run %s already: left alone", comp.Name, strings.Join(kept, ", "), version)
		}
		if together(comp) && len(start) > 0 {
			say("%s: starting %s together (they bootstrap as a group)", comp.Name, strings.Join(start, ", "))
			// One after the other, none waited for: a start returns once
			// the process runs (tens of milliseconds), and concurrent
			// first starts of one artifact would race its copy on the
			// agent against their forks (ETXTBSY).
			for _, n := range start {
				if err := startOne(n); err != nil {
					return rep, err
				}
			}
			if err := e.waitUp(ctx, o, comp, slices.Concat(start, kept), version, started, say); err != nil {
				return rep, err
			}
		} else {
			for _, n := range start {
				say("%s: starting %s", comp.Name, n)
				if err := startOne(n); err != nil {
					return rep, err
				}
				if err := e.waitUp(ctx, o, comp, []string{n}, version, started, say); err != nil {
					return rep, err
				}
			}
			if len(kept) > 0 {
				if err := e.waitUp(ctx, o, comp, kept, version, started, say); err != nil {
					return rep, err
				}
			}
		}
		if err := e.waitGate(ctx, o, comp, say); err != nil {
			return rep, err
		}
		final := o.snapshot()
		for _, m := range comp.Members {
			cm := ClusterMember{Name: m.Name, Component: comp.Name, Action: "kept", Version: version, Adopted: final.Statuses[m.Name].Adopted}
			if t, ok := started[m.Name]; ok {
				cm.Action = "started"
				if hs := final.Obs.Members[m.Name].HealthySince; !hs.IsZero() {
					cm.HealthyAfterS = hs.Sub(t).Seconds()
				}
			}
			rep.Members = append(rep.Members, cm)
		}
	}
	rep.DurationS = e.since(began).Seconds()
	say("cluster up: every member runs %s, healthy (%.1fs)", version, rep.DurationS)
	return rep, nil
}

// waitUp waits until every member of names runs version and passes its
// check, within the component's deadline from now.
func (e *Engine) waitUp(ctx context.Context, o *observer, comp *config.Component, names []string, version string, started map[string]time.Time, say func(string, ...any)) error {
	deadline := e.now().Add(comp.Deadline.D())
	waiting := slices.Clone(names)
	for {
		snap := o.snapshot()
		var still []string
		for _, n := range waiting {
			mh := snap.Obs.Members[n]
			if mh.Running && mh.Healthy && mh.Version == version {
				after := ""
				if t, ok := started[n]; ok {
					after = fmt.Sprintf(" after %.1fs", e.since(t).Seconds())
				}
				say("%s: healthy on %s%s", n, version, after)
				continue
			}
			still = append(still, n)
		}
		waiting = still
		if len(waiting) == 0 {
			return nil
		}
		// A member that exited since its start, and that nothing will
		// restart (or that keeps exiting), will not become healthy:
		// say so now, with how it exited and what it wrote last.
		for _, n := range waiting {
			st := snap.Statuses[n]
			t, ok := started[n]
			if !ok || st.Unknown || st.Since.Before(t) {
				continue
			}
			exited := !st.Running && comp.Run.Restart != "on-failure"
			looping := st.Restarts >= comp.CrashLoop.Exits
			if exited || looping {
				why := fmt.Sprintf("not running: %s", orDash(st.Detail))
				if looping {
					why = fmt.Sprintf("restarted %d times by its agent since its start (crash_loop.exits %d): %s", st.Restarts, comp.CrashLoop.Exits, orDash(st.Detail))
				}
				return fmt.Errorf("%w: %s on %s: %s%s", ErrNotHealthy, n, version, why, e.lastOutput(ctx, n))
			}
		}
		if e.now().After(deadline) {
			var why []string
			for _, n := range waiting {
				mh := snap.Obs.Members[n]
				why = append(why, fmt.Sprintf("%s: %s", n, orDash(mh.Detail)))
			}
			return fmt.Errorf("%w: %s not healthy on %s within the deadline of %s (%s): %s", ErrNotHealthy,
				strings.Join(waiting, ", "), version, comp.Deadline, comp.Name, strings.Join(why, "; "))
		}
		if err := wait(ctx, o, deadline.Sub(e.now())); err != nil {
			return err
		}
	}
}

// lastOutput is "; its last output: ..." from the driver, when it keeps
// its members' output, or "".
func (e *Engine) lastOutput(ctx context.Context, n string) string {
	lg, ok := e.cfg.Driver.(driver.Logger)
	if !ok {
		return ""
	}
	cctx, cancel := e.cfg.Clock.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := lg.Logs(cctx, e.members[n].spec, false, 10)
	if err != nil || strings.TrimSpace(out) == "" {
		return ""
	}
	return "; its last output:\n" + bounded(out)
}

// waitGate waits, when the component has a cluster gate, for a green
// gate checked after its members became healthy, within its
// gate_deadline.
func (e *Engine) waitGate(ctx context.Context, o *observer, comp *config.Component, say func(string, ...any)) error {
	if comp.Health.Cluster == nil {
		return nil
	}
	from := e.now()
	deadline := from.Add(comp.GateDeadline.D())
	o.kick("gate:" + comp.Name)
	for {
		g := o.snapshot().Obs.Gates[comp.Name]
		if g.Healthy && !g.Checked.Before(from) {
			say("%s: cluster gate green: %s", comp.Name, orDash(g.Detail))
			return nil
		}
		if e.now().After(deadline) {
			return fmt.Errorf("%w: the cluster gate of %s is not green within its gate_deadline of %s: %s", ErrNotHealthy, comp.Name, comp.GateDeadline, orDash(g.Detail))
		}
		if err := wait(ctx, o, deadline.Sub(e.now())); err != nil {
			return err
		}
	}
}

// wait returns at the observer's next news, after a tick at most, or
// with ctx's error.
func wait(ctx context.Context, o *observer, limit time.Duration) error {
	t := o.e.cfg.Clock.NewTimer(max(min(o.tick, limit), time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-o.changed:
	case <-t.C():
	}
	return nil
}

// Down stops every member gracefully through the substrate (its stop
// signal, then SIGKILL after its stop_timeout), components in the
// reverse of the plan's order, a component's members together. Members
// ferry adopted are stopped too. It refuses while an upgrade runs.
func (e *Engine) Down(ctx context.Context, progress Progress) (ClusterReport, error) {
	began := e.now()
	rep := ClusterReport{Operation: "down"}
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	if err := e.Require(substrate.ClusterUp); err != nil {
		return rep, fmt.Errorf("cluster down: %w", err)
	}
	if err := e.refuseDuringUpgrade("cluster down"); err != nil {
		return rep, err
	}
	sts, err := e.cfg.Driver.Observe(ctx, e.Members())
	if err != nil {
		return rep, err
	}
	e.learnVersions(ctx, sts)
	byName := map[string]int{}
	for i, st := range sts {
		if st.Unknown {
			return rep, fmt.Errorf("engine: cluster down: %w", unreachable(st.Name+": "+st.Detail))
		}
		byName[st.Name] = i
	}
	comps := e.c.ComponentsInOrder()
	slices.Reverse(comps)
	for _, comp := range comps {
		var names []string
		for _, m := range comp.Members {
			names = append(names, m.Name)
		}
		say("%s: stopping %s", comp.Name, strings.Join(names, ", "))
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			// Every member is stopped, running or not: a stop also
			// gives up a restart its agent has pending.
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.cfg.Driver.Stop(ctx, e.members[n].spec); err != nil {
					errs[i] = fmt.Errorf("stop %s: %w", n, err)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return rep, err
		}
		for _, n := range names {
			st := sts[byName[n]]
			cm := ClusterMember{Name: n, Component: comp.Name, Action: "down", Version: st.Version, Adopted: st.Adopted}
			if st.Running {
				cm.Action = "stopped"
			}
			rep.Members = append(rep.Members, cm)
		}
	}
	rep.DurationS = e.since(began).Seconds()
	say("cluster down: every member stopped (%.1fs)", rep.DurationS)
	return rep, nil
}

// Require refuses, by the capability's name, what the description's
// substrate cannot do (substrate.IncapableError): a command, or a step
// that needs a host locked or a switchover, asks before it touches
// anything.
func (e *Engine) Require(c substrate.Capability) error {
	return substrate.Require(e.c, c)
}
