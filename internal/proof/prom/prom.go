// Package prom reads what a service's own clients see from Prometheus,
// for services whose real traffic should be the judge of an upgrade's
// impact: a latency query and an error-rate query, evaluated over the
// baseline and the upgrade, turned into samples that the impact verdict
// judges like the requests ferry drives.
//
// Each sample is one step of the range query (an aggregate over the
// step's rate window, e.g. a p99), not one request: Mann-Whitney U then
// compares the distribution of those per-step values in a window with
// the baseline's, the p99 ratio is taken over them, and min_requests
// counts steps. A step whose error rate is above zero is a failed
// sample: zero downtime means no step saw an error.
package prom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// Op is the Op of the samples a Source returns.
const Op = "prometheus"

// Source queries one Prometheus server.
type Source struct {
	base            *url.URL
	latency, errors string
	step            time.Duration
	token           string
	hc              *http.Client
}

// New checks the signal's settings; token, if not empty, is sent as a
// bearer token (never logged).
func New(cfg config.Prometheus, token string) (*Source, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus: %q is not an http(s) URL", cfg.URL)
	}
	if strings.TrimSpace(cfg.Latency) == "" && strings.TrimSpace(cfg.Errors) == "" {
		return nil, errors.New("prometheus: a latency query, an errors query, or both, are needed")
	}
	step := cfg.Step.D()
	if step <= 0 {
		step = time.Second
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Source{base: u, latency: cfg.Latency, errors: cfg.Errors, step: step, token: token,
		hc: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Point is one step's value.
type Point struct {
	T time.Time
	V float64
}

// Samples returns one sample per step in [from, to]: Latency the
// latency query's value (seconds), OK when the errors query's value is
// zero or absent. Steps where the latency is not a number (no traffic)
// are left out.
func (s *Source) Samples(ctx context.Context, from, to time.Time) ([]traffic.Sample, error) {
	var lat, errs []Point
	var err error
	if s.latency != "" {
		if lat, err = s.Range(ctx, s.latency, from, to); err != nil {
			return nil, err
		}
	}
	if s.errors != "" {
		if errs, err = s.Range(ctx, s.errors, from, to); err != nil {
			return nil, err
		}
	}
	return Merge(lat, errs, s.latency != ""), nil
}

// Merge joins the latency and error series by step into samples (see
// Samples); withLatency says whether a latency query is configured (if
// not, each error step is a sample of latency 0).
func Merge(lat, errs []Point, withLatency bool) []traffic.Sample {
	errAt := map[int64]float64{}
	for _, p := range errs {
		errAt[p.T.UnixMilli()] = p.V
	}
	sample := func(t time.Time, latency float64) traffic.Sample {
		sm := traffic.Sample{Start: t, Latency: time.Duration(latency * float64(time.Second)), Op: Op, OK: true}
		if e := errAt[t.UnixMilli()]; e > 0 && !math.IsNaN(e) {
			sm.OK, sm.Err = false, strconv.FormatFloat(e, 'g', 4, 64)+" errors/s"
		}
		return sm
	}
	var out []traffic.Sample
	if withLatency {
		for _, p := range lat {
			if math.IsNaN(p.V) || math.IsInf(p.V, 0) || p.V < 0 {
				continue
			}
			out = append(out, sample(p.T, p.V))
		}
	} else {
		for _, p := range errs {
			if !math.IsNaN(p.V) {
				out = append(out, sample(p.T, 0))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Range evaluates query over [from, to] at the source's step: the
// query must give one series (aggregate it: sum, histogram_quantile
// over sum by (le)).
func (s *Source) Range(ctx context.Context, query string, from, to time.Time) ([]Point, error) {
	q := url.Values{}
	q.Set("query", query)
	q.Set("start", strconv.FormatFloat(float64(from.UnixMilli())/1000, 'f', 3, 64))
	q.Set("end", strconv.FormatFloat(float64(to.UnixMilli())/1000, 'f', 3, 64))
	q.Set("step", strconv.FormatFloat(s.step.Seconds(), 'f', -1, 64))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base.String()+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus at %s: %w", s.base.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("prometheus at %s: %w", s.base.Host, err)
	}
	pts, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("prometheus at %s: query %q: %w", s.base.Host, query, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("prometheus at %s: query %q: status %d", s.base.Host, query, resp.StatusCode)
	}
	return pts, nil
}

// Parse reads a query_range answer: one matrix series (or none) of
// [unix seconds, "value"] pairs, or Prometheus' error.
func Parse(b []byte) ([]Point, error) {
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("not a Prometheus answer: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("a %s, want a matrix", r.Data.ResultType)
	}
	switch len(r.Data.Result) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%d series, want one: aggregate the query (sum, or histogram_quantile over sum by (le))", len(r.Data.Result))
	}
	var out []Point
	for _, v := range r.Data.Result[0].Values {
		ts, ok := v[0].(float64)
		str, ok2 := v[1].(string)
		if !ok || !ok2 {
			return nil, fmt.Errorf("a value %v is not [time, \"number\"]", v)
		}
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("a value %q is not a number", str)
		}
		out = append(out, Point{T: time.UnixMilli(int64(math.Round(ts * 1000))), V: f})
	}
	return out, nil
}

// ForCluster is the Source of a description's traffic.prometheus, its
// token read from token_file (relative to the description), or nil
// when the description has none.
func ForCluster(c *config.Cluster, t *config.Traffic) (*Source, error) {
	if t == nil || t.Prometheus == nil {
		return nil, nil
	}
	token := ""
	if f := t.Prometheus.TokenFile; f != "" {
		b, err := readToken(c.ResolvePath(f))
		if err != nil {
			return nil, fmt.Errorf("traffic.prometheus.token_file: %w", err)
		}
		token = b
	}
	return New(*t.Prometheus, token)
}

func readToken(path string) (string, error) {
	return bearer.Read(path)
}
