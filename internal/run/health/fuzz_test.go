package health

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzMatchJSON feeds matchJSON a response body, a dotted path (the
// description's json.path) and the JSON of the expected value (its
// json.equals): it must not panic, must say what it found or why not,
// and must agree with itself: a value found at a path equals itself.
func FuzzMatchJSON(f *testing.F) {
	doc := `{"quorum": true, "term": 3, "index": 9007199254740993, "members": [{"name": "kv-1"}], "none": null, "ratio": 0.5}`
	for _, s := range [][3]string{
		{doc, "quorum", "true"}, {doc, "term", "3.0"}, {doc, "index", "9007199254740993"}, {doc, "members.0.name", `"kv-1"`},
		{doc, "members.-1", "1"}, {doc, "none", "null"}, {doc, "", "{}"}, {doc, "ratio", "5e-1"},
		{"", "a", "1"}, {"[1,2,3]", "2", "3"}, {`{"a":1} {"b":2}`, "a", "1"}, {`{"a":1e999999}`, "a", "1"},
		{`{"a":"` + strings.Repeat("x", 200) + `"}`, "a.b", `"x"`}, {"\xff", "a", "true"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, body, path, want string) {
		var w any
		if json.Unmarshal([]byte(want), &w) != nil {
			w = want
		}
		detail, ok := matchJSON([]byte(body), path, w)
		if detail == "" {
			t.Fatalf("matchJSON(%q, %q, %v) = %v with no detail", body, path, w, ok)
		}
		if len(detail) > 4096 {
			t.Fatalf("a detail of %d bytes", len(detail))
		}
		// Whatever is at path equals itself, decoded as matchJSON
		// decodes (numbers exact).
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		var doc any
		if dec.Decode(&doc) != nil {
			return
		}
		if _, err := dec.Token(); err != io.EOF {
			return // more after the value: not one JSON document
		}
		got, err := lookup(doc, path)
		if err != nil {
			return
		}
		if _, ok := matchJSON([]byte(body), path, got); !ok {
			t.Fatalf("the value at %q of %q does not equal itself", path, body)
		}
	})
}
