package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// fuzzCatalog is the description an imported release joins in
// FuzzRequestBodies (parsed, no file read).
const fuzzCatalog = `cluster: fuzz
hosts: [{name: h1, agent: "127.0.0.1:7101"}]
components:
  - name: app
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members: [{name: app-1, host: h1, address: "127.0.0.1:8101"}]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: /opt/app-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`

// FuzzRequestBodies feeds the JSON bodies the API decodes (POST
// /v1/upgrade's StartRequest, PATCH /v1/upgrade's ActionRequest, POST
// /v1/releases' ImportRequest) to decodeJSON, as the handlers do: every
// refusal is a 400, 413 or 415 with a code and a message, what is
// accepted survives a round trip, and an imported release is checked
// against the catalog as postRelease checks it (Validate, then the
// problems named by the request's fields) without a panic. The HTTP
// stack and the store are left out: decode and the validation are
// what user input reaches.
func FuzzRequestBodies(f *testing.F) {
	for _, s := range []struct {
		kind uint8
		body string
	}{
		{0, `{"to":"2.0.0"}`}, {0, `{"to":"2.0.0","traffic":true}`}, {0, `{"to":1}`}, {0, `{"to":"x","extra":1}`},
		{1, `{"action":"pause"}`}, {1, `{"action":"abort"} {}`}, {1, `[]`}, {1, ``},
		{2, `{"version":"2.0.0","upgrade_from":["1.0.x"],"artifacts":{"*":{"path":"/opt/app-2","sha256":"9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d"}}}`},
		{2, `{"version":"2.0.0","downgrade_to":["1.0.0"],"artifacts":{"app":{"image":"r/a:2","sha256":"` + strings.Repeat("A", 64) + `"}}}`},
		{2, `{"version":"2.0.0","upgrade_from":["2.0.0"],"artifacts":{"db":{"path":"rel/x","sha256":"00"}}}`},
		{2, `{"version":"1.0.0","artifacts":{}}`}, {2, `{"version":"` + strings.Repeat("9", 30) + `.0.0","artifacts":{"*":{}}}`},
		{2, "{\"version\":\"\xff\"}"},
		// Keys given twice: refused, at any depth, struct fields
		// regardless of case (the decoder would keep the last one).
		{0, `{"to":"2.0.0","to":"1.0.0"}`}, {0, `{"to":"2.0.0","TO":"1.0.0"}`}, {1, `{"action":"pause","Action":"abort"}`},
		{2, `{"version":"2.1.0","artifacts":{"*":{"path":"/a","path":"/b","sha256":"` + strings.Repeat("a", 64) + `"}}}`},
		{2, `{"version":"2.1.0","artifacts":{"app":{"image":"r/a:2"},"app":{"image":"r/b:2"}}}`},
	} {
		f.Add(s.kind, []byte(s.body))
	}
	catalog, err := config.Parse([]byte(fuzzCatalog), "fuzz.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var v any
		switch kind % 3 {
		case 0:
			v = &StartRequest{}
		case 1:
			v = &ActionRequest{}
		default:
			v = &ImportRequest{}
		}
		if err := decodeJSON(body, v); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Code == "" || ae.Message == "" ||
				(ae.Status != http.StatusBadRequest && ae.Status != http.StatusRequestEntityTooLarge && ae.Status != http.StatusUnsupportedMediaType) {
				t.Fatalf("decode(%q) = %#v", body, err)
			}
			return
		}
		// What decode accepts, a client can send again.
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		again := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := decodeJSON(b, again); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		ir, ok := v.(*ImportRequest)
		if !ok || !config.IsVersion(ir.Version) {
			return
		}
		// postRelease's check: the catalog with the release must still
		// be a valid description, and its problems are named by the
		// request's fields.
		rel := ir.release()
		rel.Migrations.Deadline = config.Duration(config.DefaultMigrateDeadline)
		rel.Migrations.Interval = config.Duration(config.DefaultMigrateInterval)
		next := *catalog
		next.Releases = append(append([]config.Release(nil), catalog.Releases...), rel)
		if err := next.Validate(); err != nil {
			if msg := importProblems(err, len(next.Releases)-1); msg == "" {
				t.Fatalf("no problems named for %s: %v", b, err)
			}
		}
	})
}
