package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// base is a small valid description; the validation tables edit it.
// Its line numbers are what the expected problems point at.
const base = `cluster: t
hosts:
  - {name: h1, agent: 127.0.0.1:7101}
components:
  - name: kv
    order: 1
    strategy: {type: one-at-a-time, quorum: 2}
    members:
      - {name: kv-1, host: h1, address: 127.0.0.1:8101, vars: {raft: 127.0.0.1:9101}}
      - {name: kv-2, host: h1, address: 127.0.0.1:8102, vars: {raft: 127.0.0.1:9102}}
      - {name: kv-3, host: h1, address: 127.0.0.1:8103, vars: {raft: 127.0.0.1:9103}}
    run:
      args: [kv, "--raft={{.Vars.raft}}"]
    health:
      member: {http: "http://{{.Address}}/ready"}
      cluster: {tcp: "{{.Any}}"}
    hooks:
      pre_stop: [{exec: [step-down, "{{.Name}}"]}]
  - name: api
    order: 2
    strategy: {type: canary, max_batch: 2, max_unavailable: 2}
    members:
      - {name: api-1, host: h1, address: 127.0.0.1:8201}
      - {name: api-2, host: h1, address: 127.0.0.1:8202}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: ` + hexA + `}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    downgrade_to: [2.0.x]
    artifacts: {"*": {path: bin/a-2, sha256: ` + hexB + `}}
policy: {on_failure: rollback}
`

const (
	hexA = "3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e"
	hexB = "9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d"
)

// edit is one textual change to base: old must occur exactly once.
type edit struct{ old, new string }

func edited(t *testing.T, edits ...edit) string {
	t.Helper()
	s := base
	for _, e := range edits {
		if n := strings.Count(s, e.old); n != 1 {
			t.Fatalf("edit %q: found %d times in base, want once", e.old, n)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return s
}

// problems parses src as t.yaml and returns the problems' lines; it
// fails the test when the error is not an *Errors.
func problems(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse([]byte(src), "t.yaml")
	if err == nil {
		return nil
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse: %T %v, want *Errors", err, err)
	}
	return strings.Split(err.Error(), "\n")
}

// table runs cases of edits to base against the exact problems.
type tcase struct {
	name  string
	edits []edit
	want  []string
}

func runTable(t *testing.T, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, edited(t, tc.edits...))
			if dumpWants {
				b, _ := json.Marshal(got)
				fmt.Printf("WANT\t%s\t%s\n", tc.name, b)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

var dumpWants = os.Getenv("DUMP_WANTS") != ""

var update = flag.Bool("update", false, "rewrite testdata golden files")

// The substrates' names as their own packages say them, for the tests
// that check a description's substrate: set by the external test file
// that links the substrates (substrates_test.go) before any test runs;
// config itself names none.
var SubstrateProcess, SubstrateKubernetes string
