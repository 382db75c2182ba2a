// Command natsload is NATS's own client (nats.go) under load, for
// ferry's real-system tests and comparisons: it publishes to a
// replicated JetStream stream (R3 by default, created if missing) with
// acknowledgements, at a steady rate, until it is interrupted (SIGINT,
// SIGTERM) or -for has passed, then reads the stream back and prints
// what clients saw as one JSON object: requests, failed, acknowledged,
// lost, p50 and p99.
//
// A publish is retried, as JetStream's documentation says to, with the
// same Nats-Msg-Id until it is acknowledged or its -timeout has passed
// (each try waits a quarter of it for its acknowledgement: one lost in
// a reconnect never comes):
// the stream's duplicate window drops a message stored twice, so a
// retry after an ambiguous failure (no acknowledgement, a reconnect)
// stores nothing twice. A publish not acknowledged within its timeout
// failed. Retries and reconnects are counted.
//
//	natsload -servers nats://127.0.0.1:21422,nats://127.0.0.1:22422 -rate 200 -ready /tmp/ready
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// Report is what the clients saw.
type Report struct {
	System       string         `json:"system"`
	Requests     int            `json:"requests"`
	Failed       int            `json:"failed"`
	Retries      int            `json:"retries"`
	Reconnects   int64          `json:"reconnects"`
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

// createStream makes sure the stream exists, once JetStream answers (a
// cluster just up elects its meta leader first). A creation request is
// given 10 s and never sent again while one may still be under way:
// two concurrent creations of one stream can leave it unusable
// (nats-server#3677). It gives up after 45 s, before the tests' own
// bound, so that they see why.
func createStream(nc *nats.Conn, name string, replicas int) error {
	js, err := nc.JetStream(nats.MaxWait(10 * time.Second))
	if err != nil {
		return err
	}
	cfg := &nats.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: replicas}
	var lastAdd time.Time
	said := time.Now()
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err = js.StreamInfo(name); err == nil {
			return nil
		}
		if errors.Is(err, nats.ErrStreamNotFound) || time.Since(lastAdd) > 20*time.Second {
			lastAdd = time.Now()
			if _, err = js.AddStream(cfg); err == nil {
				return nil
			}
		}
		if time.Since(said) > 5*time.Second {
			said = time.Now()
			fmt.Fprintf(os.Stderr, "natsload: %s: still creating the stream: %v\n", time.Now().Format(time.TimeOnly), err)
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

func main() {
	servers := flag.String("servers", "", "comma-separated nats://host:port of the members")
	rate := flag.Float64("rate", 200, "publishes per second, all workers together")
	workers := flag.Int("c", 4, "concurrent publishers")
	timeout := flag.Duration("timeout", 2*time.Second, "a publish's bound, retries included")
	dur := flag.Duration("for", 0, "stop after this long (0: at SIGINT or SIGTERM)")
	stream := flag.String("stream", "LOAD", "the stream (subjects STREAM.>)")
	replicas := flag.Int("replicas", 3, "the stream's replicas, when it is created")
	ready := flag.String("ready", "", "file created once a first publish is acknowledged")
	flag.Parse()
	if *servers == "" || *rate <= 0 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "natsload: -servers is required; -rate and -c must be positive")
		os.Exit(2)
	}
	var reconnects atomic.Int64
	nc, err := nats.Connect(*servers, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) }))
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsload:", err)
		os.Exit(1)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(*timeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsload:", err)
		os.Exit(1)
	}
	subject := *stream + ".x"
	if err := createStream(nc, *stream, *replicas); err != nil {
		fmt.Fprintln(os.Stderr, "natsload: creating the stream:", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	run := fmt.Sprintf("r%d", time.Now().UnixNano())
	rep := Report{System: "nats", FailedPerSec: map[string]int{}}
	var mu sync.Mutex
	acked := map[string]bool{}
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
				id := fmt.Sprintf("%s-%09d", run, n)
				t0 := time.Now()
				deadline := t0.Add(*timeout)
				tries := 0
				var err error
				for {
					tries++
					left := time.Until(deadline)
					if left <= 0 {
						if err == nil {
							err = errors.New("no time left")
						}
						break
					}
					// An acknowledgement lost in a reconnect never comes:
					// each try waits a part of the timeout, not all of it.
					_, err = js.Publish(subject, []byte(id), nats.MsgId(id), nats.AckWait(min(left, *timeout/4)))
					if err != nil {
						mu.Lock()
						if len(errs) < 8 {
							errs[err.Error()] = true
						}
						mu.Unlock()
					}
					if err == nil || time.Until(deadline) <= 0 {
						break
					}
					time.Sleep(min(50*time.Millisecond, max(time.Until(deadline), 0)))
				}
				mu.Lock()
				rep.Requests++
				rep.Retries += tries - 1
				if err != nil {
					rep.Failed++
					rep.FailedPerSec[fmt.Sprint(int(time.Since(start).Seconds()))]++
				} else {
					acked[id] = true
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
	rep.Reconnects = reconnects.Load()

	// Read the stream back: every message of this run.
	seen, err := readBack(js, *stream, subject, run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsload: reading back:", err)
		os.Exit(1)
	}
	for id := range acked {
		if seen[id] {
			rep.Verified++
		} else {
			rep.Lost++
			if len(rep.LostKeys) < 10 {
				rep.LostKeys = append(rep.LostKeys, id)
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

// readBack reads every message of the stream, up to its last sequence
// at the start of the read, and returns those of this run.
func readBack(js nats.JetStreamContext, stream, subject, run string) (map[string]bool, error) {
	var last uint64
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var si *nats.StreamInfo
		if si, err = js.StreamInfo(stream); err == nil {
			last = si.State.LastSeq
			break
		}
	}
	if err != nil {
		return nil, err
	}
	sub, err := js.SubscribeSync(subject, nats.OrderedConsumer(), nats.DeliverAll())
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	seen := map[string]bool{}
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			return nil, fmt.Errorf("after %d messages: %w", len(seen), err)
		}
		if id := string(m.Data); len(id) > len(run) && id[:len(run)] == run {
			seen[id] = true
		}
		md, err := m.Metadata()
		if err == nil && md.Sequence.Stream >= last {
			return seen, nil
		}
	}
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
