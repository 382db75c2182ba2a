package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
)

// NaiveRestart is what the same clients saw when, after ferry's
// upgrade and on the same cluster under the same traffic, every member
// was restarted the way a shell loop does it: killed and started again
// on the same release one after another, with no drain, no leadership
// hand-over and no wait for health, judged by the same verdict as
// ferry's upgrade against a baseline of its own taken just before.
type NaiveRestart struct {
	Members   []string      `json:"members"` // in the order restarted
	Baseline  traffic.Stats `json:"baseline"`
	Requests  traffic.Stats `json:"requests"` // first kill to healthy again
	DurationS float64       `json:"duration_s"`
	// Windows are what clients saw in each part of the restart
	// (seconds from the first kill); Verdict judges them.
	Windows []WindowStats  `json:"windows"`
	Verdict impact.Verdict `json:"verdict"`
}

// naiveRun is a naive restart's times, to judge once the traffic ends.
type naiveRun struct {
	members          []string
	baseFrom, baseTo time.Time // its baseline; baseTo is the first kill
	windows          []timeline.Window
	end              time.Time // every member healthy again
}

// killTimeout is the naive loop's stop: SIGTERM, then SIGKILL 1 ms
// later, before the member could finish a request in flight.
const killTimeout = time.Millisecond

// restartNaively takes a fresh baseline of the given length, then kills
// and starts every member ferry manages on version, in the
// description's order, without waiting for anything between, and waits
// until the cluster is healthy again.
func restartNaively(ctx context.Context, cl *Cluster, eng *engine.Engine, version string, baseline time.Duration, say func(string, ...any)) (naiveRun, error) {
	r := naiveRun{baseFrom: time.Now()}
	say("naive restart: a baseline of %s at %s first", baseline, version)
	if !sleepCtx(ctx, baseline) {
		return r, ctx.Err()
	}
	r.baseTo = time.Now()
	var marks []time.Time // where each component's turn began
	var names []string
	last := ""
	for _, m := range eng.Members() {
		art, err := eng.Artifact(m.Component, version)
		if err != nil {
			return r, err
		}
		if m.Component != last {
			marks, names, last = append(marks, time.Now()), append(names, m.Component), m.Component
		}
		m.StopTimeout = killTimeout
		say("naive restart: kill %s, start it on %s (no drain, no wait)", m.Name, version)
		if err := cl.Driver.Stop(ctx, m); err != nil {
			return r, fmt.Errorf("demo: naive restart: kill %s: %w", m.Name, err)
		}
		if err := cl.Driver.Start(ctx, m, art); err != nil {
			return r, fmt.Errorf("demo: naive restart: start %s: %w", m.Name, err)
		}
		r.members = append(r.members, m.Name)
	}
	started := time.Now()
	if err := waitHealthy(ctx, eng, cl.LBAdmin, cl.Dir, 90*time.Second); err != nil {
		return r, err
	}
	r.end = time.Now()
	say("naive restart: every member healthy again %s after the first kill", r.end.Sub(r.baseTo).Round(time.Millisecond))
	marks = append(marks, started)
	for i, c := range names {
		r.windows = append(r.windows, timeline.Window{Name: "killing and starting " + c, Kind: timeline.KindState, From: marks[i], To: marks[i+1]})
	}
	r.windows = append(r.windows,
		timeline.Window{Name: "until healthy", Kind: timeline.KindState, From: started, To: r.end},
		timeline.Window{Name: "naive restart (" + strings.Join(r.members, ", ") + ")", Kind: timeline.KindBatch, From: r.baseTo, To: r.end})
	return r, nil
}

// report judges the naive restart in samples, with the control and
// the policy that judged ferry's upgrade.
func (r naiveRun) report(samples, control []traffic.Sample, p impact.Policy) *NaiveRestart {
	n := &NaiveRestart{Members: r.members, Baseline: traffic.Summarize(samples, r.baseFrom, r.baseTo),
		Requests: traffic.Summarize(samples, r.baseTo, r.end), DurationS: r.end.Sub(r.baseTo).Seconds(),
		Verdict: impact.JudgeWithControl(samples, control, r.baseFrom, r.baseTo, r.windows, p)}
	n.Windows = proof.WindowsOf(samples, r.windows, r.baseTo)
	return n
}
