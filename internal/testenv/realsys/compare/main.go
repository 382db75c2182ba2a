// Command compare upgrades each real system (etcd 3.5 → 3.6, NATS 2.10 →
// 2.11) twice in the same run, on fresh clusters under the same load of
// its own client: once by ferry (ferry upgrade start, soak = S) and once
// by a naive rolling restart through the same agent (stop, start, wait for
// health, settle S: no leader last, no quorum check, no gate), and prints
// what clients saw (requests, failed, lost, p99) and the wall time of each,
// as a Markdown table. It exits 1 when ferry failed more requests than the
// naive loop or took more than 1.2 times its time.
//
//	go run ./internal/testenv/realsys/compare -ferry bin/ferry -settle 2s
//
// scripts/compare-realsys.sh builds what it needs and runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/testenv/realsys"
)

type row struct {
	system, by string
	r          realsys.Report
	wall       time.Duration
	pace       string
}

func main() {
	ferry := flag.String("ferry", "", "the ferry binary (required)")
	systems := flag.String("systems", "etcd,nats", "the systems to compare")
	settle := flag.Duration("settle", 2*time.Second, "the naive loop's settle, and ferry's soak")
	rate := flag.Int("rate", 100, "the load, requests per second")
	runs := flag.Int("runs", 1, "runs of each")
	seed := flag.Uint64("seed", 0, "the port seed (0: random, printed)")
	flag.Parse()
	if *ferry == "" {
		fmt.Fprintln(os.Stderr, "compare: -ferry is required")
		os.Exit(2)
	}
	ctx := context.Background()
	env, err := realsys.LoadEnv(ctx)
	if err != nil {
		fail(err)
	}
	if miss := env.Missing("ETCD_N", "ETCD_N1", "NATS_N", "NATS_N1", "ETCDLOAD", "NATSLOAD"); len(miss) > 0 {
		fail(fmt.Errorf("not built: %s (scripts/realsys.sh build)", strings.Join(miss, ", ")))
	}
	var rows []row
	for run := 1; run <= *runs; run++ {
		for _, name := range strings.Split(*systems, ",") {
			var sys *realsys.System
			switch name {
			case "etcd":
				sys = realsys.Etcd(env)
			case "nats":
				sys = realsys.NATS(env)
			default:
				fail(fmt.Errorf("unknown system %q (etcd, nats)", name))
			}
			for _, by := range []string{"ferry", "naive"} {
				r, err := once(ctx, sys, by, *ferry, *settle, *rate, *seed)
				if err != nil {
					fail(fmt.Errorf("%s by %s: %w", name, by, err))
				}
				rows = append(rows, r)
			}
		}
	}
	fmt.Printf("\n| system | upgraded by | requests | failed | retried | lost | p99 | wall time |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		by := r.by
		if r.pace != "" {
			by += " (" + r.pace + ")"
		}
		fmt.Printf("| %s %s → %s | %s | %d | %d | %d | %d | %.1f ms | %.1f s |\n", r.system, sysVersions(env, r.system)[0], sysVersions(env, r.system)[1],
			by, r.r.Requests, r.r.Failed, r.r.Retries, r.r.Lost, r.r.P99MS, r.wall.Seconds())
	}
	ok := true
	for i := 0; i+1 < len(rows); i += 2 {
		f, n := rows[i], rows[i+1]
		ratio := f.wall.Seconds() / n.wall.Seconds()
		verdict := "ok"
		if f.r.Failed > n.r.Failed || ratio > 1.2 || f.r.Lost > 0 {
			verdict, ok = "NOT MET", false
		}
		fmt.Printf("\n%s: ferry failed %d requests, the naive loop %d; ferry took %.2f× the naive loop's time (at most 1.2×): %s",
			f.system, f.r.Failed, n.r.Failed, ratio, verdict)
	}
	fmt.Println()
	if !ok {
		os.Exit(1)
	}
}

func sysVersions(env realsys.Env, name string) [2]string {
	if name == "etcd" {
		return [2]string{env["ETCD_N_VERSION"], env["ETCD_N1_VERSION"]}
	}
	return [2]string{env["NATS_N_VERSION"], env["NATS_N1_VERSION"]}
}

// once brings a fresh cluster up at N, starts the load, lets it run 2 s,
// upgrades to N+1 by ferry or by the naive loop, lets the load run 1 s
// more, and stops it.
func once(ctx context.Context, sys *realsys.System, by, ferry string, settle time.Duration, rate int, seed uint64) (row, error) {
	dir, err := os.MkdirTemp("", "ferry-compare-"+sys.Name+"-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	c, err := realsys.New(ctx, sys, ferry, dir, realsys.Options{Soak: settle, Seed: seed, Log: logf})
	if err != nil {
		return row{}, err
	}
	defer c.Close()
	if out, code, err := c.Run(ctx, "cluster", "up", "--version", sys.N); err != nil || code != 0 {
		return row{}, fmt.Errorf("cluster up: exit %d %v\n%s", code, err, out)
	}
	if err := c.Formed(ctx); err != nil {
		return row{}, err
	}
	load, err := c.StartLoad(ctx, rate)
	if err != nil {
		return row{}, err
	}
	time.Sleep(2 * time.Second) // the load's baseline: a fixed length of it before either upgrade
	res := row{system: sys.Name, by: by}
	t0 := time.Now()
	switch by {
	case "ferry":
		out, code, err := c.Run(ctx, "upgrade", "start", "--to", sys.N1, "-q")
		res.wall = time.Since(t0)
		if err != nil || code != 0 {
			_, _ = load.Stop()
			return row{}, fmt.Errorf("upgrade: exit %d %v\n%s", code, err, out)
		}
		out, _, _ = c.Run(ctx, "upgrade", "status", "-o", "json")
		var u upgrade.Upgrade
		if json.Unmarshal([]byte(out), &u) == nil {
			p := u.Pace(u.Ended)
			res.pace = fmt.Sprintf("pace ×%.2f of its lower bound %.1f s", p.BoundRatio, p.LowerBoundS)
		}
	case "naive":
		res.wall, err = c.Naive(ctx, sys.N1, settle)
		if err != nil {
			_, _ = load.Stop()
			return row{}, err
		}
	}
	time.Sleep(time.Second)
	if res.r, err = load.Stop(); err != nil {
		return row{}, err
	}
	logf("compare: %s by %s: %d requests, %d failed, %d lost, p99 %.1f ms, %.1f s", sys.Name, by, res.r.Requests, res.r.Failed, res.r.Lost, res.r.P99MS, res.wall.Seconds())
	return res, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}
