package impact

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
)

// Page is what the HTML report shows: one self-contained page (no
// script, no external asset) with the latency chart over time, the
// upgrade's windows as bands behind it, the errors and the verdict.
type Page struct {
	Title    string
	From, To string
	State    string
	Start    time.Time // the time axis starts here (the baseline's start)
	Samples  []traffic.Sample
	Windows  []timeline.Window
	Verdict  Verdict
}

// Point is one second of traffic: p50 and p99 of the successful
// requests started in it, and how many failed.
type Point struct {
	Second int
	P50MS  float64
	P99MS  float64
	Errors int
	N      int
}

// Series buckets samples by the second (from start) they began in.
func Series(samples []traffic.Sample, start time.Time) []Point {
	by := map[int][]float64{}
	errs := map[int]int{}
	last := -1
	for _, s := range samples {
		sec := int(s.Start.Sub(start) / time.Second)
		if sec < 0 {
			continue
		}
		last = max(last, sec)
		if !s.OK {
			errs[sec]++
			continue
		}
		by[sec] = append(by[sec], float64(s.Latency.Microseconds())/1000)
	}
	out := make([]Point, 0, last+1)
	for sec := 0; sec <= last; sec++ {
		v := by[sec]
		sort.Float64s(v)
		out = append(out, Point{Second: sec, P50MS: Quantile(v, 0.5), P99MS: Quantile(v, 0.99), Errors: errs[sec], N: len(v) + errs[sec]})
	}
	return out
}

const (
	chartW, chartH = 960.0, 320.0
	padL, padB     = 50.0, 30.0
)

type band struct {
	X, W float64
	Name string
	Fill string
	// Text is the label drawn at the band's top, at LabelY: its name
	// where that fits, else its number in the legend, else nothing
	// (its name is then in the legend and in its tooltip).
	Text   string
	LabelY float64
}

// keyed is a band whose name did not fit above it: the legend names it.
type keyed struct {
	Key, Name string
	From, To  float64 // seconds from the page's start
}

const (
	// labelRows is how many rows of labels the bands may stagger into;
	// charW is a generous width of one character at font-size 10.
	labelRows = 3
	charW     = 6.2
	labelGap  = 4.0
)

// placeLabels labels the batch bands so that no label overlaps another
// (with many short batches the names ran into each other, and each
// band painted over its neighbour's): a band as wide as its name gets
// it; a narrower one gets a number, staggered over labelRows rows, that
// the legend explains (or, with no room even for that, only the legend
// line).
func placeLabels(bands []band, seconds func(x float64) float64) []keyed {
	var ends [labelRows]float64
	var legend []keyed
	place := func(b *band, text string) bool {
		w := float64(len([]rune(text))) * charW
		for r := range ends {
			if b.X >= ends[r] {
				b.Text, b.LabelY = text, 12+12*float64(r)
				ends[r] = b.X + w + labelGap
				return true
			}
		}
		return false
	}
	for i := range bands {
		b := &bands[i]
		if float64(len([]rune(b.Name)))*charW <= b.W && place(b, b.Name) {
			continue
		}
		key := fmt.Sprint(len(legend) + 1)
		if !place(b, key) {
			key = ""
		}
		legend = append(legend, keyed{Key: key, Name: b.Name, From: seconds(b.X), To: seconds(b.X + b.W)})
	}
	return legend
}

type chart struct {
	P50, P99 string // polyline points
	Bands    []band
	Legend   []keyed
	Errors   []struct{ X, Y float64 }
	YTicks   []struct {
		Y     float64
		Label string
	}
	XTicks []struct {
		X     float64
		Label string
	}
	W, H, PadL, PadB float64
}

func buildChart(p Page) chart {
	pts := Series(p.Samples, p.Start)
	c := chart{W: chartW, H: chartH, PadL: padL, PadB: padB}
	secs := math.Max(1, float64(len(pts)))
	maxY := 1.0
	for _, pt := range pts {
		maxY = math.Max(maxY, pt.P99MS)
	}
	maxY = math.Ceil(maxY/5) * 5
	x := func(sec float64) float64 { return padL + sec/secs*(chartW-padL-10) }
	y := func(ms float64) float64 { return (chartH - padB) - ms/maxY*(chartH-padB-10) }
	var p50, p99 []string
	for _, pt := range pts {
		if pt.N == pt.Errors {
			continue
		}
		p50 = append(p50, fmt.Sprintf("%.1f,%.1f", x(float64(pt.Second)+0.5), y(pt.P50MS)))
		p99 = append(p99, fmt.Sprintf("%.1f,%.1f", x(float64(pt.Second)+0.5), y(pt.P99MS)))
		if pt.Errors > 0 {
			c.Errors = append(c.Errors, struct{ X, Y float64 }{x(float64(pt.Second) + 0.5), y(0) - 6})
		}
	}
	c.P50, c.P99 = strings.Join(p50, " "), strings.Join(p99, " ")
	fills := []string{"#e8f0fe", "#fef7e0", "#e6f4ea", "#fce8e6"}
	i := 0
	for _, w := range p.Windows {
		from, to := w.From.Sub(p.Start).Seconds(), w.To.Sub(p.Start).Seconds()
		if w.Kind != timeline.KindBatch {
			continue
		}
		c.Bands = append(c.Bands, band{X: x(from), W: math.Max(1, x(to)-x(from)), Name: w.Name, Fill: fills[i%len(fills)]})
		i++
	}
	c.Legend = placeLabels(c.Bands, func(px float64) float64 { return (px - padL) / (chartW - padL - 10) * secs })
	for k := 0; k <= 4; k++ {
		ms := maxY * float64(k) / 4
		c.YTicks = append(c.YTicks, struct {
			Y     float64
			Label string
		}{y(ms), fmt.Sprintf("%.0f ms", ms)})
	}
	step := int(math.Max(1, math.Ceil(secs/10)))
	for s := 0; s <= int(secs); s += step {
		c.XTicks = append(c.XTicks, struct {
			X     float64
			Label string
		}{x(float64(s)), fmt.Sprintf("%ds", s)})
	}
	return c
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"confidence": func(alpha float64) string { return fmt.Sprintf("%g %%", 100*(1-alpha)) },
	"yesno": func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.P.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#202124}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #dadce0;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.yes{background:#e6f4ea}.no{background:#fce8e6}.insufficient{background:#f1f3f4}
.legend span{display:inline-block;margin-right:16px}
</style></head><body>
<h1>{{.P.Title}}</h1>
<p>{{.P.From}} → {{.P.To}}: <b>{{.P.State}}</b>. Zero downtime: <b class="{{yesno .P.Verdict.ZeroDowntime}}">{{yesno .P.Verdict.ZeroDowntime}}</b>;
zero impact: <b class="{{yesno .P.Verdict.ZeroImpact}}">{{yesno .P.Verdict.ZeroImpact}}</b> ({{.P.Verdict.Reason}}).
Baseline: {{.P.Verdict.Baseline.Total}} requests, p50 {{printf "%.1f" .P.Verdict.Baseline.P50MS}} ms, p99 {{printf "%.1f" .P.Verdict.Baseline.P99MS}} ms.</p>
<svg id="latency-chart" xmlns="http://www.w3.org/2000/svg" width="{{.C.W}}" height="{{.C.H}}" viewBox="0 0 {{.C.W}} {{.C.H}}" role="img" aria-label="latency per second">
{{range .C.Bands}}<rect x="{{printf "%.1f" .X}}" y="0" width="{{printf "%.1f" .W}}" height="{{$.C.H}}" fill="{{.Fill}}"><title>{{.Name}}</title></rect>
{{end}}{{range .C.Bands}}{{if .Text}}<text x="{{printf "%.1f" .X}}" y="{{.LabelY}}" font-size="10" fill="#5f6368">{{.Text}}</text>
{{end}}{{end}}{{range .C.YTicks}}<line x1="{{$.C.PadL}}" x2="{{$.C.W}}" y1="{{printf "%.1f" .Y}}" y2="{{printf "%.1f" .Y}}" stroke="#e0e0e0"/><text x="4" y="{{printf "%.1f" .Y}}" font-size="10">{{.Label}}</text>
{{end}}{{range .C.XTicks}}<text x="{{printf "%.1f" .X}}" y="{{$.C.H}}" font-size="10">{{.Label}}</text>
{{end}}<polyline class="p50" fill="none" stroke="#1a73e8" stroke-width="1.5" points="{{.C.P50}}"/>
<polyline class="p99" fill="none" stroke="#d93025" stroke-width="1.5" points="{{.C.P99}}"/>
{{range .C.Errors}}<circle cx="{{printf "%.1f" .X}}" cy="{{printf "%.1f" .Y}}" r="4" fill="#000"><title>failed requests</title></circle>
{{end}}</svg>
<p class="legend"><span style="color:#1a73e8">━ p50 per second</span><span style="color:#d93025">━ p99 per second</span><span>● a second with failed requests</span><span>bands: the batches</span></p>
{{if .C.Legend}}<p class="legend">Batches too narrow for their name:{{range .C.Legend}} <span>{{if .Key}}<b>{{.Key}}</b> {{end}}{{.Name}} ({{printf "%.1f" .From}}–{{printf "%.1f" .To}} s)</span>{{end}}</p>
{{end}}<h2>Windows</h2>
<table><tr><th>window</th><th>requests</th><th>failed</th><th>p50 ms</th><th>p99 ms</th><th>p99 / baseline ({{confidence .P.Verdict.Policy.Alpha}} interval)</th><th>p-value</th><th>zero impact</th><th>why</th></tr>
{{range .P.Verdict.Windows}}<tr><td>{{.Name}}</td><td>{{.Requests}}</td><td>{{.Failed}}</td><td>{{printf "%.1f" .P50MS}}</td><td>{{printf "%.1f" .P99MS}}</td><td>{{printf "%.2f" .P99Ratio}}{{with .P99RatioCI}} {{.Range}}{{end}}</td><td>{{printf "%.2g" .PValue}}</td><td class="{{.ZeroImpact}}">{{.ZeroImpact}}</td><td style="text-align:left">{{.Reason}}</td></tr>
{{end}}</table>
<h2>Errors</h2>
{{if .Errors}}<table><tr><th>at</th><th>error</th></tr>{{range .Errors}}<tr><td>{{.At}}</td><td style="text-align:left">{{.Err}}</td></tr>{{end}}</table>{{else}}<p>None.</p>{{end}}
</body></html>
`))

// WriteHTML writes the report page.
func WriteHTML(w io.Writer, p Page) error {
	type errRow struct{ At, Err string }
	var errs []errRow
	for _, s := range p.Samples {
		if !s.OK && len(errs) < 50 {
			errs = append(errs, errRow{At: fmt.Sprintf("+%.3fs", s.Start.Sub(p.Start).Seconds()), Err: s.Err})
		}
	}
	return page.Execute(w, struct {
		P      Page
		C      chart
		Errors []errRow
	}{p, buildChart(p), errs})
}
