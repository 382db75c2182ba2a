package prom

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// prometheusBinary builds (once, cached) or finds the real Prometheus:
// with FERRY_PROM=1, or when scripts/prometheus.sh has built it before.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../../../scripts/prometheus.sh")
	if err != nil {
		t.Fatal(err)
	}
	version := "v0.316.0"
	cache, _ := os.UserCacheDir()
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		cache = x
	}
	cached := filepath.Join(cache, "ferry", "prometheus", version, "bin", "prometheus")
	if _, err := os.Stat(cached); err != nil && os.Getenv("FERRY_PROM") != "1" {
		t.Skip("no Prometheus built yet: FERRY_PROM=1 builds it from its Go module (scripts/prometheus.sh, a few minutes once)")
	}
	out, err := exec.Command("bash", script).Output()
	if err != nil {
		t.Fatalf("scripts/prometheus.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRealPrometheus runs a real Prometheus scraping a service whose
// latency histogram and error counter the test drives through a quiet
// period, a slow one and one with errors; the signal's samples show the
// slow steps slower than the quiet ones and the error steps failed; a
// query Prometheus rejects is an error naming it.
func TestRealPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	reg := prometheus.NewRegistry()
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sample_request_duration_seconds",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1}})
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "sample_errors_total"})
	reg.MustRegister(hist, errs)
	errs.Add(0)
	svc := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer svc.Close()

	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: sample\n    static_configs: [{targets: [%q]}]\n",
		strings.TrimPrefix(svc.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), nil
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	waitUntil(t, 30*time.Second, "Prometheus ready", func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	// The service's clients: quiet, then slow, then failing; 50
	// observations a second.
	drive := func(d time.Duration, latency float64, failing bool) (time.Time, time.Time) {
		from := time.Now()
		for time.Since(from) < d {
			for i := 0; i < 5; i++ {
				hist.Observe(latency * (0.9 + 0.02*float64(i)))
			}
			if failing {
				errs.Inc()
			}
			time.Sleep(100 * time.Millisecond)
		}
		return from, time.Now()
	}
	qFrom, qTo := drive(8*time.Second, 0.008, false)
	sFrom, sTo := drive(6*time.Second, 0.3, false)
	eFrom, eTo := drive(6*time.Second, 0.008, true)

	src, err := New(config.Prometheus{URL: base,
		Latency: `histogram_quantile(0.99, sum by (le) (rate(sample_request_duration_seconds_bucket[3s])))`,
		Errors:  `sum(rate(sample_errors_total[3s]))`, Step: config.Duration(time.Second)}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var smp []struct {
		t  time.Time
		ms float64
		ok bool
	}
	waitUntil(t, 20*time.Second, "the error period scraped", func() bool {
		got, err := src.Samples(ctx, qFrom, eTo.Add(2*time.Second))
		if err != nil {
			t.Fatalf("Samples: %v\n%s", err, logs.String())
		}
		smp = smp[:0]
		failed := 0
		for _, s := range got {
			smp = append(smp, struct {
				t  time.Time
				ms float64
				ok bool
			}{s.Start, float64(s.Latency.Microseconds()) / 1000, s.OK})
			if !s.OK {
				failed++
			}
		}
		return failed >= 3
	})
	// Steps well inside each period (the rate window lags by 3s).
	var quiet, slow []float64
	erred, errSteps := 0, 0
	for _, s := range smp {
		switch {
		case s.t.After(qFrom.Add(4*time.Second)) && s.t.Before(qTo):
			quiet = append(quiet, s.ms)
			if !s.ok {
				t.Errorf("a quiet step failed: %+v", s)
			}
		case s.t.After(sFrom.Add(4*time.Second)) && s.t.Before(sTo):
			slow = append(slow, s.ms)
		case s.t.After(eFrom.Add(4*time.Second)) && s.t.Before(eTo):
			errSteps++
			if !s.ok {
				erred++
			}
		}
	}
	t.Logf("p99 per step: quiet %v ms, slow %v ms; %d of %d steps of the error period failed", quiet, slow, erred, errSteps)
	if len(quiet) < 2 || len(slow) < 1 || errSteps < 1 {
		t.Fatalf("too few steps: quiet %d, slow %d, errors %d", len(quiet), len(slow), errSteps)
	}
	for _, q := range quiet {
		for _, s := range slow {
			if s <= q*5 {
				t.Errorf("a slow step's p99 %.1f ms is not well above a quiet one's %.1f ms", s, q)
			}
		}
	}
	if erred != errSteps {
		t.Errorf("%d of %d steps of the error period failed, want all", erred, errSteps)
	}

	bad, err := New(config.Prometheus{URL: base, Latency: `rate(sample_errors_total[`, Step: config.Duration(time.Second)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Samples(ctx, qFrom, eTo); err == nil || !strings.Contains(err.Error(), `query "rate(sample_errors_total["`) {
		t.Errorf("a bad query: %v", err)
	}
	many, _ := New(config.Prometheus{URL: base, Latency: `rate(sample_request_duration_seconds_bucket[3s])`, Step: config.Duration(time.Second)}, "")
	if _, err := many.Samples(ctx, qFrom, eTo); err == nil || !strings.Contains(err.Error(), "want one") {
		t.Errorf("a query of many series: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
