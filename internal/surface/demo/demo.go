// Package demo is ferry's embedded default, end to end on one machine:
// it starts the sample cluster (a raft key-value store, an api tier and
// a load balancer) at release 1.0.0 under a local ferry agent, drives
// client traffic through the load balancer, upgrades the cluster to
// 2.0.0 with ferry's engine, and reports what the clients saw.
package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/proof"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof/cpuburn"
	"github.com/ferry-upgrade/ferry/internal/proof/impact"
	"github.com/ferry-upgrade/ferry/internal/proof/timeline"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

//go:embed cluster.yaml.tmpl
var clusterTemplate string

// Options configure a demo run.
type Options struct {
	// Dir is the work directory (binaries, agent, data, store); empty
	// means a new temporary directory, removed afterwards unless Keep.
	Dir  string
	Keep bool
	// Artifacts is a directory holding sample-1.0.0 and sample-2.0.0;
	// when empty they are built from ./examples/sample/cmd/sample.
	Artifacts string
	// Self is the ferry binary that runs the agent (os.Executable).
	Self string
	// Serve, unless Direct, starts a ferry server over the cluster, and
	// the upgrade goes through its API as an operator's scripts would;
	// with Direct (or no Serve) an engine in this process drives it.
	Serve       ServeFunc
	Direct      bool
	From, To    string
	Rate        float64
	Concurrency int
	Seed        uint64
	Out         io.Writer // the live view
	// Migrations gives release 2.0.0 the kv store's migrations to its
	// format 2 (expand, migrate, finalize, contract).
	Migrations bool
	// HTML, if set, is where the self-contained HTML report goes.
	HTML string
	// Compare also upgrades the api tier naively (all at once, rolling
	// without draining) on fresh clusters, for the report's comparison.
	Compare bool
	// Flow is release To's flow (YAML, flow style), or empty for the
	// default order; GlanceFlow is Glance's.
	Flow string
	// Baseline is how long traffic runs before the first member is
	// touched (default DefaultBaseline): the verdict's reference and
	// the measure of the machine's noise.
	Baseline time.Duration
	// NaiveRestart, after ferry's upgrade, restarts every member again
	// the naive way on the same cluster under the same traffic, and
	// judges it with the same verdict (Report.NaiveRestart).
	NaiveRestart bool
	// Burn, if set, runs a CPU burner from before the baseline to the
	// end of the traffic: the verdict on a machine busy with other work.
	Burn *cpuburn.Config
	// OnEvent, if set, sees every event of the upgrade as it happens.
	OnEvent func(store.Event)
	// Bare, with Serve (--cluster-only --bare), starts the agent and
	// the load balancer only: the members are for `ferry rehearse` to
	// bring up, on a copy it stops at its end.
	Bare   bool
	Logger *slog.Logger
}

// DefaultBaseline is the demo's baseline: ten of the verdict's 1 s
// chunks, for a measure of the machine's noise.
const DefaultBaseline = 10 * time.Second

// GlanceFlow is release 2.0.0's flow in the order of Glance's rolling
// upgrade (glance-rolling-upgrades.txt), the kv store standing for
// its database: expand, the database's members, the online data
// migration, then the api members restarted in a rolling way, each
// drained from the load balancer first, then finalize and contract.
const GlanceFlow = `[{stage: expand}, {stage: phase, component: kv}, {stage: migrate}, {stage: phase, component: api}, {stage: finalize}, {stage: contract}]`

// Report is the demo's result, written as JSON by 'ferry demo --report'.
type Report struct {
	UpgradeID string        `json:"upgrade_id"`
	From      string        `json:"from"`
	To        string        `json:"to"`
	State     string        `json:"state"`
	Reason    string        `json:"reason,omitempty"`
	Requests  traffic.Stats `json:"requests"` // during the upgrade
	Baseline  traffic.Stats `json:"baseline"` // before the first member was touched
	// Rate is the clients' target (requests per second); Achieved what
	// they sent during the upgrade, and whether it fell short.
	Rate float64 `json:"rate"`
	traffic.Achieved
	Writes    Writes   `json:"writes"`
	Members   []Member `json:"members"`
	DurationS float64  `json:"duration_s"` // the upgrade, start to end
	TotalS    float64  `json:"total_s"`    // the whole demo
	Overhead  Overhead `json:"engine_overhead"`
	Events    int      `json:"events"`
	Seed      uint64   `json:"seed"`
	// Windows is what clients saw in each state and batch of the
	// upgrade (seconds from the upgrade's start).
	Windows []WindowStats `json:"windows"`
	// Verdict says, window by window, whether the upgrade was
	// zero-downtime and zero-impact against the baseline.
	Verdict impact.Verdict `json:"verdict"`
	// Naive is what the same clients saw when the api tier was upgraded
	// without ferry (with --compare).
	Naive []Comparison `json:"naive,omitempty"`
	// States are the upgrade's states in the order it went through them
	// (from its events), the terminal one left out.
	States []string `json:"states"`
	// NaiveRestart is the naive restart after ferry's upgrade, judged
	// the same way (with --naive-restart).
	NaiveRestart *NaiveRestart `json:"naive_restart,omitempty"`
	// Burn is the CPU burner's parameters and what it did (with --burn).
	Burn *Burn `json:"burn,omitempty"`
	// DrivenBy says what drove the upgrade: "server" (a ferry server on
	// loopback, Server, as its answer to POST /v1/upgrade said), or
	// "demo" (an engine in the demo's own process, --direct).
	DrivenBy string `json:"driven_by"`
	Server   string `json:"server,omitempty"`
	// LowerBoundS is the lower bound of the upgrade's plan under its
	// policy (upgrade.Bound) and BoundRatio the upgrade's wall time over
	// it: what ferry itself added; Pace has the bound's parts.
	LowerBoundS float64      `json:"lower_bound_s"`
	BoundRatio  float64      `json:"bound_ratio"`
	Pace        upgrade.Pace `json:"pace"`
}

// Burn is a CPU burner's run.
type Burn struct {
	Config string  `json:"config"`
	Bursts int64   `json:"bursts"`
	BusyS  float64 `json:"busy_s"` // spinning, summed over its workers
}

// WindowStats is the client traffic of one window of the upgrade (the
// same as in ferry's impact report).
type WindowStats = proof.Window

// Writes is the acknowledged-write check.
type Writes = proof.Writes

// Member is one member's version at the end.
type Member struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	Version   string `json:"version"`
}

// Overhead is the engine's own delay per step: from a member passing
// its health gate to the next action.
type Overhead struct {
	Steps int     `json:"steps"`
	P50MS float64 `json:"p50_ms"`
	MaxMS float64 `json:"max_ms"`
}

// Run runs the demo and returns its report. The report is returned
// even when the upgrade did not complete; err is for the demo itself
// failing to run.
func Run(ctx context.Context, o Options) (*Report, error) {
	t0 := time.Now()
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.From == "" {
		o.From = "1.0.0"
	}
	if o.To == "" {
		o.To = "2.0.0"
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Baseline <= 0 {
		o.Baseline = DefaultBaseline
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ferry-demo-")
		if err != nil {
			return nil, err
		}
		dir = d
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "%6.2fs  demo    %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	say("work directory %s (seed %d)", dir, o.Seed)

	bins, err := artifacts(ctx, o, dir, say)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	say("starting the sample cluster at %s: kv×3 (raft), api×4, lb", o.From)
	cl, err := StartCluster(ctx, ClusterOptions{Dir: dir, Self: o.Self, Start: o.From, Logger: o.Logger,
		Releases: o.releases(bins)})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	say("agent and members up, cluster healthy after %s", time.Since(start).Round(time.Millisecond))
	var onEvent func(store.Event)
	direct := o.Direct || o.Serve == nil
	seen := func(ev store.Event) {
		live(o.Out, t0, ev)
		if o.OnEvent != nil {
			o.OnEvent(ev)
		}
	}
	if direct {
		onEvent = seen
	}
	eng, st, err := cl.Engine(o.Logger, onEvent)
	if err != nil {
		return nil, err
	}
	var srv *viaServer
	if !direct {
		// The upgrade goes through ferry's server, as an operator's
		// scripts would; its dashboard shows it live.
		if srv, err = startServer(ctx, o.Serve, cl, st, o.Logger); err != nil {
			return nil, err
		}
		defer srv.stop()
		say("ferry server on %s: dashboard %s/dashboard/ (token in %s)", srv.url, srv.url, filepath.Join(cl.DataDir, "api-token"))
	}

	var burn *cpuburn.Burner
	if o.Burn != nil {
		burn = cpuburn.Start(ctx, *o.Burn)
		say("%s", burn.Config())
		defer burn.Stop()
	}
	// Traffic runs from before the first member is touched to after the last.
	tctx, stopTraffic := context.WithCancel(ctx)
	lbURL := cl.LB
	rec, done := traffic.Start(tctx, traffic.Config{BaseURL: lbURL, Concurrency: o.Concurrency, Rate: o.Rate, WriteShare: 0.5, Seed: o.Seed})
	// The control: the load balancer's admin API, on the same machine
	// and untouched by the upgrade, tells a machine that got busier
	// from an upgrade that hurt the clients (impact.JudgeWithControl).
	ctl, ctlDone := traffic.Start(tctx, controlTraffic(cl.LBAdmin, o.Seed))
	stopT := func() { stopTraffic(); <-done; <-ctlDone }
	baseStart := time.Now()
	if !sleepCtx(ctx, o.Baseline) { // the baseline the verdict compares with
		stopT()
		return nil, ctx.Err()
	}
	say("baseline traffic for %s; upgrading %s → %s", time.Since(baseStart).Round(time.Millisecond), o.From, o.To)

	upStart := time.Now()
	var u upgrade.Upgrade
	var runErr error
	if direct {
		if u, runErr = eng.Begin(ctx, o.To); runErr == nil {
			u, runErr = eng.Run(ctx)
		}
	} else {
		var id string
		if id, runErr = srv.run(ctx, o.To, seen); runErr == nil {
			u, runErr = st.Get(id)
		}
	}
	upEnd := time.Now()
	sleepCtx(ctx, time.Second)
	var naive naiveRun
	if runErr == nil && o.NaiveRestart {
		if naive, runErr = restartNaively(ctx, cl, eng, o.To, o.Baseline, say); runErr == nil {
			sleepCtx(ctx, time.Second)
		}
	}
	stopT()
	if runErr != nil {
		return nil, runErr
	}

	rep := &Report{UpgradeID: u.ID, From: o.From, To: o.To, State: u.State.String(), Reason: u.Reason,
		DurationS: upEnd.Sub(upStart).Seconds(), Seed: o.Seed, DrivenBy: "demo"}
	if srv != nil {
		rep.DrivenBy, rep.Server = srv.drivenBy, srv.url
	}
	if burn != nil {
		st := burn.Stop()
		rep.Burn = &Burn{Config: burn.Config().String(), Bursts: st.Bursts, BusyS: st.Busy.Seconds()}
	}
	samples := rec.Samples()
	rep.Requests = traffic.Summarize(samples, upStart, upEnd)
	rep.Baseline = traffic.Summarize(samples, baseStart, upStart)
	rep.Rate, rep.Achieved = o.Rate, traffic.AchievedRate(rep.Requests.Total, upEnd.Sub(upStart), o.Rate)
	rep.Writes = verify(lbURL, rec.Acked())
	snap, err := eng.Observe(ctx)
	if err != nil {
		return nil, err
	}
	for _, mv := range eng.MembersView(snap, &u) {
		rep.Members = append(rep.Members, Member{Name: mv.Name, Component: mv.Component, Version: mv.Running})
	}
	evs, err := st.Events(u.ID, 0, 0)
	if err != nil {
		return nil, err
	}
	rep.Events = len(evs)
	rep.Overhead = overhead(evs)
	rep.Pace = u.Pace(upEnd)
	rep.LowerBoundS, rep.BoundRatio = rep.Pace.LowerBoundS, rep.Pace.BoundRatio
	windows := timeline.Windows(u, evs, upEnd)
	rep.Windows = proof.WindowsOf(samples, windows, upStart)
	for _, w := range windows {
		if w.Kind == timeline.KindState {
			rep.States = append(rep.States, w.Name)
		}
	}
	control := ctl.Samples()
	rep.Verdict = impact.JudgeWithControl(samples, control, baseStart, upStart, windows, impact.Policy{})
	if o.NaiveRestart {
		rep.NaiveRestart = naive.report(samples, control, impact.Policy{})
	}
	if o.HTML != "" {
		f, err := os.Create(o.HTML)
		if err != nil {
			return rep, err
		}
		err = impact.WriteHTML(f, impact.Page{Title: "ferry demo: " + u.ID, From: o.From, To: o.To, State: u.State.String(),
			Start: baseStart, Samples: samples, Windows: windows, Verdict: rep.Verdict})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return rep, fmt.Errorf("demo: HTML report: %w", err)
		}
	}
	if o.Compare {
		say("comparing with naive upgrades of the api tier on fresh clusters")
		rep.Naive, err = Compare(ctx, o, bins, filepath.Join(dir, "naive"))
		if err != nil {
			return rep, err
		}
	}
	rep.TotalS = time.Since(t0).Seconds()
	failures(o.Out, samples, upStart, upEnd)
	return rep, nil
}

// controlTraffic is the control's requests: to the load balancer's
// list of backends.
func controlTraffic(lbAdmin string, seed uint64) traffic.Config {
	return traffic.Control(lbAdmin, "/admin/backends", seed)
}

// failures prints the first few failed requests, if any.
func failures(w io.Writer, samples []traffic.Sample, from, to time.Time) {
	n := 0
	for _, s := range samples {
		if !s.OK && !s.Start.Before(from) && s.Start.Before(to) {
			if n < 5 {
				fmt.Fprintf(w, "          failed request at +%s: %s\n", s.Start.Sub(from).Round(time.Millisecond), s.Err)
			}
			n++
		}
	}
}

func live(w io.Writer, t0 time.Time, ev store.Event) {
	switch ev.Kind {
	case "overhead":
		return
	case "action":
		if strings.HasSuffix(ev.Message, ": started") {
			return
		}
	}
	fmt.Fprintf(w, "%6.2fs  %-7s %s\n", time.Since(t0).Seconds(), ev.Kind, ev.Message)
}

// artifacts returns the paths of the two releases' binaries, building
// them from the repository when no directory was given.
func artifacts(ctx context.Context, o Options, dir string, say func(string, ...any)) (map[string]string, error) {
	out := map[string]string{}
	if o.Artifacts != "" {
		for _, v := range []string{o.From, o.To} {
			p, err := filepath.Abs(filepath.Join(o.Artifacts, "sample-"+v))
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("demo: artifact for %s: %w", v, err)
			}
			out[v] = p
		}
		return out, nil
	}
	if _, err := os.Stat(filepath.Join("examples", "sample", "cmd", "sample")); err != nil {
		return nil, errors.New("demo: no --artifacts directory and no ./examples/sample to build from; run from the repository or pass --artifacts")
	}
	for _, v := range []string{o.From, o.To} {
		p := filepath.Join(dir, "bin", "sample-"+v)
		say("building sample %s", v)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version="+v, "-o", p, "./examples/sample/cmd/sample")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("demo: build sample %s: %w\n%s", v, err, b)
		}
		out[v] = p
	}
	return out, nil
}

// releases is the demo's catalog: From, and To upgradable from From's
// line, with the kv store's migrations to format 2 when To is 2.x.
func (o Options) releases(bins map[string]string) []Release {
	to := Release{Version: o.To, Path: bins[o.To], UpgradeFrom: []string{majorMinorX(o.From)}}
	if o.Migrations && strings.HasPrefix(o.To, "2.") {
		to.Migrations = KVMigrations
	}
	to.Flow = o.Flow
	return []Release{{Version: o.From, Path: bins[o.From]}, to}
}

// Serve starts the sample cluster at From with the demo's catalog and
// keeps it running until ctx ends, so that ferry's commands can be
// tried on it by hand.
func Serve(ctx context.Context, o Options) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.From == "" {
		o.From = "1.0.0"
	}
	if o.To == "" {
		o.To = "2.0.0"
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ferry-cluster-")
		if err != nil {
			return err
		}
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	bins, err := artifacts(ctx, o, dir, func(f string, a ...any) { say(f, a...) })
	if err != nil {
		return err
	}
	cl, err := StartCluster(ctx, ClusterOptions{Dir: dir, Self: o.Self, Start: o.From, Logger: o.Logger, Releases: o.releases(bins), Bare: o.Bare})
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.Bare {
		say("the sample cluster's agent and load balancer run, no member (clients: %s); rehearse its upgrade, from another terminal:", cl.LB)
		say("  ferry -f %s rehearse --to %s [--seed N] [--report rehearsal.json]", cl.File, o.To)
		say("between two rehearsals, remove the members' data (%s): each copy starts from what is there", filepath.Join(dir, "data"))
		say("Ctrl-C stops them.")
		<-ctx.Done()
		return nil
	}
	say("the sample cluster runs at %s (kv×3, api×4, lb); clients: %s", o.From, cl.LB)
	say("try, from another terminal:")
	say("  export FERRY_FILE=%s FERRY_DATA_DIR=%s", cl.File, cl.DataDir)
	say("  ferry members; ferry releases list; ferry health --to %s; ferry plan --to %s", o.To, o.To)
	say("  ferry upgrade start --to %s    (then: ferry upgrade status | pause | resume | abort)", o.To)
	// No server runs here: one would hold the store that the commands
	// above open. The operator starts it, and then goes through it.
	say("for the dashboard, a ferry server over the same description (with the variables above):")
	say("  ferry server --listen 127.0.0.1:7400")
	say("  then open http://127.0.0.1:7400/dashboard/#token=$(cat %s), and give the commands --addr 127.0.0.1:7400", filepath.Join(cl.DataDir, "api-token"))
	say("Ctrl-C stops the cluster.")
	<-ctx.Done()
	return nil
}

// majorMinorX turns 1.0.0 into the x-range 1.0.x.
func majorMinorX(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 {
		return v
	}
	return parts[0] + "." + parts[1] + ".x"
}

// placeholder is a ${NAME} in the demo's description template.
var placeholder = regexp.MustCompile(`\$\{[A-Z0-9]+\}`)

func fileSHA256(p string) (string, error) { return checksum.File(p) }

// startAgent runs 'ferry agent' as its own process (its own session, so
// that the members it owns outlive any ferry process) and waits for it.
func startAgent(ctx context.Context, self, addr, dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "agent", "--listen", addr, "--dir", dir, "--token-file", filepath.Join(dir, "token"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("demo: start agent: %w", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if _, err := os.Stat(filepath.Join(dir, "token")); err == nil && resp.StatusCode == 200 {
				return stop, nil
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("demo: the agent exited at start; see %s", filepath.Join(dir, "agent.log"))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("demo: the agent did not answer on %s within 15s", addr)
		}
	}
}

// waitHealthy waits until every member is healthy, every gate green
// and the load balancer sees every backend healthy.
func waitHealthy(ctx context.Context, eng *engine.Engine, lbAdmin, dir string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	why := ""
	for time.Now().Before(deadline) {
		if portClash(dir) {
			return fmt.Errorf("demo: a member's port was taken by another process (see the logs in %s)", filepath.Join(dir, "agent"))
		}
		snap, err := eng.Observe(ctx)
		if err == nil {
			why = sick(snap)
			if why == "" {
				why = lbSick(lbAdmin)
			}
			if why == "" {
				return nil
			}
		} else {
			why = err.Error()
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("demo: the cluster did not become healthy within %s: %s", limit, why)
}

func sick(snap engine.Snapshot) string {
	var out []string
	for n, m := range snap.Obs.Members {
		if !m.Healthy {
			out = append(out, n+": "+m.Detail)
		}
	}
	for n, g := range snap.Obs.Gates {
		if !g.Healthy {
			out = append(out, "gate "+n+": "+g.Detail)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func lbSick(admin string) string {
	resp, err := http.Get(admin + "/admin/backends")
	if err != nil {
		return "lb: " + err.Error()
	}
	defer resp.Body.Close()
	var bs []struct {
		Name    string `json:"name"`
		Healthy bool   `json:"healthy"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&bs); err != nil {
		return "lb: " + err.Error()
	}
	for _, b := range bs {
		if !b.Healthy {
			return "lb: backend " + b.Name + " not healthy yet"
		}
	}
	return ""
}

// verify reads back every acknowledged write through the load balancer.
func verify(base string, acked map[string]string) Writes {
	w := Writes{Acknowledged: len(acked)}
	c := &http.Client{Timeout: 5 * time.Second}
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, status, err := traffic.Read(c, base, k)
		if err == nil && status == http.StatusOK && got == acked[k] {
			w.Verified++
			continue
		}
		w.Lost++
		if len(w.LostKeys) < 20 {
			w.LostKeys = append(w.LostKeys, k)
		}
	}
	return w
}

func overhead(evs []store.Event) Overhead {
	var ds []float64
	for _, e := range evs {
		if e.Kind == "overhead" {
			ds = append(ds, e.DurationMS)
		}
	}
	o := Overhead{Steps: len(ds)}
	if len(ds) == 0 {
		return o
	}
	sort.Float64s(ds)
	o.P50MS = ds[len(ds)/2]
	o.MaxMS = ds[len(ds)-1]
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Completed reports whether the report meets the demo's promise.
func (r *Report) Completed() error {
	var bad []string
	if r.State != upgrade.StateCompleted.String() {
		bad = append(bad, "state "+r.State)
	}
	for _, m := range r.Members {
		if m.Version != r.To {
			bad = append(bad, m.Name+" runs "+m.Version)
		}
	}
	if r.Requests.Failed > 0 {
		bad = append(bad, fmt.Sprintf("%d failed requests", r.Requests.Failed))
	}
	if r.Writes.Lost > 0 {
		bad = append(bad, fmt.Sprintf("%d acknowledged writes lost", r.Writes.Lost))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, ", "))
	}
	return nil
}
