package impact

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

// manyBatches is a page of an upgrade with many short batches (a canary
// of one-member batches, a kv tier, then doubling api batches), whose
// labels used to run into each other.
func manyBatches() Page {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var samples []traffic.Sample
	for i := range 15000 {
		samples = append(samples, traffic.Sample{Start: t0.Add(time.Duration(i) * 2 * time.Millisecond), Latency: time.Duration(5+i%11) * time.Millisecond, OK: true})
	}
	var ws []timeline.Window
	at := 3 * time.Second
	for i, d := range []time.Duration{400, 300, 350, 200, 200, 250, 1500, 1200, 300, 300, 300, 300, 2500, 2000, 150, 150, 150, 3000} {
		d *= time.Millisecond
		comp := "kv"
		if i >= 6 {
			comp = "api"
		}
		ws = append(ws, timeline.Window{Name: fmt.Sprintf("%s batch %d (%s-%d)", comp, i+1, comp, i+1), Kind: timeline.KindBatch, From: t0.Add(at), To: t0.Add(at + d)})
		at += d + 100*time.Millisecond
	}
	return Page{Title: "many short batches", From: "1.0.0", To: "2.0.0", State: "completed", Start: t0, Samples: samples, Windows: ws,
		Verdict: Judge(samples, t0, t0.Add(3*time.Second), ws, Policy{})}
}

// TestBatchLabelsDoNotOverlap: with many short batches, no two labels
// drawn in the chart overlap (in one row, each starts after the last
// one's end), each band's name is drawn or listed in the legend, and
// the legend's numbers are drawn where they fit. FERRY_REPORT_HTML=FILE
// keeps the page, to look at it.
func TestBatchLabelsDoNotOverlap(t *testing.T) {
	p := manyBatches()
	c := buildChart(p)
	if len(c.Bands) != len(p.Windows) {
		t.Fatalf("%d bands for %d batches", len(c.Bands), len(p.Windows))
	}
	ends := map[float64]float64{}
	inLegend := map[string]bool{}
	for _, k := range c.Legend {
		inLegend[k.Name] = true
	}
	for _, b := range c.Bands {
		switch {
		case b.Text == b.Name:
		case inLegend[b.Name]:
		default:
			t.Errorf("%q: drawn as %q and not in the legend", b.Name, b.Text)
		}
		if b.Text == "" {
			continue
		}
		if b.X < ends[b.LabelY] {
			t.Errorf("%q at x %.1f (row y %.0f) overlaps the label before it, which ends at %.1f", b.Text, b.X, b.LabelY, ends[b.LabelY])
		}
		ends[b.LabelY] = b.X + float64(len([]rune(b.Text)))*charW
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, p); err != nil {
		t.Fatal(err)
	}
	if f := os.Getenv("FERRY_REPORT_HTML"); f != "" {
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d bands, %d in the legend", len(c.Bands), len(c.Legend))
}
