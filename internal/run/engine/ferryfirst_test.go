package engine

import (
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
)

// TestFerryUnderstands: a release's requires_ferry at or below this
// ferry's release passes; above it, the check fails naming both.
func TestFerryUnderstands(t *testing.T) {
	have := buildinfo.Release()
	for _, c := range []struct {
		requires string
		ok       bool
	}{
		{have, true},
		{"0.0.1", true},
		{"99.0.0", false},
		{have + "-rc1", true}, // a pre-release of this one is older
	} {
		name, ok, detail := FerryUnderstands("3.0.0", c.requires)
		if name != "ferry understands release 3.0.0" || ok != c.ok {
			t.Errorf("requires %s: %q %v (%s), want ok %v", c.requires, name, ok, detail, c.ok)
		}
		if !ok && (!strings.Contains(detail, c.requires) || !strings.Contains(detail, have) || !strings.Contains(detail, "upgrade ferry first")) {
			t.Errorf("requires %s: %q does not name both versions", c.requires, detail)
		}
	}
}
