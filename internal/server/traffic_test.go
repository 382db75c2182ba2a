package server

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// TestUpgradeWithTraffic starts an upgrade with "traffic": true: the
// server drives the description's traffic from a baseline on, the
// per-second series grows while it runs, each batch is judged, and at
// the end the report says zero downtime with every acknowledged write
// read back; /metrics counts the traffic's requests.
func TestUpgradeWithTraffic(t *testing.T) {
	cl := startCluster(t, 300*time.Millisecond)
	c := serve(t, clusterServer(t, cl))
	c.do("GET", "/v1/upgrade/report", nil).expect(t, "a report before any", 404, CodeNoReport)
	c.do("GET", "/v1/traffic", nil).expect(t, "traffic before any", 404, CodeNoReport)
	c.do("GET", "/v1/traffic?since=x", nil).expect(t, "since=x", 400, CodeBadRequest)

	began := time.Now()
	var us UpgradeStatus
	c.do("POST", "/v1/upgrade", map[string]any{"to": "2.0.0", "traffic": true}).expect(t, "start with traffic", 202).json(t, &us)
	if time.Since(began) < 3*time.Second {
		t.Errorf("the start returned after %s: before the 3s baseline", time.Since(began))
	}
	c.do("GET", "/v1/upgrade/report", nil).expect(t, "the report while it runs", 404, CodeNoReport)
	var ts TrafficSeries
	waitFor(t, time.Minute, "the series past the baseline", func() bool {
		c.do("GET", "/v1/traffic?since=1", nil).expect(t, "traffic", 200).json(t, &ts)
		return ts.Started != nil && len(ts.Points) > 3
	})
	if ts.Points[0].Second != 1 || ts.Points[0].Requests == 0 {
		t.Errorf("first point: %+v", ts.Points[0])
	}
	waitFor(t, 2*time.Minute, "state completed", func() bool {
		u := current(t, c).Upgrade
		if u.State.Terminal() && u.State != upgrade.StateCompleted {
			t.Fatalf("ended %s: %s", u.State, u.Reason)
		}
		return u.State == upgrade.StateCompleted
	})
	var r proof.Report
	waitFor(t, 30*time.Second, "the report", func() bool {
		return c.do("GET", "/v1/upgrade/report", nil).status == 200
	})
	c.do("GET", "/v1/upgrade/report", nil).expect(t, "the report", 200).json(t, &r)
	if r.UpgradeID != us.Upgrade.ID || !r.ZeroDowntime || r.Traffic == nil || r.Traffic.Requests.Total < 500 ||
		r.Traffic.Writes == nil || r.Traffic.Writes.Lost != 0 || r.Traffic.Writes.Acknowledged < 100 {
		t.Fatalf("report: %+v", r)
	}
	t.Logf("report: %d requests during the upgrade, %d failed, p99 %.1f ms (baseline %.1f ms); zero impact %v; writes %+v",
		r.Traffic.Requests.Total, r.Traffic.Requests.Failed, r.Traffic.Requests.P99MS, r.Traffic.Baseline.P99MS, r.ZeroImpact, *r.Traffic.Writes)
	_, text := scrape(t, c)
	for _, want := range []string{`ferry_traffic_requests_total{request="put"}`, `ferry_traffic_requests_total{request="get"}`,
		"ferry_traffic_latency_seconds_count"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
