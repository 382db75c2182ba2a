package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
)

func clusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "start every member of the description at a release, or stop them all"}
	var version string
	up := &cobra.Command{
		Use:   "up --version VERSION",
		Short: "start every member at a release, in the plan's order, each waited for until healthy",
		Long: `Start every member of the description at release VERSION through its agent, in
the plan's order (components by order). Members of a component that bootstraps
as a group (strategy one-at-a-time, or a role) are started together and then
waited for; the others one at a time, each waited for until its member check
passes, within the component's deadline; then the component's cluster gate
must be green within its gate_deadline. Members already running VERSION
(started by ferry, or adopted) are left alone, so running it again is safe.

Refused, nothing started: while an upgrade runs (exit 3); at a release the
catalog does not allow from the one an upgrade last finalized (no going back);
when a member runs another release (moving it is 'ferry upgrade start'); when an artifact of
VERSION is missing or has the wrong sha256. A member not healthy in time exits 1
with its last check's answer. The agents must be running ('ferry agent').`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version == "" {
				return errors.New("--version VERSION is required")
			}
			if g.remote() {
				return g.remoteCluster(cmd.Context(), "/v1/cluster/up", map[string]string{"version": version})
			}
			return g.clusterLocal(cmd.Context(), func(ctx context.Context, e *engine.Engine, p engine.Progress) (engine.ClusterReport, error) {
				return e.Up(ctx, version, p)
			})
		},
	}
	up.Flags().StringVar(&version, "version", "", "the release every member runs")
	down := &cobra.Command{
		Use:   "down",
		Short: "stop every member gracefully, components in reverse order",
		Long: `Stop every member of the description gracefully through its agent (its
run.stop_signal, SIGTERM by default, then SIGKILL after run.stop_timeout),
components in the reverse of the plan's order, the members of a component
together. Members ferry adopted are stopped too. Refused while an upgrade
runs (exit 3).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.remote() {
				return g.remoteCluster(cmd.Context(), "/v1/cluster/down", struct{}{})
			}
			return g.clusterLocal(cmd.Context(), func(ctx context.Context, e *engine.Engine, p engine.Progress) (engine.ClusterReport, error) {
				return e.Down(ctx, p)
			})
		},
	}
	cmd.AddCommand(up, down)
	return cmd
}

// clusterLocal runs cluster up or down here, holding the engine lock
// (so that no upgrade starts meanwhile), printing each step.
func (g *globals) clusterLocal(ctx context.Context, op func(context.Context, *engine.Engine, engine.Progress) (engine.ClusterReport, error)) error {
	c, err := g.load()
	if err != nil {
		return err
	}
	// Refused by the capability's name before a driver is built (a
	// Kubernetes driver would list pods first): nothing is touched.
	if err := substrate.Require(c, substrate.ClusterUp); err != nil {
		return err
	}
	e, st, err := g.engineFor(c, nil)
	if err != nil {
		return err
	}
	unlock, err := st.LockEngine()
	if err != nil {
		return &exitError{code: 3, err: fmt.Errorf("%w: another ferry process drives the cluster", err)}
	}
	defer unlock()
	var progress engine.Progress
	if !g.json() {
		progress = func(msg string) { fmt.Fprintln(g.stdout, msg) }
	}
	rep, err := op(ctx, e, progress)
	if err != nil {
		if errors.Is(err, store.ErrActive) {
			return &exitError{code: 3, err: err}
		}
		return err
	}
	if g.json() {
		return g.printJSON(rep)
	}
	return nil
}

// remoteCluster asks a server for cluster up or down; it answers when
// it is done.
func (g *globals) remoteCluster(ctx context.Context, path string, body any) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	var rep engine.ClusterReport
	if err := c.Do(ctx, http.MethodPost, path, body, &rep); err != nil {
		return remoteErr(err)
	}
	if g.json() {
		return g.printJSON(rep)
	}
	w := g.table()
	fmt.Fprintln(w, "MEMBER\tCOMPONENT\tACTION\tVERSION")
	for _, m := range rep.Members {
		action := m.Action
		if m.Adopted {
			action += " (adopted)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.Component, action, dash(m.Version))
	}
	w.Flush()
	fmt.Fprintf(g.stdout, "cluster %s: done in %.1fs\n", rep.Operation, rep.DurationS)
	return nil
}
