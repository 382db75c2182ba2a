package config

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// The bounds of one render, whoever renders (Validate, plan, the
// engine, a probe, the traffic driver): text/template has none of its
// own, and three ranges over 400 vars kept 'ferry validate' busy for a
// minute. They count work, not time, so that a template judged at
// validation is judged the same at run time, on a loaded machine too,
// and so that the pure packages that render (upgrade) read no clock.
const (
	// maxRendered bounds what one render writes.
	maxRendered = 1 << 20
	// maxSteps bounds the template nodes one render evaluates: a
	// range charges its length times the nodes of its body when it
	// starts (more for a map, which text/template sorts each time), a
	// comparison the length of its strings. They take about 100 ms on
	// an idle core; a range over 20,000 members, writing each one's
	// name and address, takes a third of them.
	maxSteps = 500_000
	// maxMade bounds the bytes the formatting functions (print,
	// printf, println, html, js, urlquery) make in one render, written
	// or not: each call's output is estimated before it is made.
	maxMade = 4 << 20
)

// BoundError is a render stopped at one of its bounds.
type BoundError struct {
	// What says which bound, and how far the render got.
	What string
}

func (e *BoundError) Error() string { return e.What }

// meter counts the work of one render against the bounds.
type meter struct{ steps, made int }

// charge adds n steps; an error once they pass maxSteps.
func (m *meter) charge(n int) error {
	if n < 0 || n > maxSteps || m.steps+n > maxSteps {
		return &BoundError{What: fmt.Sprintf("stopped at the bound of %d steps of one render (a range costs its length times its body, and ranges nested in ranges multiply: range over fewer, or nest less)", maxSteps)}
	}
	m.steps += n
	return nil
}

// allow refuses a function call whose output (estimate, an upper
// bound) would take the render past maxMade, before it is made.
func (m *meter) allow(fn string, estimate int) error {
	if estimate > maxMade-m.made {
		return &BoundError{What: fmt.Sprintf("%s would make more than the %d bytes the functions of one render may make", fn, maxMade)}
	}
	return nil
}

// keep counts what a function made.
func (m *meter) keep(s string) (string, error) {
	m.made += len(s)
	return s, m.charge(1 + len(s)/bytesPerStep)
}

// bytesPerStep is how many bytes of a string compared, sorted or made
// count as one step.
const bytesPerStep = 256

// Names of the functions the metering rewrite calls: not callable
// from a description (they are added at execution only, so that a
// description naming them gets "function not defined").
const (
	fnRange = "ferry_range_"
	fnSize  = "ferry_size_"
)

// comparisons are the builtins whose cost is the length of their
// arguments.
var comparisons = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true}

// formatting are the builtins that make strings, replaced by metered
// equivalents.
var formatting = map[string]bool{"print": true, "printf": true, "println": true, "html": true, "js": true, "urlquery": true}

// meterTree rewrites a parsed (and bounded) template so that its
// execution is metered: each range's pipeline goes through fnRange,
// which charges the range's length times its body's weight, and each
// argument of a comparison through fnSize. It reports whether the
// template needs the metered functions at all (a plain
// "http://{{.Address}}/ready" does not, and is executed as it is).
func meterTree(t *template.Template) bool {
	if t.Tree == nil {
		return false
	}
	w := &meterWalk{}
	w.list(t.Tree.Root)
	return w.needed
}

type meterWalk struct{ needed bool }

func (w *meterWalk) list(l *parse.ListNode) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		w.node(n)
	}
}

func (w *meterWalk) node(n parse.Node) {
	switch n := n.(type) {
	case *parse.ActionNode:
		w.pipe(n.Pipe)
	case *parse.IfNode:
		w.pipe(n.Pipe)
		w.list(n.List)
		w.list(n.ElseList)
	case *parse.WithNode:
		w.pipe(n.Pipe)
		w.list(n.List)
		w.list(n.ElseList)
	case *parse.RangeNode:
		w.pipe(n.Pipe)
		w.list(n.List)
		w.list(n.ElseList)
		if n.Pipe != nil && len(n.Pipe.Cmds) == 1 {
			cmd := n.Pipe.Cmds[0]
			weight := int64(1 + listWeight(n.List))
			cmd.Args = append([]parse.Node{ident(fnRange, cmd.Pos), number(weight, cmd.Pos)}, cmd.Args...)
			w.needed = true
		}
	}
}

func (w *meterWalk) pipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			switch a := a.(type) {
			case *parse.PipeNode:
				w.pipe(a)
			case *parse.ChainNode:
				if p, ok := a.Node.(*parse.PipeNode); ok {
					w.pipe(p)
				}
			}
		}
		id, ok := c.Args[0].(*parse.IdentifierNode)
		switch {
		case !ok:
		case formatting[id.Ident]:
			w.needed = true
		case comparisons[id.Ident]:
			w.needed = true
			for i := 1; i < len(c.Args); i++ {
				a := c.Args[i]
				c.Args[i] = &parse.PipeNode{NodeType: parse.NodePipe, Pos: a.Position(),
					Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: a.Position(), Args: []parse.Node{ident(fnSize, a.Position()), a}}}}
			}
		}
	}
}

func ident(name string, pos parse.Pos) *parse.IdentifierNode {
	return parse.NewIdentifier(name).SetPos(pos)
}

func number(n int64, pos parse.Pos) *parse.NumberNode {
	return &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: n, Text: strconv.FormatInt(n, 10)}
}

// listWeight counts the nodes one pass over l evaluates, leaving out
// the bodies of the ranges in it (each charges its own when it starts).
func listWeight(l *parse.ListNode) int {
	if l == nil {
		return 0
	}
	n := 0
	for _, x := range l.Nodes {
		n += nodeWeight(x)
	}
	return n
}

func nodeWeight(n parse.Node) int {
	switch n := n.(type) {
	case *parse.ActionNode:
		return 1 + pipeWeight(n.Pipe)
	case *parse.IfNode:
		return 1 + pipeWeight(n.Pipe) + listWeight(n.List) + listWeight(n.ElseList)
	case *parse.WithNode:
		return 1 + pipeWeight(n.Pipe) + listWeight(n.List) + listWeight(n.ElseList)
	case *parse.RangeNode:
		return 1 + pipeWeight(n.Pipe) + listWeight(n.ElseList)
	case *parse.PipeNode:
		return pipeWeight(n)
	case *parse.ChainNode:
		return 1 + nodeWeight(n.Node)
	}
	return 1
}

func pipeWeight(p *parse.PipeNode) int {
	if p == nil {
		return 0
	}
	n := 1
	for _, c := range p.Cmds {
		n++
		for _, a := range c.Args {
			n += nodeWeight(a)
		}
	}
	return n
}

// funcs are the metered functions of one execution.
func (m *meter) funcs() template.FuncMap {
	return template.FuncMap{
		fnRange: m.rangeOver,
		fnSize:  m.size,
		"printf": func(format string, args ...any) (string, error) {
			if err := m.allow("printf", printfBound(format, args)); err != nil {
				return "", err
			}
			return m.keep(fmt.Sprintf(format, args...))
		},
		"print": func(args ...any) (string, error) {
			if err := m.allow("print", printBound(args, 1)); err != nil {
				return "", err
			}
			return m.keep(fmt.Sprint(args...))
		},
		"println": func(args ...any) (string, error) {
			if err := m.allow("println", printBound(args, 1)); err != nil {
				return "", err
			}
			return m.keep(fmt.Sprintln(args...))
		},
		"html":     m.escaper("html", template.HTMLEscaper),
		"js":       m.escaper("js", template.JSEscaper),
		"urlquery": m.escaper("urlquery", template.URLQueryEscaper),
	}
}

func (m *meter) escaper(name string, f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := m.allow(name, printBound(args, 6)); err != nil {
			return "", err
		}
		return m.keep(f(args...))
	}
}

// rangeOver charges a range that starts: its length times the weight
// of its body, and the bytes of a map's keys, which text/template
// sorts each time.
func (m *meter) rangeOver(weight int, v reflect.Value) (reflect.Value, error) {
	x := v
	for x.IsValid() && (x.Kind() == reflect.Interface || x.Kind() == reflect.Pointer) && !x.IsNil() {
		x = x.Elem()
	}
	n, keys := 1, 0
	switch x.Kind() {
	case reflect.Map:
		// text/template sorts the keys and looks each one up again:
		// an element costs the log of the length, and a few steps.
		n = x.Len()
		weight += 4 + 2*bits.Len(uint(n))
		if x.Type().Key().Kind() == reflect.String {
			for it := x.MapRange(); it.Next(); {
				keys += len(it.Key().String())
			}
		}
	case reflect.Slice, reflect.Array, reflect.String:
		n = x.Len()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = int(max(0, min(x.Int(), maxSteps+1)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = int(min(x.Uint(), maxSteps+1))
	}
	if n > maxSteps/max(weight, 1) {
		return v, m.charge(maxSteps + 1)
	}
	return v, m.charge(n*weight + keys/bytesPerStep)
}

// size charges what comparing v costs: its length, for a string.
func (m *meter) size(v reflect.Value) (reflect.Value, error) {
	x := v
	for x.IsValid() && x.Kind() == reflect.Interface && !x.IsNil() {
		x = x.Elem()
	}
	n := 1
	if x.IsValid() && x.Kind() == reflect.String {
		n += x.Len() / bytesPerStep
	}
	return v, m.charge(n)
}

// printBound is an upper bound of what fmt.Sprint(args...) (or an
// escaper of it, which makes at most factor bytes of each) makes.
func printBound(args []any, factor int) int {
	n := 0
	for _, a := range args {
		n += factor * (1 + valueSize(reflect.ValueOf(a), maxMade, 0))
		if n > maxMade {
			return n
		}
	}
	return n
}

// printfBound is an upper bound of what fmt.Sprintf(format, args...)
// makes, found without making it: the format's length, each verb's
// width and precision (given or taken from an argument by '*'), and
// each argument as many times as a verb names it, six times over when
// the verb may escape it (%q, %x, %#v).
func printfBound(format string, args []any) int {
	total := len(format)
	argNum := 0
	arg := func(i, factor int) {
		if i >= 0 && i < len(args) {
			total += factor * valueSize(reflect.ValueOf(args[i]), maxMade, 0)
		}
		total += 32 // %!v(MISSING), %!d(string=...)
	}
	for i := 0; i < len(format) && total <= maxMade; {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		factor := 1
		for i < len(format) && strings.IndexByte("#0+- ", format[i]) >= 0 {
			if format[i] == '#' || format[i] == '+' || format[i] == ' ' {
				factor = 6
			}
			i++
		}
		index := func() {
			if i < len(format) && format[i] == '[' {
				end := strings.IndexByte(format[i:], ']')
				if end < 0 {
					i = len(format)
					return
				}
				if n, err := strconv.Atoi(format[i+1 : i+end]); err == nil {
					argNum = n - 1
				}
				i += end + 1
			}
		}
		num := func() {
			index()
			if i < len(format) && format[i] == '*' {
				i++
				if argNum >= 0 && argNum < len(args) {
					if v := reflect.ValueOf(args[argNum]); v.CanInt() {
						w := v.Int()
						if w < 0 {
							w = -w
						}
						if w < 0 || w > maxMade {
							w = maxMade + 1
						}
						total += int(w)
					}
				}
				argNum++
				return
			}
			j := i
			for j < len(format) && format[j] >= '0' && format[j] <= '9' {
				j++
			}
			if j > i {
				n, err := strconv.Atoi(format[i:j])
				if err != nil || n > maxMade {
					n = maxMade + 1
				}
				total += n
				i = j
			}
		}
		num()
		if i < len(format) && format[i] == '.' {
			i++
			num()
		}
		index()
		if i >= len(format) {
			break
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		if verb == '%' {
			continue
		}
		if strings.ContainsRune("qxXU", verb) {
			factor = 6
		}
		arg(argNum, factor)
		argNum++
	}
	for k := argNum; k < len(args) && total <= maxMade; k++ {
		arg(k, 1) // %!(EXTRA ...)
	}
	return total
}

// valueSize is an upper bound of the bytes fmt prints for v with %v
// or %+v, counted until it passes limit.
func valueSize(v reflect.Value, limit, depth int) int {
	if !v.IsValid() {
		return 5
	}
	if depth > 16 {
		return limit + 1
	}
	switch v.Kind() {
	case reflect.String:
		return len(v.String()) + 2
	case reflect.Bool:
		return 5
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 5
		}
		return 1 + valueSize(v.Elem(), limit, depth+1)
	case reflect.Slice, reflect.Array:
		n := 2
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += 1 + valueSize(v.Index(i), limit, depth+1)
		}
		return n
	case reflect.Map:
		n := 5
		for it := v.MapRange(); it.Next() && n <= limit; {
			n += 2 + valueSize(it.Key(), limit, depth+1) + valueSize(it.Value(), limit, depth+1)
		}
		return n
	case reflect.Struct:
		n := 2 + len(v.Type().String())
		for i := 0; i < v.NumField() && n <= limit; i++ {
			n += 2 + len(v.Type().Field(i).Name) + valueSize(v.Field(i), limit, depth+1)
		}
		return n
	}
	return 32 // numbers, and what a description's data does not hold
}

// errBound reports whether err is a render stopped at a bound.
func errBound(err error) (*BoundError, bool) {
	var be *BoundError
	ok := errors.As(err, &be)
	return be, ok
}
