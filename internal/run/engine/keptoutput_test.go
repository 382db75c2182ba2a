package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// TestKeptOutputEvent: the event of a replaced instance's output says
// whose it is and why it went in one line, carries the lines apart
// (Output), and is told apart as lost or as a previous instance's by
// the bundle's helpers.
func TestKeptOutputEvent(t *testing.T) {
	inst := "pod db/mon-0 (uid 5f2c), container mon, version 1.0.0, on node n-1"
	for _, tc := range []struct {
		name           string
		o              driver.KeptOutput
		msg            string
		lost, previous bool
	}{
		{"kept", driver.KeptOutput{Instance: inst, Why: "replaced with version 2.0.0", Output: "a\nb\n", Lines: 2},
			"mon-0: output of " + inst + ", kept before it was replaced with version 2.0.0: its last 2 line(s)", false, false},
		{"cut", driver.KeptOutput{Instance: inst, Why: "replaced with version 2.0.0", Output: "b\n", Lines: 1, Cut: true},
			"mon-0: output of " + inst + ", kept before it was replaced with version 2.0.0: its last 1 line(s), its first bytes left out to keep within the driver's bound", false, false},
		{"previous", driver.KeptOutput{Instance: inst + ", restarted 2 time(s)", Previous: true, Why: "stopped", Output: "x\n", Lines: 1},
			"mon-0: previous instance's output of " + inst + ", restarted 2 time(s), kept before it was stopped: its last 1 line(s)", false, true},
		{"none written", driver.KeptOutput{Instance: inst, Why: "stopped"},
			"mon-0: output of " + inst + ", kept before it was stopped: it wrote none", false, false},
		{"lost", driver.KeptOutput{Instance: inst, Why: "stopped", Err: errors.New("context deadline exceeded\n(5s)")},
			"mon-0: output of " + inst + " could not be kept before it was stopped: context deadline exceeded (5s)", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := KeptOutputEvent("mon-0", tc.o)
			if ev.Kind != EventKeptOutput || ev.Member != "mon-0" || ev.Message != tc.msg || ev.Output != tc.o.Output {
				t.Errorf("event %+v\nwant message %q, output %q", ev, tc.msg, tc.o.Output)
			}
			if strings.Contains(ev.Message, "\n") {
				t.Errorf("message of more than one line: %q", ev.Message)
			}
			if KeptOutputLost(ev) != tc.lost || KeptOutputPrevious(ev) != tc.previous {
				t.Errorf("lost %t, previous %t; want %t, %t", KeptOutputLost(ev), KeptOutputPrevious(ev), tc.lost, tc.previous)
			}
		})
	}
}
