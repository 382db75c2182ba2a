// Package traffic drives client requests through a service while it is
// upgraded and records every one of them, so that ferry can show what
// its users saw: how many requests failed, how slow they were, and
// whether every write the service acknowledged is still there.
package traffic

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// Config says how to drive a service: the request mix (from the
// description's traffic spec, config.Traffic) and the load.
type Config struct {
	// Targets are the service's base URLs; clients take them in turn.
	Targets []string
	// Requests is the mix; each is picked with probability Share over
	// the sum of the shares.
	Requests []config.TrafficRequest
	// Concurrency is the number of clients; Rate the total requests per
	// second they aim for (0: as fast as they can).
	Concurrency int
	Rate        float64
	Timeout     time.Duration
	// Seed makes the request mix reproducible.
	Seed uint64

	// BaseURL and WriteShare, when Requests is empty, drive the sample
	// key-value API (KVRequests) at BaseURL.
	BaseURL    string
	WriteShare float64
}

// FromSpec is the Config of a description's traffic spec.
func FromSpec(t *config.Traffic) Config {
	return Config{Targets: t.Targets, Requests: t.Requests, Concurrency: t.Concurrency, Rate: t.Rate,
		Timeout: t.Timeout.D(), Seed: t.Seed}
}

// KVRequests is the sample key-value API's mix: writes of fresh keys
// (a share of writeShare) and reads, checked, of acknowledged ones.
func KVRequests(writeShare float64) []config.TrafficRequest {
	return []config.TrafficRequest{
		{Name: "put", Method: http.MethodPut, Path: "/v1/kv/{{.Key}}", Body: "{{.Value}}", Share: writeShare, Writes: true},
		{Name: "get", Method: http.MethodGet, Path: "/v1/kv/{{.Written}}", Share: 1 - writeShare, Verify: true},
	}
}

func (cfg Config) withDefaults() Config {
	if len(cfg.Requests) == 0 {
		cfg.Requests = KVRequests(cfg.WriteShare)
	}
	if len(cfg.Targets) == 0 && cfg.BaseURL != "" {
		cfg.Targets = []string{cfg.BaseURL}
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 4
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	for i := range cfg.Requests {
		r := &cfg.Requests[i]
		if r.Name == "" {
			r.Name = strings.ToLower(r.Method)
		}
		if r.Method == "" {
			r.Method = http.MethodGet
		}
	}
	return cfg
}

// Sample is one request.
type Sample struct {
	Start   time.Time
	Latency time.Duration
	Op      string // the request's name in the mix
	OK      bool
	Err     string
}

// Recorder holds every sample and every acknowledged write.
type Recorder struct {
	mu      sync.Mutex
	samples []Sample
	acked   map[string]string
	keys    []string // acked keys, for picking one at random
	// OnSample, if set before the traffic starts, sees every sample as
	// it is recorded (metrics, a live chart). It must not block.
	OnSample func(Sample)
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{acked: map[string]string{}} }

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
	r.samples = append(r.samples, s)
	if s.OK && key != "" {
		if _, seen := r.acked[key]; !seen {
			r.keys = append(r.keys, key)
		}
		r.acked[key] = val
	}
	on := r.OnSample
	r.mu.Unlock()
	if on != nil {
		on(s)
	}
}

func (r *Recorder) pick(rng *rand.Rand) (string, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keys) == 0 {
		return "", "", false
	}
	k := r.keys[rng.IntN(len(r.keys))]
	return k, r.acked[k], true
}

// Run drives traffic until ctx ends, and returns the recorder.
func Run(ctx context.Context, cfg Config) *Recorder {
	rec := NewRecorder()
	run(ctx, cfg, rec)
	return rec
}

// Start is Run in the background: it returns the recorder at once (its
// methods may be called while requests go on) and a channel closed when
// the clients have stopped, after ctx ends.
func Start(ctx context.Context, cfg Config) (*Recorder, <-chan struct{}) {
	rec := NewRecorder()
	return rec, StartWith(ctx, cfg, rec)
}

// Control is a control's requests: 50 a second from one client, GET
// path on target, something on the machine the upgrade does not touch,
// whose latency says how busy the machine is (impact.JudgeWithControl).
func Control(target, path string, seed uint64) Config {
	return Config{Targets: []string{target}, Concurrency: 1, Rate: 50, Seed: seed,
		Requests: []config.TrafficRequest{{Name: "control", Method: http.MethodGet, Path: path, Share: 1}}}
}

// StartWith is Start with a recorder of the caller's (OnSample set).
func StartWith(ctx context.Context, cfg Config, rec *Recorder) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, cfg, rec)
	}()
	return done
}

func run(ctx context.Context, cfg Config, rec *Recorder) {
	cfg = cfg.withDefaults()
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency}}
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(cfg.Concurrency) / cfg.Rate)
	}
	var total float64
	for _, r := range cfg.Requests {
		total += r.Share
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
				req := choose(cfg.Requests, total, rng.Float64())
				d := config.TrafficData{Key: fmt.Sprintf("w%d-%d", w, n), Value: strconv.FormatUint(rng.Uint64(), 36), Seq: n, Client: w}
				if req.UsesWritten() {
					k, v, ok := rec.pick(rng)
					if !ok {
						continue // nothing written yet to read back
					}
					d.Written, d.WrittenValue = k, v
				}
				target := cfg.Targets[(w+n)%len(cfg.Targets)]
				s := do(client, target, req, d)
				if req.Writes {
					rec.add(s, d.Key, d.Value)
				} else {
					rec.add(s, "", "")
				}
			}
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
}

// choose picks the request whose share covers u in [0, 1).
func choose(reqs []config.TrafficRequest, total, u float64) *config.TrafficRequest {
	x := u * total
	for i := range reqs {
		if x < reqs[i].Share {
			return &reqs[i]
		}
		x -= reqs[i].Share
	}
	return &reqs[len(reqs)-1]
}

// maxBody bounds what is read of a response.
const maxBody = 1 << 20

// do makes one request of the mix and records it as a sample.
func do(c *http.Client, target string, r *config.TrafficRequest, d config.TrafficData) Sample {
	s := Sample{Start: time.Now(), Op: r.Name}
	err := func() error {
		path, err := config.RenderTraffic(r.Path, d)
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		var body io.Reader
		if r.Body != "" {
			b, err := config.RenderTraffic(r.Body, d)
			if err != nil {
				return fmt.Errorf("body: %w", err)
			}
			body = strings.NewReader(b)
		}
		req, err := http.NewRequest(r.Method, strings.TrimSuffix(target, "/")+path, body)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			return fmt.Errorf("%s %s: reading the response: %w", r.Method, path, err)
		}
		ok := resp.StatusCode/100 == 2
		if r.ExpectStatus != 0 {
			ok = resp.StatusCode == r.ExpectStatus
		}
		if !ok {
			return fmt.Errorf("%s %s: status %d", r.Method, path, resp.StatusCode)
		}
		if r.Verify && string(got) != d.WrittenValue {
			return fmt.Errorf("%s %s: read %q, acknowledged %q", r.Method, path, truncate(string(got), 64), d.WrittenValue)
		}
		return nil
	}()
	s.Latency = time.Since(s.Start)
	s.OK = err == nil
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// VerifyWrites reads back every acknowledged write with the mix's
// first verifying request (Verify set), at the first target, and
// returns how many read back and the keys that did not (lost). It
// reports ok=false when the mix has no verifying request.
func VerifyWrites(ctx context.Context, cfg Config, acked map[string]string) (verified int, lost []string, ok bool) {
	cfg = cfg.withDefaults()
	var vr *config.TrafficRequest
	for i := range cfg.Requests {
		if cfg.Requests[i].Verify {
			vr = &cfg.Requests[i]
			break
		}
	}
	if vr == nil || len(cfg.Targets) == 0 {
		return 0, nil, false
	}
	c := &http.Client{Timeout: cfg.Timeout}
	defer c.CloseIdleConnections()
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ctx.Err() != nil {
			lost = append(lost, k)
			continue
		}
		// A read is retried a few times: the check is of the data, not
		// of one request's luck.
		var s Sample
		for try := 0; try < 3; try++ {
			if s = do(c, cfg.Targets[0], vr, config.TrafficData{Written: k, WrittenValue: acked[k]}); s.OK {
				break
			}
		}
		if s.OK {
			verified++
		} else {
			lost = append(lost, k)
		}
	}
	return verified, lost, true
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

// MinAchieved is the share of its target rate below which a load is
// said to have fallen short: on a loaded machine the clients cannot send
// what was asked, and the verdicts then judge a lighter load than the
// one described.
const MinAchieved = 0.9

// Achieved is the rate a load reached against its target.
type Achieved struct {
	// Rate is requests per second over the span measured.
	Rate float64 `json:"achieved_rate"`
	// Short says so when Rate is below MinAchieved of the target.
	Short string `json:"rate_short,omitempty"`
}

// AchievedRate is the rate of total requests over d against target
// (requests per second; 0: no target, nothing is short of it).
func AchievedRate(total int, d time.Duration, target float64) Achieved {
	if d <= 0 {
		return Achieved{}
	}
	a := Achieved{Rate: float64(total) / d.Seconds()}
	if target > 0 && a.Rate < MinAchieved*target {
		a.Short = fmt.Sprintf("%.0f requests/s sent of the %.0f/s asked (%.0f%%): the machine could not keep up, and the verdict judges a lighter load", a.Rate, target, 100*a.Rate/target)
	}
	return a
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
