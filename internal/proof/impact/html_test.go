package impact

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

func TestWriteHTML(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var samples []traffic.Sample
	for i := 0; i < 6000; i++ { // 12 s: a baseline of 8 s, long enough to judge by
		samples = append(samples, traffic.Sample{Start: t0.Add(time.Duration(i) * 2 * time.Millisecond), Latency: time.Duration(5+i%7) * time.Millisecond, OK: i != 1500, Err: "connection <refused>"})
	}
	ws := []timeline.Window{{Name: "api batch 1 (<script>alert(1)</script>)", Kind: timeline.KindBatch, From: t0.Add(8 * time.Second), To: t0.Add(10 * time.Second)}}
	v := Judge(samples, t0, t0.Add(8*time.Second), ws, Policy{})
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Page{Title: "t", From: "1.0.0", To: "2.0.0", State: "completed", Start: t0, Samples: samples, Windows: ws, Verdict: v}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{`<svg id="latency-chart"`, `class="p50"`, `class="p99"`, "api batch 1 (&lt;script&gt;", "connection &lt;refused&gt;", "zero impact", "p99 / baseline (99 % interval)", "×, "} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(out, "<script>") || strings.Contains(out, `points=""`) {
		t.Errorf("unescaped script or an empty polyline")
	}
	if n := strings.Count(out[strings.Index(out, `class="p99"`):], ","); n < 6 {
		t.Errorf("p99 polyline has too few points (%d commas)", n)
	}
	// No samples: still a page.
	buf.Reset()
	if err := WriteHTML(&buf, Page{Title: "empty", Start: t0}); err != nil || !strings.Contains(buf.String(), "latency-chart") {
		t.Fatalf("empty page: %v", err)
	}
}

func TestSeries(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := []traffic.Sample{{Start: t0, Latency: 10 * time.Millisecond, OK: true}, {Start: t0.Add(1500 * time.Millisecond), OK: false},
		{Start: t0.Add(1600 * time.Millisecond), Latency: 20 * time.Millisecond, OK: true}}
	got := Series(s, t0)
	if len(got) != 2 || got[0].P50MS != 10 || got[1].Errors != 1 || got[1].P99MS != 20 || got[1].N != 2 {
		t.Fatalf("Series = %+v", got)
	}
}
