package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// TestApplicationSupports: the health query's check that an
// application supports the target release (StarlingX's
// kube-upgrade-start refuses a version an installed application does
// not support): by its list of releases, by its own check asked with
// the release (a real command here), or both; a refusal names the
// application and why.
func TestApplicationSupports(t *testing.T) {
	c, err := config.Parse([]byte(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: api
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: api-1, host: h1, address: 127.0.0.1:8201}]
applications:
  - {name: cert-manager, supports: [1.37.x, 1.38.x]}
  - {name: platform-integ, check: {exec: [test, "{{.Version}}", "!=", "1.38.1"]}}
  - {name: both, supports: [1.38.x], check: {exec: [test, "{{.Version}}", "!=", "1.38.1"]}}
releases:
  - version: 1.37.2
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
	for _, tc := range []struct {
		app, version string
		ok           bool
		detail       string
	}{
		{"cert-manager", "1.38.0", true, "supports 1.37.x, 1.38.x"},
		{"cert-manager", "1.39.0", false, "cert-manager supports 1.37.x, 1.38.x, not 1.39.0: upgrade the application to a release that supports 1.39.0 first"},
		{"platform-integ", "1.38.0", true, "exec test 1.38.0 != 1.38.1: exit status 0"},
		{"platform-integ", "1.38.1", false, "platform-integ says no: exec test 1.38.1 != 1.38.1: exit status 1"},
		{"both", "1.38.0", true, "supports 1.38.x; exec test 1.38.0 != 1.38.1: exit status 0"},
		{"both", "1.38.1", false, "both says no"},
		{"both", "1.39.0", false, "both supports 1.38.x, not 1.39.0"},
	} {
		var app *config.Application
		for i := range c.Applications {
			if c.Applications[i].Name == tc.app {
				app = &c.Applications[i]
			}
		}
		name, ok, detail := e.applicationSupports(context.Background(), app, tc.version)
		if name != "application "+tc.app+" supports "+tc.version || ok != tc.ok || !strings.HasPrefix(detail, tc.detail) {
			t.Errorf("%s %s: %q %v %q; want ok %v, detail beginning %q", tc.app, tc.version, name, ok, detail, tc.ok, tc.detail)
		}
	}
}
