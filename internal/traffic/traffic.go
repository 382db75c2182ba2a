// Package traffic drives client requests through a service while it is
// upgraded and records every one of them, so that ferry can show what
// its users saw: how many requests failed, how slow they were, and
// whether every write the service acknowledged is still there.
package traffic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Config says how to drive the sample key-value API.
type Config struct {
	// BaseURL is the service's address, e.g. http://127.0.0.1:8000.
	BaseURL string
	// Concurrency is the number of clients; Rate the total requests per
	// second they aim for (0: as fast as they can).
	Concurrency int
	Rate        float64
	// WriteShare is the share of writes (the rest are reads of keys
	// written before).
	WriteShare float64
	Timeout    time.Duration
	// Seed makes the request mix reproducible.
	Seed uint64
}

// Sample is one request.
type Sample struct {
	Start   time.Time
	Latency time.Duration
	Op      string // put, get
	OK      bool
	Err     string
}

// Recorder holds every sample and every acknowledged write.
type Recorder struct {
	mu      sync.Mutex
	samples []Sample
	acked   map[string]string
}

// Samples returns a copy of the samples so far.
func (r *Recorder) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Sample(nil), r.samples...)
}

// Acked returns the writes the service acknowledged: key → value.
func (r *Recorder) Acked() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.acked))
	for k, v := range r.acked {
		out[k] = v
	}
	return out
}

func (r *Recorder) add(s Sample, key, val string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	if s.OK && s.Op == "put" {
		r.acked[key] = val
	}
}

func (r *Recorder) pick(rng *rand.Rand) (string, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.acked) == 0 {
		return "", "", false
	}
	// Maps have no index; a small sample of the last writes is enough.
	n := rng.IntN(len(r.acked))
	for k, v := range r.acked {
		if n == 0 {
			return k, v, true
		}
		n--
	}
	return "", "", false
}

// Run drives traffic until ctx ends, and returns the recorder.
func Run(ctx context.Context, cfg Config) *Recorder {
	rec := &Recorder{acked: map[string]string{}}
	run(ctx, cfg, rec)
	return rec
}

// Start is Run in the background: it returns the recorder at once (its
// methods may be called while requests go on) and a channel closed when
// the clients have stopped, after ctx ends.
func Start(ctx context.Context, cfg Config) (*Recorder, <-chan struct{}) {
	rec := &Recorder{acked: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, cfg, rec)
	}()
	return rec, done
}

func run(ctx context.Context, cfg Config, rec *Recorder) {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 4
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency}}
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(cfg.Concurrency) / cfg.Rate)
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			next := time.Now()
			for n := 0; ctx.Err() == nil; n++ {
				if interval > 0 {
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(d):
						}
					}
				}
				if rng.Float64() < cfg.WriteShare {
					key := fmt.Sprintf("w%d-%d", w, n)
					val := strconv.FormatUint(rng.Uint64(), 36)
					rec.add(put(client, cfg.BaseURL, key, val), key, val)
				} else if key, val, ok := rec.pick(rng); ok {
					rec.add(get(client, cfg.BaseURL, key, val), "", "")
				}
			}
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
}

func put(c *http.Client, base, key, val string) Sample {
	s := Sample{Start: time.Now(), Op: "put"}
	req, err := http.NewRequest(http.MethodPut, base+"/v1/kv/"+key, bytes.NewBufferString(val))
	if err == nil {
		var resp *http.Response
		resp, err = c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = fmt.Errorf("PUT %s: status %d", key, resp.StatusCode)
			}
		}
	}
	s.Latency = time.Since(s.Start)
	s.OK = err == nil
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

func get(c *http.Client, base, key, want string) Sample {
	s := Sample{Start: time.Now(), Op: "get"}
	got, status, err := Read(c, base, key)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", key, status)
	} else if err == nil && got != want {
		err = fmt.Errorf("GET %s: read %q, acknowledged %q", key, got, want)
	}
	s.Latency = time.Since(s.Start)
	s.OK = err == nil
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

// Read reads one key through the service.
func Read(c *http.Client, base, key string) (string, int, error) {
	resp, err := c.Get(base + "/v1/kv/" + key)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, err
}

// Stats summarises samples.
type Stats struct {
	Total  int     `json:"total"`
	Failed int     `json:"failed"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// Summarize computes Stats over the samples that started in [from, to).
func Summarize(samples []Sample, from, to time.Time) Stats {
	var lat []float64
	var st Stats
	for _, s := range samples {
		if s.Start.Before(from) || !s.Start.Before(to) {
			continue
		}
		st.Total++
		if !s.OK {
			st.Failed++
		}
		lat = append(lat, float64(s.Latency.Microseconds())/1000)
	}
	if len(lat) == 0 {
		return st
	}
	sort.Float64s(lat)
	st.P50MS = quantile(lat, 0.50)
	st.P99MS = quantile(lat, 0.99)
	st.MaxMS = lat[len(lat)-1]
	return st
}

// quantile of sorted values, nearest-rank.
func quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
