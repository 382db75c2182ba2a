package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// nodesDriver reads no output of its members (a Kubernetes node).
type nodesDriver struct{ fakeDriver }

func (d *nodesDriver) Logs(_ context.Context, m driver.Member, _ bool, _ int) (string, error) {
	return "", fmt.Errorf("member %s is a node: %w", m.Name, errors.ErrUnsupported)
}

// TestKeptOutputOfReplacedInstances: the output the driver kept of the
// instances it replaced (kept-output events) is written per member in
// the order replaced, a previous run's beside its instance's, secrets
// scrubbed; one that could not be kept is named with what the driver
// said; a failed member's summary shows its replaced instances' last
// lines; members whose output the driver does not read are named once.
func TestKeptOutputOfReplacedInstances(t *testing.T) {
	st, u := testStore(t)
	now := time.Now()
	inst := func(uid string) string {
		return "pod db/a-1 (uid " + uid + "), container a, version 2.0.0, on node n-1"
	}
	var evs []store.Event
	for _, o := range []driver.KeptOutput{
		{Instance: inst("u1"), Why: "replaced with version 2.0.0", Output: "a-1 1.0.0: ok\n", Lines: 1},
		{Instance: inst("u1") + ", restarted 1 time(s)", Previous: true, Why: "replaced with version 2.0.0", Output: "a-1 1.0.0: panic\n", Lines: 1},
		{Instance: inst("u2"), Why: "replaced with version 1.0.0", Output: "a-1 2.0.0: token driver-token-0123456789 refused\nnot ready\n", Lines: 2},
		{Instance: inst("u3"), Why: "stopped", Err: errors.New("context deadline exceeded (the driver waits 5s for a replaced pod's output)")},
	} {
		ev := engine.KeptOutputEvent("a-1", o)
		ev.Time, ev.Upgrade = now, u.ID
		evs = append(evs, ev)
	}
	// a-1 failed once: its step's event.
	evs = append(evs, store.Event{Time: now, Upgrade: u.ID, Kind: "step", Member: "a-1", Message: "a-1: soaking → failed (not ready)"})
	f, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(f, evs...); err != nil {
		t.Fatal(err)
	}
	live := fakeLive{members: []driver.Member{{Name: "a-1", Host: "h"}, {Name: "n-1", Host: "n-1"}, {Name: "n-2", Host: "n-2"}}}
	var buf bytes.Buffer
	man, err := Write(context.Background(), &buf, Config{Store: st, Description: []byte("cluster: x\n"), Cluster: &config.Cluster{Substrate: "pods"}, Live: live, Driver: &nodesDriver{}})
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, buf.Bytes())
	for name, want := range map[string]string{
		"members/a-1/replaced-1.log":          "a-1 1.0.0: ok\n",
		"members/a-1/replaced-1.previous.log": "a-1 1.0.0: panic\n",
		"members/a-1/replaced-2.log":          "a-1 2.0.0: token [REDACTED] refused\nnot ready\n",
	} {
		if got, ok := fs[name]; !ok || got != want {
			t.Errorf("%s = %q (%t), want %q", name, got, ok, want)
		}
	}
	if _, ok := fs["members/a-1/replaced-3.log"]; ok {
		t.Error("an output that could not be kept was written")
	}
	var lost, nodes int
	for _, m := range man.NotCollected {
		switch {
		case strings.Contains(m.What, "replaced-3.log") && strings.Contains(m.Why, "could not be kept before it was stopped: context deadline exceeded"):
			lost++
		case m.What == "the output of 3 member(s) (a-1, n-1, n-2)" && strings.Contains(m.Why, "is a node"):
			nodes++
		default:
			t.Errorf("not collected: %+v", m)
		}
	}
	if lost != 1 || nodes != 1 {
		t.Errorf("not collected %+v: want the lost output named once and the members without output once", man.NotCollected)
	}
	for _, f := range man.Files {
		if f.Name == "members/a-1/replaced-2.log" && !strings.Contains(f.What, "uid u2") {
			t.Errorf("the manifest says of %s: %q", f.Name, f.What)
		}
	}
	sum := fs["summary.txt"]
	for _, want := range []string{
		"output of " + inst("u2") + ", kept before it was replaced with version 1.0.0: its last 2 line(s); last 2 line(s) (members/a-1/replaced-2.log):",
		"      | not ready\n",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, sum)
		}
	}
}
