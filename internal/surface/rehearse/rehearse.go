// Package rehearse is `ferry rehearse`: an upgrade rehearsed on a
// disposable copy of the cluster, the seeds' gate jobs (grenade for
// Glance and Ironic) as a command a CI pipeline can run. It brings the
// copy up at the release before, drives the description's traffic, and
// runs the checks (each component's member and cluster checks, the
// traffic verdict) before the upgrade, in each mixed-version state a
// stage leaves, after finalize, and after the rollback the seed may
// choose (internal/core/rehearsal chooses; this package runs).
package rehearse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/rehearsal"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Options configure one rehearsal.
type Options struct {
	// File is the cluster description.
	File string
	// To is the release rehearsed; From the one the copy starts on
	// (default: the first of the catalog that may upgrade to To).
	To, From string
	Seed     uint64
	// Dir is the scratch directory (ferry's store, the copy of the
	// description); empty: a new temporary one. It is removed at the
	// end unless Keep.
	Dir  string
	Keep bool
	// Window is how long the traffic is judged at each stage (default
	// DefaultWindow), Quiet how long after the stage's checks pass the
	// window opens (0 opens it at once; the CLI's default is
	// DefaultQuiet); Settle how long a stage's member and cluster
	// checks may take to pass (default DefaultSettle).
	Window, Quiet, Settle time.Duration
	// GateLatency makes the latency verdict of each stage's traffic
	// window (zero impact against the baseline) a gating check; by
	// default it is reported and advisory: a window of a few seconds
	// on a shared CI machine is no ground to fail a pipeline on its
	// p99, where a failed request is (grenade's gates are functional).
	GateLatency bool
	// Out gets the schedule first, then the run as it goes.
	Out    io.Writer
	Logger *slog.Logger
}

// DefaultWindow is the traffic judged at each stage: a few of the
// verdict's 1 s chunks.
const DefaultWindow = 3 * time.Second

// DefaultQuiet is the time between a stage's last move and its traffic
// window: the retries of the move itself (a raft leader elected, a
// load balancer's backend back in rotation) are the move's impact, not
// the state's; the state is what clients see once it stands.
const DefaultQuiet = time.Second

// DefaultSettle is how long a stage's member and cluster checks may
// take to pass: a member just restarted is still joining its load
// balancer or its raft group; one that does not settle fails.
const DefaultSettle = 15 * time.Second

// Report is one rehearsal, as `--report FILE` writes it.
type Report struct {
	Seed     uint64             `json:"seed"`
	Schedule rehearsal.Schedule `json:"schedule"`
	// Plan is the schedule as printed first (Schedule.String).
	Plan        string `json:"plan"`
	Description string `json:"description"` // the file rehearsed
	From        string `json:"from"`
	To          string `json:"to"`
	// Stages are the stages' checks in the order they ran.
	Stages []Stage `json:"stages"`
	// Runs are the upgrades the rehearsal made: the first, aborted
	// where the schedule says, and the one run again.
	Runs []Run `json:"upgrades"`
	// Passed is true when every check of every stage passed and the
	// last upgrade completed; Failed names the first failed check:
	// `stage "after phase api": check "traffic": …`.
	Passed    bool    `json:"passed"`
	Failed    string  `json:"failed,omitempty"`
	DurationS float64 `json:"duration_s"`
}

// Run is one upgrade of the rehearsal.
type Run struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Batches are its batches in the order they were taken: the
	// members' order the schedule chose, as the strategies applied it.
	Batches []Batch `json:"batches"`
}

// Batch is one batch of an upgrade.
type Batch struct {
	Component string   `json:"component"`
	Members   []string `json:"members"`
}

// Stage is one stage's checks.
type Stage struct {
	Stage string `json:"stage"`
	// Pass is 1 for the first upgrade (and its rollback), 2 for the
	// upgrade run again after it.
	Pass int `json:"pass"`
	// AtS is seconds from the rehearsal's start.
	AtS float64 `json:"at_s"`
	// Versions are each component's members per version: the mixed
	// state the checks saw.
	Versions map[string]map[string]int `json:"versions"`
	Checks   []Check                   `json:"checks"`
	Passed   bool                      `json:"passed"`
}

// Check is one named check of a stage.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Advisory is a check reported but not gating: the latency verdict
	// unless Options.GateLatency.
	Advisory bool `json:"advisory,omitempty"`
}

// mark is how a check reads: ok, advice (failed, not gating) or FAILED.
func (c Check) mark() string {
	switch {
	case c.OK:
		return "ok"
	case c.Advisory:
		return "advice"
	}
	return "FAILED"
}

// Rehearse runs one rehearsal and returns its report; the report is
// returned whenever the copy came up, passed or not, and err is for
// the rehearsal failing to run at all.
func Rehearse(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Quiet < 0 {
		o.Quiet = 0
	}
	// Read once: the copy is made of the bytes validated here.
	data, err := safefile.Read(o.File, config.MaxFileSize, safefile.DefaultTimeout)
	if err != nil {
		return nil, fmt.Errorf("rehearse: reading the cluster description: %w", err)
	}
	orig, err := config.Parse(data, o.File)
	if err != nil {
		return nil, err
	}
	rel := orig.Release(o.To)
	if rel == nil {
		return nil, fmt.Errorf("rehearse: release %s is not in %s's catalog", o.To, o.File)
	}
	if o.From == "" {
		if o.From = plan.FirstFrom(orig, o.To); o.From == "" {
			return nil, fmt.Errorf("rehearse: no release of %s's catalog may be upgraded to %s", o.File, o.To)
		}
	} else if !plan.Allowed(orig, o.From, o.To) {
		return nil, fmt.Errorf("rehearse: release %s may not be upgraded to %s in one step (its upgrade_from)", o.From, o.To)
	}
	flow := rehearsal.FromConfig(rel.Flow)
	if len(flow) == 0 {
		var names []string
		for _, c := range orig.ComponentsInOrder() {
			names = append(names, c.Name)
		}
		flow = rehearsal.DefaultFlow(names)
	}
	in := rehearsal.Input{Seed: o.Seed, Flow: flow}
	for _, c := range orig.Components {
		rc := rehearsal.Component{Name: c.Name}
		for _, m := range c.Members {
			rc.Members = append(rc.Members, m.Name)
		}
		in.Components = append(in.Components, rc)
	}
	sched, err := rehearsal.Choose(in)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(o.Out, sched)
	r := &rehearsalRun{o: o, sched: sched, began: began, done: map[string]bool{},
		rep: &Report{Seed: o.Seed, Schedule: sched, Plan: sched.String(), Description: o.File, From: o.From, To: o.To, Passed: true}}
	defer func() { r.rep.DurationS = time.Since(began).Seconds() }()
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "ferry-rehearse-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !o.Keep {
		defer os.RemoveAll(dir)
	}
	copied, err := copyDescription(data, o.To, flow, sched)
	if err != nil {
		return nil, err
	}
	copyFile := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(copyFile, copied, 0o644); err != nil {
		return nil, err
	}
	// Parsed under the original's name: relative paths in it resolve
	// as they do for the original.
	c, err := config.Parse(copied, o.File)
	if err != nil {
		return nil, fmt.Errorf("rehearse: the rehearsal's copy of the description (%s) is invalid: %w", copyFile, err)
	}
	if err := substrate.Require(c, substrate.ClusterUp); err != nil {
		return nil, fmt.Errorf("rehearse brings a copy of the cluster up and down: %w", err)
	}
	d, err := substrate.New(c, substrate.Options{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	st, err := store.Open(filepath.Join(dir, "ferry"))
	if err != nil {
		return nil, err
	}
	r.st = st
	e, err := engine.New(engine.Config{Cluster: c, Driver: d, Store: st, Logger: o.Logger, ExitOnPause: true,
		Calls: checkpoints{inner: health.NewProber(), r: r}, OnEvent: r.live})
	if err != nil {
		return nil, err
	}
	r.e = e
	unlock, err := st.LockEngine()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := r.refuseRunning(ctx, d); err != nil {
		return nil, err
	}
	r.say("bringing the copy up at %s (scratch directory %s)", o.From, dir)
	defer r.down()
	if _, err := e.Up(ctx, o.From, nil); err != nil {
		return nil, fmt.Errorf("rehearse: the copy did not come up at %s: %w", o.From, err)
	}
	if c.Traffic != nil {
		ctl, stopControl, err := startControl(ctx, o.Seed)
		if err != nil {
			return nil, err
		}
		defer stopControl()
		r.sess = proof.Start(ctx, c.Traffic, proof.Options{Control: ctl})
		defer r.sess.Stop(context.Background())
		r.say("traffic: %.0f requests/s to %s; baseline %s", c.Traffic.Rate, strings.Join(c.Traffic.Targets, ", "), c.Traffic.Baseline)
		if err := r.sess.WaitBaseline(ctx); err != nil {
			return nil, err
		}
	} else {
		r.say("the description has no traffic: spec; the stages are checked without traffic")
	}
	if !r.check(ctx, rehearsal.StageBefore) {
		return r.rep, nil
	}
	for {
		u, err := r.begin(ctx, e, o.To)
		if err != nil {
			return r.rep, fmt.Errorf("rehearse: begin the upgrade to %s: %w", o.To, err)
		}
		if sched.AbortAfter(rehearsal.StageBefore, r.rolledBack) {
			r.abort("the schedule aborts before any member moves")
		}
		if u, err = e.Run(ctx); err != nil {
			return r.rep, fmt.Errorf("rehearse: the upgrade to %s: %w", o.To, err)
		}
		run := Run{ID: u.ID, State: u.State.String(), Reason: u.Reason}
		for _, b := range u.Batches {
			run.Batches = append(run.Batches, Batch{Component: b.Component, Members: b.Members})
		}
		r.rep.Runs = append(r.rep.Runs, run)
		r.say("upgrade %s ended %s", u.ID, u.State)
		switch u.State {
		case upgrade.StateCompleted:
			r.check(ctx, rehearsal.StageFinal)
			return r.rep, nil
		case upgrade.StateRolledBack:
			r.check(ctx, rehearsal.StageRollback)
			// A checkpoint's call may still be finishing beside us: the
			// run's state is read and changed under its lock.
			r.mu.Lock()
			again := r.rep.Passed && !r.rolledBack
			r.rolledBack = r.rolledBack || again
			r.mu.Unlock()
			if !again {
				return r.rep, nil
			}
			r.say("rolled back as the schedule chose; upgrading again")
		default:
			r.fail("upgrade", "ended", fmt.Sprintf("the upgrade ended %s: %s", u.State, u.Reason))
			return r.rep, nil
		}
	}
}

// fitWait bounds how long a rehearsal waits for the copy's members and
// cluster gates to pass the preflight again once a stage's checks have
// passed: a member between two elections of its own (the sample's kv
// under a loaded CI machine: "no known leader" for a moment) is not
// what the rehearsal rehearses.
const fitWait = 30 * time.Second

// begin begins the upgrade to `to`, asking again, each second for up to
// fitWait and saying so, while the preflight refuses for health alone
// (healthOnly): nothing was changed by a refused Begin.
func (r *rehearsalRun) begin(ctx context.Context, e *engine.Engine, to string) (upgrade.Upgrade, error) {
	deadline := time.Now().Add(fitWait)
	for {
		u, err := e.Begin(ctx, to)
		failed, transient := healthOnly(err)
		if !transient || time.Now().After(deadline) {
			return u, err
		}
		r.say("preflight refused for health (%s): asked again within %s", failed, fitWait)
		select {
		case <-ctx.Done():
			return u, err
		case <-time.After(time.Second):
		}
	}
}

// healthOnly names the failed checks when err is a preflight refused
// for members' health or components' cluster gates alone
// (Preflight.HealthOnly); any other refusal or error is not.
func healthOnly(err error) (string, bool) {
	var pe *engine.PreflightError
	if !errors.As(err, &pe) {
		return "", false
	}
	names := pe.Preflight.HealthOnly()
	return strings.Join(names, ", "), len(names) > 0
}

// startControl serves and drives the verdict's control: requests to a
// handler of the rehearsal's own on loopback, which no upgrade touches,
// whose latency says how busy the machine is at each stage (a shared CI
// machine's other jobs are not the upgrade's impact).
func startControl(ctx context.Context, seed uint64) (*traffic.Recorder, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("rehearse: the control's listener: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(ln) }()
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rec, done := traffic.Start(cctx, traffic.Control("http://"+ln.Addr().String(), "/control", seed))
	return rec, func() { cancel(); <-done; _ = srv.Close() }, nil
}

// rehearsalRun is one rehearsal's state while it runs.
type rehearsalRun struct {
	o     Options
	sched rehearsal.Schedule
	began time.Time
	e     *engine.Engine
	st    *store.Store
	sess  *proof.Session

	mu         sync.Mutex
	rep        *Report
	rolledBack bool
	done       map[string]bool // checkpoints answered, by pass and name
}

func (r *rehearsalRun) say(format string, args ...any) {
	fmt.Fprintf(r.o.Out, "%7.2fs  %s\n", time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
}

// live prints the upgrade's states and batches as they happen.
func (r *rehearsalRun) live(ev store.Event) {
	if ev.Kind == "state" || ev.Kind == "batch" {
		r.say("%-7s %s", ev.Kind, ev.Message)
	}
}

// refuseRunning refuses a cluster any member of which runs: the
// rehearsal starts its copy from nothing and stops it at the end, so
// it must never be pointed at a cluster in service.
func (r *rehearsalRun) refuseRunning(ctx context.Context, d driver.Driver) error {
	sts, err := d.Observe(ctx, r.e.Members())
	if err != nil {
		return fmt.Errorf("rehearse: observe the hosts: %w", err)
	}
	var running []string
	for _, s := range sts {
		if s.Running {
			running = append(running, fmt.Sprintf("%s (%s)", s.Name, s.Version))
		}
	}
	if len(running) > 0 {
		return fmt.Errorf("rehearse brings up a disposable copy of the cluster and stops it at the end, but %s already run(s): "+
			"rehearse a description of hosts kept for it (staging), or stop those members first (ferry cluster down)", strings.Join(running, ", "))
	}
	return nil
}

// down stops the copy, whatever happened.
func (r *rehearsalRun) down() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := r.e.Down(ctx, nil); err != nil {
		r.say("stopping the copy: %v", err)
		return
	}
	r.say("the copy is stopped")
}

// abort asks the engine for an abort of the current upgrade, where the
// point of no return allows one, and reports whether it was recorded.
func (r *rehearsalRun) abort(why string) bool {
	cur, ok, err := r.st.Current()
	if err != nil || !ok {
		r.say("abort: no current upgrade (%v)", err)
		return false
	}
	_, err = r.st.Request(cur.ID, upgrade.IntentAbort, time.Now(), func(u upgrade.Upgrade) error {
		if why := upgrade.NoAbort(&u); why != "" {
			return errors.New(why)
		}
		return nil
	})
	if err != nil {
		r.say("abort refused: %v", err)
		return false
	}
	r.say("abort requested: %s", why)
	return true
}

// abortTaken is how long a checkpoint's call waits for the engine to
// take the abort it requested.
const abortTaken = time.Minute

// waitAbortTaken holds a checkpoint's call until the engine has taken
// the abort (the record rolls back, or ended): the engine reads
// requests once a tick, and a call that returned at once could let it
// walk the stages that make no call (migrate, finalize) to the end
// first, past the point of no return, within one tick.
func (r *rehearsalRun) waitAbortTaken(ctx context.Context) {
	deadline := time.Now().Add(abortTaken)
	for time.Now().Before(deadline) {
		if u, ok, err := r.st.Current(); err == nil && ok && (u.State.Kind == upgrade.KindRollingBack || u.State.Terminal()) {
			return
		}
		select {
		case <-ctx.Done(): // the engine cancelled the call: it took the abort
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.say("the engine did not take the abort within %s", abortTaken)
}

// checkpoint runs the checks of a checkpoint's stage when the engine
// calls it, then aborts the upgrade if a check failed or the schedule
// aborts there. The call always passes: what the checks found is the
// rehearsal's to report, not the engine's to retry.
func (r *rehearsalRun) checkpoint(ctx context.Context, name string) health.Result {
	var cp *rehearsal.Checkpoint
	for i := range r.sched.Checkpoints {
		if r.sched.Checkpoints[i].Name == name {
			cp = &r.sched.Checkpoints[i]
		}
	}
	if cp == nil {
		return health.Result{OK: false, Detail: "rehearse: no checkpoint " + name}
	}
	r.mu.Lock()
	key := fmt.Sprintf("%v/%s", r.rolledBack, name)
	again := r.done[key]
	r.done[key] = true
	rolledBack := r.rolledBack
	r.mu.Unlock()
	if again {
		return health.Result{OK: true, Detail: "rehearsal checks of " + cp.Stage + ": made already"}
	}
	ok := r.check(ctx, cp.Stage)
	aborted := false
	switch {
	case !ok:
		aborted = r.abort("a check of " + cp.Stage + " failed")
	case r.sched.AbortAfter(cp.Stage, rolledBack):
		aborted = r.abort("the schedule aborts at " + cp.Stage)
	}
	if aborted {
		r.waitAbortTaken(ctx)
	}
	return health.Result{OK: true, Detail: "rehearsal checks of " + cp.Stage + " made"}
}

// check runs a stage's checks, records them and reports whether all
// passed: each component's member checks and cluster gate (given
// Settle to pass), then the traffic of the next Window, judged against
// the baseline.
func (r *rehearsalRun) check(ctx context.Context, stage string) bool {
	res := Stage{Stage: stage, Pass: 1, AtS: time.Since(r.began).Seconds(), Versions: map[string]map[string]int{}}
	r.mu.Lock()
	if r.rolledBack {
		res.Pass = 2
	}
	r.mu.Unlock()
	snap, err := r.settled(ctx)
	if err != nil {
		res.Checks = append(res.Checks, Check{Name: "observe", Detail: err.Error()})
	}
	for _, m := range r.e.Members() {
		if snap.Statuses == nil {
			break
		}
		v := snap.Statuses[m.Name].Version
		if !snap.Statuses[m.Name].Running {
			v = "not running"
		}
		if res.Versions[m.Component] == nil {
			res.Versions[m.Component] = map[string]int{}
		}
		res.Versions[m.Component][v]++
	}
	if snap.Statuses != nil {
		res.Checks = append(res.Checks, healthChecks(r.e, snap)...)
	}
	if r.sess != nil {
		// The quiet time, then the window: both measured, not hoped.
		from := time.Now().Add(r.o.Quiet)
		select {
		case <-ctx.Done():
		case <-time.After(r.o.Quiet + r.o.Window):
		}
		to := time.Now()
		n, failed, firstErr := 0, 0, ""
		for _, s := range r.sess.Recorder().Samples() {
			if !s.Start.Before(from) && s.Start.Before(to) {
				n++
				if !s.OK {
					if failed == 0 {
						firstErr = s.Op + ": " + s.Err
					}
					failed++
				}
			}
		}
		tc := Check{Name: "traffic", OK: failed == 0, Detail: fmt.Sprintf("%d requests in %s, %d failed", n, r.o.Window, failed)}
		if failed > 0 {
			tc.Detail += "; the first: " + firstErr
		}
		lc := Check{Name: "latency", OK: true, Advisory: !r.o.GateLatency, Detail: "not judged: requests failed"}
		if failed == 0 {
			// With no request failed, the verdict's answer is its
			// zero-impact part alone.
			why := r.sess.Judge(from, to)
			lc.OK, lc.Detail = why == "", "not slower than the baseline (or too few requests to say)"
			if why != "" {
				lc.Detail = why
			}
		}
		res.Checks = append(res.Checks, tc, lc)
	}
	res.Passed = true
	for _, c := range res.Checks {
		if !c.OK && !c.Advisory {
			res.Passed = false
			r.fail(stage, c.Name, c.Detail)
		}
	}
	r.mu.Lock()
	r.rep.Stages = append(r.rep.Stages, res)
	r.mu.Unlock()
	r.say("check   %s", stageLine(res))
	return res.Passed
}

// settled observes until every member and cluster check passes, or
// Settle has passed: the last observation.
func (r *rehearsalRun) settled(ctx context.Context) (engine.Snapshot, error) {
	deadline := time.Now().Add(r.o.Settle)
	for {
		snap, err := r.e.Observe(ctx)
		if err == nil && allHealthy(snap) || time.Now().After(deadline) || ctx.Err() != nil {
			return snap, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func allHealthy(snap engine.Snapshot) bool {
	for _, m := range snap.Obs.Members {
		if !m.Healthy {
			return false
		}
	}
	for _, g := range snap.Obs.Gates {
		if !g.Healthy {
			return false
		}
	}
	return true
}

// healthChecks are each component's checks in one observation: its
// members' checks ("kv members") and its cluster gate ("kv cluster").
func healthChecks(e *engine.Engine, snap engine.Snapshot) []Check {
	var comps []string
	byComp := map[string][]string{}
	for _, m := range e.Members() {
		if _, ok := byComp[m.Component]; !ok {
			comps = append(comps, m.Component)
		}
		byComp[m.Component] = append(byComp[m.Component], m.Name)
	}
	var out []Check
	for _, comp := range comps {
		var sick []string
		for _, n := range byComp[comp] {
			if h, ok := snap.Obs.Members[n]; ok && !h.Healthy {
				sick = append(sick, n+": "+h.Detail)
			}
		}
		c := Check{Name: comp + " members", OK: len(sick) == 0, Detail: fmt.Sprintf("%d of %d healthy", len(byComp[comp])-len(sick), len(byComp[comp]))}
		if len(sick) > 0 {
			c.Detail += "; " + strings.Join(sick, "; ")
		}
		out = append(out, c)
		if g, ok := snap.Obs.Gates[comp]; ok {
			out = append(out, Check{Name: comp + " cluster", OK: g.Healthy, Detail: g.Detail})
		}
	}
	return out
}

// fail records a failed check; the first one names the rehearsal's
// failure.
func (r *rehearsalRun) fail(stage, check, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rep.Passed {
		r.rep.Passed = false
		r.rep.Failed = fmt.Sprintf("stage %q: check %q: %s", stage, check, detail)
	}
}

// stageLine is one stage on one line: its checks and the versions seen.
func stageLine(s Stage) string {
	var checks []string
	for _, c := range s.Checks {
		m := c.mark()
		if !c.OK && !c.Advisory {
			m += ": " + c.Detail
		}
		checks = append(checks, c.Name+" "+m)
	}
	return fmt.Sprintf("%s (pass %d): %s [%s]", s.Stage, s.Pass, strings.Join(checks, ", "), versions(s.Versions))
}

// versions is "kv 2.0.0×3, api 1.0.0×4", components and versions
// sorted.
func versions(v map[string]map[string]int) string {
	var comps []string
	for c := range v {
		comps = append(comps, c)
	}
	sort.Strings(comps)
	var out []string
	for _, c := range comps {
		var vs []string
		for ver, n := range v[c] {
			vs = append(vs, fmt.Sprintf("%s×%d", ver, n))
		}
		sort.Strings(vs)
		out = append(out, c+" "+strings.Join(vs, " "))
	}
	return strings.Join(out, ", ")
}

// Summary is the report as text: the plan, each stage's checks, the
// upgrades and the outcome.
func (rep *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", rep.Plan)
	fmt.Fprintf(&b, "rehearsal of %s → %s (%s)\n", rep.From, rep.To, rep.Description)
	for _, s := range rep.Stages {
		mark := "passed"
		if !s.Passed {
			mark = "FAILED"
		}
		fmt.Fprintf(&b, "  %-28s pass %d  %-6s  %s\n", s.Stage, s.Pass, mark, versions(s.Versions))
		for _, c := range s.Checks {
			fmt.Fprintf(&b, "      %-6s %-14s %s\n", c.mark(), c.Name, c.Detail)
		}
	}
	for _, u := range rep.Runs {
		fmt.Fprintf(&b, "  upgrade %s: %s", u.ID, u.State)
		if u.Reason != "" {
			fmt.Fprintf(&b, " (%s)", u.Reason)
		}
		b.WriteString("\n")
	}
	if rep.Passed {
		fmt.Fprintf(&b, "PASSED: seed %d, %d stages, every check passed, in %.1fs\n", rep.Seed, len(rep.Stages), rep.DurationS)
	} else {
		fmt.Fprintf(&b, "FAILED: seed %d (--seed %d replays it): %s\n", rep.Seed, rep.Seed, rep.Failed)
	}
	return b.String()
}

// checkpoints is the engine's Caller in a rehearsal: a checkpoint's
// call runs the stage's checks; every other call is made as always.
type checkpoints struct {
	inner engine.Caller
	r     *rehearsalRun
}

func (c checkpoints) Do(ctx context.Context, call config.Call, d config.TemplateData) health.Result {
	if name, ok := strings.CutPrefix(call.HTTP, checkpointURL); ok {
		return c.r.checkpoint(ctx, name)
	}
	return c.inner.Do(ctx, call, d)
}

func (c checkpoints) Version(ctx context.Context, call config.Call, d config.TemplateData) (string, health.Result) {
	return c.inner.Version(ctx, call, d)
}
