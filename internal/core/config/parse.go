package config

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

const (
	// MaxFileSize is the largest description Parse and Load accept.
	MaxFileSize = 8 << 20
	// MaxNodes bounds the YAML nodes a description's aliases expand to,
	// so that an alias bomb ("billion laughs") is refused, not expanded.
	// Only what aliases add is counted: the nodes written out in the
	// file are bounded by MaxFileSize already, and a large honest
	// description (20,000 members) must not be mistaken for a bomb.
	MaxNodes = 100_000
	// maxDepth bounds nesting; a description needs less than ten.
	maxDepth = 64
)

// Load reads the description at path and parses it (see Parse).
// Relative paths in it (artifacts, token files) are resolved against
// the directory of path by ResolvePath.
//
// Only a regular file is read (a FIFO, a device or a directory is
// refused at once, see readFile), at most MaxFileSize bytes.
func Load(path string) (*Cluster, error) {
	data, err := readFile(path, "cluster description")
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(filepath.Dir(path)); err == nil {
		c.dir = abs
	}
	return c, nil
}

// Parse decodes a description, applies the defaults (defaults.go) and
// validates it. file names the description in problems and anchors
// relative paths (ResolvePath); it is not opened. On any problem Parse
// returns nil and an *Errors with all the problems found.
func Parse(data []byte, file string) (*Cluster, error) {
	fail := func(line int, path, format string, args ...any) (*Cluster, error) {
		return nil, &Errors{Problems: []Problem{{File: file, Line: line, Path: path, Reason: fmt.Sprintf(format, args...)}}}
	}
	if len(data) > MaxFileSize {
		return fail(0, "", "the file is larger than %d bytes: not a cluster description", MaxFileSize)
	}
	root, err := parseYAML(data)
	if err != nil {
		line, reason := yamlErrorLine(err)
		if line == 0 && strings.Contains(reason, "control characters") {
			line = controlCharLine(data)
		}
		if m := unknownAnchorRE.FindStringSubmatch(reason); line == 0 && m != nil {
			line = lineOf(data, "*"+m[1])
		}
		return fail(line, "", "%s", reason)
	}
	if root == nil {
		return fail(0, "", "the file is empty: a description starts with cluster: and components:")
	}
	body := root
	if body.Kind == yaml.DocumentNode {
		if len(body.Content) == 0 {
			return fail(0, "", "the file is empty: a description starts with cluster: and components:")
		}
		body = body.Content[0]
	}
	if body.Kind == yaml.ScalarNode && body.ShortTag() == "!!null" {
		return fail(body.Line, "", "the document is empty: a description starts with cluster: and components:")
	}
	if body.Kind != yaml.MappingNode && body.Kind != yaml.AliasNode {
		return fail(body.Line, "", "the description must be a mapping (cluster: ..., components: ...), not %s", describe(body))
	}

	d := &decoder{file: file}
	c := &Cluster{}
	d.decode(body, reflect.ValueOf(c).Elem(), "", nil, "", 0)
	if d.stop {
		return nil, problemsOf(d.probs, 0)
	}
	c.File = file
	sum := sha256.Sum256(data)
	c.Digest = hex.EncodeToString(sum[:])
	c.suspect = d.suspects()
	c.ApplyDefaults()
	probs, omitted := d.probs, d.omitted
	if err := c.Validate(); err != nil {
		var errs *Errors
		if !errors.As(err, &errs) {
			return nil, err
		}
		// A value that failed to decode is left zero; leave out what
		// Validate says of it, which would only repeat the problem.
		for _, p := range errs.Problems {
			if !d.follows(p) {
				probs = append(probs, p)
			}
		}
		omitted += errs.Omitted
	}
	if len(probs) > 0 || omitted > 0 {
		return nil, problemsOf(probs, omitted)
	}
	return c, nil
}

// parseYAML parses data into a node tree; nil when there is no
// document. It turns a panic of the YAML parser into an error.
func parseYAML(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("not valid YAML (the parser failed: %v)", r)
		}
	}()
	if !utf8.Valid(data) && !hasBOM16(data) {
		return nil, lineError(data, "not valid UTF-8: a description is a YAML text file")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("yaml: line %d: a second document: a description is one YAML document", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	return &n, nil
}

func hasBOM16(b []byte) bool {
	return len(b) >= 2 && (b[0] == 0xfe && b[1] == 0xff || b[0] == 0xff && b[1] == 0xfe)
}

// lineError names the line of the first invalid UTF-8 sequence.
func lineError(data []byte, reason string) error {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		if data[i] == '\n' {
			line++
		}
		i += size
	}
	return fmt.Errorf("yaml: line %d: %s", line, reason)
}

// controlCharLine returns the line of the first control character
// YAML does not allow, or 0.
func controlCharLine(data []byte) int {
	line := 1
	for _, r := range string(data) {
		switch {
		case r == '\n':
			line++
		case r == '\t' || r == '\r':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfffe || r == 0xffff:
			return line
		}
	}
	return 0
}

var unknownAnchorRE = regexp.MustCompile(`unknown anchor '([^']*)' referenced`)

// lineOf returns the line of the first s in data, or 0.
func lineOf(data []byte, s string) int {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 0
	}
	return bytes.Count(data[:i], []byte("\n")) + 1
}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

// yamlErrorLine takes the line out of a yaml.v3 error message.
func yamlErrorLine(err error) (int, string) {
	msg := err.Error()
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, msg
	}
	line, _ := strconv.Atoi(m[1])
	reason := msg[len(m[0]):]
	if reason == "" {
		reason = "not valid YAML"
	} else if !strings.HasPrefix(reason, "not valid") && !strings.HasPrefix(reason, "a second document") {
		reason = "not valid YAML: " + reason
	}
	return line, reason
}

// posSetter is implemented by the types with positions.
type posSetter interface{ setPos(positions) }

// scalarForm is a struct that may be written as a single name
// (RunOn: run_on: controller-0 or run_on: {active: coord}).
type scalarForm interface{ fromScalar(string) error }

func (x *Cluster) setPos(p positions)   { x.pos = p }
func (x *Host) setPos(p positions)      { x.pos = p }
func (x *Component) setPos(p positions) { x.pos = p }
func (x *Strategy) setPos(p positions)  { x.pos = p }
func (x *Member) setPos(p positions)    { x.pos = p }
func (x *Run) setPos(p positions)       { x.pos = p }
func (x *Health) setPos(p positions)    { x.pos = p }
func (x *Call) setPos(p positions)      { x.pos = p } // and Check, which embeds Call
func (x *Release) setPos(p positions)   { x.pos = p }

// decoder turns a yaml.Node tree into the description's structs,
// collecting problems instead of stopping at the first.
type decoder struct {
	file  string
	probs []Problem
	// omitted counts the problems beyond maxCollected, not kept.
	omitted int
	// failed are the paths of values that failed to decode, and
	// siblings the mappings they are in: what Validate says of a failed
	// value or of its siblings follows from the failure and is left out.
	failed, siblings map[string]bool
	// misspelt are the unknown keys close to a known key left out.
	misspelt []misspelling
	nodes    int  // nodes visited through aliases
	stop     bool // the document is refused as a whole
	// alias is the outermost alias being expanded, to name it when
	// the expansion is too large.
	alias struct {
		line int
		path string
	}
}

// enter notes that decoding at path follows the alias n; the returned
// func undoes it.
func (d *decoder) enter(n *yaml.Node, path string) func() {
	if n.Kind != yaml.AliasNode || d.alias.line != 0 {
		return func() {}
	}
	d.alias.line, d.alias.path = n.Line, path
	return func() { d.alias.line, d.alias.path = 0, "" }
}

func (d *decoder) problem(line int, path, format string, args ...any) {
	if len(d.probs) >= maxCollected {
		d.omitted++
		return
	}
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Path: path, Reason: fmt.Sprintf(format, args...)})
}

// badValue is a problem with a value: the value is left zero, and the
// checks of the mapping it is in would only repeat it.
func (d *decoder) badValue(line int, path, format string, args ...any) {
	d.problem(line, path, format, args...)
	if d.failed == nil {
		d.failed, d.siblings = map[string]bool{}, map[string]bool{}
	}
	d.failed[path] = true
	if p := parent(path); p != "" {
		d.siblings[p] = true
	}
}

// follows reports whether a problem Validate found at path follows
// from a value that failed to decode.
func (d *decoder) follows(p Problem) bool {
	path := p.Path
	for _, m := range d.misspelt {
		// The known key's own problems ("must be set"), and its
		// mapping's that name it ("needs one of http, tcp or exec").
		if under(path, m.field) || path == parent(m.field) && mentions(p.Reason, m.field[len(parent(m.field)):]) {
			return true
		}
	}
	// Under a failed value: the path or one of its parents failed.
	for q := path; q != ""; q = parent(q) {
		if d.failed[q] {
			return true
		}
	}
	// A sibling's: the mapping itself, or a field of it.
	if d.siblings[path] {
		return true
	}
	if q := parent(path); q != "" && d.siblings[q] && path[len(q)] == '.' {
		return true
	}
	return false
}

// mentions reports whether reason names key (".address", "[\"x\"]"
// as join wrote it) as a word.
func mentions(reason, key string) bool {
	key = strings.TrimPrefix(key, ".")
	for i := 0; ; {
		j := strings.Index(reason[i:], key)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isWordByte(reason[j-1])
		after := j+len(key) == len(reason) || !isWordByte(reason[j+len(key)])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// suspects are the members with a misspelt key (adress for address):
// the templates rendered to check the component leave them out, so
// that an address left empty by the misspelling does not make every
// URL "http:///ready has no host".
func (d *decoder) suspects() map[string]bool {
	var out map[string]bool
	for _, m := range d.misspelt {
		p := parent(m.field)
		if strings.HasSuffix(p, "]") && strings.HasSuffix(parent(p), ".members") {
			if out == nil {
				out = map[string]bool{}
			}
			out[p] = true
		}
	}
	return out
}

// parent strips the last field or index of a path.
func parent(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}

// count charges n nodes to the budget of alias expansion; false once
// it is spent. Nodes decoded outside any alias are free: the file's
// size bounds them.
func (d *decoder) count(n int, line int) bool {
	if d.stop {
		return false
	}
	if d.alias.line == 0 {
		return true
	}
	d.nodes += n
	if d.nodes > MaxNodes {
		d.probs = nil
		d.problem(d.alias.line, d.alias.path, "the aliases expand to more than %d nodes (an alias bomb?): refused; write the repeated parts out, or alias less", MaxNodes)
		d.stop = true
		return false
	}
	return true
}

// resolve follows aliases to the node they stand for.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 100 {
			return nil
		}
		n = n.Alias
	}
	return n
}

// owner collects the positions of one struct that has them, and the
// lines of the nodes below it that have none of their own.
type owner struct{ pos *positions }

func (o *owner) record(rel string, line int) {
	if o == nil || o.pos == nil || rel == "" {
		return
	}
	if !strings.ContainsAny(rel, ".[") {
		o.pos.keys[rel] = line
		return
	}
	if o.pos.sub == nil {
		o.pos.sub = map[string]int{}
	}
	o.pos.sub[rel] = line
}

// null notes that rel was written with no value.
func (o *owner) null(rel string) {
	if o == nil || o.pos == nil || rel == "" {
		return
	}
	if o.pos.null == nil {
		o.pos.null = map[string]bool{}
	}
	o.pos.null[rel] = true
}

// isIdent reports whether a key can be written after a dot in a path
// ([A-Za-z_][A-Za-z0-9_-]*).
func isIdent(s string) bool {
	for i, r := range s {
		switch {
		case r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
		case i > 0 && (r == '-' || '0' <= r && r <= '9'):
		default:
			return false
		}
	}
	return s != ""
}

// join appends a field or map key to a path: a.b, a["*"].
func join(path, key string) string {
	if !isIdent(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// decode decodes n into v. path is the field path for problems; rel is
// the path relative to own, the nearest struct with positions.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, own *owner, rel string, depth int) {
	if d.stop {
		return
	}
	line := n.Line
	defer d.enter(n, path)()
	n = d.resolve(n)
	if n == nil {
		d.badValue(line, path, "an alias to nothing")
		return
	}
	if !d.count(1, line) {
		return
	}
	if depth > maxDepth {
		d.problem(line, path, "nested more than %d levels deep", maxDepth)
		return
	}
	if why := tagProblem(n); why != "" {
		d.badValue(line, path, "%s", why)
		return
	}
	t := v.Type()
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	if isNull {
		own.null(rel)
		if t.Kind() == reflect.Struct {
			if ps, ok := v.Addr().Interface().(posSetter); ok {
				ps.setPos(positions{line: line})
			}
		}
		v.SetZero()
		return
	}

	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			d.badValue(line, path, "must be %s, not %s", typeName(t), describe(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.badValue(line, path, "%v", err)
		}
		return
	}

	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.badValue(line, path, "must be a string, not %s", describe(n))
			return
		}
		switch n.ShortTag() {
		case "!!int", "!!float", "!!bool", "!!timestamp":
			// name: true, vars: {raft: 9101}: YAML read another type,
			// and turning it into text silently guesses (0755 is 493
			// to YAML, 1.10 is 1.1).
			d.badValue(line, path, "must be a string, not %s: quote it (%q) if the text is meant", describe(n), n.Value)
			return
		}
		if why := badText(n.Value); why != "" {
			d.badValue(line, path, "%s", why)
			return
		}
		v.SetString(n.Value)

	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if plainDigits(n) {
			// Too long for YAML to call it an integer (it says a float,
			// or a string): it is one, out of range.
			d.badValue(line, path, "the integer %s is out of range (at most %d digits)", truncate(n.Value, 40), len(strconv.Itoa(math.MaxInt64)))
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.badValue(line, path, "must be an integer, not %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil || v.OverflowInt(i) {
			d.badValue(line, path, "the integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)

	case reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.badValue(line, path, "must be an integer, not %s", describe(n))
			return
		}
		u, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil {
			d.badValue(line, path, "must be an integer from 0 to 2^64-1, not %s", n.Value)
			return
		}
		v.SetUint(u)

	case reflect.Float64:
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") {
			d.badValue(line, path, "must be a number, not %s", describe(n))
			return
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.badValue(line, path, "must be a finite number, not %s", n.Value)
			return
		}
		v.SetFloat(f)

	case reflect.Bool:
		b, ok := yamlBool(n)
		if !ok {
			d.badValue(line, path, "must be true or false, not %s", describe(n))
			return
		}
		v.SetBool(b)

	case reflect.Interface:
		if x := d.anyValue(n, path, depth); x != nil {
			v.Set(reflect.ValueOf(x))
		}

	case reflect.Pointer:
		e := reflect.New(t.Elem())
		d.decode(n, e.Elem(), path, own, rel, depth)
		v.Set(e)

	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.badValue(line, path, "must be a list, not %s", describe(n))
			return
		}
		if !d.count(len(n.Content), line) {
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			own.record(index(rel, i), item.Line)
			d.decode(item, s.Index(i), index(path, i), own, index(rel, i), depth+1)
		}
		v.Set(s)

	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.badValue(line, path, "must be a mapping, not %s", describe(n))
			return
		}
		m := reflect.MakeMap(t)
		for _, p := range d.pairs(n, path, depth) {
			e := reflect.New(t.Elem()).Elem()
			own.record(join(rel, p.name), p.key.Line)
			d.decode(p.val, e, join(path, p.name), own, join(rel, p.name), depth+1)
			m.SetMapIndex(reflect.ValueOf(p.name).Convert(t.Key()), e)
		}
		v.Set(m)

	case reflect.Struct:
		if sf, ok := v.Addr().Interface().(scalarForm); ok && n.Kind == yaml.ScalarNode {
			// A struct with a short form (run_on: controller-0).
			if why := badName(n.Value); why != "" {
				d.badValue(line, path, "%s", why)
				return
			}
			if err := sf.fromScalar(n.Value); err != nil {
				d.badValue(line, path, "%v", err)
			}
			return
		}
		if n.Kind != yaml.MappingNode {
			d.badValue(line, path, "must be a mapping, not %s", describe(n))
			return
		}
		info := structInfoOf(t)
		ps, hasPos := v.Addr().Interface().(posSetter)
		var p positions
		if hasPos {
			p = positions{line: line, keys: map[string]int{}}
			own, rel = &owner{pos: &p}, ""
		}
		kvs := d.pairs(n, path, depth)
		for _, kv := range kvs {
			f, ok := info.fields[kv.name]
			if !ok {
				close := closest(kv.name, info.known)
				hint := ""
				if close != "" {
					hint = " (did you mean " + close + "?)"
					if !hasKey(kvs, close) {
						d.misspelt = append(d.misspelt, misspelling{field: join(path, close), key: kv.name, line: kv.key.Line})
					}
				}
				d.problem(kv.key.Line, join(path, kv.name), "unknown key%s; known keys: %s", hint, strings.Join(info.known, ", "))
				continue
			}
			own.record(join(rel, kv.name), kv.key.Line)
			d.decode(kv.val, v.FieldByIndex(f), join(path, kv.name), own, join(rel, kv.name), depth+1)
			if info.names[kv.name] {
				if why := badName(v.FieldByIndex(f).String()); why != "" {
					d.badValue(kv.val.Line, join(path, kv.name), "%s", why)
				}
			}
		}
		if hasPos {
			ps.setPos(p)
		}

	default:
		d.problem(line, path, "cannot hold a value (a %s field)", t)
	}
}

// pair is one key and value of a mapping, merges (<<) applied.
type pair struct {
	name     string
	key, val *yaml.Node
}

// pairs returns the entries of a mapping: its own keys first, then
// keys merged in with "<<" that it does not have itself. Duplicate and
// non-string keys are problems.
func (d *decoder) pairs(n *yaml.Node, path string, depth int) []pair {
	if depth > maxDepth {
		d.problem(n.Line, path, "nested more than %d levels deep", maxDepth)
		return nil
	}
	if !d.count(len(n.Content), n.Line) {
		return nil
	}
	var out []pair
	var merges []*yaml.Node
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.resolve(n.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode {
			d.problem(n.Content[i].Line, path, "a key must be a plain string, not %s", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if why := badText(k.Value); why != "" {
			d.problem(n.Content[i].Line, join(path, k.Value), "the key %s", why)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.problem(n.Content[i].Line, join(path, k.Value), "duplicate key (first on line %d)", first)
			continue
		}
		seen[k.Value] = n.Content[i].Line
		out = append(out, pair{name: k.Value, key: n.Content[i], val: n.Content[i+1]})
	}
	for _, m := range merges {
		d.merge(m, path, depth, seen, &out)
		if d.stop {
			return nil
		}
	}
	return out
}

// merge adds the entries of a "<<" value (a mapping, or a list of
// mappings, each possibly an alias) that out does not have yet. Each
// alias is entered while its mapping is read, so that what it expands
// to is charged to the budget (a mapping merging itself is a bomb).
func (d *decoder) merge(m *yaml.Node, path string, depth int, seen map[string]int, out *[]pair) {
	line := m.Line
	defer d.enter(m, path)()
	m = d.resolve(m)
	from := func(s *yaml.Node) {
		for _, p := range d.pairs(s, path, depth+1) {
			if _, dup := seen[p.name]; !dup {
				seen[p.name] = p.key.Line
				*out = append(*out, p)
			}
		}
	}
	switch {
	case m != nil && m.Kind == yaml.MappingNode:
		from(m)
	case m != nil && m.Kind == yaml.SequenceNode:
		for _, s := range m.Content {
			leave := d.enter(s, path)
			if r := d.resolve(s); r == nil || r.Kind != yaml.MappingNode {
				d.problem(line, path, "<< merges mappings, not %s", describe(r))
			} else {
				from(r)
			}
			leave()
			if d.stop {
				return
			}
		}
	default:
		d.problem(line, path, "<< merges a mapping or a list of mappings, not %s", describe(m))
	}
}

// anyValue decodes a node as encoding/json would hold it.
func (d *decoder) anyValue(n *yaml.Node, path string, depth int) any {
	line := n.Line
	defer d.enter(n, path)()
	n = d.resolve(n)
	switch {
	case n == nil:
		d.problem(line, path, "an alias to nothing")
		return nil
	case d.stop || !d.count(1, line):
		return nil
	case depth > maxDepth:
		d.problem(line, path, "nested more than %d levels deep", maxDepth)
		return nil
	}
	if why := tagProblem(n); why != "" {
		d.problem(line, path, "%s", why)
		return nil
	}
	switch n.Kind {
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, d.anyValue(c, index(path, i), depth+1))
		}
		return out
	case yaml.MappingNode:
		out := map[string]any{}
		for _, p := range d.pairs(n, path, depth) {
			out[p.name] = d.anyValue(p.val, join(path, p.name), depth+1)
		}
		return out
	}
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		b, _ := yamlBool(n)
		return b
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			d.problem(line, path, "the number %s is out of range", n.Value)
			return nil
		}
		return f
	}
	if why := badText(n.Value); why != "" {
		d.problem(line, path, "%s", why)
		return nil
	}
	return n.Value
}

// badText says why s cannot be any string of a description, or "": a
// NUL byte, which an argument, a variable of the environment, a
// header or a path cannot hold (the agent or the kernel would refuse
// it at run time, or cut the string there). One rule for every string
// the decoder reads, so that no field is forgotten.
func badText(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Sprintf("holds a NUL byte at byte %d of %d: no string of a description may hold one (an argument, an environment variable, a header or a path cannot)", i+1, len(s))
	}
	return ""
}

// badName says why s cannot be a name printed in messages, logs and on
// terminals (a field tagged text:"name"), or "": a control character
// there could clear the screen or set the terminal's title.
func badName(s string) string {
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("holds the control character %U at byte %d: a name is printed in messages, logs and on terminals, so it holds none", r, i+1)
		}
	}
	return ""
}

// plainDigits reports whether n is an unquoted run of decimal digits
// that YAML did not take for an integer: one too large for it.
func plainDigits(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.Style != 0 || n.ShortTag() == "!!int" {
		return false
	}
	s := strings.TrimPrefix(n.Value, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// tagProblem says what is wrong with a node's explicit tag, or "":
// the standard tags are read as they say, but binary data has no place
// in a description, and a custom tag (!secret, !include, !env) would be
// silently ignored when its writer expects it to do something.
func tagProblem(n *yaml.Node) string {
	if n.Style&yaml.TaggedStyle == 0 {
		return ""
	}
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq", "!!timestamp":
		return ""
	case "!!binary":
		return "binary data (!!binary) has no place in a description: write the value as text"
	default:
		return fmt.Sprintf("the tag %s is not understood: ferry reads plain YAML, with no custom tags (no secrets, includes or variables); write the value itself", truncate(tag, 40))
	}
}

func yamlBool(n *yaml.Node) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, false
	}
	switch strings.ToLower(n.Value) {
	case "true", "yes", "on", "y":
		return true, true
	}
	return false, true
}

// describe names what a node is, for "must be X, not Y" messages.
func describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "the boolean " + v
	case "!!int":
		return "the integer " + v
	case "!!float":
		return "the number " + v
	case "!!timestamp":
		return "the date " + v
	case "!!str":
		return "the string " + strconv.Quote(v)
	}
	return fmt.Sprintf("%s %s", n.ShortTag(), strconv.Quote(v))
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return "a duration (like 2s or 150ms)"
	}
	return "a " + t.String()
}

// structInfo is the YAML keys of a struct type, inline fields
// flattened, in declaration order.
type structInfo struct {
	fields map[string][]int
	known  []string
	// names are the keys of fields tagged text:"name": names printed
	// in messages, logs and on terminals, which badName checks.
	names map[string]bool
}

var structInfos sync.Map // reflect.Type -> *structInfo

func structInfoOf(t reflect.Type) *structInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{fields: map[string][]int{}, names: map[string]bool{}}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			idx := append(append([]int(nil), prefix...), i)
			if opts == "inline" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			si.fields[name] = idx
			si.known = append(si.known, name)
			if f.Tag.Get("text") == "name" {
				si.names[name] = true
			}
		}
	}
	walk(t, nil)
	structInfos.Store(t, si)
	return si
}

// closest returns the known key closest to an unknown one, if one is
// close: within two edits (adress, intervall, Address), or the known
// key it abbreviates (addr, thresh), or "".
func closest(key string, known []string) string {
	low := strings.ToLower(key)
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(low, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" && len(low) >= 3 {
		for _, k := range known {
			if strings.HasPrefix(k, low) {
				return k
			}
		}
	}
	return best
}

func hasKey(ps []pair, name string) bool {
	for _, p := range ps {
		if p.name == name {
			return true
		}
	}
	return false
}

// misspelling is an unknown key that is close to a known key left
// out: what Validate says of the known key's absence (it "must be
// set", a URL rendered without the member's address) follows from it.
type misspelling struct {
	field string // the path of the known key: components[0].members[1].address
	key   string // the key as written: adress
	line  int
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sortedKeys returns the keys of a map in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// LoadTraffic reads a file that holds a traffic spec alone (a
// "traffic:" block, as in a description), for 'ferry upgrade start
// --traffic FILE', and checks it like Parse (see ParseTraffic). It
// reads at most MaxFileSize bytes: /dev/zero is refused, not read for
// ever.
func LoadTraffic(path string) (*Traffic, error) {
	data, err := readFile(path, "traffic spec")
	if err != nil {
		return nil, err
	}
	return ParseTraffic(data, path)
}

// ParseTraffic decodes, completes and checks a traffic spec alone (a
// mapping with the one key traffic:); file names it in problems. On
// any problem it returns nil and an *Errors.
func ParseTraffic(data []byte, path string) (*Traffic, error) {
	if len(data) > MaxFileSize {
		return nil, &Errors{Problems: []Problem{{File: path, Reason: fmt.Sprintf("the file is larger than %d bytes: not a traffic spec", MaxFileSize)}}}
	}
	root, err := parseYAML(data)
	if err != nil {
		line, reason := yamlErrorLine(err)
		return nil, &Errors{Problems: []Problem{{File: path, Line: line, Reason: reason}}}
	}
	d := &decoder{file: path}
	c := &Cluster{}
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, &Errors{Problems: []Problem{{File: path, Line: 1, Reason: "a traffic spec is a mapping with one key, traffic:"}}}
	}
	d.decode(root, reflect.ValueOf(c).Elem(), "", nil, "", 0)
	probs := d.probs
	if c.Name != "" || len(c.Components) > 0 || len(c.Hosts) > 0 || len(c.Releases) > 0 || c.Substrate != "" {
		probs = append(probs, Problem{File: path, Line: 1, Reason: "a traffic file holds traffic: only (the rest belongs in the description)"})
	}
	if c.Traffic == nil && len(probs) == 0 {
		probs = append(probs, Problem{File: path, Line: 1, Path: "traffic", Reason: "must be set: the traffic spec"})
	}
	if len(probs) == 0 {
		c.File = path
		c.Traffic.applyDefaults(c.pos)
		v := &validator{c: c}
		v.traffic()
		probs = v.probs
	}
	if len(probs) > 0 {
		return nil, problemsOf(probs, 0)
	}
	return c.Traffic, nil
}
