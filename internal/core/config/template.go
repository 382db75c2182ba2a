package config

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
)

// TemplateData is what the strings of runs, checks and hooks are
// rendered with: {{.Name}}, {{.Address}}, {{.Vars.raft}},
// {{range $i, $m := .Members}}{{$m.Address}}{{end}}.
type TemplateData struct {
	Name      string // the member's name
	Component string // the component's name
	Host      string // the member's host
	Address   string // the member's address, host:port
	// Version is the release the call is about: in a member or role
	// check the one the member runs, in a hook the member's target, in
	// a migration its release; empty in run.args, run.env and
	// run.files, rendered once per member (DataFor leaves it empty for
	// the caller to set).
	Version string
	// Any is the address of a member of the component to ask about the
	// whole component: in cluster checks, phase hooks and migrations,
	// one that answers (the last seen healthy); in a member's own calls,
	// its own address. DataFor sets the member's own address, or the
	// first member's when there is no member; a prober sets one that
	// answers.
	Any string
	// Pin is the cluster's compatibility version (Upgrade.Pin) when
	// the string is rendered: in run.args, run.env and run.files the
	// record's pin when the engine starts the member (the release
	// before until a rollout or finalize moves it; the release brought
	// up by cluster up), so that a rollout restarts members with the
	// new pin; in hooks, undos and migration calls, the record's pin
	// when the call is made.
	Pin string
	// To is the member a switchover hands the role to (hooks.switchover:
	// an upgraded member; in its undo, the member that held it before);
	// empty in every other call.
	To string
	// Backup is the directory of the member's backup (backup.command,
	// check and restore); empty in every other call.
	Backup  string
	Vars    map[string]string // the member's vars
	Members []MemberRef       // every member of the component, in order
	// PID is the member's process id while it runs (process substrate;
	// 0 when not known, and in calls made for no member), for hooks and
	// checks that signal it or read its /proc entries.
	PID int
}

// MemberRef is one member of the component, as TemplateData.Members
// lists it.
type MemberRef struct {
	Name    string
	Address string
	Host    string
	Vars    map[string]string
}

// DataFor returns the template data for member m of comp; m may be nil
// for what is rendered once per component (cluster checks), and then
// Name, Host, Address and Vars are empty.
func (c *Cluster) DataFor(comp *Component, m *Member) TemplateData {
	return dataFor(comp, m, memberRefs(comp))
}

// MemberRefs is comp's members as TemplateData.Members lists them, for
// DataWith: made once for many members' data.
func MemberRefs(comp *Component) []MemberRef { return memberRefs(comp) }

// DataWith is DataFor with comp's Members list made already
// (MemberRefs(comp)).
func DataWith(comp *Component, m *Member, refs []MemberRef) TemplateData {
	return dataFor(comp, m, refs)
}

// MembersData is DataFor of every member of comp, in order, sharing one
// Members list: a component of a thousand members would otherwise hold
// a million references.
func (c *Cluster) MembersData(comp *Component) []TemplateData {
	refs := memberRefs(comp)
	out := make([]TemplateData, len(comp.Members))
	for i := range comp.Members {
		out[i] = dataFor(comp, &comp.Members[i], refs)
	}
	return out
}

func memberRefs(comp *Component) []MemberRef {
	refs := make([]MemberRef, len(comp.Members))
	for i, m := range comp.Members {
		refs[i] = MemberRef{Name: m.Name, Address: m.Address, Host: m.Host, Vars: m.Vars}
	}
	return refs
}

func dataFor(comp *Component, m *Member, refs []MemberRef) TemplateData {
	d := TemplateData{Component: comp.Name, Members: refs, Vars: map[string]string{}}
	if m != nil {
		d.Name, d.Host, d.Address, d.Any = m.Name, m.Host, m.Address, m.Address
		if m.Vars != nil {
			d.Vars = m.Vars
		}
	} else if len(refs) > 0 {
		d.Any = refs[0].Address
	}
	return d
}

// MemberFiles renders comp's run.files for one member: d is the
// member's TemplateData (DataFor, MembersData), with .Version set by the
// caller when contents use it. The error names the member and the file.
func (c *Cluster) MemberFiles(comp *Component, d TemplateData) ([]memberfile.File, error) {
	if len(comp.Run.Files) == 0 {
		return nil, nil
	}
	out := make([]memberfile.File, 0, len(comp.Run.Files))
	for i, f := range comp.Run.Files {
		content, err := Render(f.Content, d)
		if err != nil {
			return nil, fmt.Errorf("member %s: %s.run.files[%d] (%s): content: %w", d.Name, comp.Name, i, f.Path, err)
		}
		mode := fs.FileMode(f.Mode)
		if mode == 0 {
			mode = memberfile.DefaultMode // a Cluster built in Go without ApplyDefaults
		}
		out = append(out, memberfile.File{Path: f.Path, Mode: mode, Content: content})
	}
	return out, nil
}

// IsTemplate reports whether s is rendered as a template (it has "{{").
func IsTemplate(s string) bool { return strings.Contains(s, "{{") }

// Render executes tmpl, a text/template, over d. A key missing from
// Vars is an error (missingkey=error), and so is a field TemplateData
// does not have, with the list of those it has. Strings without "{{"
// are returned as they are. Every render is bounded (bound.go): what
// it writes, the steps it takes, the bytes its functions make; one
// that reaches a bound stops with a *BoundError naming it.
func Render(tmpl string, d TemplateData) (string, error) {
	return render(tmpl, d)
}

// TrafficData is what a traffic request's path and body are rendered
// with (see TrafficRequest).
type TrafficData struct {
	Key, Value            string // a fresh key and value
	Written, WrittenValue string // a key written before, and its value
	Seq                   int    // the client's request number
	Client                int    // the client's number
}

// RenderTraffic renders a traffic request's path or body.
func RenderTraffic(tmpl string, d TrafficData) (string, error) {
	return render(tmpl, d)
}

// UsesWritten reports whether the request reads a key written before
// (and so waits until one exists).
func (r *TrafficRequest) UsesWritten() bool {
	return strings.Contains(r.Path+r.Body, ".Written")
}

func checkTrafficTemplate(tmpl string) error {
	_, err := RenderTraffic(tmpl, TrafficData{Key: "k", Value: "v", Written: "w", WrittenValue: "wv"})
	return err
}

func render(tmpl string, d any) (string, error) {
	if !IsTemplate(tmpl) {
		return tmpl, nil
	}
	p, err := parseTemplate(tmpl)
	if err != nil {
		return "", err
	}
	t := p.t
	if p.metered {
		// A clone shares the parsed tree; its functions are this
		// render's meter.
		if t, err = t.Clone(); err != nil {
			return "", err
		}
		t.Funcs((&meter{}).funcs())
	}
	var b limitedBuilder
	if err := t.Execute(&b, d); err != nil {
		if errors.Is(err, errTooLong) {
			return "", &BoundError{What: fmt.Sprintf("template renders to more than %d bytes", maxRendered)}
		}
		if be, ok := errBound(err); ok {
			return "", &BoundError{What: "template " + be.What}
		}
		return "", explainExec(err)
	}
	return b.String(), nil
}

var (
	templates   sync.Map // string -> *parsed or error
	templatesN  int
	templatesMu sync.Mutex
)

// parsed is a template parsed, bounded and metered (meterTree):
// metered says whether its execution needs a meter's functions.
type parsed struct {
	t       *template.Template
	metered bool
}

// parseTemplate parses once per distinct string (the cache is
// dropped when it grows past a few thousand entries).
func parseTemplate(s string) (*parsed, error) {
	if v, ok := templates.Load(s); ok {
		if p, ok := v.(*parsed); ok {
			return p, nil
		}
		return nil, v.(error)
	}
	var v any
	var p *parsed
	t, err := template.New("t").Option("missingkey=error").Parse(s)
	switch {
	case err != nil:
		msg := strings.TrimPrefix(err.Error(), "template: t:")
		if rest, ok := strings.CutPrefix(msg, "1: "); ok {
			msg = rest
		} else if line, rest, ok := strings.Cut(msg, ": "); ok {
			msg = "line " + line + ": " + rest
		}
		t, err = nil, fmt.Errorf("not a valid template: %s", msg)
		v = err
	default:
		if berr := bounded(t); berr != nil {
			err = fmt.Errorf("not an allowed template: %w", berr)
			v = err
		} else {
			p = &parsed{t: t, metered: meterTree(t)}
			v = p
		}
	}
	templatesMu.Lock()
	if templatesN >= 4096 {
		templates.Clear()
		templatesN = 0
	}
	templatesN++
	templatesMu.Unlock()
	templates.Store(s, v)
	return p, err
}

var (
	noFieldRE = regexp.MustCompile(`can't evaluate field (\w+) in type (\*?[\w.]+)`)
	execRE    = regexp.MustCompile(`^template: t:\d+:\d+: executing "t" at (<[^>]*>): `)
)

// meteringRE finds what meterTree added to a template, left out of
// the node an error names.
var meteringRE = regexp.MustCompile(fnRange + ` \d+ |\(` + fnSize + ` `)

// explainExec rewrites text/template's execution errors: an unknown
// field is named with the fields there are, and the node is written as
// in the description (without the metering).
func explainExec(err error) error {
	msg := meteringRE.ReplaceAllStringFunc(err.Error(), func(m string) string {
		if strings.HasPrefix(m, "(") {
			return "("
		}
		return ""
	})
	if m := noFieldRE.FindStringSubmatch(msg); m != nil {
		var fields []string
		switch {
		case strings.HasSuffix(m[2], "TemplateData"):
			fields = fieldNames(reflect.TypeFor[TemplateData](), ".")
		case strings.HasSuffix(m[2], "MemberRef"):
			fields = fieldNames(reflect.TypeFor[MemberRef](), ".")
		case strings.HasSuffix(m[2], "TrafficData"):
			fields = fieldNames(reflect.TypeFor[TrafficData](), ".")
		}
		if fields != nil {
			return fmt.Errorf("template: no field %s (there are %s)", m[1], strings.Join(fields, ", "))
		}
	}
	if m := execRE.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("template: at %s: %s", m[1], msg[len(m[0]):])
	}
	return fmt.Errorf("template: %s", strings.TrimPrefix(msg, "template: "))
}

func fieldNames(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		out = append(out, prefix+t.Field(i).Name)
	}
	return out
}

var errTooLong = errors.New("too long")

// limitedBuilder is a strings.Builder that refuses to grow past
// maxRendered, so that a runaway template stops.
type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRendered {
		return 0, errTooLong
	}
	return b.Builder.Write(p)
}

// bounded refuses what would let a template run for ever, since
// text/template has no bound of its own and Validate renders every
// template of a description: a range over a number ({{range
// 100000000000}}{{end}} loops for hours without writing a byte), over
// a function's result, a range over the members inside another (n²
// for n members: 4e8 for 20,000), and {{define}}/{{template}} (which
// could hide the same). What a template writes is bounded apart, by
// maxRendered.
func bounded(t *template.Template) error {
	if len(t.Templates()) > 1 {
		return errors.New("{{define}}, {{block}} and {{template}} are not for descriptions: write the template out")
	}
	if t.Tree == nil {
		return nil
	}
	return boundedList(t.Tree.Root, false)
}

func boundedList(l *parse.ListNode, inMembers bool) error {
	if l == nil {
		return nil
	}
	for _, n := range l.Nodes {
		if err := boundedNode(n, inMembers); err != nil {
			return err
		}
	}
	return nil
}

func boundedNode(n parse.Node, inMembers bool) error {
	switch n := n.(type) {
	case *parse.TemplateNode:
		return errors.New("{{template}} is not for descriptions: write the template out")
	case *parse.IfNode:
		return errors.Join(boundedList(n.List, inMembers), boundedList(n.ElseList, inMembers))
	case *parse.WithNode:
		return errors.Join(boundedList(n.List, inMembers), boundedList(n.ElseList, inMembers))
	case *parse.RangeNode:
		over, ok := rangedField(n.Pipe)
		if !ok {
			return fmt.Errorf("{{range %s}}: a template may range over a field (.Members, .Vars) only, not a number or what a function returns", truncate(n.Pipe.String(), 40))
		}
		members := over != "Vars"
		if members && inMembers {
			return fmt.Errorf("{{range %s}} inside a range over the members: it would run once per pair of members; range over them once", truncate(n.Pipe.String(), 40))
		}
		return errors.Join(boundedList(n.List, inMembers || members), boundedList(n.ElseList, inMembers))
	}
	return nil
}

// rangedField returns the last field a range's pipeline names (Members
// for .Members, $.Members or $x.Members; "" for a variable), and false
// when it ranges over anything else.
func rangedField(p *parse.PipeNode) (string, bool) {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return "", false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return a.Ident[len(a.Ident)-1], true
	case *parse.VariableNode:
		if len(a.Ident) > 1 {
			return a.Ident[len(a.Ident)-1], true
		}
		return "", true
	case *parse.DotNode:
		return "", true
	}
	return "", false
}
