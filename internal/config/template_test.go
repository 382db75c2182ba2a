package config

import (
	"strings"
	"testing"
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
		{"{{.Adress}}", "template: no field Adress (there are .Name, .Component, .Host, .Address, .Version, .Any, .Vars, .Members, .PID)"},
		{"{{range .Members}}{{.Nmae}}{{end}}", "template: no field Nmae (there are .Name, .Address, .Host, .Vars)"},
		{"{{.Vars.b}}", `template: at <.Vars.b>: map has no entry for key "b"`},
		{"{{.Name", "not a valid template: unclosed action"},
		{"x\n{{.Name", "not a valid template: line 2: unclosed action"},
		{"{{nofunc .Name}}", `not a valid template: function "nofunc" not defined`},
		{`{{printf "%*d" 1000000 1}}{{printf "%*d" 1000000 1}}`, "template renders to more than 1048576 bytes"},
		{`{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`, "are not for descriptions"},
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
