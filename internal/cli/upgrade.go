package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/store"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

func upgradeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "upgrade", Short: "start, follow and resume upgrades"}
	var to string
	var quiet bool
	start := &cobra.Command{
		Use:   "start --to VERSION",
		Short: "plan and run an upgrade, with a live progress view",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errors.New("--to VERSION is required")
			}
			return g.runUpgrade(cmd.Context(), to, quiet)
		},
	}
	start.Flags().StringVar(&to, "to", "", "target release version")
	start.Flags().BoolVarP(&quiet, "quiet", "q", false, "no live view; print the outcome only")
	resume := &cobra.Command{
		Use:   "resume",
		Short: "continue the current upgrade (after ferry was stopped or crashed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.runUpgrade(cmd.Context(), "", quiet)
		},
	}
	resume.Flags().BoolVarP(&quiet, "quiet", "q", false, "no live view; print the outcome only")
	status := &cobra.Command{
		Use:   "status",
		Short: "show the current upgrade: state, phase, batch, members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			st, err := store.Open(g.dataDir)
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
			if g.json() {
				return g.printJSON(u)
			}
			printStatus(g, u)
			return nil
		},
	}
	cmd.AddCommand(start, resume, status)
	return cmd
}

// runUpgrade begins an upgrade to version to (or, when to is empty,
// takes up the current one) and drives it to its end.
func (g *globals) runUpgrade(ctx context.Context, to string, quiet bool) error {
	c, err := g.load()
	if err != nil {
		return err
	}
	var onEvent func(store.Event)
	if !quiet && !g.json() {
		start := time.Now()
		onEvent = func(ev store.Event) { printLive(g, start, ev) }
	}
	e, st, err := g.engineFor(c, onEvent)
	if err != nil {
		return err
	}
	unlock, err := st.LockEngine()
	if err != nil {
		return err
	}
	defer unlock()
	if to != "" {
		u, err := e.Begin(ctx, to)
		if err != nil {
			if errors.Is(err, store.ErrActive) {
				return &exitError{code: 3, err: fmt.Errorf("%w\n  to continue it: ferry upgrade resume", err)}
			}
			return err
		}
		if !quiet && !g.json() {
			fmt.Fprintf(g.stdout, "upgrade %s: %s → %s\n", u.ID, u.From, u.To)
			printPlan(g, u.Plan)
		}
	}
	u, err := e.Run(ctx)
	if err != nil {
		return err
	}
	if g.json() {
		return g.printJSON(u)
	}
	printStatus(g, u)
	if u.State != upgrade.StateCompleted {
		return &exitError{code: 4, err: fmt.Errorf("upgrade %s ended %s: %s", u.ID, u.State, u.Reason)}
	}
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

func printStatus(g *globals, u upgrade.Upgrade) {
	fmt.Fprintf(g.stdout, "upgrade:  %s\nstate:    %s\nrelease:  %s → %s\n", u.ID, u.State, u.From, u.To)
	if len(u.Plan.Phases) > 0 && u.Phase < len(u.Plan.Phases) {
		ph := u.Plan.Phases[u.Phase]
		fmt.Fprintf(g.stdout, "phase:    %d/%d (%s), batch %d/%d\n", u.Phase+1, len(u.Plan.Phases), ph.Component, min(u.Batch+1, len(ph.Batches)), len(ph.Batches))
	}
	done := 0
	for _, m := range u.Members {
		if m.Step == upgrade.StepDone {
			done++
		}
	}
	fmt.Fprintf(g.stdout, "members:  %d/%d done\n", done, len(u.Members))
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
	w := g.table()
	fmt.Fprintln(w, "MEMBER\tCOMPONENT\tFROM\tTARGET\tSTEP\tDETAIL")
	for _, ph := range u.Plan.Phases {
		for _, n := range phaseMembers(ph.Batches, ph.Skipped) {
			m := u.Members[n]
			if m == nil {
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Component, dash(m.From), m.Target, m.Step, m.Detail)
		}
	}
	w.Flush()
}
