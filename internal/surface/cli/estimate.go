package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/sim"
)

// estimate runs the simulator on plan p with the durations the last
// completed upgrade in the store measured (the defaults without one).
func estimate(ctx context.Context, c *config.Cluster, st *store.Store, p plan.Plan) (*sim.Estimate, error) {
	moves := false
	for _, ph := range p.Phases {
		moves = moves || len(ph.Batches) > 0 || ph.Hosts != nil
	}
	if !moves {
		return nil, nil // nothing to move: nothing to estimate
	}
	cfg := sim.EstimateConfig{Cluster: c, To: p.To, Now: time.Now()}
	if len(p.From) > 0 {
		cfg.From = p.From[0]
	}
	if st != nil {
		if u, ok, err := st.LastCompleted(); err == nil && ok {
			if cfg.Moves = sim.Measure(u, c); len(cfg.Moves) > 0 {
				cfg.Basis = fmt.Sprintf("each step as measured in upgrade %s (%s → %s, completed %s)", u.ID, u.From, u.To, u.Ended.Local().Format(time.RFC3339))
			}
		}
	}
	est, err := sim.EstimateUpgrade(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &est, nil
}

func printEstimate(g *globals, est *sim.Estimate) {
	out := g.stdout
	fmt.Fprintf(out, "\nestimate (the simulator on this plan; %s; simulated in %s):\n", est.Basis, est.Simulated.Round(time.Millisecond))
	w := g.table()
	fmt.Fprintln(w, "PHASE\tCOMPONENT\tBATCHES\tEXPECTED")
	for i, ph := range est.Phases {
		name := ph.Component
		if ph.Part != "" {
			name += " (" + ph.Part + ")"
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", i+1, name, ph.Batches, ph.Took.Round(time.Millisecond))
	}
	_ = w.Flush()
	fmt.Fprintf(out, "total:    %s expected (preflight to completed); at worst %s (each batch to its deadline and soak)\n", est.Total.Round(time.Millisecond), est.Worst.Round(time.Second))
	fmt.Fprintf(out, "down at once, at most: %s\n", mostLine(est.MostDown.Component))
	if len(est.MostDown.Host) > 0 {
		fmt.Fprintf(out, "  per host: %s\n", mostLine(est.MostDown.Host))
	}
	if len(est.MostDown.Domain) > 0 {
		fmt.Fprintf(out, "  per domain: %s\n", mostLine(est.MostDown.Domain))
	}
	if len(est.Hooks) == 0 {
		fmt.Fprintln(out, "hooks:    none")
	} else {
		fmt.Fprintln(out, "hooks that run:")
		for _, h := range est.Hooks {
			fmt.Fprintf(out, "  %s\n", h)
		}
	}
	if est.Window != "" {
		fmt.Fprintf(out, "windows:  %s\n", est.Window)
	}
}

// mostLine writes counts by name, sorted: "api 2, kv 1".
func mostLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
