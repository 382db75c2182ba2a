package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/core/window"
)

// An estimate is the simulator run on the plan with the durations an
// earlier upgrade of the same cluster measured (Measure), no fault
// drawn: the same engine, machine, strategies, gates and soaks, so that
// what the estimate counts is what the upgrade will do, not a formula
// beside it. Without an earlier upgrade the simulator's own default
// durations stand in, and each member's deadline bounds the worst.

// Estimate is what `ferry plan` says of the time an upgrade will take.
type Estimate struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Basis says where the durations come from: an earlier upgrade (its
	// id), or the defaults.
	Basis string           `json:"basis"`
	Moves map[string]Moves `json:"moves,omitempty"`
	// Phases are the expected durations of the plan's phases, from its
	// first batch's start to its last batch's end; Total is the whole
	// upgrade's, preflight to completion.
	Phases []PhaseEstimate `json:"phases"`
	Total  time.Duration   `json:"total"`
	// Worst is the upgrade if every move took its member's deadline
	// (healthy_deadline) and its soak: a bound, not an expectation.
	Worst    time.Duration `json:"worst"`
	MostDown MostDown      `json:"most_down"`
	// Hooks are the hooks that will run, list by list, in order.
	Hooks []string `json:"hooks,omitempty"`
	// Window says how the upgrade fits the policy's maintenance
	// windows ("" without windows).
	Window string `json:"window,omitempty"`
	// Fits is false when the upgrade cannot finish inside one window.
	Fits bool `json:"fits"`
	// Simulated is how long the simulation took (real time).
	Simulated time.Duration `json:"simulated"`
}

// PhaseEstimate is one phase's expected duration.
type PhaseEstimate struct {
	Component string `json:"component"`
	// Part names the phase when it moves a part of its component.
	Part    string        `json:"part,omitempty"`
	Batches int           `json:"batches"`
	Took    time.Duration `json:"took"`
}

// Measure is what an upgrade's record says its members' moves took,
// per component: the median of each step over the members that moved
// to their target in it (none measured of an upgrade that did not
// complete: a rollback's moves are another upgrade's).
func Measure(u upgrade.Upgrade, c *config.Cluster) map[string]Moves {
	if u.State != upgrade.StateCompleted {
		return nil
	}
	type samples struct{ drain, stop, start, ready, rejoin []time.Duration }
	by := map[string]*samples{}
	for _, m := range u.Members {
		if m.Step != upgrade.StepDone || m.Stopped.IsZero() || m.StartDone.IsZero() || m.HealthySince.IsZero() {
			continue // done without a move (already on the target)
		}
		s := by[m.Component]
		if s == nil {
			s = &samples{}
			by[m.Component] = s
		}
		soak := time.Duration(0)
		if comp := c.Component(m.Component); comp != nil {
			soak = comp.Soak.D()
		}
		s.drain = append(s.drain, nonNegative(m.Stopped.Sub(m.Began)))
		s.stop = append(s.stop, m.StopTook)
		s.start = append(s.start, m.StartTook)
		s.ready = append(s.ready, nonNegative(m.HealthySince.Sub(m.StartDone)))
		s.rejoin = append(s.rejoin, nonNegative(m.Since.Sub(m.HealthySince)-soak))
	}
	var gate time.Duration
	if n := len(u.Batches); n > 0 {
		gate = u.Bound.Gates / time.Duration(n)
	}
	out := map[string]Moves{}
	for comp, s := range by {
		out[comp] = Moves{Drain: median(s.drain), Stop: median(s.stop), Start: median(s.start), Ready: median(s.ready), Rejoin: median(s.rejoin), Gate: gate, Members: len(s.drain)}
	}
	return out
}

func nonNegative(d time.Duration) time.Duration { return max(d, 0) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// EstimateConfig is one estimate's input.
type EstimateConfig struct {
	Cluster  *config.Cluster
	From, To string
	// Moves are the measured durations (Measure); Basis says of which
	// upgrade. Without them the simulator's defaults stand in.
	Moves map[string]Moves
	Basis string
	// Now is when the upgrade would begin: the windows are set against
	// it.
	Now time.Time
}

// EstimateUpgrade runs the simulator on the upgrade with the measured
// durations and no faults, and says what it took, phase by phase, the
// most members it had down at once, the hooks that run, and how it fits
// the policy's maintenance windows.
func EstimateUpgrade(ctx context.Context, cfg EstimateConfig) (Estimate, error) {
	c := *cfg.Cluster
	windows := c.Policy.MaintenanceWindows()
	// The time needed is simulated without the windows, then set
	// against them.
	c.Policy = c.Policy.WithoutWindows()
	timing := DefaultTiming
	est := Estimate{From: cfg.From, To: cfg.To, Basis: cfg.Basis, Moves: cfg.Moves, Fits: true}
	if len(cfg.Moves) > 0 {
		timing.Moves = cfg.Moves
		timing.Call = Span{Min: time.Millisecond, Max: time.Millisecond}
	} else {
		// The middle of each default span, the same for every member:
		// an expectation, not a draw.
		mid := func(s Span) Span { m := (s.Min + s.Max) / 2; return Span{m, m} }
		timing = Timing{Stop: mid(timing.Stop), Start: mid(timing.Start), Ready: mid(timing.Ready), Call: mid(timing.Call), Elect: mid(timing.Elect)}
		est.Basis = fmt.Sprintf("no upgrade of this cluster measured yet: the simulator's default durations (stop %s, start %s, ready %s)",
			timing.Stop.Min, timing.Start.Min, timing.Ready.Min)
	}
	began := time.Now()
	res, err := Run(ctx, Config{Cluster: &c, From: cfg.From, To: cfg.To, Seed: 1, Timing: &timing, Faults: &Faults{},
		Tick: estimateTick(&c), NoEvents: true, together: true})
	est.Simulated = time.Since(began)
	if err != nil {
		return est, err
	}
	if res.Err != "" || res.State != upgrade.StateCompleted {
		return est, fmt.Errorf("the simulated upgrade ended %s: %s", res.State, strings.TrimSpace(res.Err+" "+res.Reason))
	}
	if est.From == "" && len(res.Plan.From) > 0 {
		est.From = res.Plan.From[0]
	}
	est.Total, est.MostDown = res.Took, res.MostDown
	for i, ph := range res.Plan.Phases {
		pe := PhaseEstimate{Component: ph.Component, Part: ph.Part}
		var first, last time.Time
		for _, b := range res.Record.Batches {
			if b.Phase != i || b.Rollback {
				continue
			}
			pe.Batches++
			if first.IsZero() || b.Began.Before(first) {
				first = b.Began
			}
			if b.Ended.After(last) {
				last = b.Ended
			}
		}
		if !first.IsZero() {
			pe.Took = last.Sub(first)
		}
		est.Phases = append(est.Phases, pe)
	}
	est.Worst = worst(&c, res)
	est.Hooks = hooksRun(&c, res)
	if len(windows) > 0 {
		est.Window, est.Fits = fit(windows, cfg.Now, est.Total)
	}
	return est, nil
}

// estimateTick is the engine's tick in an estimate: the description's,
// as the upgrade will run it, but at least a second beyond a thousand
// members (each tick is a pass of the machine over all of them: a
// finer one costs the estimate more than it tells).
func estimateTick(c *config.Cluster) time.Duration {
	n := 0
	for _, comp := range c.Components {
		n += len(comp.Members)
	}
	if n > 1000 {
		return max(c.Policy.Tick.D(), time.Second)
	}
	return c.Policy.Tick.D()
}

// worst bounds the upgrade: every batch the simulation formed taking
// its component's deadline and soak.
func worst(c *config.Cluster, res Result) time.Duration {
	var d time.Duration
	for _, b := range res.Record.Batches {
		if comp := c.Component(b.Component); comp != nil {
			d += comp.Deadline.D() + comp.Soak.D()
		}
	}
	return d
}

// hooksRun lists the description's hooks the upgrade runs, list by list
// in the order they run, with how often.
func hooksRun(c *config.Cluster, res Result) []string {
	var out []string
	add := func(list string, calls []config.Call, times int) {
		if len(calls) == 0 || times == 0 {
			return
		}
		texts := make([]string, len(calls))
		for i, cl := range calls {
			texts[i] = callWords(cl)
		}
		n := ""
		if times > 1 {
			n = fmt.Sprintf(" ×%d", times)
		}
		out = append(out, fmt.Sprintf("%s%s: %s", list, n, strings.Join(texts, ", ")))
	}
	add("pre_upgrade", c.Hooks.PreUpgrade, 1)
	for _, ph := range res.Plan.Phases {
		comp := c.Component(ph.Component)
		if comp == nil {
			continue
		}
		moved := 0
		for _, n := range ph.Members() {
			if m := res.Record.Members[n]; m != nil && !m.Stopped.IsZero() {
				moved++
			}
		}
		add(comp.Name+" pre_phase", comp.Hooks.PrePhase, 1)
		add(comp.Name+" pre_stop", comp.Hooks.PreStop, moved)
		add(comp.Name+" post_start", comp.Hooks.PostStart, moved)
		if len(comp.Hooks.Switchover) > 0 {
			switches := 0
			for _, b := range res.Record.Batches {
				if b.Component == comp.Name && len(b.Before) > 0 {
					switches++
				}
			}
			add(comp.Name+" switchover", comp.Hooks.Switchover, switches)
		}
		add(comp.Name+" post_phase", comp.Hooks.PostPhase, 1)
	}
	if r := c.Release(res.Plan.To); r != nil {
		m := r.Migrations
		for _, st := range []struct {
			name  string
			calls []config.Call
		}{{"expand", m.Expand}, {"migrate", m.Migrate}, {"finalize", m.Finalize}, {"contract", m.Contract}} {
			add(st.name+" of "+r.Version, st.calls, 1)
		}
	}
	add("post_upgrade", c.Hooks.PostUpgrade, 1)
	return out
}

// callWords is a call as the description writes it (its templates not
// rendered: one line for every member).
func callWords(c config.Call) string {
	switch {
	case c.HTTP != "":
		return strings.TrimSpace(c.Method + " " + c.HTTP)
	case c.TCP != "":
		return "tcp " + c.TCP
	case len(c.Exec) > 0:
		return "exec " + strings.Join(c.Exec, " ")
	}
	return "-"
}

// fit sets an upgrade that needs total against the windows from now:
// whether it fits inside one, and in words when it would run.
func fit(ws window.Set, now time.Time, total time.Duration) (string, bool) {
	openings := ws.Openings(now, 8*24*time.Hour)
	var longest time.Duration
	for _, o := range openings {
		longest = max(longest, o.Close.Sub(o.Open))
	}
	if len(openings) == 0 {
		return fmt.Sprintf("the windows (%s) never open in the week ahead: the upgrade would hold", ws), false
	}
	first := openings[0]
	zone := ws[0].Zone
	when := "the window open now closes at " + first.Close.In(zone).Format(time.RFC3339)
	if first.Open.After(now) {
		when = fmt.Sprintf("outside the windows now: members are taken down from %s, when the next opens", first.Open.In(zone).Format(time.RFC3339))
	}
	if total > longest {
		return fmt.Sprintf("CANNOT FINISH INSIDE A WINDOW: it needs %s, the longest window (%s) is %s: it would hold at a window's close and go on at the next; %s",
			total.Round(time.Second), ws, longest.Round(time.Second), when), false
	}
	// The first opening begins at now when a window is open now.
	if d := first.Close.Sub(first.Open); total > d {
		return fmt.Sprintf("fits inside a window (%s; the longest is %s), but not the first: it has %s left and the upgrade needs %s: it would hold at its close; %s",
			ws, longest.Round(time.Second), d.Round(time.Second), total.Round(time.Second), when), true
	}
	return fmt.Sprintf("fits inside a window (%s): %s", ws, when), true
}
