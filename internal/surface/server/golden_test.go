package server

import (
	"bytes"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

var update = flag.Bool("update", false, "rewrite testdata/api's golden answers from what the server answers")

// TestGoldenUpgradeAnswers: the server's answers about an upgrade are
// the API's types, kept as golden files (testdata/api): GET and DELETE
// /v1/upgrade of a completed upgrade recorded before records had a
// schema (core/upgrade's testdata/records/v1). The record's own fields
// (its schema, action numbers, when an engine last stepped it) are not
// in them; what the record says changes them only through
// api.FromRecord.
func TestGoldenUpgradeAnswers(t *testing.T) {
	o := offlineCluster(t)
	s := newTestServer(t, o)
	b, err := os.ReadFile("../../core/upgrade/testdata/records/v1/cluster-completed.json")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := upgrade.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := boltOf(s).Create(rec); err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	for _, a := range []struct{ method, file string }{{"GET", "get-upgrade-completed.json"}, {"DELETE", "delete-upgrade-completed.json"}} {
		body := c.do(a.method, "/v1/upgrade", nil).expect(t, a.method, http.StatusOK).body
		for _, own := range []string{`"schema"`, `"action_seq"`, `"alive"`, `"intent_seen"`, `"boundary"`, `"upgrade_hooks"`} {
			if bytes.Contains(body, []byte(own)) {
				t.Errorf("%s /v1/upgrade shows the record's %s", a.method, own)
			}
		}
		path := filepath.Join("testdata", "api", a.file)
		if *update {
			if err := os.WriteFile(path, body, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
		}
		if !bytes.Equal(body, want) {
			t.Errorf("%s /v1/upgrade changed:\n%s\nwant (%s):\n%s", a.method, body, path, want)
		}
	}
}

// TestOldClientsRequests: the request bodies a CLI of the release
// before the API's own types and named tokens sent (testdata/api/
// requests: an override with its own "by", a pause, a start, none with
// api_version) are taken as they were; a request naming another API
// version is refused naming this one, one naming this one taken.
func TestOldClientsRequests(t *testing.T) {
	o := offlineCluster(t)
	s := newTestServer(t, o)
	stuckUpgrade(t, boltOf(s), o.cfg.Digest)
	c := serve(t, s)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "api", "requests", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var st UpgradeStatus
	c.do("POST", "/v1/upgrade/overrides", read("override-before-named-tokens.json")).expect(t, "an old CLI's override", 201).json(t, &st)
	if n := len(st.Upgrade.Overrides); n != 1 || st.Upgrade.Overrides[0].By != TokenName || st.Upgrade.Overrides[0].Reason != "a disk replaced" {
		t.Errorf("an old CLI's override: %+v, want by %s (its token), not ann@laptop", st.Upgrade.Overrides, TokenName)
	}
	c.do("PATCH", "/v1/upgrade", read("action-before-api-version.json")).expect(t, "an old CLI's pause", 202)
	// The cluster is offline and an upgrade runs: the start is refused
	// for that, after its body was taken (not 400).
	c.do("POST", "/v1/upgrade", read("start-before-api-version.json")).expect(t, "an old CLI's start", 409, CodeUpgradeInProgress)

	r := c.do("PATCH", "/v1/upgrade", `{"api_version": "ferry.dev/v2", "action": "resume"}`).expect(t, "another API version", 400, CodeBadRequest)
	if !strings.Contains(string(r.body), "ferry.dev/v1") {
		t.Errorf("a request of another API version: %s, want this server's named", r.body)
	}
	c.do("PATCH", "/v1/upgrade", `{"api_version": "ferry.dev/v1", "action": "resume"}`).expect(t, "this API version", 202)
}
