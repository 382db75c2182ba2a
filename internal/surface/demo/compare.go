package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Naive is one way to upgrade the api tier without ferry, for the
// comparison: what ferry's ordering and draining save.
type Naive string

const (
	// AllAtOnce stops every api member, then starts them all on the new
	// release.
	AllAtOnce Naive = "all-at-once"
	// RollingNoDrain restarts the api members one by one, each as soon
	// as the previous one runs, without taking it out of the load
	// balancer first and without waiting for it to be healthy.
	RollingNoDrain Naive = "rolling-no-drain"
)

// Comparison is what clients saw during one naive upgrade of the api
// tier to To on a fresh sample cluster.
type Comparison struct {
	Mode      Naive         `json:"mode"`
	Requests  traffic.Stats `json:"requests"`
	DurationS float64       `json:"duration_s"`
	// ZeroDowntime is the verdict ferry's report gives: no request
	// failed while the api tier was upgraded.
	ZeroDowntime bool `json:"zero_downtime"`
}

// Compare runs each naive upgrade on its own fresh cluster under the
// same traffic as the demo and reports what clients saw.
func Compare(ctx context.Context, o Options, bins map[string]string, dir string) ([]Comparison, error) {
	var out []Comparison
	for _, mode := range []Naive{AllAtOnce, RollingNoDrain} {
		c, err := compareOne(ctx, o, bins, filepath.Join(dir, string(mode)), mode)
		if err != nil {
			return out, fmt.Errorf("demo: %s: %w", mode, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func compareOne(ctx context.Context, o Options, bins map[string]string, dir string, mode Naive) (Comparison, error) {
	o.Migrations, o.Flow = false, "" // the naive ways know nothing of them
	cl, err := StartCluster(ctx, ClusterOptions{Dir: dir, Self: o.Self, Start: o.From, Logger: o.Logger, Releases: o.releases(bins)})
	if err != nil {
		return Comparison{}, err
	}
	defer cl.Close()
	eng, _, err := cl.Engine(o.Logger, nil)
	if err != nil {
		return Comparison{}, err
	}
	art, err := eng.Artifact("api", o.To)
	if err != nil {
		return Comparison{}, err
	}
	var api []driver.Member
	for _, m := range cl.Members {
		if m.Component == "api" {
			api = append(api, m)
		}
	}
	tctx, stop := context.WithCancel(ctx)
	rec, done := traffic.Start(tctx, traffic.Config{BaseURL: cl.LB, Concurrency: o.Concurrency, Rate: o.Rate, WriteShare: 0.5, Seed: o.Seed})
	defer func() { stop(); <-done }()
	if !sleepCtx(ctx, 2*time.Second) {
		return Comparison{}, ctx.Err()
	}
	start := time.Now()
	switch mode {
	case AllAtOnce:
		var wg sync.WaitGroup
		for _, m := range api {
			wg.Add(1)
			go func() { defer wg.Done(); _ = cl.Driver.Stop(ctx, m) }()
		}
		wg.Wait()
		for _, m := range api {
			if err := cl.Driver.Start(ctx, m, art); err != nil {
				return Comparison{}, err
			}
		}
	case RollingNoDrain:
		for _, m := range api {
			if err := cl.Driver.Stop(ctx, m); err != nil {
				return Comparison{}, err
			}
			if err := cl.Driver.Start(ctx, m, art); err != nil {
				return Comparison{}, err
			}
		}
	}
	if err := waitHealthy(ctx, eng, cl.LBAdmin, cl.Dir, 60*time.Second); err != nil {
		return Comparison{}, err
	}
	end := time.Now()
	sleepCtx(ctx, time.Second)
	stop()
	<-done
	st := traffic.Summarize(rec.Samples(), start, end)
	return Comparison{Mode: mode, Requests: st, DurationS: end.Sub(start).Seconds(), ZeroDowntime: st.Failed == 0}, nil
}
