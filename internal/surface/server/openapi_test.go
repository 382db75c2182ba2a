package server

import (
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

// spec is api/openapi.yaml, read once, and what the tests saw of each
// of its operations.
type spec struct {
	doc   map[string]any
	paths map[string]map[string]any // path template → method → operation

	mu   sync.Mutex
	seen map[string]map[int]bool // "METHOD /template" → statuses answered
}

var (
	specOnce sync.Once
	theSpec  *spec
	specErr  error
)

func specPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "api", "openapi.yaml")
}

func loadSpec(t testing.TB) *spec {
	t.Helper()
	specOnce.Do(func() {
		b, err := os.ReadFile(specPath())
		if err != nil {
			specErr = err
			return
		}
		var doc map[string]any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			specErr = fmt.Errorf("api/openapi.yaml: %w", err)
			return
		}
		sp := &spec{doc: doc, paths: map[string]map[string]any{}, seen: map[string]map[int]bool{}}
		paths, _ := doc["paths"].(map[string]any)
		for p, item := range paths {
			ops := map[string]any{}
			for m, op := range item.(map[string]any) {
				ops[strings.ToUpper(m)] = op
			}
			sp.paths[p] = ops
		}
		theSpec = sp
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return theSpec
}

// match finds the spec's path template for a request path.
func (sp *spec) match(path string) (string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for tmpl := range sp.paths {
		ts := strings.Split(strings.Trim(tmpl, "/"), "/")
		if len(ts) != len(segs) {
			continue
		}
		ok := true
		for i := range ts {
			if !(strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}")) && ts[i] != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			return tmpl, true
		}
	}
	return "", false
}

// check holds one response to the spec: the operation exists, the
// status is documented, the content type is, and a JSON body has the
// documented schema (required fields, types, enums). It returns every
// mismatch.
func (sp *spec) check(method, path string, status int, contentType string, body []byte) []string {
	tmpl, ok := sp.match(path)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no such path in api/openapi.yaml", method, path)}
	}
	op, ok := sp.paths[tmpl][method].(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no such operation in api/openapi.yaml", method, tmpl)}
	}
	key := method + " " + tmpl
	sp.mu.Lock()
	if sp.seen[key] == nil {
		sp.seen[key] = map[int]bool{}
	}
	sp.seen[key][status] = true
	sp.mu.Unlock()
	responses, _ := op["responses"].(map[string]any)
	resp, ok := responses[fmt.Sprint(status)]
	if !ok {
		return []string{fmt.Sprintf("%s: status %d is not documented (documented: %s)", key, status, strings.Join(sortedKeys(responses), ", "))}
	}
	r := sp.resolve(resp)
	content, _ := r["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 {
			return []string{fmt.Sprintf("%s %d: a body, but none is documented", key, status)}
		}
		return nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	media, ok := content[mt].(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s %d: Content-Type %q is not documented (documented: %s)", key, status, contentType, strings.Join(sortedKeys(content), ", "))}
	}
	if mt != "application/json" {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []string{fmt.Sprintf("%s %d: the body is not JSON: %v", key, status, err)}
	}
	var errs []string
	sp.validate(media["schema"], v, "body", &errs)
	for i := range errs {
		errs[i] = fmt.Sprintf("%s %d: %s", key, status, errs[i])
	}
	return errs
}

// resolve follows a $ref inside the document.
func (sp *spec) resolve(n any) map[string]any {
	m, _ := n.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = sp.doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, _ := cur.(map[string]any)
			cur = cm[part]
		}
		m, _ = cur.(map[string]any)
	}
	return m
}

// validate checks v against the subset of JSON Schema the spec uses.
func (sp *spec) validate(schemaNode, v any, at string, errs *[]string) {
	bad := func(format string, args ...any) { *errs = append(*errs, at+": "+fmt.Sprintf(format, args...)) }
	s := sp.resolve(schemaNode)
	if s == nil {
		if m, ok := schemaNode.(map[string]any); ok && m["$ref"] != nil {
			bad("$ref %v names no schema of the spec", m["$ref"])
		}
		return
	}
	if v == nil {
		if n, _ := s["nullable"].(bool); !n {
			bad("null, want %v", s["type"])
		}
		return
	}
	switch s["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			bad("want an object, got %T", v)
			return
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				bad("required field %q is missing", r)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, fv := range obj {
			if ps, ok := props[k]; ok {
				sp.validate(ps, fv, at+"."+k, errs)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					bad("field %q is not documented", k)
				}
			case map[string]any:
				sp.validate(ap, fv, at+"."+k, errs)
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			bad("want an array, got %T", v)
			return
		}
		for i, it := range arr {
			sp.validate(s["items"], it, fmt.Sprintf("%s[%d]", at, i), errs)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("want a string, got %T", v)
			return
		}
		if s["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				bad("%q is not a date-time", str)
			}
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			bad("want an integer, got %v", v)
			return
		}
		if mn, ok := s["minimum"].(int); ok && f < float64(mn) {
			bad("%v is below the minimum %d", f, mn)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			bad("want a number, got %T", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("want a boolean, got %T", v)
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		bad("%v is not one of %v", v, enum)
	}
}

// uncovered lists the spec's operations no test saw answer with a
// success status.
func (sp *spec) uncovered() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []string
	for p, ops := range sp.paths {
		for m := range ops {
			ok := false
			for st := range sp.seen[m+" "+p] {
				if st >= 200 && st < 300 {
					ok = true
				}
			}
			if !ok {
				out = append(out, m+" "+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestSpecMatchesRoutes: every route the server serves is in the spec,
// and every operation of the spec is a route, each with the errors
// every route may answer documented.
func TestSpecMatchesRoutes(t *testing.T) {
	sp := loadSpec(t)
	s := newTestServer(t, offlineCluster(t))
	routes := map[string]bool{}
	for _, r := range s.Routes() {
		routes[r] = true
		method, path, _ := strings.Cut(r, " ")
		op, ok := sp.paths[path][method].(map[string]any)
		if !ok {
			t.Errorf("route %s is not in api/openapi.yaml", r)
			continue
		}
		responses, _ := op["responses"].(map[string]any)
		public := r == "GET /v1/healthz"
		if _, ok := responses["401"]; !ok && !public {
			t.Errorf("%s: 401 (the token) is not documented", r)
		}
		if id, _ := op["operationId"].(string); id == "" {
			t.Errorf("%s: no operationId", r)
		}
	}
	for p, ops := range sp.paths {
		for m := range ops {
			if !routes[m+" "+p] {
				t.Errorf("api/openapi.yaml documents %s %s, which the server does not serve", m, p)
			}
		}
	}
}

// TestSpecChecker: the checker itself refuses what it should.
func TestSpecChecker(t *testing.T) {
	full := loadSpec(t)
	sp := &spec{doc: full.doc, paths: full.paths, seen: map[string]map[int]bool{}} // its own coverage
	cases := []struct {
		method, path string
		status       int
		body         string
		wantErr      string
	}{
		{"GET", "/v1/upgrade", 418, `{}`, "not documented"},
		{"GET", "/v1/nothing", 200, `{}`, "no such path"},
		{"PUT", "/v1/upgrade", 200, `{}`, "no such operation"},
		{"GET", "/v1/healthz", 200, `{"status": "ok", "time": "2026-01-01T00:00:00Z"}`, `required field "cluster"`},
		{"GET", "/v1/healthz", 200, `{"status": "bad", "cluster": "c", "time": "2026-01-01T00:00:00Z"}`, "not one of"},
		{"GET", "/v1/events", 200, `{"events": [{"seq": 1.5, "time": "x", "kind": "k", "message": "m"}], "last": 1}`, "integer"},
		{"GET", "/v1/upgrade", 404, `{"code": "no_upgrade"}`, `required field "message"`},
		{"GET", "/v1/upgrade", 200, `{"upgrade": {"action_seq": 3}, "driven_by": "server"}`, `field "action_seq" is not documented`},
	}
	for _, c := range cases {
		errs := sp.check(c.method, c.path, c.status, "application/json", []byte(c.body))
		if !strings.Contains(strings.Join(errs, "\n"), c.wantErr) {
			t.Errorf("%s %s %d %s: errors %q, want one with %q", c.method, c.path, c.status, c.body, errs, c.wantErr)
		}
	}
	if errs := sp.check("GET", "/v1/healthz", 200, "application/json", []byte(`{"status": "ok", "cluster": "c", "time": "2026-01-01T00:00:00Z"}`)); len(errs) > 0 {
		t.Errorf("a good healthz: %q", errs)
	}
}

// TestSpecDocumentsTheAPITypes: api/openapi.yaml's schemas of the
// upgrade resource are the API's types (package api), field for field
// both ways: every field is a property of its type, every property a
// field, a field always present (no omitempty) is required and a
// required one always present, and every object is closed
// (additionalProperties: false), so that the response checker refuses
// a field the spec does not name.
func TestSpecDocumentsTheAPITypes(t *testing.T) {
	sp := loadSpec(t)
	for name, ty := range map[string]reflect.Type{
		"UpgradeStatus": reflect.TypeFor[api.UpgradeStatus](), "ActionResult": reflect.TypeFor[api.ActionResult](),
		"StartRequest": reflect.TypeFor[api.StartRequest](), "ActionRequest": reflect.TypeFor[api.ActionRequest](),
		"OverrideRequest": reflect.TypeFor[api.OverrideRequest](),
	} {
		schema := map[string]any{"$ref": "#/components/schemas/" + name}
		sp.matchType(t, ty, schema, name, map[string]bool{})
	}
}

// matchType holds Go type ty to schema node, at names where.
func (sp *spec) matchType(t *testing.T, ty reflect.Type, node any, at string, seen map[string]bool) {
	t.Helper()
	s := sp.resolve(node)
	if s == nil {
		t.Errorf("%s: no schema for %s", at, ty)
		return
	}
	if ref, _ := node.(map[string]any)["$ref"].(string); ref != "" {
		key := ref + " " + ty.String()
		if seen[key] {
			return
		}
		seen[key] = true
	}
	want := func(typ string) {
		if s["type"] != typ {
			t.Errorf("%s: %s is documented as %v, not %s", at, ty, s["type"], typ)
		}
	}
	if ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	switch {
	case ty == reflect.TypeFor[time.Time]():
		want("string")
		if s["format"] != "date-time" {
			t.Errorf("%s: a time without format: date-time", at)
		}
	case ty.Kind() == reflect.String:
		want("string")
	case ty.Kind() == reflect.Bool:
		want("boolean")
	case ty.Kind() >= reflect.Int && ty.Kind() <= reflect.Uint64:
		want("integer")
	case ty.Kind() == reflect.Float64:
		want("number")
	case ty.Kind() == reflect.Slice:
		want("array")
		sp.matchType(t, ty.Elem(), s["items"], at+"[]", seen)
	case ty.Kind() == reflect.Map:
		want("object")
		sp.matchType(t, ty.Elem(), s["additionalProperties"], at+"{}", seen)
	case ty.Kind() == reflect.Struct:
		want("object")
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			t.Errorf("%s: not closed (additionalProperties: false): the checker would let an undocumented field pass", at)
		}
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		reqs, _ := s["required"].([]any)
		for _, r := range reqs {
			required[r.(string)] = true
		}
		fields := map[string]bool{}
		for i := range ty.NumField() {
			f := ty.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if !f.IsExported() || name == "-" || name == "" {
				t.Errorf("%s.%s: no json name", at, f.Name)
				continue
			}
			fields[name] = true
			optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			p, ok := props[name]
			switch {
			case !ok:
				t.Errorf("%s: field %q (%s) is not documented", at, name, f.Name)
				continue
			case !optional && !required[name]:
				t.Errorf("%s: field %q is always sent but not required", at, name)
			case optional && required[name]:
				t.Errorf("%s: field %q is required but may be left out", at, name)
			}
			sp.matchType(t, f.Type, p, at+"."+name, seen)
		}
		for name := range props {
			if !fields[name] {
				t.Errorf("%s: the spec documents %q, which %s has not", at, name, ty)
			}
		}
	default:
		t.Errorf("%s: %s: a kind the check does not know", at, ty)
	}
}
