package engine

import (
	"slices"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// TestSpecWithPin: a member's run is rendered again at each start with
// the pin the action carries (the record's when it was decided), in its
// arguments, environment and files; with no pin, the spec rendered at
// New serves.
func TestSpecWithPin(t *testing.T) {
	c, err := config.Parse([]byte(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: api
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: api-1, host: h1, address: 127.0.0.1:8201}]
    run:
      args: [api, --pin, "{{.Pin}}"]
      env: {PIN: "{{.Pin}}"}
      files: [{path: api.conf, content: "pin_release_version = {{.Pin}}\n"}]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Cluster: c, Driver: process.New(nil), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pin, arg string }{{"", ""}, {"1.0.0", "1.0.0"}, {"2.0.0", "2.0.0"}} {
		spec, err := e.specWithPin("api-1", tc.pin)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"api", "--pin", tc.arg}
		if !slices.Equal(spec.Args, want) || spec.Env["PIN"] != tc.arg || len(spec.Files) != 1 ||
			string(spec.Files[0].Content) != "pin_release_version = "+tc.arg+"\n" {
			t.Errorf("pin %q: args %q env %q files %+v; want args %q and the pin in env and file", tc.pin, spec.Args, spec.Env, spec.Files, want)
		}
	}
	if _, err := e.specWithPin("nope", "2.0.0"); err == nil {
		t.Error("an unknown member: no error")
	}
}
