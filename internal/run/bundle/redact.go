package bundle

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Redacted replaces every secret a bundle leaves out.
const Redacted = "[REDACTED]"

// Redaction is one value of the description that was replaced, by its
// path in the description ("components[1].hooks.pre_stop[0].headers.Authorization")
// and why. The value itself is nowhere in the bundle.
type Redaction struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// Why a value was redacted.
const (
	whyHeader  = "a header value"
	whyBody    = "a request body"
	whyContent = "a file's content"
	whyName    = "its key names a secret"
	whyFlag    = "the argument after a flag that names a secret"
	whyPattern = "it looks like a credential (a bearer token, a URL's password, a secret's name=value)"
)

// minKnown is the shortest secret value scrubbed wherever it appears:
// a shorter one ("1", "true") would blank out half of every log.
const minKnown = 8

// secretWords are what a key's name contains when its value is a
// secret. Over-matching (a var named "keyspace") costs a value in the
// bundle; under-matching costs a secret, so the list is broad.
var secretWords = []string{"token", "passw", "pwd", "secret", "key", "auth", "credential", "cookie",
	"session", "signature", "private", "bearer", "salt"}

// secretName reports whether a key, a variable or a flag named name
// holds a secret. A name ending in "file" (token_file, key_file) holds
// a path, which is kept: the file itself is never read.
func secretName(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "file") {
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

var (
	// bearerRE is an Authorization header's value in any text.
	bearerRE = regexp.MustCompile(`(?i)(\bbearer\s+)([^\s"',;]+)`)
	// userinfoRE is the password of a URL (scheme://user:password@host).
	userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@"']*):([^/\s@"']+)@`)
	// assignRE is name=value or name: value where the name says secret
	// (a description's scalars: the broad list).
	assignRE = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*(?:token|passw|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth|credential|cookie|session|signature)[A-Za-z0-9_.-]*)(["']?\s*[=:]\s*["']?)((?:bearer\s+|basic\s+)?[^\s&;,"']+)`)
	// textAssignRE is the same for the text ferry collects (events,
	// outputs, reports), with the names that cannot be anything else:
	// "session: 3" or "authority=x" in a log is no secret.
	textAssignRE = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*(?:token|password|passwd|secret|api[_-]?key|apikey|private[_-]?key|credential)[A-Za-z0-9_.-]*)(["']?\s*[=:]\s*["']?)((?:bearer\s+|basic\s+)?[^\s&;,"'\\]+)`)
	// flagRE is a command-line flag given without its value.
	flagRE = regexp.MustCompile(`^--?([A-Za-z0-9][A-Za-z0-9_.-]*)$`)
)

// scrubPatterns replaces the credentials a text shows by their form,
// with re for name=value.
func scrubPatterns(s string, re *regexp.Regexp) string {
	if s == "" {
		return s
	}
	s = bearerRE.ReplaceAllString(s, "${1}"+Redacted)
	s = userinfoRE.ReplaceAllString(s, "${1}:"+Redacted+"@")
	return re.ReplaceAllStringFunc(s, func(m string) string {
		sm := re.FindStringSubmatch(m)
		if sm[3] == Redacted || strings.HasPrefix(sm[3], "{{") || strings.HasPrefix(sm[3], "$") {
			// Already done; a template or a variable names no secret
			// value itself (what it renders to is scrubbed as a value).
			return m
		}
		return sm[1] + sm[2] + Redacted
	})
}

// Description returns the cluster description data with its secrets
// replaced by Redacted: every header value, every body (of a call or a
// traffic request), every file content (run.files), every value whose
// key names a secret (a var, an env entry, any key: token, password,
// secret, key, auth...), the argument after a flag that names one
// (--token X), and, in any other value, what has a credential's form
// (Bearer X, scheme://user:password@, password=X). Comments are
// dropped: they may say anything. A token_file (any *_file) keeps its
// path: the file is never read. It returns what was redacted, by path,
// and the secret values themselves (of at least minKnown bytes, not
// templates), to be scrubbed from everything else the bundle holds.
// Data that is not YAML is an error: it is then left out whole.
func Description(data []byte) (out []byte, reds []Redaction, values []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, nil, fmt.Errorf("the description is not YAML, so its secrets cannot be found: %w", err)
	}
	r := &redactor{seen: map[*yaml.Node]bool{}, values: map[string]bool{}}
	r.walk(&doc, "", false)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, nil, nil, fmt.Errorf("the redacted description: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, nil, nil, err
	}
	for v := range r.values {
		values = append(values, v)
	}
	sort.Strings(values)
	return b.Bytes(), r.reds, values, nil
}

type redactor struct {
	seen   map[*yaml.Node]bool // walked already (aliases share nodes)
	reds   []Redaction
	values map[string]bool
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	if strings.ContainsAny(key, ".[] \"") || key == "" {
		return path + "[" + strconv.Quote(key) + "]"
	}
	return path + "." + key
}

func uncomment(n *yaml.Node) { n.HeadComment, n.LineComment, n.FootComment = "", "", "" }

// walk visits n at path; underArtifacts is set for the mapping under
// a release's artifacts, whose keys are component names (a component
// named "keystone" is not a secret).
func (r *redactor) walk(n *yaml.Node, path string, underArtifacts bool) {
	if n == nil || r.seen[n] {
		return
	}
	r.seen[n] = true
	uncomment(n)
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			r.walk(c, path, false)
		}
	case yaml.AliasNode:
		r.walk(n.Alias, path, underArtifacts)
	case yaml.SequenceNode:
		for i, c := range n.Content {
			r.walk(c, fmt.Sprintf("%s[%d]", path, i), false)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			uncomment(k)
			key := k.Value
			p := join(path, key)
			switch lk := strings.ToLower(key); {
			case key == "<<":
				r.walk(v, path, underArtifacts)
			case lk == "headers":
				r.all(v, p, whyHeader)
			case lk == "body":
				r.all(v, p, whyBody)
			case lk == "content":
				r.all(v, p, whyContent)
			case !underArtifacts && secretName(key):
				r.all(v, p, whyName)
			case lk == "args" || lk == "exec":
				r.argv(v, p)
			default:
				r.walk(v, p, lk == "artifacts")
			}
		}
	case yaml.ScalarNode:
		if n.Tag == "!!str" || n.Tag == "" {
			if s := scrubPatterns(n.Value, assignRE); s != n.Value {
				r.note(path, whyPattern, n.Value)
				n.Value = s
				n.Style = yaml.DoubleQuotedStyle
			}
		}
	}
}

// argv walks a command line: the value after a flag that names a
// secret (--token X) is redacted whole.
func (r *redactor) argv(n *yaml.Node, path string) {
	if n.Kind != yaml.SequenceNode || r.seen[n] {
		r.walk(n, path, false)
		return
	}
	r.seen[n] = true
	uncomment(n)
	next := false
	for i, c := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		if next {
			r.all(c, p, whyFlag)
			next = false
			continue
		}
		if c.Kind == yaml.ScalarNode {
			if m := flagRE.FindStringSubmatch(c.Value); m != nil && secretName(m[1]) {
				next = true
			}
		}
		r.walk(c, p, false)
	}
}

// all redacts every scalar at or below n (a header map's values, a
// secret's whole subtree); mapping keys stay, so that the reader sees
// which header or var was there.
func (r *redactor) all(n *yaml.Node, path string, why string) {
	seen := map[*yaml.Node]bool{}
	var do func(n *yaml.Node, path string)
	do = func(n *yaml.Node, path string) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		r.seen[n] = true
		uncomment(n)
		switch n.Kind {
		case yaml.AliasNode:
			do(n.Alias, path) // the anchor's value is redacted where it is defined too
		case yaml.SequenceNode:
			for i, c := range n.Content {
				do(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				uncomment(n.Content[i])
				do(n.Content[i+1], join(path, n.Content[i].Value))
			}
		case yaml.ScalarNode:
			if n.Value == "" || n.Tag == "!!null" || n.Value == Redacted {
				return
			}
			r.note(path, why, n.Value)
			n.Value, n.Tag, n.Style = Redacted, "!!str", yaml.DoubleQuotedStyle
		}
	}
	do(n, path)
}

func (r *redactor) note(path, why, value string) {
	r.reds = append(r.reds, Redaction{Path: path, Why: why})
	if len(value) >= minKnown && !strings.Contains(value, "{{") {
		r.values[value] = true
	}
	// The secret part of a value goes in the list too: what follows
	// "Bearer ", a URL's password, the value of password=.
	for _, re := range []*regexp.Regexp{bearerRE, userinfoRE, assignRE} {
		for _, m := range re.FindAllStringSubmatch(value, -1) {
			v := m[len(m)-1]
			if i := strings.IndexAny(v, " \t"); i >= 0 && re == assignRE {
				v = v[i+1:] // "Bearer X" as the value of a name
			}
			if len(v) >= minKnown && !strings.Contains(v, "{{") && v != Redacted {
				r.values[v] = true
			}
		}
	}
}

// scrubber removes secrets from the text a bundle collects (events,
// members' output, reports, the record): every known secret value
// (the tokens ferry holds, the values redacted from the description)
// wherever it appears, and what has a credential's form. It counts
// what it replaced.
type scrubber struct {
	rep *strings.Replacer
	mu  sync.Mutex
	n   int
}

func newScrubber(known []string) *scrubber {
	uniq := map[string]bool{}
	var ks []string
	for _, k := range known {
		k = strings.TrimSpace(k)
		if len(k) >= minKnown && !uniq[k] {
			uniq[k] = true
			ks = append(ks, k)
		}
	}
	// Longer first: a secret that contains another goes whole.
	sort.Slice(ks, func(i, j int) bool { return len(ks[i]) > len(ks[j]) })
	var pairs []string
	for _, k := range ks {
		pairs = append(pairs, k, Redacted)
	}
	return &scrubber{rep: strings.NewReplacer(pairs...)}
}

// text scrubs s.
func (s *scrubber) text(in string) string {
	out := s.rep.Replace(in)
	out = scrubPatterns(out, textAssignRE)
	if out != in {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return out
}

// count is how many texts had something replaced.
func (s *scrubber) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// value scrubs every string (and []byte) reachable from v, a pointer,
// in place: a record or an event keeps its shape and field order, and
// no secret it might quote (a hook's answer, an error) survives.
func (s *scrubber) value(v any) {
	s.walk(reflect.ValueOf(v))
}

func (s *scrubber) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			if v.Kind() == reflect.Interface && e.Kind() == reflect.String {
				if v.CanSet() {
					v.Set(reflect.ValueOf(s.text(e.String())))
				}
				return
			}
			s.walk(e)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				s.walk(f)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.CanSet() && !v.IsNil() {
				v.SetBytes([]byte(s.text(string(v.Bytes()))))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			s.walk(v.Index(i))
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			s.walk(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			switch e.Kind() {
			case reflect.Pointer:
				s.walk(e)
			case reflect.String:
				v.SetMapIndex(k, reflect.ValueOf(s.text(e.String())).Convert(e.Type()))
			case reflect.Struct, reflect.Slice, reflect.Map, reflect.Interface:
				c := reflect.New(e.Type()).Elem()
				c.Set(e)
				s.walk(c)
				v.SetMapIndex(k, c)
			}
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(s.text(v.String()))
		}
	}
}
