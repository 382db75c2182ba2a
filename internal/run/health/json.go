package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// matchJSON reports whether the value at path in the JSON document data
// equals want, with a detail that says what was found: "quorum = true",
// or what was wrong: "quorum = false, want true".
func matchJSON(data []byte, path string, want any) (string, bool) {
	doc, detail, ok := decodeDoc(data)
	if !ok {
		return detail, false
	}
	got, err := lookup(doc, path)
	if err != nil {
		return err.Error(), false
	}
	if !equal(got, want) {
		return fmt.Sprintf("%s = %s, want %s", path, show(got), show(want)), false
	}
	return fmt.Sprintf("%s = %s", path, show(got)), true
}

// matchJSONPaths reports whether the values at two paths of the JSON
// document data are equal: "leader = header.member_id = \"8e9e…\"".
func matchJSONPaths(data []byte, path, other string) (string, bool) {
	doc, detail, ok := decodeDoc(data)
	if !ok {
		return detail, false
	}
	got, err := lookup(doc, path)
	if err != nil {
		return err.Error(), false
	}
	want, err := lookup(doc, other)
	if err != nil {
		return err.Error(), false
	}
	if !equal(got, want) {
		return fmt.Sprintf("%s = %s, %s = %s: not equal", path, show(got), other, show(want)), false
	}
	return fmt.Sprintf("%s = %s = %s", path, other, show(got)), true
}

// readJSON returns the value at path of the JSON document data as a
// string: a string as it is, anything else as JSON writes it.
func readJSON(data []byte, path string) (string, string, bool) {
	doc, detail, ok := decodeDoc(data)
	if !ok {
		return "", detail, false
	}
	got, err := lookup(doc, path)
	if err != nil {
		return "", err.Error(), false
	}
	if s, ok := got.(string); ok {
		return s, fmt.Sprintf("%s = %s", path, show(got)), s != ""
	}
	if got == nil {
		return "", path + " = null", false
	}
	b, _ := json.Marshal(got)
	return string(b), fmt.Sprintf("%s = %s", path, show(got)), true
}

// decodeDoc decodes one JSON document; on failure it says why.
func decodeDoc(data []byte) (any, string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers compare by value, exactly when they can
	var doc any
	err := dec.Decode(&doc)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			err = nil
		} else if err == nil {
			err = fmt.Errorf("more after the first value")
		}
	}
	if err != nil {
		what := "the response is not JSON"
		if len(data) >= MaxBody {
			what = fmt.Sprintf("the response (its first %d bytes) is not JSON", MaxBody)
		}
		if len(data) == 0 {
			return nil, what + ": it is empty", false
		}
		return nil, fmt.Sprintf("%s: %v", what, err), false
	}
	return doc, "", true
}

// lookup follows a dotted path through objects (by key) and arrays (by
// index): "items.0.name". The empty path is the whole document.
func lookup(doc any, path string) (any, error) {
	if path == "" {
		return doc, nil
	}
	cur := doc
	parts := strings.Split(path, ".")
	for i, key := range parts {
		where := "the response"
		if i > 0 {
			where = strings.Join(parts[:i], ".")
		}
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[key]
			if !ok {
				return nil, fmt.Errorf("%s: not in the response (%s has no %q)", path, where, key)
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(key)
			if err != nil || n < 0 || n >= len(x) {
				return nil, fmt.Errorf("%s: not in the response (%s is a list of %d, no item %q)", path, where, len(x), key)
			}
			cur = x[n]
		default:
			return nil, fmt.Errorf("%s: not in the response (%s is %s, not an object or a list)", path, where, show(cur))
		}
	}
	return cur, nil
}

// equal compares a decoded JSON value with an expected one as YAML or Go
// gives it: numbers by value (3 equals 3.0 and json.Number("3")),
// strings, bools, null, and lists and objects item by item.
func equal(got, want any) bool {
	if w, ok := toNumber(want); ok {
		g, ok := toNumber(got)
		return ok && w.equal(g)
	}
	switch w := want.(type) {
	case nil:
		return got == nil
	case string:
		g, ok := got.(string)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	}
	wv := reflect.ValueOf(want)
	switch wv.Kind() {
	case reflect.Slice, reflect.Array:
		g, ok := got.([]any)
		if !ok || len(g) != wv.Len() {
			return false
		}
		for i := range g {
			if !equal(g[i], wv.Index(i).Interface()) {
				return false
			}
		}
		return true
	case reflect.Map:
		g, ok := got.(map[string]any)
		if !ok || len(g) != wv.Len() || wv.Type().Key().Kind() != reflect.String {
			return false
		}
		for _, k := range wv.MapKeys() {
			gv, ok := g[k.String()]
			if !ok || !equal(gv, wv.MapIndex(k).Interface()) {
				return false
			}
		}
		return true
	case reflect.String: // a named string type
		g, ok := got.(string)
		return ok && g == wv.String()
	case reflect.Bool:
		g, ok := got.(bool)
		return ok && g == wv.Bool()
	}
	return false
}

// number is a numeric value: exact when it is an integer, a float64
// otherwise.
type number struct {
	i *big.Int // set for integers
	f float64
}

func (a number) equal(b number) bool {
	if a.i != nil && b.i != nil {
		return a.i.Cmp(b.i) == 0
	}
	return a.f == b.f
}

// toNumber reads the numbers encoding/json (json.Number, float64), YAML
// (int, float64) and Go code give.
func toNumber(v any) (number, bool) {
	if n, ok := v.(json.Number); ok {
		s := string(n)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return number{}, false
		}
		// Integers written as such compare exactly (raft indexes above
		// 2^53); anything else, 3.0 or 1e3 included, as a float64. The
		// length bound keeps a hostile number from costing much.
		if len(s) <= 40 && !strings.ContainsAny(s, ".eE") {
			if i, ok := new(big.Int).SetString(s, 10); ok {
				return number{i: i, f: f}, true
			}
		}
		return number{f: f}, true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return number{i: big.NewInt(rv.Int()), f: float64(rv.Int())}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return number{i: new(big.Int).SetUint64(rv.Uint()), f: float64(rv.Uint())}, true
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return number{f: f}, true // equal to nothing (NaN) or to itself only
		}
		if f == math.Trunc(f) {
			i, _ := big.NewFloat(f).Int(nil) // exact: f is integral
			return number{i: i, f: f}, true
		}
		return number{f: f}, true
	}
	return number{}, false
}

// show writes a value as JSON would, shortened.
func show(v any) string {
	b, err := json.Marshal(v)
	s := string(b)
	if err != nil {
		s = fmt.Sprint(v)
	}
	if len(s) > 80 {
		s = strings.ToValidUTF8(s[:80], "") + "…"
	}
	return s
}
