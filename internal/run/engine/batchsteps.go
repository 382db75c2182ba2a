package engine

import (
	"fmt"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// batchStepChanges describes, as batch events, the extra steps of a
// batch (a switchover) that began or were complete between records a
// and b: the timeline and 'ferry events' show each once.
func batchStepChanges(a, b upgrade.Upgrade) []store.Event {
	var evs []store.Event
	for i, bb := range b.Batches {
		for j, x := range bb.Before {
			var was upgrade.BatchStep
			if i < len(a.Batches) && j < len(a.Batches[i].Before) {
				was = a.Batches[i].Before[j]
			}
			if x.Tries > 0 && was.Tries == 0 {
				evs = append(evs, store.Event{Kind: "batch", Component: bb.Component,
					Message: fmt.Sprintf("%s: %s from %s to %s", bb.Name(), x.Name, x.From, x.To)})
			}
			if x.Done && !was.Done {
				evs = append(evs, store.Event{Kind: "batch", Component: bb.Component,
					DurationMS: float64(x.Ended.Sub(x.Since).Microseconds()) / 1000,
					Message:    fmt.Sprintf("%s: %s done in %s: %s", bb.Name(), x.Name, x.Ended.Sub(x.Since).Round(time.Millisecond), x.Detail)})
			}
		}
	}
	return evs
}
