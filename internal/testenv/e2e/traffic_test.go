package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestTrafficFromTheDescription drives the description's traffic spec
// with 'ferry traffic', then upgrades under it with 'ferry upgrade
// start --traffic': ferry measures the baseline, judges every window
// and writes the JSON and HTML reports; the upgrade is zero-downtime
// and every acknowledged write reads back.
func TestTrafficFromTheDescription(t *testing.T) {
	cl := startCluster(t, demo.ClusterOptions{}, "2.0.0")

	out, code := ferry(t, cl, "traffic", "--duration", "2s", "-o", "json")
	if code != 0 {
		t.Fatalf("ferry traffic: exit %d\n%s", code, out)
	}
	var sum struct {
		Requests  struct{ Total, Failed int }
		ByRequest map[string]struct{ Total int } `json:"by_request"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("ferry traffic -o json: %v\n%s", err, out)
	}
	t.Logf("ferry traffic: %d requests in 2s, %d failed, by request %v", sum.Requests.Total, sum.Requests.Failed, sum.ByRequest)
	if sum.Requests.Total < 100 || sum.Requests.Failed != 0 || sum.ByRequest["put"].Total == 0 || sum.ByRequest["get"].Total == 0 {
		t.Fatalf("ferry traffic: %+v", sum)
	}

	report := filepath.Join(t.TempDir(), "proof.json")
	out, code = ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "--traffic", "--report", report)
	t.Logf("ferry upgrade start --traffic:\n%s", tail(out, 30))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"baseline for 5s", "zero downtime: yes", "writes: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r proof.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	tr := r.Traffic
	if r.State != "completed" || !r.ZeroDowntime || tr == nil || tr.Requests.Failed != 0 || tr.Baseline.Total < 200 {
		t.Fatalf("report: %s", b)
	}
	batches := 0
	for _, w := range tr.Verdict.Windows {
		if w.Kind == "batch" {
			batches++
		}
		if !w.ZeroDowntime || w.ZeroImpact == "" {
			t.Errorf("window %+v", w)
		}
	}
	if batches < 3 {
		t.Errorf("%d batch windows judged, want one per batch (kv×3, api×3)", batches)
	}
	if tr.Writes == nil || tr.Writes.Acknowledged < 100 || tr.Writes.Lost != 0 {
		t.Errorf("writes: %+v", tr.Writes)
	}
	t.Logf("verdict: zero downtime %v, zero impact %v; %d requests during the upgrade, p99 %.1f ms (baseline %.1f ms); writes %+v",
		r.ZeroDowntime, r.ZeroImpact, tr.Requests.Total, tr.Requests.P99MS, tr.Baseline.P99MS, *tr.Writes)
	// Every request, with the state and batch that were running.
	rows, err := os.ReadFile(strings.TrimSuffix(report, ".json") + ".samples.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(rows)), "\n")
	inBatch := 0
	for _, l := range lines[1:] {
		if strings.Contains(l, "batch ") {
			inBatch++
		}
	}
	t.Logf("samples.csv: %d requests, %d during a batch; e.g. %s", len(lines)-1, inBatch, lines[len(lines)/2])
	if lines[0] != "start,latency_ms,request,ok,error,state,batch" || len(lines)-1 < tr.Requests.Total || inBatch == 0 {
		t.Errorf("samples.csv: header %q, %d rows (%d during the upgrade), %d in a batch", lines[0], len(lines)-1, tr.Requests.Total, inBatch)
	}
	html, err := os.ReadFile(strings.TrimSuffix(report, ".json") + ".html")
	if err != nil || !strings.Contains(string(html), `id="latency-chart"`) {
		t.Errorf("HTML report: %v", err)
	}
	_ = impact.Yes
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
