package cli

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
)

// TestHealthWarns: a check that passes with a warning (a component that
// serves from one member) prints WARN and does not fail the query; a
// failed check prints FAIL and exits 1.
func TestHealthWarns(t *testing.T) {
	var out bytes.Buffer
	g := &globals{stdout: &out, stderr: &out}
	checks := []engine.Check{{Name: "hosts answer", OK: true, Detail: "3 member(s) observed"},
		{Name: "component conductor keeps serving", OK: true, Warning: true, Detail: "conductor has one member (conductor-1)"}}
	if err := g.printHealth(true, "2.0.0", checks); err != nil {
		t.Errorf("a warning failed the health query: %v", err)
	}
	if !regexp.MustCompile(`component conductor keeps serving +WARN +conductor has one member`).MatchString(out.String()) {
		t.Errorf("no WARN line:\n%s", out.String())
	}
	out.Reset()
	checks[0].OK = false
	if err := g.printHealth(false, "2.0.0", checks); err == nil || !regexp.MustCompile(`hosts answer +FAIL`).MatchString(out.String()) {
		t.Errorf("a failed check: %v\n%s", err, out.String())
	}
}
