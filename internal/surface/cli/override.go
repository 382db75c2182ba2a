package cli

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

func overrideCmd(g *globals) *cobra.Command {
	var member, effectID, reason, component string
	var thisPhase, revoke bool
	var lasts time.Duration
	cmd := &cobra.Command{
		Use:   "override [PREDICATE]",
		Short: "switch off one admission predicate (or give up one effect's undo) for the current upgrade",
		Long: `Switch off one named admission predicate for the current upgrade, for one member
(--member) or for all; or, with --effect, give up on the undo of one effect that
keeps failing. Refusals name their predicate in 'ferry upgrade status' and the
events ("quorum refused kv-3 (...)"). Every override is recorded with who and
when, in the record and the events. There is no way to switch off all safety at
once: one predicate per override. --component and --phase limit it to one
component's members or to the phase in progress; --for 30m makes it expire;
--revoke withdraws one in force (the same predicate or effect, and scope).

Predicates: ` + strings.Join(strategy.PredicateNames(), ", "),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := upgrade.Override{Member: member, Effect: effectID, Reason: reason, Component: component, Revoke: revoke, By: whoAmI(), At: time.Now()}
			if len(args) == 1 {
				o.Predicate = args[0]
			}
			if lasts < 0 || lasts > 0 && revoke {
				return errors.New("--for is a positive duration (30m), and a revoke does not expire")
			}
			if lasts > 0 {
				o.Until = o.At.Add(lasts)
			}
			if g.remote() {
				c, err := g.client()
				if err != nil {
					return err
				}
				// "by" for a server of an earlier release, which took
				// it from the client; a server now records the name of
				// the token sent.
				req := api.OverrideRequest{Predicate: o.Predicate, Member: o.Member, Effect: o.Effect, Reason: o.Reason, By: o.By,
					Component: o.Component, ThisPhase: thisPhase, Revoke: o.Revoke}
				if lasts > 0 {
					req.For = lasts.String()
				}
				u, err := c.Override(cmd.Context(), req)
				if err != nil {
					return remoteErr(err)
				}
				// What the server recorded, and who it says made it.
				what, by := o.String(), o.By
				if n := len(u.Overrides); n > 0 {
					what, by = u.Overrides[n-1].Summary, u.Overrides[n-1].By
				}
				fmt.Fprintf(g.stdout, "override recorded for upgrade %s: %s, by %s\n", u.ID, what, by)
				return nil
			}
			st, cur, err := g.currentLocked("override")
			if err != nil {
				return err
			}
			if thisPhase {
				o.Phase, o.PhaseRollback = cur.Phase+1, cur.RollingBack()
			}
			u, err := st.Override(cur.ID, o, func(u upgrade.Upgrade) error {
				if why := upgrade.CheckOverride(&u, o, strategy.Known, strings.Join(strategy.PredicateNames(), ", ")); why != "" {
					return errors.New("override refused: " + why)
				}
				return nil
			})
			if err != nil {
				return &exitError{code: 3, err: err}
			}
			fmt.Fprintf(g.stdout, "override recorded for upgrade %s: %s, by %s; the ferry process driving it applies it at its next step\n", u.ID, o, o.By)
			return nil
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "only for this member")
	cmd.Flags().StringVar(&effectID, "effect", "", "give up on the undo of this effect (its ID, as 'ferry upgrade status' lists it)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.Flags().StringVar(&component, "component", "", "only for the members of this component")
	cmd.Flags().BoolVar(&thisPhase, "phase", false, "only for the phase in progress")
	cmd.Flags().DurationVar(&lasts, "for", 0, "expire after this long (30m); without it, it lasts the upgrade")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "withdraw the override in force with the same predicate (or --effect) and scope")
	return cmd
}

// whoAmI names the operator for the record: user@host.
func whoAmI() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = fmt.Sprintf("uid %d", os.Getuid())
	}
	return name + "@" + host
}
