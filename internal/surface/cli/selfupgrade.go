package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
)

// versionCmd says which ferry this binary is. `ferry version -o json`
// is how ferry self-upgrade (and an agent asked to re-execute itself)
// asks a new binary its release before running it as ferry.
func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print this ferry's release and build (-o json: {release, build})",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			self := buildinfo.Running()
			if g.json() {
				return g.printJSON(self)
			}
			fmt.Fprintf(g.stdout, "ferry %s (build %s)\n", self.Release, self.Build)
			return nil
		},
	}
}

// printBuilds writes ferry's release and build and each agent's, below
// the members' versions in ferry versions.
func (g *globals) printBuilds(b selfupgrade.Builds) error {
	w := g.table()
	fmt.Fprintln(w, "\nFERRY\tRELEASE\tBUILD")
	fmt.Fprintf(w, "ferry\t%s\t%s\n", b.Ferry.Release, b.Ferry.Build)
	for _, a := range b.Agents {
		if a.Error != "" {
			fmt.Fprintf(w, "agent %s\t%s\t%s\n", a.Host, dash(a.Release), "unknown: "+a.Error)
			continue
		}
		fmt.Fprintf(w, "agent %s\t%s\t%s\n", a.Host, a.Release, a.Build)
	}
	return w.Flush()
}

func selfUpgradeCmd(g *globals) *cobra.Command {
	var binary, sum string
	var servers bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "self-upgrade --binary PATH --sha256 HEX",
		Short: "upgrade ferry's agents, host by host, to a newer ferry binary; their members keep running",
		Long: `Upgrade ferry first: its agents, host by host, to a newer ferry binary.

The binary's sha256 must be --sha256, and asked 'BINARY version -o json'
it must say a release newer than this ferry's: a downgrade or the same
release is refused, naming both, before anything changes. Refused too
while an upgrade of the cluster has not ended (ferry holds the engine
lock throughout, so none starts meanwhile), or when an agent does not
answer or is newer than the binary.

Then, one host at a time: the binary is uploaded to the agent's store
(as a member's artifact is), the agent re-executes itself on it (same
pid; its members never stop, the new agent adopts them), and ferry
waits until it answers on the new release before the next host. Replace
the ferry binary you run (and the one your agents' service starts) with
the new one afterwards.

With --addr, the server does it (POST /v1/self-upgrade): --binary is then
a path on the server's host, under one of its --artifact-roots. With
--servers too, it then moves the other servers of its etcd election, one
at a time (each re-executes on the binary, the same path on its host,
and is waited for on the new release), and last itself: it answers, then
stops, revokes its lease (an upgraded standby leads) and re-executes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if binary == "" || sum == "" {
				return errors.New("--binary and --sha256 are required")
			}
			if servers && !g.remote() {
				return errors.New("--servers needs --addr: the server replicas are upgraded by a server (the leader), standbys first, then itself")
			}
			req := selfupgrade.Request{Binary: binary, SHA256: sum, WaitMS: wait.Milliseconds(), Servers: servers}
			var rep selfupgrade.Report
			var err error
			if g.remote() {
				rep, err = g.remoteSelfUpgrade(cmd.Context(), req)
			} else {
				rep, err = g.localSelfUpgrade(cmd.Context(), req)
			}
			if err != nil {
				// The README's exit codes: 3 busy, 5 refused before
				// anything changed.
				switch {
				case errors.Is(err, selfupgrade.ErrBusy):
					return &exitError{code: 3, err: err}
				case errors.Is(err, selfupgrade.ErrRefused):
					return &exitError{code: 5, err: err}
				}
				return err
			}
			if g.json() {
				return g.printJSON(rep)
			}
			fmt.Fprintf(g.stdout, "agents on ferry %s: %d of %d re-executed, their members untouched\n", rep.Release, rep.Upgraded(), len(rep.Agents))
			if servers {
				fmt.Fprintf(g.stdout, "servers on ferry %s: %d, the one that answered last (it re-executes now; a leader hands over)\n", rep.Release, len(rep.Servers))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&binary, "binary", "", "the new ferry binary")
	f.StringVar(&sum, "sha256", "", "the new binary's sha256 (hex), checked before it is used")
	f.BoolVar(&servers, "servers", false, "with --addr: then the server replicas, one at a time, standbys first, the server asked last (a leader resigns its election as it re-executes)")
	f.DurationVar(&wait, "wait", selfupgrade.DefaultWait, "how long each agent has to answer on the new release")
	return cmd
}

func (g *globals) localSelfUpgrade(ctx context.Context, req selfupgrade.Request) (selfupgrade.Report, error) {
	c, err := g.load()
	if err != nil {
		return selfupgrade.Report{}, err
	}
	d, err := newDriver(c, g.driverLogger())
	if err != nil {
		return selfupgrade.Report{}, err
	}
	st, err := store.Open(g.dataDir)
	if err != nil {
		return selfupgrade.Report{}, err
	}
	progress := func(r selfupgrade.HostResult) {
		if !g.json() {
			g.printAgent(r)
		}
	}
	unlock, err := st.LockEngine()
	if err != nil {
		return selfupgrade.Report{}, selfupgrade.Busy("the engine lock: %v", err)
	}
	defer unlock()
	rep, _, err := selfupgrade.Run(ctx, req, d, selfupgrade.HostNames(c), st, progress)
	return rep, err
}

func (g *globals) remoteSelfUpgrade(ctx context.Context, req selfupgrade.Request) (selfupgrade.Report, error) {
	c, err := g.client()
	if err != nil {
		return selfupgrade.Report{}, err
	}
	if req.Servers {
		// To the leader itself: a standby that forwarded the request
		// would be re-executed while it carries the answer.
		var info server.ServerInfo
		if err := c.Do(ctx, http.MethodGet, "/v1/server", nil, &info); err != nil {
			return selfupgrade.Report{}, remoteErr(err)
		}
		if !info.Leads && info.Leader != "" {
			if !g.json() {
				fmt.Fprintf(g.stdout, "%s is a standby: asking the leader %s\n", g.addr, info.Leader)
			}
			if c, err = g.clientAt(info.Leader); err != nil {
				return selfupgrade.Report{}, err
			}
		}
	}
	var rep selfupgrade.Report
	if err := c.Do(ctx, http.MethodPost, "/v1/self-upgrade", req, &rep); err != nil {
		return selfupgrade.Report{}, remoteErr(err)
	}
	if !g.json() {
		for _, r := range rep.Agents {
			g.printAgent(r)
		}
		for _, r := range rep.Servers {
			switch {
			case r.Handover:
				fmt.Fprintf(g.stdout, "server %s: %s → %s after its answer (it re-executes; a leader hands over)\n", r.Host, r.From, r.To)
			case r.Skipped:
				fmt.Fprintf(g.stdout, "server %s: on ferry %s already\n", r.Host, r.To)
			default:
				fmt.Fprintf(g.stdout, "server %s: %s → %s in %s\n", r.Host, dash(r.From), r.To, r.Took.Round(time.Millisecond))
			}
		}
	}
	return rep, nil
}

// printAgent says what a self-upgrade did to one host's agent, as each
// is done (locally) or from the server's report (--addr).
func (g *globals) printAgent(r selfupgrade.HostResult) {
	if r.Skipped {
		fmt.Fprintf(g.stdout, "host %s: agent on ferry %s already\n", r.Host, r.To)
		return
	}
	fmt.Fprintf(g.stdout, "host %s: agent %s → %s in %s (%s)\n", r.Host, dash(r.From), r.To, r.Took.Round(time.Millisecond), r.Build)
}
