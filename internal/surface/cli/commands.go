package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/sim"
)

func (g *globals) table() *tabwriter.Writer {
	return tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
}

func validateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "check a cluster description and report every problem with its file and line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.load()
			if err != nil {
				var perr *config.Errors
				if errors.As(err, &perr) {
					fmt.Fprintln(g.stderr, err)
					return &exitError{code: 2, err: fmt.Errorf("%s: %d problem(s)", g.file, len(perr.Problems))}
				}
				return &exitError{code: 2, err: err}
			}
			n := 0
			for _, comp := range c.Components {
				n += len(comp.Members)
			}
			if g.json() {
				return g.printJSON(map[string]any{"file": g.file, "valid": true, "components": len(c.Components), "members": n, "releases": len(c.Releases)})
			}
			fmt.Fprintf(g.stdout, "%s: valid (%d components, %d members, %d releases)\n", g.file, len(c.Components), n, len(c.Releases))
			return nil
		},
	}
}

func healthCmd(g *globals) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "health [--to VERSION]",
		Short: "run the upgrade preflight alone: every check with pass or fail (like health-query-upgrade)",
		Long: `Run the checks that 'ferry upgrade start' runs before it touches anything: no
upgrade in progress, every host answering, every member healthy, every cluster
gate green and, with --to, the target release in the catalog, reachable from
what runs, and the artifacts of the target and of the running release (which a
rollback needs) present with the right sha256. Exit code 1 if any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.remote() {
				return g.remoteHealth(cmd.Context(), to)
			}
			c, err := g.load()
			if err != nil {
				return err
			}
			e, _, err := g.viewEngine(c)
			if err != nil {
				return err
			}
			pf := e.RunPreflight(cmd.Context(), to)
			return g.printHealth(pf.OK(), to, pf.Checks)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "also check that this release can be upgraded to")
	return cmd
}

func planCmd(g *globals) *cobra.Command {
	var to string
	var noEstimate bool
	cmd := &cobra.Command{
		Use:   "plan --to VERSION",
		Short: "print the ordered plan (phases and batches) to reach a version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.load()
			if err != nil {
				return err
			}
			if to == "" {
				return errors.New("--to VERSION is required")
			}
			e, st, err := g.viewEngine(c)
			if err != nil {
				return err
			}
			p, _, err := e.Plan(cmd.Context(), to)
			if err != nil {
				return err
			}
			var est *sim.Estimate
			var estErr error
			if !noEstimate {
				est, estErr = estimate(cmd.Context(), c, st, p)
			}
			if g.json() {
				out := struct {
					plan.Plan
					Estimate      *sim.Estimate `json:"estimate,omitempty"`
					EstimateError string        `json:"estimate_error,omitempty"`
				}{Plan: p, Estimate: est}
				if estErr != nil {
					out.EstimateError = estErr.Error()
				}
				return g.printJSON(out)
			}
			printPlan(g, p, c)
			switch {
			case estErr != nil:
				fmt.Fprintf(g.stdout, "\nno estimate: %v\n", estErr)
			case est != nil:
				printEstimate(g, est)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "target release version")
	cmd.Flags().BoolVar(&noEstimate, "no-estimate", false, "print the plan alone, without simulating it for the estimate")
	return cmd
}

func printPlan(g *globals, p plan.Plan, c *config.Cluster) {
	fmt.Fprintf(g.stdout, "plan: %s → %s\n", strings.Join(p.From, ","), p.To)
	if len(p.Path) > 1 {
		fmt.Fprintf(g.stdout, "path: %s → %s: %d consecutive upgrades, each finalized before the next is planned; this plan is the first\n",
			strings.Join(p.From, ","), strings.Join(p.Path, " → "), len(p.Path))
	}
	if r := c.Release(p.To); r != nil && !r.Migrations.Empty() {
		m := &r.Migrations
		var stages []string
		for _, st := range []struct {
			name  string
			calls []config.Call
		}{{"expand", m.Expand}, {"migrate", m.Migrate}, {"finalize (point of no return)", m.Finalize}, {"contract", m.Contract}} {
			if len(st.calls) > 0 {
				stages = append(stages, st.name)
			}
		}
		when := "by itself"
		if c.Policy.Finalize == "manual" {
			when = "on 'ferry upgrade finalize'"
		}
		fmt.Fprintf(g.stdout, "migrations of %s (on %s): %s; finalized %s\n", p.To, m.Component, strings.Join(stages, ", "), when)
	}
	if len(p.Flow) > 0 {
		fmt.Fprintf(g.stdout, "flow of %s: %s\n", p.To, flowLine(p, c))
	}
	w := g.table()
	fmt.Fprintln(w, "PHASE\tCOMPONENT\tSTRATEGY\tBATCH\tMEMBERS")
	for i, ph := range p.Phases {
		if ph.Hosts != nil {
			printHostsPhase(w, i, ph)
			continue
		}
		strategy := fmt.Sprintf("%s, max_unavailable %d", ph.Strategy, ph.MaxUnavailable)
		if ph.Rollout {
			strategy = "rollout: " + strategy
		}
		if ph.Quorum > 0 {
			strategy += fmt.Sprintf(", quorum %d", ph.Quorum)
		}
		name := ph.Component
		if ph.Part != "" {
			name += " (" + ph.Part + ")" // a part of the component
		}
		for j, b := range ph.Batches {
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", i+1, name, strategy, j+1, strings.Join(b.Members, ", "))
			strategy = ""
		}
		for _, s := range ph.Skipped {
			fmt.Fprintf(w, "%d\t%s\t%s\t-\t%s (skipped: %s)\n", i+1, name, strategy, s.Member, s.Reason)
			strategy = ""
		}
		if ph.Note != "" {
			fmt.Fprintf(w, "\t\tnote: %s\t\t\n", ph.Note)
		}
	}
	w.Flush()
	// Each strategy says once how the batches it forms at run time may
	// differ from those shown.
	said := map[string]bool{}
	for _, ph := range p.Phases {
		st, ok := strategy.Lookup(ph.Strategy)
		if !ok || len(ph.Batches) < 2 {
			continue
		}
		if text := st.Explain(); text != "" && !said[text] {
			said[text] = true
			fmt.Fprintln(g.stdout, text)
		}
	}
}

// flowLine is a release's own flow as the states it goes through, its
// point of no return named (finalize when none is marked).
func flowLine(p plan.Plan, c *config.Cluster) string {
	var names []string
	marked := false
	for _, st := range p.Flow {
		marked = marked || st.PointOfNoReturn
	}
	for _, st := range p.Flow {
		n := upgrade.StageState(st).String()
		if st.State != "" && st.State != n {
			n += " [" + st.State + "]" // shown as the flow names it
		}
		if st.PointOfNoReturn && st.Kind == config.StageHosts {
			n += " (point of no return: its first lock)"
		} else if st.PointOfNoReturn || (!marked && st.Kind == config.StageFinalize) {
			n += " (point of no return)"
		}
		if st.Kind == config.StageFinalize && c.Policy.Finalize == "manual" {
			n = upgrade.StateAwaitingFinalize.String() + " → " + n
		}
		names = append(names, n)
	}
	return strings.Join(names, " → ")
}

// printHealth prints a preflight's checks; any failed check exits 1.
func (g *globals) printHealth(ok bool, to string, checks []engine.Check) error {
	if g.json() {
		if err := g.printJSON(map[string]any{"ok": ok, "to": to, "checks": checks}); err != nil {
			return err
		}
	} else {
		w := g.table()
		fmt.Fprintln(w, "CHECK\tRESULT\tDETAIL")
		for _, ch := range checks {
			res := "pass"
			switch {
			case !ch.OK:
				res = "FAIL"
			case ch.Warning:
				res = "WARN"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", ch.Name, res, ch.Detail)
		}
		w.Flush()
	}
	failed := 0
	for _, ch := range checks {
		if !ch.OK {
			failed++
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d checks failed", failed, len(checks))}
	}
	return nil
}

func releasesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "releases", Short: "the release catalog"}
	list := &cobra.Command{
		Use:   "list",
		Short: "each release with its state computed from what runs: active, partial, available, unavailable",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.remote() {
				return g.remoteReleases(cmd.Context())
			}
			e, _, snap, err := g.observed(cmd.Context())
			if err != nil {
				return err
			}
			return g.printReleases(e.ReleasesView(cmd.Context(), snap))
		},
	}
	cmd.AddCommand(list)
	return cmd
}

func (g *globals) printReleases(rv []engine.ReleaseView) error {
	if g.json() {
		return g.printJSON(rv)
	}
	w := g.table()
	fmt.Fprintln(w, "VERSION\tTARGET\tSTATE\tLOAD\tMEMBERS\tPATH\tUPGRADE_FROM\tDOWNGRADE_TO\tMIGRATIONS\tSIGNED")
	var errs []engine.ReleaseView
	for _, r := range rv {
		fmt.Fprintf(w, "%s\t%t\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Version, r.Target, dash(r.State), r.Load, r.Members, dash(strings.Join(r.Path, " → ")),
			dash(strings.Join(r.UpgradeFrom, ",")), dash(strings.Join(r.DowngradeTo, ",")), dash(strings.Join(r.Migrations, ",")), dash(r.Signed))
		if r.LoadDetail != "" {
			errs = append(errs, r)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range errs {
		fmt.Fprintf(g.stdout, "load %s %s: %s\n", r.Version, r.Load, r.LoadDetail)
	}
	return nil
}

func versionsCmd(g *globals) *cobra.Command {
	var builds bool
	cmd := &cobra.Command{
		Use:   "versions",
		Short: "count running members per component per version (like ceph versions), and show ferry's and each agent's release",
		Long: `Count running members per component per version (like ceph versions),
then ferry's own release and build, and each host's agent's.

-o json prints the components' array, as it always has; with --builds it
prints the API's object instead: {"components", "ferry", "agents"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.remote() {
				return g.remoteVersions(cmd.Context(), builds)
			}
			c, err := g.load()
			if err != nil {
				return err
			}
			e, _, err := g.viewEngine(c)
			if err != nil {
				return err
			}
			snap, err := e.Observe(cmd.Context())
			if err != nil {
				return err
			}
			vv := e.VersionsView(snap)
			if g.json() && !builds {
				return g.printVersions(vv)
			}
			d, err := newDriver(c, g.driverLogger())
			if err != nil {
				return err
			}
			b := selfupgrade.Collect(cmd.Context(), d, selfupgrade.HostNames(c))
			return g.printVersionsBuilds(vv, b)
		},
	}
	cmd.Flags().BoolVar(&builds, "builds", false, "with -o json: the object {components, ferry, agents} instead of the components' array")
	return cmd
}

// printVersionsBuilds writes the members' versions and the builds: a
// table of each, or the API's object (server.Versions's fields).
func (g *globals) printVersionsBuilds(vv []engine.ComponentVersions, b selfupgrade.Builds) error {
	if g.json() {
		return g.printJSON(struct {
			Components []engine.ComponentVersions `json:"components"`
			selfupgrade.Builds
		}{vv, b})
	}
	if err := g.printVersions(vv); err != nil {
		return err
	}
	return g.printBuilds(b)
}

func (g *globals) printVersions(vv []engine.ComponentVersions) error {
	if g.json() {
		return g.printJSON(vv)
	}
	w := g.table()
	fmt.Fprintln(w, "COMPONENT\tVERSION\tMEMBERS")
	for _, cv := range vv {
		for _, v := range engine.SortedVersions(cv.Versions) {
			fmt.Fprintf(w, "%s\t%s\t%d\n", cv.Component, v, cv.Versions[v])
		}
	}
	return w.Flush()
}

func membersCmd(g *globals) *cobra.Command {
	var byHost bool
	var labels []string
	cmd := &cobra.Command{
		Use:   "members",
		Short: "list members with target version, running version and status",
		Long: `List members with target version, running version and status.

--by-host lists hosts instead (StarlingX's kube-host-upgrade-list): each
host's target, the version each component runs on it (N/A where none of
its members is there: a worker's control plane) and what moves on it
now; --label KEY adds a column of the hosts' label KEY (personality).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(labels) > 0 && !byHost {
				return errors.New("--label goes with --by-host")
			}
			show := func(rows []engine.MemberView) error {
				if byHost {
					return g.printHosts(rows, labels)
				}
				if g.json() {
					return g.printJSON(rows)
				}
				printMembers(g, rows)
				return nil
			}
			if g.remote() {
				rows, err := g.remoteMemberRows(cmd.Context())
				if err != nil {
					return err
				}
				return show(rows)
			}
			e, st, snap, err := g.observed(cmd.Context())
			if err != nil {
				return err
			}
			var up *upgrade.Upgrade
			if u, ok, err := st.Current(); err != nil {
				return err
			} else if ok {
				up = &u
			}
			return show(e.MembersView(snap, up))
		},
	}
	cmd.Flags().BoolVar(&byHost, "by-host", false, "one row per host: the version of each component on it")
	cmd.Flags().StringSliceVar(&labels, "label", nil, "with --by-host: a column of the hosts' label KEY (repeatable)")
	return cmd
}

// printHosts writes the hosts view of member rows: a row per host, a
// column per component in the order the rows name them, N/A where the
// host runs none of its members.
func (g *globals) printHosts(rows []engine.MemberView, labels []string) error {
	hosts := engine.HostsView(rows)
	if g.json() {
		return g.printJSON(hosts)
	}
	var comps []string
	for _, r := range rows {
		if !slices.Contains(comps, r.Component) {
			comps = append(comps, r.Component)
		}
	}
	w := g.table()
	head := []string{"HOST"}
	for _, l := range labels {
		head = append(head, strings.ToUpper(l))
	}
	head = append(head, "TARGET")
	for _, c := range comps {
		head = append(head, strings.ToUpper(c))
	}
	fmt.Fprintln(w, strings.Join(append(head, "STATUS"), "\t"))
	for _, h := range hosts {
		row := []string{h.Host}
		for _, l := range labels {
			row = append(row, dash(h.Labels[l]))
		}
		row = append(row, dash(h.Target))
		for _, c := range comps {
			v, ok := h.Versions[c]
			if !ok {
				v = "N/A"
			}
			row = append(row, v)
		}
		fmt.Fprintln(w, strings.Join(append(row, dash(h.Status)), "\t"))
	}
	return w.Flush()
}

func printMembers(g *globals, rows []engine.MemberView) {
	w := g.table()
	fmt.Fprintln(w, "MEMBER\tCOMPONENT\tHOST\tTARGET\tRUNNING\tSTATUS\tSTEP")
	for _, r := range rows {
		status := r.Status
		if r.Adopted {
			// Started outside ferry, found running: the first restart
			// hands it over.
			status += " (adopted)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Component, r.Host, dash(r.Target), dash(r.Running), status, dash(r.Step))
	}
	w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func eventsCmd(g *globals) *cobra.Command {
	var all, follow bool
	var limit int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "list the events of the current upgrade (every action and health result)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if g.remote() {
				return g.remoteEvents(cmd.Context(), all, follow, limit)
			}
			st, err := store.OpenReadOnly(g.dataDir)
			if err != nil {
				return err
			}
			id := ""
			if !all {
				u, ok, err := st.Current()
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("no upgrade yet; --all lists every event")
				}
				id = u.ID
			}
			var after uint64
			for {
				evs, err := st.Events(id, after, limit)
				if err != nil {
					return err
				}
				for _, ev := range evs {
					after = ev.Seq
					if g.json() {
						if err := g.printJSON(ev); err != nil {
							return err
						}
						continue
					}
					printEvent(g, ev)
				}
				if !follow {
					return nil
				}
				if u, ok, _ := st.Current(); ok && u.State.Terminal() && len(evs) == 0 {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(250 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "events of every upgrade, not only the current one")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new events until the upgrade ends")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many events (0: all)")
	return cmd
}

func printEvent(g *globals, ev store.Event) {
	fmt.Fprintf(g.stdout, "%s  %-8s %s\n", ev.Time.Local().Format("15:04:05.000"), ev.Kind, ev.Message)
}

// observed loads the description, builds the engine and observes the
// cluster: what every listing starts with.
func (g *globals) observed(ctx context.Context) (*engine.Engine, *store.Store, engine.Snapshot, error) {
	c, err := g.load()
	if err != nil {
		return nil, nil, engine.Snapshot{}, err
	}
	e, st, err := g.viewEngine(c)
	if err != nil {
		return nil, nil, engine.Snapshot{}, err
	}
	snap, err := e.Observe(ctx)
	return e, st, snap, err
}
