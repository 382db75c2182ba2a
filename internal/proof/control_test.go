package proof

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// TestControlExcusesASlowMachine drives traffic and a control
// (traffic.control) at two real HTTP servers and slows them after the
// baseline, as a loaded machine slows everything on it: with the
// control, the window is not judged impacted; without it, the same
// slowdown is. When the service alone slows, the control does not hide
// it.
func TestControlExcusesASlowMachine(t *testing.T) {
	const slowBy = 50 * time.Millisecond
	for _, c := range []struct {
		name                     string
		control                  bool
		serviceSlow, controlSlow bool
		impacted                 bool
	}{
		{"the machine slows, with a control", true, true, true, false},
		{"the machine slows, without a control", false, true, true, true},
		{"the service alone slows, with a control", true, true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var slowService, slowControl atomic.Bool
			handler := func(slow *atomic.Bool) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if slow.Load() {
						time.Sleep(slowBy)
					}
					_, _ = w.Write([]byte("ok"))
				})
			}
			svc := httptest.NewServer(handler(&slowService))
			defer svc.Close()
			ctl := httptest.NewServer(handler(&slowControl))
			defer ctl.Close()
			spec := &config.Traffic{Targets: []string{svc.URL}, Rate: 100, Concurrency: 8,
				Timeout: config.Duration(2 * time.Second), Baseline: config.Duration(5 * time.Second), Seed: 7,
				Requests: []config.TrafficRequest{{Name: "get", Method: http.MethodGet, Path: "/x", Share: 1}},
				Verdict:  config.Verdict{Alpha: 0.01, P99Ratio: 1.5, MinRequests: 20}}
			if c.control {
				spec.Control = &config.TrafficControl{URL: ctl.URL + "/admin/backends", Rate: 50}
			}
			ctx := context.Background()
			s := Start(ctx, spec, Options{})
			defer s.Stop(ctx)
			if err := s.WaitBaseline(ctx); err != nil {
				t.Fatal(err)
			}
			slowService.Store(c.serviceSlow)
			slowControl.Store(c.controlSlow)
			from := time.Now()
			time.Sleep(3 * time.Second) // the window judged: traffic runs through it
			to := time.Now()
			why := s.Judge(from, to)
			t.Logf("judged: %q", why)
			if got := why != ""; got != c.impacted {
				t.Errorf("impacted %v (%q), want %v", got, why, c.impacted)
			}
			if c.control && len(s.controlSamples()) < 100 {
				t.Errorf("the control sent %d requests in 8 s at 50/s", len(s.controlSamples()))
			}
		})
	}
}
