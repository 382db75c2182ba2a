// Command etcdload is etcd's own client (clientv3, etcd v3.6.8) under
// load, for ferry's real-system tests and comparisons: it writes fresh
// keys at a steady rate to every endpoint the client balances over,
// until it is interrupted (SIGINT, SIGTERM) or -for has passed, then
// reads every acknowledged write back and prints what clients saw as
// one JSON object: requests, failed, acknowledged, lost, p50 and p99.
//
// A write is retried, as an application would, until it succeeds or its
// -timeout has passed: a Put of a fresh key with a fixed value is
// idempotent, so a retry after an ambiguous failure (the leader stepped
// down, the connection closed) cannot write anything twice. A write
// that has not succeeded within its timeout failed. Retries are
// counted.
//
//	etcdload -endpoints 127.0.0.1:21379,127.0.0.1:22379 -rate 200 -ready /tmp/ready
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Report is what the clients saw.
type Report struct {
	System       string         `json:"system"`
	Requests     int            `json:"requests"`
	Failed       int            `json:"failed"`
	Retries      int            `json:"retries"`
	Acknowledged int            `json:"acknowledged"`
	Verified     int            `json:"verified"`
	Lost         int            `json:"lost"`
	LostKeys     []string       `json:"lost_keys,omitempty"`
	P50MS        float64        `json:"p50_ms"`
	P99MS        float64        `json:"p99_ms"`
	DurationS    float64        `json:"duration_s"`
	FailedPerSec map[string]int `json:"failed_per_second,omitempty"`
	Errors       []string       `json:"errors,omitempty"` // the first distinct ones
}

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated host:port of the members' client URLs")
	rate := flag.Float64("rate", 200, "writes per second, all workers together")
	workers := flag.Int("c", 4, "concurrent writers")
	timeout := flag.Duration("timeout", 2*time.Second, "a write's bound, retries included")
	dur := flag.Duration("for", 0, "stop after this long (0: at SIGINT or SIGTERM)")
	prefix := flag.String("prefix", "ferry-load/", "key prefix")
	ready := flag.String("ready", "", "file created once a first write is acknowledged")
	flag.Parse()
	if *endpoints == "" || *rate <= 0 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "etcdload: -endpoints is required; -rate and -c must be positive")
		os.Exit(2)
	}
	var eps []string
	for _, e := range strings.Split(*endpoints, ",") {
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		eps = append(eps, e)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdload:", err)
		os.Exit(1)
	}
	defer cli.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	run := fmt.Sprintf("%s%d/", *prefix, time.Now().UnixNano())
	rep := Report{System: "etcd", FailedPerSec: map[string]int{}}
	var mu sync.Mutex
	acked := map[string]string{}
	var lat []time.Duration
	errs := map[string]bool{}
	start := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	jobs := make(chan int)
	var once sync.Once
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				k, v := fmt.Sprintf("%s%09d", run, n), fmt.Sprintf("value-%d", n)
				t0 := time.Now()
				wctx, cancel := context.WithTimeout(context.Background(), *timeout)
				tries := 0
				var err error
				for {
					tries++
					// Each try waits a part of the timeout: an answer lost
					// with a stopped member never comes.
					tctx, tcancel := context.WithTimeout(wctx, *timeout/4)
					_, err = cli.Put(tctx, k, v)
					tcancel()
					if err != nil {
						mu.Lock()
						if len(errs) < 8 {
							errs[err.Error()] = true
						}
						mu.Unlock()
					}
					if err == nil || wctx.Err() != nil {
						break
					}
					t := time.NewTimer(50 * time.Millisecond)
					select {
					case <-wctx.Done():
					case <-t.C:
					}
					t.Stop()
				}
				cancel()
				mu.Lock()
				rep.Requests++
				rep.Retries += tries - 1
				if err != nil {
					rep.Failed++
					rep.FailedPerSec[fmt.Sprint(int(time.Since(start).Seconds()))]++
				} else {
					acked[k] = v
					lat = append(lat, time.Since(t0))
				}
				mu.Unlock()
				if err == nil && *ready != "" {
					once.Do(func() { _ = os.WriteFile(*ready, []byte("ok\n"), 0o644) })
				}
			}
		}()
	}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
			select {
			case jobs <- n:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	rep.DurationS = time.Since(start).Seconds()
	rep.Acknowledged = len(acked)

	// Read back every acknowledged write: one range over the run's
	// prefix, tried for up to 30s (the cluster may be settling).
	var got map[string]string
	var rerr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.Get(rctx, run, clientv3.WithPrefix())
		cancel()
		if rerr = err; err == nil {
			got = make(map[string]string, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				got[string(kv.Key)] = string(kv.Value)
			}
			break
		}
	}
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "etcdload: reading back:", rerr)
		os.Exit(1)
	}
	for k, v := range acked {
		if got[k] == v {
			rep.Verified++
		} else {
			rep.Lost++
			if len(rep.LostKeys) < 10 {
				rep.LostKeys = append(rep.LostKeys, k)
			}
		}
	}
	rep.P50MS, rep.P99MS = quantile(lat, 0.50), quantile(lat, 0.99)
	for e := range errs {
		rep.Errors = append(rep.Errors, e)
	}
	sort.Strings(rep.Errors)
	if len(rep.FailedPerSec) == 0 {
		rep.FailedPerSec = nil
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rep)
}

// quantile returns the q-quantile of ds in milliseconds (nearest rank).
func quantile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s)) + 0.5)
	i = min(max(i-1, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}
