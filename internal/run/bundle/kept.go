package bundle

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// kept is the output of an instance the driver replaced during the
// upgrade (a pod it deleted, or let its controller replace), which it
// kept in the events before the instance went: written as
// members/NAME/replaced-N.log (N counts the member's replaced instances
// in order; .previous.log for the output of the run before that
// instance's last, when the kubelet had restarted its container).
type kept struct {
	member, file, header, output string
}

// collectKept writes the output the driver kept of the instances it
// replaced, from the events, and names what it could not keep; it
// returns them by member, for the summary.
func collectKept(w *writer, evs []store.Event) (map[string][]kept, error) {
	out := map[string][]kept{}
	n := map[string]int{}
	for _, ev := range evs {
		if ev.Kind != engine.EventKeptOutput || ev.Member == "" {
			continue
		}
		// The previous run's output comes right after its instance's own.
		previous := engine.KeptOutputPrevious(ev) && n[ev.Member] > 0
		if !previous {
			n[ev.Member]++
		}
		name := "members/" + unsafeName.ReplaceAllString(ev.Member, "_") + "/replaced-" + strconv.Itoa(n[ev.Member])
		if previous {
			name += ".previous"
		}
		name += ".log"
		if engine.KeptOutputLost(ev) {
			w.missing(fmt.Sprintf("%s's output of its instance replaced at %s (%s)", ev.Member, ev.Time.UTC().Format("15:04:05.000"), name),
				errors.New(w.scrub.text(ev.Message)))
			continue
		}
		k := kept{member: ev.Member, file: name, header: w.scrub.text(ev.Message), output: w.scrub.text(ev.Output)}
		if err := w.add(name, k.header, []byte(k.output)); err != nil {
			return nil, err
		}
		out[ev.Member] = append(out[ev.Member], k)
	}
	return out, nil
}
