package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/proof/prom"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

func upgradeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "upgrade", Short: "start, follow and resume upgrades"}
	var to, trafficFlag, report string
	var quiet, acceptDowntime bool
	start := &cobra.Command{
		Use:   "start --to VERSION",
		Short: "plan and run an upgrade, with a live progress view",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errors.New("--to VERSION is required")
			}
			if g.remote() {
				return g.remoteStart(cmd.Context(), to, cmd.Flags().Changed("traffic"), acceptDowntime, quiet, report)
			}
			var pr *proofRun
			if cmd.Flags().Changed("traffic") {
				pr = &proofRun{report: report}
				if trafficFlag == "" {
					trafficFlag = fromDescription
				}
			}
			return g.runUpgrade(cmd.Context(), to, engine.BeginOptions{AcceptDowntime: acceptDowntime}, quiet, pr, trafficFlag)
		},
	}
	start.Flags().BoolVar(&acceptDowntime, "accept-downtime", false, "begin an upgrade that cannot be zero-downtime (a component of strategy offline goes down); without it such an upgrade is refused, saying why")
	start.Flags().StringVar(&to, "to", "", "target release version")
	start.Flags().StringVar(&trafficFlag, "traffic", "", "drive traffic during the upgrade and judge its impact: the description's traffic spec, or --traffic=FILE")
	start.Flags().Lookup("traffic").NoOptDefVal = fromDescription
	start.Flags().StringVar(&report, "report", "", "with --traffic: where to write the JSON report (default DATA-DIR/reports/ID.json; the HTML page goes beside it)")
	start.Flags().BoolVarP(&quiet, "quiet", "q", false, "no live view; print the outcome only")
	resume := &cobra.Command{
		Use:   "resume",
		Short: "continue the current upgrade: after a pause, or after ferry was stopped or crashed",
		Long: `Continue the current upgrade. A paused upgrade goes on (members that failed are
tried again from their start). If no ferry process is driving the upgrade, this
one does, in the foreground, after observing what runs: it reconciles from the
members' actual versions and health, it does not replay a log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.request(cmd.Context(), upgrade.IntentResume, quiet)
		},
	}
	resume.Flags().BoolVarP(&quiet, "quiet", "q", false, "no live view; print the outcome only")
	pause := &cobra.Command{
		Use:   "pause",
		Short: "finish the step in flight, then stop taking members down until resumed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.request(cmd.Context(), upgrade.IntentPause, true)
		},
	}
	abort := &cobra.Command{
		Use:   "abort",
		Short: "roll the current upgrade back: every member touched so far returns to its previous release",
		Long: `Abort the current upgrade: every member touched so far returns to the release it
ran before, in reverse order, through the same gated steps; the upgrade ends in
rolled-back. Allowed until the point of no return. If no ferry process is
driving the upgrade, this one runs the rollback in the foreground.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.request(cmd.Context(), upgrade.IntentAbort, quiet)
		},
	}
	abort.Flags().BoolVarP(&quiet, "quiet", "q", false, "no live view; print the outcome only")
	status := &cobra.Command{
		Use:   "status",
		Short: "show the current upgrade: state, phase, batch, members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if g.remote() {
				return g.remoteStatus(cmd.Context())
			}
			st, err := store.OpenReadOnly(g.dataDir)
			if err != nil {
				return err
			}
			u, ok, err := st.Current()
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("no upgrade yet")
			}
			shown := api.FromRecord(u)
			if g.json() {
				return g.printJSON(shown)
			}
			printStatus(g, shown)
			return nil
		},
	}
	finalize := &cobra.Command{
		Use:   "finalize",
		Short: "pass the point of no return: move the cluster's pin to the new release (policy finalize: manual)",
		Long: `Finalize an upgrade that awaits it (policy finalize: manual): the release's
finalize calls move the cluster's compatibility version to the new release, then
its contract calls run. After this there is no abort and no rollback: members
of the previous release could not read what the new one then writes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.request(cmd.Context(), upgrade.IntentFinalize, quiet)
		},
	}
	finalize.Flags().BoolVarP(&quiet, "quiet", "q", false, "no live view; print the outcome only")
	cmd.AddCommand(start, status, pause, resume, abort, finalize, overrideCmd(g), recoverCmd(g))
	return cmd
}

// runUpgrade begins an upgrade to version to (or, when to is empty,
// takes up the current one) and drives it to its end.
// A run that ends in a state other than completed (or, for an abort,
// rolled-back) exits with code 4.
func (g *globals) runUpgrade(ctx context.Context, to string, opts engine.BeginOptions, quiet bool, pr *proofRun, spec string, ok ...upgrade.State) error {
	c, err := g.load()
	if err != nil {
		return err
	}
	var judge func(from, to time.Time) (string, bool)
	if pr != nil {
		if pr.spec, err = trafficSpec(c, spec); err != nil {
			return err
		}
		judge = func(from, to time.Time) (string, bool) { return pr.session.Judge(from, to), true }
	}
	var onEvent func(store.Event)
	if !quiet && !g.json() {
		start := time.Now()
		onEvent = func(ev store.Event) { printLive(g, start, ev) }
	}
	e, st, err := g.engineFor(c, onEvent, judge)
	if err != nil {
		return err
	}
	unlock, err := st.LockEngine()
	if err != nil {
		return &exitError{code: 3, err: fmt.Errorf("%w: it drives the upgrade already; follow it with 'ferry upgrade status' or 'ferry events --follow'", err)}
	}
	defer unlock()
	if pr != nil {
		sig, err := prom.ForCluster(c, pr.spec)
		if err != nil {
			return err
		}
		opts := proof.Options{}
		if sig != nil {
			opts.Signal = sig
		}
		pr.session = proof.Start(ctx, pr.spec, opts)
		if !quiet && !g.json() {
			fmt.Fprintf(g.stdout, "traffic: %.0f requests/s from %d clients to %s; baseline for %s\n",
				pr.spec.Rate, pr.spec.Concurrency, strings.Join(pr.spec.Targets, ", "), pr.spec.Baseline)
		}
		if err := pr.session.WaitBaseline(ctx); err != nil {
			pr.session.Stop(ctx)
			return err
		}
	}
	if to != "" {
		u, err := e.BeginWith(ctx, to, opts)
		if err != nil {
			if pr != nil {
				pr.session.Stop(ctx)
			}
			if errors.Is(err, engine.ErrDowntime) {
				return &exitError{code: 5, err: err}
			}
			if errors.Is(err, store.ErrActive) {
				return &exitError{code: 3, err: fmt.Errorf("%w\n  to continue it: ferry upgrade resume", err)}
			}
			if errors.Is(err, engine.ErrPreflight) {
				return &exitError{code: 5, err: err}
			}
			if errors.Is(err, engine.ErrNothingToDo) {
				return g.nothingToDo(to, err.Error())
			}
			return err
		}
		if !quiet && !g.json() {
			fmt.Fprintf(g.stdout, "upgrade %s: %s → %s\n", u.ID, u.From, u.To)
			printPlan(g, u.Plan, c)
		}
	}
	u, err := e.Run(ctx)
	if err != nil {
		if pr != nil {
			pr.session.Stop(ctx)
		}
		if errors.Is(err, engine.ErrLocked) {
			return &exitError{code: 3, err: err}
		}
		return err
	}
	var rep *proof.Report
	if pr != nil {
		r, err := pr.writeReport(ctx, g, st, u)
		if err != nil {
			return err
		}
		rep = &r
	}
	shown := api.FromRecord(u)
	if g.json() {
		if rep != nil {
			return g.printJSON(struct {
				api.Upgrade
				Proof *proof.Report `json:"proof"`
			}{shown, rep})
		}
		return g.printJSON(shown)
	}
	printStatus(g, shown)
	if u.State != upgrade.StateCompleted && !slices.Contains(ok, u.State) {
		return &exitError{code: 4, err: fmt.Errorf("upgrade %s ended %s: %s", u.ID, u.State, u.Reason)}
	}
	return nil
}

// nothingToDo says that an upgrade to version to would move nothing, and
// exits 0: the cluster is where the operator asked it to be.
func (g *globals) nothingToDo(to, msg string) error {
	if g.json() {
		return g.printJSON(engine.NothingToDo{NothingToDo: true, To: to, Message: msg})
	}
	fmt.Fprintln(g.stdout, msg)
	return nil
}

// printLive prints the events an operator follows: state changes,
// member steps, actions, health changes and waits.
func printLive(g *globals, start time.Time, ev store.Event) {
	switch ev.Kind {
	case "overhead":
		return
	case "action":
		if strings.HasSuffix(ev.Message, ": started") {
			return
		}
	}
	fmt.Fprintf(g.stdout, "%7.2fs  %-7s %s\n", time.Since(start).Seconds(), ev.Kind, ev.Message)
}

func printStatus(g *globals, u api.Upgrade) {
	state := u.State
	if u.ShownState != "" {
		state = u.ShownState + " (" + u.State + ")"
	}
	fmt.Fprintf(g.stdout, "upgrade:  %s\nstate:    %s\nrelease:  %s → %s\n", u.ID, state, u.From, u.To)
	if u.Final != "" {
		fmt.Fprintf(g.stdout, "path:     one step towards %s\n", u.Final)
	}
	if u.Downtime != "" {
		fmt.Fprintf(g.stdout, "downtime: accepted: %s\n", u.Downtime)
	}
	if u.Pin != "" {
		pin := u.Pin
		switch {
		case u.NoReturn != "":
			pin += " (past the point of no return, " + u.NoReturn + ", at " + u.Finalized.Local().Format(time.TimeOnly) + ": no going back)"
		case !u.Finalized.IsZero():
			pin += " (finalized " + u.Finalized.Local().Format(time.TimeOnly) + ": no going back)"
		}
		fmt.Fprintf(g.stdout, "pin:      %s\n", pin)
	}
	if u.Stage != nil && u.Stage.Tries > 0 {
		fmt.Fprintf(g.stdout, "stage:    %d call(s), last: %s\n", u.Stage.Tries, dash(u.Stage.Detail))
	}
	if ph := u.Progress.Phase; ph != nil {
		what := "phase"
		if ph.Rollback {
			what = "rollback phase"
		}
		fmt.Fprintf(g.stdout, "phase:    %s %d/%d (%s), batch %d/%d", what, ph.Number, ph.Of, ph.Component, ph.Batch, ph.Batches)
		if b := u.Current(); b != nil {
			fmt.Fprintf(g.stdout, ": %s (size %d: %s)", strings.Join(b.Members, ", "), b.Size, b.Why)
		}
		fmt.Fprintln(g.stdout)
	}
	if len(u.Hosts) > 0 {
		fmt.Fprintf(g.stdout, "hosts:    %s\n", hostsLine(u))
	}
	fmt.Fprintf(g.stdout, "members:  %d/%d done\n", u.Progress.MembersDone, u.Progress.Members)
	end := u.Updated
	if !u.Ended.IsZero() {
		end = u.Ended
	}
	fmt.Fprintf(g.stdout, "elapsed:  %s\n", end.Sub(u.Created).Round(time.Millisecond))
	if u.Waiting != "" {
		fmt.Fprintf(g.stdout, "waiting:  %s\n", u.Waiting)
	}
	if u.Reason != "" {
		fmt.Fprintf(g.stdout, "reason:   %s\n", u.Reason)
	}
	if u.Held != nil {
		fmt.Fprintf(g.stdout, "held:     outside the maintenance windows (%s) since %s: resumes by itself at %s\n", u.Held.Windows, u.Held.Since.Format(time.RFC3339), u.Held.Until.Format(time.RFC3339))
	}
	if u.Outage != nil {
		fmt.Fprintf(g.stdout, "OUTAGE:   the substrate does not answer since %s: %s\n", u.Outage.Since.Local().Format(time.TimeOnly), u.Outage.Detail)
	}
	for _, r := range u.Refusals {
		fmt.Fprintf(g.stdout, "refused:  %s\n", r.Summary)
	}
	for _, o := range u.Overrides {
		// As the record and the events say it: scope, expiry, revoke.
		fmt.Fprintf(g.stdout, "override: %s, by %s at %s\n", o.Summary, o.By, o.At.Local().Format(time.TimeOnly))
	}
	printEffects(g, u.Effects)
	// The pace of a completed upgrade only: one rolled back ran a part
	// of the plan the bound is of, and its ratio would say nothing.
	if p := u.Pace; p != nil && u.State == upgrade.StateCompleted.String() {
		fmt.Fprintf(g.stdout, "pace:     %.1fs against a lower bound of %.1fs (×%.2f)\n", p.WallS, p.LowerBoundS, p.BoundRatio)
	}
	w := g.table()
	fmt.Fprintln(w, "MEMBER\tCOMPONENT\tFROM\tTARGET\tSTEP\tDETAIL")
	for _, ph := range u.Plan.Phases {
		for _, n := range planMembers(ph) {
			m, ok := u.Members[n]
			if !ok {
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Component, dash(m.From), m.Target, m.Step, m.Detail)
		}
	}
	w.Flush()
}

// planMembers lists a phase's members as planned: its batches', then
// those it skipped.
func planMembers(ph api.Phase) []string {
	var out []string
	for _, b := range ph.Batches {
		out = append(out, b.Members...)
	}
	for _, s := range ph.Skipped {
		out = append(out, s.Member)
	}
	return out
}

// currentLocked opens the store and returns the current upgrade, which
// this description may act on (exit 3 otherwise: none, or the cluster
// locked by another description).
func (g *globals) currentLocked(what string) (*store.Store, upgrade.Upgrade, error) {
	c, err := g.load()
	if err != nil {
		return nil, upgrade.Upgrade{}, err
	}
	st, err := store.Open(g.dataDir)
	if err != nil {
		return nil, upgrade.Upgrade{}, err
	}
	cur, ok, err := st.Current()
	if err != nil {
		return nil, upgrade.Upgrade{}, err
	}
	if !ok {
		return nil, upgrade.Upgrade{}, &exitError{code: 3, err: errors.New("no upgrade to " + what + ": none was ever started here (data directory " + g.dataDir + ")")}
	}
	if err := engine.CheckLock(cur, c.Digest, c.File); err != nil {
		return nil, upgrade.Upgrade{}, &exitError{code: 3, err: err}
	}
	return st, cur, nil
}

// request records an operator's request (pause, resume, abort) for the
// current upgrade. The ferry process driving the upgrade acts on it at
// its next step; when none is (it was stopped, or crashed), resume and
// abort drive the upgrade here, in the foreground.
func (g *globals) request(ctx context.Context, kind upgrade.IntentKind, quiet bool) error {
	if g.remote() {
		return g.remoteRequest(ctx, kind, quiet)
	}
	st, cur, err := g.currentLocked(string(kind))
	if err != nil {
		return err
	}
	u, err := st.Request(cur.ID, kind, time.Now(), func(u upgrade.Upgrade) error {
		if u.State.Terminal() {
			return fmt.Errorf("upgrade %s has ended (%s): nothing to %s", u.ID, u.State, kind)
		}
		switch kind {
		case upgrade.IntentAbort:
			if why := upgrade.NoAbort(&u); why != "" {
				return fmt.Errorf("abort refused: %s", why)
			}
		case upgrade.IntentFinalize:
			if why := upgrade.NoFinalize(&u); why != "" {
				return fmt.Errorf("finalize refused: %s", why)
			}
		case upgrade.IntentPause:
			if u.State == upgrade.StatePaused {
				return fmt.Errorf("upgrade %s is already paused; 'ferry upgrade resume' goes on", u.ID)
			}
		}
		return nil
	})
	if err != nil {
		return &exitError{code: 3, err: err}
	}
	unlock, lockErr := st.LockEngine()
	if lockErr != nil {
		// A ferry process drives the upgrade: it takes the request.
		fmt.Fprintf(g.stdout, "%s of upgrade %s requested; the ferry process driving it acts on it at its next step\n", kind, u.ID)
		return nil
	}
	if kind == upgrade.IntentPause {
		unlock()
		fmt.Fprintf(g.stdout, "pause of upgrade %s recorded; no ferry process drives it now, so nothing moves until 'ferry upgrade resume'\n", u.ID)
		return nil
	}
	unlock()
	if kind == upgrade.IntentAbort {
		return g.runUpgrade(ctx, "", engine.BeginOptions{}, quiet, nil, "", upgrade.StateRolledBack)
	}
	return g.runUpgrade(ctx, "", engine.BeginOptions{}, quiet, nil, "")
}

// printEffects lists, loudly, the changes ferry made outside the
// members whose undo is still owed, failed, or was given up.
func printEffects(g *globals, effects []api.Effect) {
	if len(effects) == 0 {
		return
	}
	failed := 0
	for _, e := range effects {
		if e.State != string(effect.StateOpen) {
			failed++
		}
	}
	head := fmt.Sprintf("%d change(s) outside the members not undone yet", len(effects))
	if failed > 0 {
		head = fmt.Sprintf("%d change(s) outside the members NOT UNDONE, %d of them FAILED or ABANDONED", len(effects), failed)
	}
	fmt.Fprintf(g.stdout, "EFFECTS:  %s:\n", head)
	w := g.table()
	for _, e := range effects {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", e.ID, e.Scope, strings.ToUpper(e.State), e.Summary)
	}
	w.Flush()
}
