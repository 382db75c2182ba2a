package impact

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

// TestHTMLInChromium opens the report in headless Chromium (Debian's
// chromium package), checks in the rendered DOM that the chart is there
// with its two lines, and that the screenshot of the chart's area is
// not blank. The screenshot is kept in FERRY_ARTIFACTS (if set).
func TestHTMLInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian package chromium): the HTML report is not rendered in a browser here")
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var samples []traffic.Sample
	for i := 0; i < 5000; i++ {
		samples = append(samples, traffic.Sample{Start: t0.Add(time.Duration(i) * 2 * time.Millisecond), Latency: time.Duration(5+(i%13)*(1+i/2000)) * time.Millisecond, OK: true})
	}
	ws := []timeline.Window{{Name: "kv batch 1", Kind: timeline.KindBatch, From: t0.Add(2 * time.Second), To: t0.Add(5 * time.Second)},
		{Name: "api batch 1", Kind: timeline.KindBatch, From: t0.Add(5 * time.Second), To: t0.Add(9 * time.Second)}}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Page{Title: "chromium", From: "1.0.0", To: "2.0.0", State: "completed", Start: t0, Samples: samples, Windows: ws,
		Verdict: Judge(samples, t0, t0.Add(2*time.Second), ws, Policy{})}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + filepath.Join(dir, "profile")}
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append(flags, args...)...).Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", args, err)
		}
		return out
	}
	dom := string(run("--dump-dom", "file://"+page))
	i := strings.Index(dom, `id="latency-chart"`)
	if i < 0 {
		t.Fatalf("the rendered page has no latency-chart element")
	}
	for _, line := range []string{`class="p50"`, `class="p99"`} {
		j := strings.Index(dom[i:], line)
		if j < 0 || strings.Count(dom[i+j:min(len(dom), i+j+2000)], ",") < 5 {
			t.Errorf("the chart's %s line is missing or empty", line)
		}
	}
	shot := filepath.Join(dir, "report.png")
	run("--window-size=1000,700", "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The chart's area (below the title) must hold more than one colour:
	// the bands, the grid and the two lines.
	colours := map[[3]uint32]bool{}
	for y := 150; y < 450 && y < img.Bounds().Dy(); y += 3 {
		for x := 50; x < 950 && x < img.Bounds().Dx(); x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	if len(colours) < 5 {
		t.Errorf("the chart area of the screenshot has %d colours: blank", len(colours))
	}
	if a := os.Getenv("FERRY_ARTIFACTS"); a != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(filepath.Join(a, "impact-report.png"), b, 0o644)
	}
	t.Logf("rendered; %d colours in the chart area", len(colours))
}
