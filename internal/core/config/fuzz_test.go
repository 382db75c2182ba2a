package config

import (
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds Parse anything: it must not panic or hang, and an
// error must be an *Errors whose every problem names the file and has
// a line, unless it is about the whole file. A description it accepts
// must pass Validate again, and its helpers must work on it.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	bad, _ := filepath.Glob("testdata/bad/*.yaml") // every refusal, as seeds
	files = append(files, bad...)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(base))
	for _, s := range []string{
		"", "---\n", "- a\n", "cluster: x\n", "a: &a [*a]\n", "policy: &a {<<: *a}\n",
		"cluster: x\ncomponents: [{name: a, members: [{name: m, host: h, address: 'a:1'}]}]\n",
		"cluster: !!binary aGVsbG8=\n", "{cluster: [x, {y: z}]}", "\xff\xfe", "cluster: \"\\u0000\"\n",
		// Issue #22: NUL in keys and values, other types where text is
		// wanted, control characters in names, ports out of range.
		"cluster: x\nhosts: [{name: h, agent: \"a:1\", domain: \"z\\e[2J\", token_file: \"t\\0\"}]\n",
		"cluster: true\ncomponents: [{name: 1, members: [{name: m, vars: {\"a\\0\": 9101}}]}]\n",
		// The ssh substrate's keys: a host's ssh, a component's commands.
		"cluster: x\nsubstrate: ssh\nhosts: [{name: h, ssh: {address: \"a:22\", known_hosts: k, identity_files: [\"\"], max_sessions: -1, connect_timeout: 0s}}]\ncomponents: [{name: a, members: [{name: m, host: h, address: 'a:1'}], commands: {start: [], sudo: [x, x], status: [\"{{.Nope}}\"]}}]\n",
		"cluster: 2026-01-01\nsubstrate: ssh\ntraffic: {targets: [\"http://a:99999\"], requests: [{name: \"\\u009b\", path: /}]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz.yaml"
		c, err := Parse(data, file)
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned a cluster and an error")
			}
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.Problems) == 0 {
				t.Fatalf("error %T %v, want a non-empty *Errors", err, err)
			}
			for _, p := range errs.Problems {
				if p.File != file {
					t.Fatalf("problem without the file: %+v", p)
				}
				if p.Line <= 0 && p.Path != "" {
					t.Fatalf("problem about a field without a line: %+v", p)
				}
				if p.Reason == "" {
					t.Fatalf("problem without a reason: %+v", p)
				}
			}
			if !strings.HasPrefix(err.Error(), file) {
				t.Fatalf("error does not start with the file: %v", err)
			}
			return
		}
		if c == nil {
			t.Fatal("Parse returned neither a cluster nor an error")
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted description fails Validate: %v", err)
		}
		for _, comp := range c.ComponentsInOrder() {
			for i := range comp.Members {
				m := &comp.Members[i]
				if gc, gm := c.MemberOf(m.Name); gc != comp || gm != m {
					t.Fatalf("MemberOf(%s) is wrong", m.Name)
				}
				d := c.DataFor(comp, m)
				for _, a := range comp.Run.Args {
					if _, err := Render(a, d); err != nil {
						t.Fatalf("arg %q of %s passed Validate but does not render: %v", a, m.Name, err)
					}
				}
			}
			for _, r := range c.Releases {
				if _, ok := r.ArtifactFor(comp.Name); !ok {
					t.Fatalf("release %s has no artifact for %s", r.Version, comp.Name)
				}
			}
		}
	})
}

// within runs f and fails t if it has not returned within d: a
// template or a description that makes ferry loop is a hang to its
// operator, and the fuzzer would otherwise wait for ever.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not return within %s", d)
	}
}

// FuzzParseTraffic feeds ParseTraffic (ferry upgrade start
// --traffic=FILE) anything: no panic, no hang, an *Errors naming the
// file, or a spec that passes its own checks.
func FuzzParseTraffic(f *testing.F) {
	f.Add([]byte(trafficBase))
	f.Add([]byte("traffic:\n  prometheus: {url: http://127.0.0.1:9090, latency: up, step: 1ms}\n"))
	f.Add([]byte("traffic: {targets: [http://a:1], requests: [{path: \"/{{range 9}}{{end}}\"}]}\n"))
	f.Add([]byte("cluster: x\ntraffic: {}\n"))
	f.Add([]byte("traffic: &a {<<: [*a, *a]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, 10*time.Second, func() {
			tr, err := ParseTraffic(data, "t.yaml")
			if err != nil {
				var errs *Errors
				if tr != nil || !errors.As(err, &errs) || len(errs.Problems) == 0 {
					t.Fatalf("ParseTraffic = %v, %T %v", tr, err, err)
				}
				for _, p := range errs.Problems {
					if p.File != "t.yaml" || p.Reason == "" {
						t.Fatalf("problem without its file or reason: %+v", p)
					}
				}
				return
			}
			if tr == nil || (len(tr.Targets) == 0 && tr.Prometheus == nil) || tr.Rate <= 0 || tr.Concurrency < 1 {
				t.Fatalf("accepted %+v", tr)
			}
			for _, r := range tr.Requests {
				for _, tmpl := range []string{r.Path, r.Body} {
					if _, err := RenderTraffic(tmpl, TrafficData{Key: "k", Value: "v", Written: "w", WrittenValue: "wv", Seq: 7, Client: 1}); err != nil {
						t.Fatalf("accepted template %q does not render: %v", tmpl, err)
					}
				}
			}
		})
	})
}

// FuzzRender feeds a template to Render (the strings of runs, checks
// and hooks, over a member) and RenderTraffic (a traffic request's
// path and body): no panic, no hang, and never more than maxRendered.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"{{.Name}}", "http://{{.Address}}/ready", "{{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Name}}={{$m.Vars.raft}}{{end}}",
		"{{.Vars.raft}}", "{{.Key}}={{.Value}}", "/v1/kv/{{.Written}}", "{{printf \"%0900000d\" 1}}{{.Seq}}",
		"{{range 9}}{{end}}", "{{range .Members}}{{range $.Members}}{{end}}{{end}}", `{{define "a"}}{{template "a"}}{{end}}`,
		"{{index .Vars \"x\"}}", "{{slice .Name 1 2}}", "{{len .Members}}", "{{.Client | printf \"%d\"}}", "{{",
		// The bounds of issue #22: ranges over ranges, formatting that
		// makes more than it writes, comparisons, the metered builtins.
		"{{range .Vars}}{{range $.Vars}}{{range $.Vars}}{{end}}{{end}}{{end}}", "{{range .Vars}}{{$x := printf \"%0999999d\" 1}}{{end}}",
		"{{printf \"%*d\" 1000000000 1}}", "{{printf \"%[2]*[1]d|%.*f\" 3 -4000000 5 1.5}}", "{{$s := .Key}}{{$s = print $s $s $s}}{{html $s}}{{js $s}}{{urlquery $s}}{{println $s}}",
		"{{if eq .Name \"a\" \"b\"}}{{else if lt .Seq 3}}{{end}}", "{{range $i, $m := .Members}}{{if ne $i 0}},{{end}}{{$m.Name}}{{break}}{{end}}",
		"{{$n := 100000000000}}{{range $n}}{{end}}", "{{.Name | eq \"m\"}}", "{{ferry_range_ 1 .Vars}}",
	} {
		f.Add(s)
	}
	c, err := Parse([]byte(base), "t.yaml")
	if err != nil {
		f.Fatal(err)
	}
	kv := c.Component("kv")
	member := c.DataFor(kv, &kv.Members[0])
	traffic := TrafficData{Key: "k", Value: "v", Written: "w", WrittenValue: "wv", Seq: 3, Client: 1}
	f.Fuzz(func(t *testing.T, tmpl string) {
		within(t, 10*time.Second, func() {
			for _, d := range []any{member, traffic} {
				var out string
				var err error
				switch d := d.(type) {
				case TemplateData:
					out, err = Render(tmpl, d)
				case TrafficData:
					out, err = RenderTraffic(tmpl, d)
				}
				if err == nil && len(out) > maxRendered {
					t.Fatalf("rendered %d bytes, more than %d", len(out), maxRendered)
				}
				if err == nil && !IsTemplate(tmpl) && out != tmpl {
					t.Fatalf("a plain string %q rendered as %q", tmpl, out)
				}
			}
		})
	})
}

// FuzzVersions checks version parsing and matching: CompareVersions
// is a total order (antisymmetric, transitive), agrees with the
// numbers of two versions however long they are, and MatchVersion
// matches a version with itself and "*".
func FuzzVersions(f *testing.F) {
	for _, s := range [][3]string{
		{"1.0.0", "1.0.1", "2.0.0-rc1"}, {"1.0.x", "1.0.3-rc.1", "*"}, {"1.x", "1.2.3", "0.0.0-a"},
		{"9223372036854775807.0.0", "1.0.0", "0.0.0"}, {"v1", "", "1.2"}, {"01.0.0", "1.0.0-", "1.0.0-a.b"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		if CompareVersions(a, a) != 0 {
			t.Fatalf("Compare(%q, itself) != 0", a)
		}
		ab, ba := CompareVersions(a, b), CompareVersions(b, a)
		if ab != -ba || ab < -1 || ab > 1 {
			t.Fatalf("Compare(%q, %q) = %d but Compare(%q, %q) = %d", a, b, ab, b, a, ba)
		}
		if ab <= 0 && CompareVersions(b, c) <= 0 && CompareVersions(a, c) > 0 {
			t.Fatalf("not transitive: %q <= %q <= %q but %q > %q", a, b, c, a, c)
		}
		if IsVersion(a) && IsVersion(b) {
			if want := refCompare(a, b); ab != want {
				t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, ab, want)
			}
		}
		for _, v := range []string{a, b, c} {
			if IsVersion(v) && (!MatchVersion(v, v) || !MatchVersion("*", v) || !IsVersionPattern(v)) {
				t.Fatalf("%q does not match itself or *", v)
			}
		}
		if MatchVersion(a, b) && a != b && a != "*" && !IsVersion(b) {
			t.Fatalf("pattern %q matches %q, which is not a version", a, b)
		}
	})
}

// refCompare orders two versions by their numbers, compared as
// numbers of any length, then by their suffixes (none after any).
func refCompare(a, b string) int {
	ca, pa, _ := strings.Cut(a, "-")
	cb, pb, _ := strings.Cut(b, "-")
	na, nb := strings.Split(ca, "."), strings.Split(cb, ".")
	for i := range 3 {
		x, y := new(big.Int), new(big.Int)
		x.SetString(na[i], 10)
		y.SetString(nb[i], 10)
		if c := x.Cmp(y); c != 0 {
			return c
		}
	}
	_, ha := strings.CutPrefix(a, ca+"-")
	_, hb := strings.CutPrefix(b, cb+"-")
	switch {
	case !ha && !hb:
		return 0
	case !ha:
		return 1
	case !hb:
		return -1
	}
	return strings.Compare(pa, pb)
}
