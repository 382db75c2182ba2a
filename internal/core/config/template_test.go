package config

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDataForAndRender(t *testing.T) {
	c, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kv := c.Component("kv")
	d := c.DataFor(kv, &kv.Members[1])
	d.Version = "2.0.0"
	if d.Name != "kv-2" || d.Component != "kv" || d.Host != "host-1" || d.Address != "127.0.0.1:8102" ||
		d.Any != "127.0.0.1:8102" || d.Vars["raft"] != "127.0.0.1:9102" || len(d.Members) != 3 {
		t.Errorf("DataFor(kv-2) = %+v", d)
	}
	var args []string
	for _, a := range kv.Run.Args {
		r, err := Render(a, d)
		if err != nil {
			t.Fatalf("Render(%q): %v", a, err)
		}
		args = append(args, r)
	}
	want := "kv --id kv-2 --http 127.0.0.1:8102 --raft 127.0.0.1:9102 --data data/kv-2 --peers " +
		"kv-1=127.0.0.1:9101=127.0.0.1:8101,kv-2=127.0.0.1:9102=127.0.0.1:8102,kv-3=127.0.0.1:9103=127.0.0.1:8103"
	if got := strings.Join(args, " "); got != want {
		t.Errorf("args:\n%s\nwant:\n%s", got, want)
	}

	cd := c.DataFor(kv, nil)
	if cd.Name != "" || cd.Address != "" || cd.Any != "127.0.0.1:8101" || cd.Vars == nil {
		t.Errorf("DataFor(kv, nil) = %+v", cd)
	}
	if got, err := Render(kv.Health.Cluster.HTTP, cd); err != nil || got != "http://127.0.0.1:8101/cluster" {
		t.Errorf("cluster check renders to %q, %v", got, err)
	}
}

func TestRenderErrors(t *testing.T) {
	d := TemplateData{Name: "m", Vars: map[string]string{"a": "1"}, Members: []MemberRef{{Name: "m"}}}
	for _, tc := range []struct{ tmpl, want string }{
		{"plain {not a template}", ""},
		{"{{.Name}}-{{.Vars.a}}-{{.Version}}", ""},
		{"{{.Adress}}", "template: no field Adress (there are .Name, .Component, .Host, .Address, .Version, .Any, .Pin, .To, .Backup, .Vars, .Members, .PID)"},
		{"{{range .Members}}{{.Nmae}}{{end}}", "template: no field Nmae (there are .Name, .Address, .Host, .Vars)"},
		{"{{.Vars.b}}", `template: at <.Vars.b>: map has no entry for key "b"`},
		{"{{.Name", "not a valid template: unclosed action"},
		{"x\n{{.Name", "not a valid template: line 2: unclosed action"},
		{"{{nofunc .Name}}", `not a valid template: function "nofunc" not defined`},
		{`{{printf "%*d" 1000000 1}}{{printf "%*d" 1000000 1}}`, "template renders to more than 1048576 bytes"},
		{`{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`, "are not for descriptions"},
		// The metering of comparisons is not shown in the node named.
		{"{{if eq .Name 1}}{{end}}", "template: at <eq (.Name) (1)>: error calling eq: incompatible types"},
	} {
		got, err := Render(tc.tmpl, d)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Render(%q): %v", tc.tmpl, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Render(%q) = %.40q, %v; want error %q", tc.tmpl, got, err, tc.want)
		}
	}
	// A second call is served by the cache and says the same.
	_, err1 := Render("{{.Name", d)
	_, err2 := Render("{{.Name", d)
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
		t.Errorf("cached parse error differs: %v / %v", err1, err2)
	}
}

// TestTemplatesBounded: Validate renders every template of a
// description, and text/template has no bound of its own: a range over
// a number ran for hours (issue #14's corpus, 216), a range over the
// members inside another n² times.
func TestTemplatesBounded(t *testing.T) {
	for _, tc := range []struct {
		tmpl string
		ok   bool
	}{
		{"{{range .Members}}{{.Name}}{{end}}", true},
		{"{{range $i, $m := .Members}}{{range $k, $v := $m.Vars}}{{$k}}{{end}}{{end}}", true},
		{"{{range .Vars}}{{.}}{{end}}{{range .Members}}{{end}}", true},
		{"{{with .Members}}{{range .}}{{end}}{{end}}", true},
		{"{{range 100000000000}}{{end}}", false},
		{"{{range len .Members}}{{end}}", false},
		{"{{range (slice .Members 0)}}{{end}}", false},
		{"{{range .Members}}{{range $.Members}}{{end}}{{end}}", false},
		{"{{range .Members}}{{if .Name}}{{range $.Members}}{{end}}{{end}}{{end}}", false},
		{`{{define "a"}}{{end}}{{template "a"}}`, false},
		{`{{block "a" .}}{{end}}`, false},
	} {
		_, err := parseTemplate(tc.tmpl)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.tmpl, err, tc.ok)
		}
	}
}

// manyVars is n vars, v0 to v(n-1).
func manyVars(n int) map[string]string {
	vars := make(map[string]string, n)
	for i := range n {
		vars[fmt.Sprintf("v%d", i)] = "x"
	}
	return vars
}

// TestRenderBoundedWork: every render stops at its bounds, whoever
// renders (Validate, plan, the engine and the probes call Render): ranges
// over ranges (three over 400 vars ran for a minute), formatting that
// makes megabytes it never writes, comparisons of long strings in a
// loop. Each stops with a *BoundError naming its bound, within a second;
// what a description does write stays possible.
func TestRenderBoundedWork(t *testing.T) {
	long := strings.Repeat("x", 200_000)
	var members []MemberRef
	for i := range 20_000 {
		members = append(members, MemberRef{Name: fmt.Sprintf("m-%d", i), Address: "10.0.0.1:80", Vars: map[string]string{"raft": "10.0.0.1:90"}})
	}
	for _, tc := range []struct {
		name, tmpl string
		vars       map[string]string
		bound      string // "" when it renders
	}{
		{"three ranges over 400 vars", `{{range .Vars}}{{range $.Vars}}{{range $.Vars}}{{end}}{{end}}{{end}}`, manyVars(400), "500000 steps"},
		{"a break does not make it cheap", `{{range .Vars}}{{range $.Vars}}{{range $.Vars}}{{break}}{{end}}{{end}}{{end}}`, manyVars(3000), "500000 steps"},
		{"printf of a megabyte per var", `{{range .Vars}}{{$x := printf "%0999999d" 1}}{{end}}`, manyVars(3000), "4194304 bytes"},
		{"printf's width from an argument", `{{printf "%*d" 900000000 1}}`, nil, "4194304 bytes"},
		{"a format that names its argument again", `{{$f := printf "%s" "%[1]s"}}{{range .Vars}}{{$f = printf "%s%s" $f $f}}{{end}}{{printf $f "x"}}`, manyVars(40), "4194304 bytes"},
		{"print doubling a string", `{{$s := "xx"}}{{range .Vars}}{{$s = print $s $s}}{{end}}`, manyVars(64), "4194304 bytes"},
		{"html of a long var in a loop", `{{range .Vars}}{{$x := html $.Vars.long}}{{end}}`, func() map[string]string { v := manyVars(30); v["long"] = long; return v }(), "4194304 bytes"},
		{"comparing long strings in a loop", `{{range .Vars}}{{range $.Vars}}{{range $.Vars}}{{if eq . $.Vars.long}}{{end}}{{end}}{{end}}{{end}}`, func() map[string]string { v := manyVars(30); v["long"] = long; return v }(), "500000 steps"},
		{"a range over a number in a variable", `{{$n := 100000000000}}{{range $n}}{{end}}`, nil, "500000 steps"},
		{"the members of 20,000 in a loop of vars", `{{range .Vars}}{{range $.Members}}{{end}}{{end}}`, manyVars(100), "500000 steps"},
		{"writing is bounded too", `{{range .Members}}{{$.Vars.long}}{{end}}`, map[string]string{"long": long}, "1048576 bytes"},
		{"the peers of 20,000 members", `{{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Name}}={{$m.Vars.raft}}={{$m.Address}}{{end}}`, nil, ""},
		{"a printf per member", `{{range .Members}}{{printf "%s:%d," .Name 80}}{{end}}`, nil, ""},
		{"equality per member", `{{range .Members}}{{if eq .Name $.Name}}me{{end}}{{end}}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := TemplateData{Name: "m-7", Vars: tc.vars, Members: members}
			var out string
			var err error
			start := time.Now()
			within(t, 10*time.Second, func() { out, err = Render(tc.tmpl, d) })
			took := time.Since(start)
			t.Logf("%v, %d bytes, %v", took, len(out), err)
			var be *BoundError
			switch {
			case tc.bound == "" && err != nil:
				t.Fatalf("Render: %v", err)
			case tc.bound != "" && (!errors.As(err, &be) || !strings.Contains(err.Error(), tc.bound)):
				t.Fatalf("Render = %d bytes, %v; want a *BoundError at %s", len(out), err, tc.bound)
			case tc.bound != "" && took > raceSlowdown*time.Second:
				t.Fatalf("refused in %v, want under 1s", took)
			}
		})
	}
}

// TestValidateRefusesRunawayTemplatesFast: the two templates,
// in a description, are refused by Parse within a second, with the
// field, the member and the bound.
func TestValidateRefusesRunawayTemplatesFast(t *testing.T) {
	yamlVars := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, ", v%d: x", i)
		}
		return "{raft: 127.0.0.1:9101" + b.String() + "}"
	}
	for _, tc := range []struct {
		tmpl string
		vars int
		want string
	}{
		{`{{range .Vars}}{{range $.Vars}}{{range $.Vars}}{{end}}{{end}}{{end}}`, 400,
			"t.yaml:13: components[0].run.args[1]: template stopped at the bound of 500000 steps of one render"},
		{`{{range .Vars}}{{$x := printf "%0999999d" 1}}{{end}}`, 3000,
			"t.yaml:13: components[0].run.args[1]: template printf would make more than the 4194304 bytes the functions of one render may make"},
	} {
		src := base
		src = strings.Replace(src, "vars: {raft: 127.0.0.1:9101}", "vars: "+yamlVars(tc.vars), 1)
		src = strings.Replace(src, `args: [kv, "--raft={{.Vars.raft}}"]`, "args: [kv, '"+tc.tmpl+"']", 1)
		var got []string
		start := time.Now()
		within(t, 10*time.Second, func() { got = problems(t, src) })
		took := time.Since(start)
		t.Logf("%v: %s", took, strings.Join(got, "\n"))
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) || !strings.HasSuffix(got[0], "(for member kv-1)") {
			t.Errorf("problems:\n%s\nwant one starting %q, for member kv-1", strings.Join(got, "\n"), tc.want)
		}
		if took > raceSlowdown*time.Second {
			t.Errorf("refused in %v, want under 1s", took)
		}
	}
}

// TestRenderConcurrent: one template, metered, rendered by many
// goroutines at once (probes do): each render has its own meter.
func TestRenderConcurrent(t *testing.T) {
	d := TemplateData{Name: "m", Vars: manyVars(50)}
	const tmpl = `{{range $k, $v := .Vars}}{{printf "%s=%s;" $k $v}}{{end}}`
	want, err := Render(tmpl, d)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got, err := Render(tmpl, d); err != nil || got != want {
					errs <- fmt.Errorf("Render = %.40q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
