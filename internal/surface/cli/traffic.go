package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// fromDescription is the --traffic value that takes the description's
// own traffic spec.
const fromDescription = "description"

// trafficSpec returns the traffic spec that flag names: the
// description's (fromDescription) or a file's.
func trafficSpec(c *config.Cluster, flag string) (*config.Traffic, error) {
	if flag == fromDescription || flag == "" {
		if c.Traffic == nil {
			return nil, fmt.Errorf("%s has no traffic: spec; add one, or pass --traffic FILE", c.File)
		}
		return c.Traffic, nil
	}
	return config.LoadTraffic(flag)
}

func trafficCmd(g *globals) *cobra.Command {
	var spec string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "traffic",
		Short: "drive the description's traffic at the service, without upgrading, and summarise what clients saw",
		Long: `Drive the traffic spec (the description's traffic:, or --traffic FILE) for
--duration and print what the clients saw: requests, failures, p50 and p99, per
request of the mix and in all. Use it to size the rate and to see the baseline
an upgrade will be compared with.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.load()
			if err != nil {
				return err
			}
			t, err := trafficSpec(c, spec)
			if err != nil {
				return err
			}
			if len(t.Targets) == 0 {
				return errors.New("the traffic spec has no targets: nothing to drive")
			}
			if duration <= 0 {
				return errors.New("--duration must be more than 0s")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), duration)
			defer cancel()
			began := time.Now()
			rec := traffic.Run(ctx, traffic.FromSpec(t))
			samples := rec.Samples()
			took := time.Since(began)
			sum := trafficSummary{Duration: took.Seconds(), All: traffic.Summarize(samples, began, time.Now().Add(time.Second)),
				ByRequest: map[string]traffic.Stats{}, Rate: t.Rate}
			sum.Achieved = traffic.AchievedRate(sum.All.Total, took, t.Rate)
			byOp := map[string][]traffic.Sample{}
			for _, s := range samples {
				byOp[s.Op] = append(byOp[s.Op], s)
				if !s.OK && len(sum.Errors) < 10 {
					sum.Errors = append(sum.Errors, s.Err)
				}
			}
			for op, ss := range byOp {
				sum.ByRequest[op] = traffic.Summarize(ss, began, time.Now().Add(time.Second))
			}
			if g.json() {
				return g.printJSON(sum)
			}
			fmt.Fprintf(g.stdout, "%d requests in %.1fs (%.0f/s), %d failed, p50 %.1f ms, p99 %.1f ms\n",
				sum.All.Total, sum.Duration, sum.Achieved.Rate, sum.All.Failed, sum.All.P50MS, sum.All.P99MS)
			if sum.Short != "" {
				fmt.Fprintf(g.stdout, "rate short: %s\n", sum.Short)
			}
			for _, op := range slices.Sorted(maps.Keys(sum.ByRequest)) {
				st := sum.ByRequest[op]
				fmt.Fprintf(g.stdout, "  %-12s %6d requests, %d failed, p50 %.1f ms, p99 %.1f ms\n", termText(op), st.Total, st.Failed, st.P50MS, st.P99MS)
			}
			for _, e := range sum.Errors {
				fmt.Fprintf(g.stdout, "  failed: %s\n", termText(e))
			}
			if sum.All.Failed > 0 {
				return &exitError{code: 4, err: fmt.Errorf("%d of %d requests failed", sum.All.Failed, sum.All.Total)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&spec, "traffic", fromDescription, "traffic spec: the description's, or a file holding a traffic: block")
	cmd.Flags().DurationVar(&duration, "duration", 10*time.Second, "how long to drive the traffic")
	return cmd
}

type trafficSummary struct {
	Duration  float64                  `json:"duration_s"`
	All       traffic.Stats            `json:"requests"`
	ByRequest map[string]traffic.Stats `json:"by_request"`
	Rate      float64                  `json:"rate"`
	traffic.Achieved
	Errors []string `json:"errors,omitempty"`
}

// proofRun is the traffic of one 'upgrade start --traffic'.
type proofRun struct {
	spec    *config.Traffic
	session *proof.Session
	report  string // path of the JSON report; the HTML one is beside it
}

// writeReport judges the upgrade and writes the JSON and HTML reports.
func (p *proofRun) writeReport(ctx context.Context, g *globals, st *store.Store, u upgrade.Upgrade) (proof.Report, error) {
	end := time.Now()
	p.session.Stop(ctx)
	evs, err := st.Events(u.ID, 0, 0)
	if err != nil {
		return proof.Report{}, err
	}
	r := p.session.Report(ctx, u, evs, end, true)
	path := p.report
	if path == "" {
		path = filepath.Join(g.dataDir, "reports", u.ID+".json")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return r, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o640); err != nil {
		return r, err
	}
	csvPath := trimExt(path) + ".samples.csv"
	cf, err := os.OpenFile(csvPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return r, err
	}
	err = p.session.WriteSamples(cf, u, evs, end)
	if cerr := cf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, fmt.Errorf("samples: %w", err)
	}
	html := trimExt(path) + ".html"
	f, err := os.Create(html)
	if err != nil {
		return r, err
	}
	err = impact.WriteHTML(f, p.session.Page("ferry upgrade "+u.ID, r, u, evs))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, fmt.Errorf("HTML report: %w", err)
	}
	if !g.json() {
		printProof(g, r, path, html, csvPath)
	}
	return r, nil
}

func trimExt(p string) string { return p[:len(p)-len(filepath.Ext(p))] }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printProof(g *globals, r proof.Report, jsonPath, htmlPath, csvPath string) {
	fmt.Fprintf(g.stdout, "\nzero downtime: %s   zero impact: %s\n", yesNo(r.ZeroDowntime), yesNo(r.ZeroImpact))
	if r.Traffic != nil && r.Traffic.Short != "" {
		fmt.Fprintf(g.stdout, "rate short: %s\n", r.Traffic.Short)
	}
	if tr := r.Traffic; tr != nil {
		fmt.Fprintf(g.stdout, "traffic: baseline %d requests p99 %.1f ms; during the upgrade %d requests, %d failed, p99 %.1f ms\n",
			tr.Baseline.Total, tr.Baseline.P99MS, tr.Requests.Total, tr.Requests.Failed, tr.Requests.P99MS)
		for _, w := range tr.Verdict.Windows {
			fmt.Fprintf(g.stdout, "  %-26s %6d requests %4d failed  p99 %6.1f ms (×%.2f)  zero impact: %-12s %s\n",
				w.Name, w.Requests, w.Failed, w.P99MS, w.P99Ratio, w.ZeroImpact, w.Reason)
		}
		if w := tr.Writes; w != nil {
			fmt.Fprintf(g.stdout, "writes: %d acknowledged, %d read back, %d lost\n", w.Acknowledged, w.Verified, w.Lost)
		}
	}
	if pr := r.Prometheus; pr != nil {
		fmt.Fprintf(g.stdout, "prometheus: %d samples, zero downtime %s, zero impact %s %s\n", pr.Samples,
			yesNo(pr.Verdict.ZeroDowntime), yesNo(pr.Verdict.ZeroImpact), pr.Error)
	}
	if htmlPath == "" {
		fmt.Fprintf(g.stdout, "report: %s (the HTML page and every request are the server's: GET /v1/upgrade/report, the dashboard)\n", jsonPath)
		return
	}
	fmt.Fprintf(g.stdout, "report: %s, %s; every request: %s\n", jsonPath, htmlPath, csvPath)
}
