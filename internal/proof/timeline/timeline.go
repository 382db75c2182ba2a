// Package timeline turns an upgrade's events into the windows of time
// its states and batches took, so that what clients saw can be judged
// phase by phase and batch by batch (the impact report's bands).
// It is pure: events in, windows out.
package timeline

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Kind says what a window covers.
type Kind string

const (
	KindState Kind = "state" // a state of the upgrade: upgrading-kv, migrating, rolling-back…
	KindBatch Kind = "batch" // one batch of one phase, first drain to last member done
)

// Window is a named span of time.
type Window struct {
	Name string    `json:"name"`
	Kind Kind      `json:"kind"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Windows returns the state windows (in time order) and the batch
// windows of upgrade u from its events; end closes a window still open.
func Windows(u upgrade.Upgrade, evs []store.Event, end time.Time) []Window {
	var out []Window
	// States: each "state A → B" event ends A's window and opens B's.
	var open *Window
	for _, ev := range evs {
		if ev.Kind != "state" || !strings.HasPrefix(ev.Message, "state ") {
			continue // "upgrade … created" is not a transition
		}
		_, to, ok := transition(ev.Message)
		if !ok {
			continue
		}
		if open != nil {
			open.To = ev.Time
			out = append(out, *open)
			open = nil
		}
		// A state the flow names (activating) is none of the machine's
		// words: a window all the same.
		st, err := upgrade.ParseState(to)
		if err != nil || !st.Terminal() && st != upgrade.StateStarted && st != upgrade.StatePreflight {
			open = &Window{Name: to, Kind: KindState, From: ev.Time}
		}
	}
	if open != nil {
		open.To = end
		out = append(out, *open)
	}
	// Batches: as the record keeps them, from their admission to their
	// last member done.
	for _, b := range u.Batches {
		w := Window{Name: fmt.Sprintf("%s (%s)", b.Name(), strings.Join(b.Members, ", ")), Kind: KindBatch, From: b.Began, To: b.Ended}
		if w.To.IsZero() || w.To.Before(w.From) {
			w.To = end
		}
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind == KindState
		}
		return out[i].From.Before(out[j].From)
	})
	return out
}

// transition parses "A → B".
func transition(msg string) (from, to string, ok bool) {
	msg = strings.TrimPrefix(msg, "state ")
	from, to, ok = strings.Cut(msg, " → ")
	if !ok {
		return "", "", false
	}
	if i := strings.IndexAny(to, " :("); i >= 0 {
		to = to[:i]
	}
	return strings.TrimSpace(from), strings.TrimSpace(to), true
}
