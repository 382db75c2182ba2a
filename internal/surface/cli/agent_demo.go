package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/proof/cpuburn"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
)

func agentCmd(g *globals) *cobra.Command {
	var listen, dir, tokenFile, cert, key string
	var useTLS, insecure bool
	var maxArtifact int64
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "run the per-host agent that owns member processes (start, stop, status, version)",
		Long: `Run the per-host agent that owns member processes.

Its token runs any program as the agent's user: whoever holds it and can
reach the agent may upload an artifact and run it. On loopback (the
default) the agent serves plain HTTP; beyond loopback it serves TLS,
with --tls-cert/--tls-key or else a self-signed certificate generated
into DIR/tls at its first start, whose fingerprint it prints and writes
to DIR/tls/fingerprint: pin it in the description,
  hosts: [{name: h1, agent: HOST:PORT, tls: {fingerprint: "sha256:…"}}]
Plain HTTP beyond loopback is refused unless --insecure-listen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokenFile == "" {
				tokenFile = filepath.Join(dir, "token")
			}
			if maxArtifact <= 0 {
				return fmt.Errorf("--max-artifact-size %d: want a number of bytes above 0", maxArtifact)
			}
			mode := agent.TLSAuto
			if cmd.Flags().Changed("tls") {
				mode = map[bool]agent.TLSMode{true: agent.TLSOn, false: agent.TLSOff}[useTLS]
			}
			log := slog.New(slog.NewTextHandler(g.stderr, nil))
			log.Info("ferry agent", "listen", listen, "dir", dir)
			return agent.Serve(cmd.Context(), listen, agent.Config{Dir: dir, TokenFile: tokenFile, Logger: log,
				TLS: mode, CertFile: cert, KeyFile: key, InsecureListen: insecure, MaxArtifactSize: maxArtifact})
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7101", "address to listen on (loopback by default; beyond it the agent serves TLS)")
	f.StringVar(&dir, "dir", "ferry-agent", "the agent's directory: artifacts, logs, member state, its TLS certificate")
	f.StringVar(&tokenFile, "token-file", "", "bearer token file, created 0600 if missing (default DIR/token)")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key, the agent serves HTTPS with it")
	f.StringVar(&key, "tls-key", "", "TLS private key file (PEM)")
	f.BoolVar(&useTLS, "tls", false, "serve TLS on loopback too (beyond loopback it is the default); --tls=false beyond loopback needs --insecure-listen")
	f.BoolVar(&insecure, "insecure-listen", false, "serve plain HTTP beyond loopback: the token then travels in clear (only on a network you trust); the agent warns at start and in /v1/health")
	f.Int64Var(&maxArtifact, "max-artifact-size", agent.DefaultMaxArtifactSize, "the largest artifact, in bytes, an upload may send")
	return cmd
}

func demoCmd(g *globals) *cobra.Command {
	var o demo.Options
	var report string
	var clusterOnly, glance, burn bool
	var burnSeed uint64
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "start the sample cluster at 1.0.0, drive traffic through it, upgrade it to 2.0.0, report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			o.Self = self
			o.Out = g.stdout
			o.Logger = g.logger()
			if !o.Direct {
				// Through a ferry server on loopback, as an operator's
				// scripts would drive it; its dashboard URL is printed.
				o.Serve = serveDemo
			}
			if clusterOnly {
				return demo.Serve(cmd.Context(), o)
			}
			if glance {
				// Glance's zero-downtime and zero-impact gate: its
				// order, then the naive restart judged the same way.
				o.Flow, o.Migrations, o.NaiveRestart = demo.GlanceFlow, true, true
			}
			if burn {
				o.Burn = &cpuburn.Config{Seed: burnSeed}
			}
			if o.HTML == "" && report != "" {
				o.HTML = strings.TrimSuffix(report, ".json") + ".html"
			}
			rep, err := demo.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if report != "" {
				if err := writeJSON(report, rep); err != nil {
					return err
				}
			}
			printDemo(g, rep, report)
			if err := rep.Completed(); err != nil {
				return &exitError{code: 4, err: fmt.Errorf("demo did not meet its promise: %w", err)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&report, "report", "", "write the JSON report to this file")
	f.StringVar(&o.HTML, "html", "", "write the self-contained HTML report here (default: beside --report, .html)")
	f.BoolVar(&o.Compare, "compare", false, "also upgrade the api tier naively (all at once; rolling without draining) on fresh clusters and compare")
	f.BoolVar(&o.Direct, "direct", false, "drive the upgrade with an engine in this process instead of through a ferry server's API")
	f.BoolVar(&o.Migrations, "migrations", true, "give 2.0.0 the kv store's migrations to its format 2 (expand, migrate, finalize, contract)")
	f.BoolVar(&glance, "glance", false, "Glance's zero-impact gate: 2.0.0 in Glance's order (expand, kv, migrate, api drained one by one, contract), then every member restarted naively (killed and started, no drain) under the same traffic, both judged by the same verdict")
	f.BoolVar(&o.NaiveRestart, "naive-restart", false, "after the upgrade, restart every member naively (kill and start, no drain, no wait) and judge it with the same verdict")
	f.BoolVar(&burn, "burn", false, "load the machine with a CPU burner (2 goroutines spinning in random bursts) from before the baseline to the end: the verdict must not blame the upgrade")
	f.Uint64Var(&burnSeed, "burn-seed", 0, "seed of the burner's bursts (0: from the clock; printed)")
	f.DurationVar(&o.Baseline, "baseline", demo.DefaultBaseline, "traffic before the first member is touched: the verdict's reference, cut into 1s chunks to measure the machine's noise (at least 4s)")
	f.BoolVar(&clusterOnly, "cluster-only", false, "start the sample cluster and keep it running (until Ctrl-C) to try ferry's commands by hand")
	f.BoolVar(&o.Bare, "bare", false, "with --cluster-only: start the agent and the load balancer only, no member, for 'ferry rehearse'")
	f.StringVar(&o.Dir, "dir", "", "work directory (default: a new temporary directory)")
	f.BoolVar(&o.Keep, "keep", false, "keep the work directory")
	f.StringVar(&o.Artifacts, "artifacts", "", "directory with sample-1.0.0 and sample-2.0.0 (default: build them)")
	f.Float64Var(&o.Rate, "rate", 500, "client requests per second during the demo")
	f.IntVar(&o.Concurrency, "concurrency", 8, "concurrent clients")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the request mix (0: from the clock; printed)")
	return cmd
}

func printDemo(g *globals, r *demo.Report, report string) {
	fmt.Fprintf(g.stdout, "\nsummary\n")
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "upgrade\t%s: %s → %s, %s in %.1fs\n", r.UpgradeID, r.From, r.To, r.State, r.DurationS)
	if r.Server != "" {
		fmt.Fprintf(w, "driven by\tthe ferry server at %s (POST /v1/upgrade; driven_by %s)\n", r.Server, r.DrivenBy)
	} else {
		fmt.Fprintf(w, "driven by\tan engine in this process (--direct)\n")
	}
	fmt.Fprintf(w, "requests during upgrade\t%d sent (%.0f/s of %.0f/s asked), %d failed, p50 %.1fms, p99 %.1fms, max %.1fms\n", r.Requests.Total, r.Achieved.Rate, r.Rate, r.Requests.Failed, r.Requests.P50MS, r.Requests.P99MS, r.Requests.MaxMS)
	if r.Short != "" {
		fmt.Fprintf(w, "RATE SHORT\t%s\n", r.Short)
	}
	fmt.Fprintf(w, "baseline (before)\t%d sent, %d failed, p50 %.1fms, p99 %.1fms\n", r.Baseline.Total, r.Baseline.Failed, r.Baseline.P50MS, r.Baseline.P99MS)
	fmt.Fprintf(w, "acknowledged writes\t%d, %d read back, %d lost\n", r.Writes.Acknowledged, r.Writes.Verified, r.Writes.Lost)
	fmt.Fprintf(w, "engine overhead per step\tp50 %.2fms, max %.2fms over %d steps\n", r.Overhead.P50MS, r.Overhead.MaxMS, r.Overhead.Steps)
	fmt.Fprintf(w, "pace\t%.1fs against a lower bound of %.1fs (batches %.1fs, gates %.2fs, stages %.2fs, hooks %.2fs): ×%.3f\n",
		r.Pace.WallS, r.LowerBoundS, r.Pace.Batches, r.Pace.Gates, r.Pace.Stages, r.Pace.Hooks, r.BoundRatio)
	fmt.Fprintf(w, "events recorded\t%d\n", r.Events)
	fmt.Fprintf(w, "demo wall time\t%.1fs\n", r.TotalS)
	w.Flush()
	if r.Burn != nil {
		fmt.Fprintf(g.stdout, "%s: %d bursts, %.1fs of CPU spun\n", r.Burn.Config, r.Burn.Bursts, r.Burn.BusyS)
	}
	fmt.Fprintf(g.stdout, "states: %s → %s\n", strings.Join(r.States, " → "), r.State)
	printVerdict(g, "ferry's upgrade", r.Windows, r.Verdict)
	if n := r.NaiveRestart; n != nil {
		fmt.Fprintf(g.stdout, "\nthe naive restart on the same cluster (%s: each killed and started, no drain, no wait): %d requests, %d failed, p99 %.1fms (baseline %.1fms), healthy again after %.1fs\n",
			strings.Join(n.Members, ", "), n.Requests.Total, n.Requests.Failed, n.Requests.P99MS, n.Baseline.P99MS, n.DurationS)
		printVerdict(g, "the naive restart", n.Windows, n.Verdict)
	}
	if len(r.Naive) > 0 {
		w = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "API TIER UPGRADED BY\tREQUESTS\tFAILED\tP50\tP99\tMAX\tTOOK")
		for _, x := range r.Windows {
			if strings.HasPrefix(x.Name, "upgrading-api") {
				fmt.Fprintf(w, "ferry (drained, canary)\t%d\t%d\t%.1fms\t%.1fms\t%.1fms\t%.1fs\n", x.Requests.Total, x.Requests.Failed, x.Requests.P50MS, x.Requests.P99MS, x.Requests.MaxMS, x.ToS-x.FromS)
			}
		}
		for _, c := range r.Naive {
			fmt.Fprintf(w, "%s\t%d\t%d\t%.1fms\t%.1fms\t%.1fms\t%.1fs\n", c.Mode, c.Requests.Total, c.Requests.Failed, c.Requests.P50MS, c.Requests.P99MS, c.Requests.MaxMS, c.DurationS)
		}
		w.Flush()
	}
	w = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tCOMPONENT\tVERSION")
	for _, m := range r.Members {
		fmt.Fprintf(w, "%s\t%s\t%s\n", m.Name, m.Component, m.Version)
	}
	w.Flush()
	if report != "" {
		fmt.Fprintf(g.stdout, "report written to %s (and %s)\n", report, strings.TrimSuffix(report, ".json")+".html")
	}
}

// printVerdict prints one verdict: the noise its thresholds came from,
// the whole, and window by window.
func printVerdict(g *globals, what string, windows []demo.WindowStats, v impact.Verdict) {
	yes := map[bool]string{true: "yes", false: "NO"}
	fmt.Fprintf(g.stdout, "%s: zero downtime: %s; zero impact: %s (%s)\n", what, yes[v.ZeroDowntime], yes[v.ZeroImpact], v.Reason)
	fmt.Fprintf(g.stdout, "  baseline: %d requests, p50 %.1fms, p99 %.1fms; noise: %s\n", v.Baseline.Total, v.Baseline.P50MS, v.Baseline.P99MS, v.Noise.Reason)
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "WINDOW\tFROM\tTO\tREQUESTS\tFAILED\tP50\tP99\tP50/BASE\tP99/BASE [INTERVAL]\tRATE/BASE\tCONTROL P99/BASE\tP-VALUE\tZERO IMPACT")
	for i, x := range windows {
		wv := v.Windows[i]
		ctl := "-"
		if wv.Control != nil {
			ctl = fmt.Sprintf("%.2f", wv.Control.P99Ratio)
		}
		p99 := fmt.Sprintf("%.2f", wv.P99Ratio)
		if ci := wv.P99RatioCI; ci != nil {
			p99 += " " + ci.Range()
		}
		fmt.Fprintf(w, "%s\t%.1fs\t%.1fs\t%d\t%d\t%.1fms\t%.1fms\t%.2f\t%s\t%.2f\t%s\t%.2g\t%s\n", x.Name, x.FromS, x.ToS, x.Requests.Total, x.Requests.Failed,
			x.Requests.P50MS, x.Requests.P99MS, wv.P50Ratio, p99, wv.RateRatio, ctl, wv.PValue, wv.ZeroImpact)
	}
	w.Flush()
}

func writeJSON(path string, v any) error {
	b, err := jsonIndent(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// serveDemo starts a ferry server over the demo's cluster on loopback.
func serveDemo(ctx context.Context, cl *demo.Cluster, st *store.Store, logger *slog.Logger) (string, string, func(), error) {
	tok, _, err := server.LoadOrCreateToken(filepath.Join(cl.DataDir, server.TokenFile))
	if err != nil {
		return "", "", nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s, err := server.New(server.Config{Cluster: cl.Config, Driver: cl.Driver, Store: st, Token: tok, Logger: logger})
	if err != nil {
		return "", "", nil, err
	}
	url, stop, err := s.Loopback(ctx)
	return url, tok, stop, err
}
