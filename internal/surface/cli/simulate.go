package cli

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/substrate/sim"
)

// simulateCmd runs the description's upgrade through the real engine
// against the sim substrate, on a virtual clock.
func simulateCmd(g *globals) *cobra.Command {
	var to, from string
	var seed uint64
	var perComponent int
	var memberChecks bool
	cmd := &cobra.Command{
		Use:   "simulate --to VERSION [--seed N] [--members-per-component K]",
		Short: "simulate the upgrade on a virtual clock: the plan, the timeline, the invariants checked and the time it would take",
		Long: `simulate runs the upgrade of the description through ferry's own engine
and state machine against simulated members (internal/substrate/sim): seeded stop,
start and ready times, and what the seed draws of releases that never
become healthy, crash loops and outages of the substrate. Nothing is
touched and no data directory is used. It prints the plan, the timeline
(states and batches at their virtual times), the invariants checked at
every instant a member is taken down (budgets per component, host and
domain, quorum, one phase and one switchover at a time) and at the end,
and the wall time the upgrade would take. The seed is printed: --seed N
replays the run exactly. Exit code 1 when an invariant broke.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errors.New("--to VERSION is required")
			}
			c, err := g.load()
			if err != nil {
				return err
			}
			if perComponent > 0 {
				if c, err = sim.Scale(c, perComponent); err != nil {
					return err
				}
			}
			if !cmd.Flags().Changed("seed") {
				seed = randomSeed()
			}
			began := time.Now()
			res, err := sim.Run(cmd.Context(), sim.Config{Cluster: c, From: from, To: to, Seed: seed, MemberChecks: memberChecks, NoEvents: true})
			if err != nil {
				return err
			}
			if g.json() {
				if err := g.printJSON(res); err != nil {
					return err
				}
			} else {
				printSimulation(g, res, time.Since(began))
			}
			if b := res.Broken(); len(b) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d invariant breach(es) with seed %d (--seed %d replays it)", len(b), res.Seed, res.Seed)}
			}
			if res.Err != "" {
				return &exitError{code: 1, err: fmt.Errorf("the simulation did not finish (--seed %d replays it): %s", res.Seed, res.Err)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "target release version")
	cmd.Flags().StringVar(&from, "from", "", "the release every member runs at the start (default: the first of the catalog that may upgrade to --to)")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "the seed of the run's durations and faults (default: random, printed)")
	cmd.Flags().IntVar(&perComponent, "members-per-component", 0, "give every component K members, copies of its own spread over copies of their hosts (budgets grow with them)")
	cmd.Flags().BoolVar(&memberChecks, "member-checks", false, "keep the member and role checks, answered by the simulated members at their intervals (slow for large clusters)")
	return cmd
}

// randomSeed is a seed for a run given none, printed by the run so
// that --seed replays it (63 bits: it prints the same everywhere).
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 1
}

// maxLine bounds a timeline line (a batch of a thousand members).
const maxLine = 160

func printSimulation(g *globals, res sim.Result, real time.Duration) {
	out := g.stdout
	fmt.Fprintf(out, "simulation: seed %d (--seed %d replays it), %d members, faults: %s\n", res.Seed, res.Seed, res.Members, res.Faults)
	p := res.Plan
	fmt.Fprintf(out, "\nplan: %s → %s\n", strings.Join(p.From, ","), p.To)
	w := g.table()
	fmt.Fprintln(w, "PHASE\tCOMPONENT\tSTRATEGY\tMEMBERS\tEXPECTED BATCHES")
	for i, ph := range p.Phases {
		strategy := fmt.Sprintf("%s, max_unavailable %d", ph.Strategy, ph.MaxUnavailable)
		if ph.Quorum > 0 {
			strategy += fmt.Sprintf(", quorum %d", ph.Quorum)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\n", i+1, ph.Component, strategy, len(ph.Members()), len(ph.Batches))
	}
	_ = w.Flush()
	fmt.Fprintf(out, "\ntimeline (virtual time from the start):\n")
	for _, e := range res.Timeline {
		line := e.String()
		if len(line) > maxLine {
			line = line[:maxLine] + "…"
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "\ninvariants:\n")
	w = g.table()
	fmt.Fprintln(w, "INVARIANT\tCHECKS\tRESULT")
	for _, inv := range res.Invariants {
		result := "held"
		switch {
		case len(inv.Broken) > 0:
			result = fmt.Sprintf("BROKEN %d time(s)", len(inv.Broken))
		case inv.Checks == 0:
			result = "not exercised"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", inv.Name, inv.Checks, result)
	}
	_ = w.Flush()
	for _, b := range res.Broken() {
		fmt.Fprintf(out, "  broken: %s\n", b)
	}
	fmt.Fprintf(out, "\nended %s", res.State)
	if res.Reason != "" {
		fmt.Fprintf(out, " (%s)", res.Reason)
	}
	fmt.Fprintf(out, ": the upgrade would take %s of wall time (simulated in %s)\n", res.Took.Round(time.Millisecond), real.Round(time.Millisecond))
	if res.Err != "" {
		fmt.Fprintf(out, "the simulation did not finish: %s\n", res.Err)
	}
}
