package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/surface/rehearse"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// rehearseCmd rehearses the upgrade on a disposable copy of the
// cluster, checking every stage: a gate for a CI pipeline.
func rehearseCmd(g *globals) *cobra.Command {
	var o rehearse.Options
	var report string
	cmd := &cobra.Command{
		Use:   "rehearse --to VERSION [--seed N] [--report FILE]",
		Short: "rehearse the upgrade on a disposable copy of the cluster, checking every stage (exit 1 naming the stage and check that failed)",
		Long: `rehearse brings a disposable copy of the cluster up at the release before
(--from, default the first of the catalog that may upgrade to --to) in a scratch
directory of its own ('ferry cluster up' with a store there: the description's
hosts must have their agents running, and none of its members may run yet),
drives the description's traffic, and upgrades it to --to with checks at each
stage: before; after each stage that moves members (the mixed-version state it
leaves); after finalize; and after a rollback. The checks are each component's
member checks and cluster gate, and the traffic of a window: "traffic" fails
if a request failed (a checked read included); "latency" is the impact
verdict against the baseline (thresholds from its noise, scaled by a control on
the same machine), reported and advisory unless --gate-latency.

The seed chooses, within what the policy allows, the order of each component's
members (what its strategy takes as the plan's order) and whether to abort the
first upgrade (before any member moves, or after one of the stages before the
point of no return), roll it back, check, and upgrade again. The seed and that
plan are printed first: --seed N replays it. A failed check aborts the upgrade
where an abort is still allowed.

The members' data is where the description's arguments put it, and a copy
starts from what is there: rehearse a description whose data may be thrown
away, and clear it between rehearsals.

It stops the copy and removes the scratch directory at the end (--keep keeps
it), writes the report with --report (JSON, and its text summary beside it as
FILE.txt), and exits 1 on any failed check, naming the stage and the check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.To == "" {
				return errors.New("--to VERSION is required")
			}
			if err := g.checkOutput(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("seed") {
				o.Seed = randomSeed()
			}
			o.File, o.Out, o.Logger = g.file, g.stdout, g.driverLogger()
			if g.json() {
				o.Out = io.Discard
			}
			rep, err := rehearse.Rehearse(cmd.Context(), o)
			if err != nil {
				return err
			}
			if report != "" {
				if err := writeRehearsal(report, rep); err != nil {
					return err
				}
			}
			if g.json() {
				if err := g.printJSON(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(g.stdout, "\n%s", rep.Summary())
			}
			if !rep.Passed {
				return &exitError{code: 1, err: fmt.Errorf("rehearsal failed (seed %d): %s", rep.Seed, rep.Failed)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "the release rehearsed")
	f.StringVar(&o.From, "from", "", "the release the copy starts on (default: the first of the catalog that may upgrade to --to)")
	f.Uint64Var(&o.Seed, "seed", 0, "the seed of the members' order and of the abort (default: random, printed)")
	f.StringVar(&report, "report", "", "write the report here as JSON, and its text summary to FILE.txt")
	f.StringVar(&o.Dir, "dir", "", "the scratch directory (default: a new temporary one)")
	f.BoolVar(&o.Keep, "keep", false, "keep the scratch directory (ferry's store and the copy of the description)")
	f.DurationVar(&o.Window, "window", rehearse.DefaultWindow, "how long the traffic is judged at each stage")
	f.DurationVar(&o.Quiet, "quiet", rehearse.DefaultQuiet, "how long after a stage's checks pass its traffic window opens (the stage's own moves are not the state's)")
	f.BoolVar(&o.GateLatency, "gate-latency", false, "fail a stage whose traffic window is slower than the baseline (the latency verdict; reported and advisory without it)")
	f.DurationVar(&o.Settle, "settle", rehearse.DefaultSettle, "how long a stage's member and cluster checks may take to pass")
	return cmd
}

// writeRehearsal writes the report as JSON to path and its summary to
// path.txt.
func writeRehearsal(path string, rep *rehearse.Report) error {
	if err := safefile.WriteAtomic(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}); err != nil {
		return err
	}
	return safefile.WriteAtomic(strings.TrimSuffix(path, ".json")+".txt", 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, rep.Summary())
		return err
	})
}
