package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Config is what an engine works with.
type Config struct {
	Cluster *config.Cluster
	Driver  driver.Driver
	Store   Store
	Logger  *slog.Logger
	// Clock is the time the engine reads and waits on (default
	// RealClock); a simulation passes a virtual one.
	Clock Clock
	// Calls makes the description's calls: checks, gates, roles, hooks,
	// undos, migrations and version calls (default health.NewProber()).
	// A simulation answers them itself. The engine bounds each call by
	// its timeout on Clock, whatever Calls does.
	Calls Caller
	// Backups holds the files of the backup steps (default FileBackups:
	// ferry's own file system, where the description's backup commands
	// write). A simulation keeps none.
	Backups Backups
	// OnEvent, if set, is called with every event once it is stored
	// (the CLI's live view), by one goroutine at a time. It must not
	// block for long.
	OnEvent func(store.Event)
	// ExitOnPause makes Run return when the upgrade pauses, for a run
	// with no operator to resume it (the demo).
	ExitOnPause bool
	// Judge, if set, judges each batch once it ends, from the traffic
	// its caller drives: it returns how the clients were hurt between
	// from and to, or "" if they were not. Policy on_impact says what a
	// hurt batch leads to. judged is false when there was no traffic to
	// judge the batch by (a server with no traffic session): the batch
	// then gets no impact event, so nothing says it was judged.
	Judge func(from, to time.Time) (why string, judged bool)
	// Self is the ferry binary that runs the engine (default: this
	// process's executable): what agents older than a release's
	// requires_ferry re-execute on when the release names no ferry
	// binary of its own (ferry first).
	Self string
}

// Store is where the engine keeps the upgrade record and its events,
// written before each action: the embedded store (store.Store) for the
// CLI and the server, an Upgrade resource's status for the Kubernetes
// controller. Its records keep store.Records' contract: the engine
// claims a fence when it begins or takes an upgrade up, saves each
// record at the revision it last read or wrote, and stops at the first
// save refused (store.ErrConflict, store.ErrFenced): another engine
// acts on the upgrade. ErrActive and ErrNotFound are the store
// package's.
type Store interface {
	store.Records
	// Current returns the current upgrade record, if any.
	Current() (upgrade.Upgrade, bool, error)
}

var _ Store = (*store.Store)(nil)

// Engine drives upgrades of one cluster.
type Engine struct {
	cfg     Config
	c       *config.Cluster
	members map[string]memberInfo // by member name
	order   []string              // member names in description order
	tracker *health.Tracker

	// prober makes every check, hook and undo call of this engine
	// (Config.Calls, bounded by call).
	prober prober

	loads loads // verdicts on artifacts (checksum, signature), for the preflight

	// learnt holds the versions adopted members reported through their
	// component's version call (adopt.go), by member.
	learntMu sync.Mutex
	learnt   map[string]learntVersion

	mu       sync.Mutex
	lastSnap Snapshot // the latest observation, for the calls made to "any" member

	pubMu sync.Mutex // publish's
}

type memberInfo struct {
	comp   *config.Component
	member *config.Member
	spec   driver.Member
	data   config.TemplateData
	// pos is the member's position in the engine's order.
	pos int
}

// New checks the configuration and renders every member's run spec.
func New(cfg Config) (*Engine, error) {
	if cfg.Cluster == nil || cfg.Driver == nil || cfg.Store == nil {
		return nil, errors.New("engine: cluster, driver and store are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Calls == nil {
		cfg.Calls = health.NewProber()
	}
	if cfg.Backups == nil {
		cfg.Backups = FileBackups{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, c: cfg.Cluster, members: map[string]memberInfo{}, tracker: &health.Tracker{},
		prober: prober{calls: cfg.Calls, clock: cfg.Clock}, learnt: map[string]learntVersion{}}
	for _, comp := range cfg.Cluster.ComponentsInOrder() {
		all := cfg.Cluster.MembersData(comp)
		for i := range comp.Members {
			m := &comp.Members[i]
			data := all[i]
			spec, err := renderSpec(cfg.Cluster, comp, m, data)
			if err != nil {
				return nil, err
			}
			e.members[m.Name] = memberInfo{comp: comp, member: m, spec: spec, data: data, pos: len(e.order)}
			e.order = append(e.order, m.Name)
		}
	}
	return e, nil
}

func renderSpec(c *config.Cluster, comp *config.Component, m *config.Member, data config.TemplateData) (driver.Member, error) {
	spec := driver.Member{Name: m.Name, Component: comp.Name, Host: m.Host, Address: m.Address,
		StopTimeout: comp.Run.StopTimeout.D(), Env: map[string]string{}, Workload: WorkloadOf(comp), Restart: comp.Run.Restart,
		StopSignal: comp.Run.StopSignal}
	if a := comp.AdoptOf(m); a != nil {
		ad, err := adoptSpec(c, a, m, data)
		if err != nil {
			return spec, err
		}
		spec.Adopt = ad
	}
	for i, a := range comp.Run.Args {
		v, err := config.Render(a, data)
		if err != nil {
			return spec, fmt.Errorf("engine: %s: run.args[%d]: %w", m.Name, i, err)
		}
		spec.Args = append(spec.Args, v)
	}
	for k, a := range comp.Run.Env {
		v, err := config.Render(a, data)
		if err != nil {
			return spec, fmt.Errorf("engine: %s: run.env[%s]: %w", m.Name, k, err)
		}
		spec.Env[k] = v
	}
	files, err := c.MemberFiles(comp, data)
	spec.Files = files
	return spec, err
}

// Members returns the rendered driver view of every member, in
// description order.
func (e *Engine) Members() []driver.Member {
	out := make([]driver.Member, 0, len(e.order))
	for _, n := range e.order {
		out = append(out, e.members[n].spec)
	}
	return out
}

// Snapshot is one observation of the cluster.
type Snapshot struct {
	Time     time.Time
	Statuses map[string]driver.Status
	Obs      upgrade.Observation
	// gen is the observer's count of changes the snapshot was made at
	// (observer.snapshot): the same gen, the same observation.
	gen uint64
	// verdicts names the members whose verdict (healthy, role, known,
	// version, detail) differs from the snapshot before, when the
	// observer made one before (all: every member).
	verdicts []string
	all      bool
}

// Versions maps each member to the version it runs ("" if never started).
func (s Snapshot) Versions() map[string]string {
	v := make(map[string]string, len(s.Statuses))
	for n, st := range s.Statuses {
		v[n] = st.Version
	}
	return v
}

// Down lists the members that are not running healthy.
func (s Snapshot) Down() map[string]bool {
	d := map[string]bool{}
	for n, mh := range s.Obs.Members {
		if !mh.Healthy {
			d[n] = true
		}
	}
	return d
}

// Plan computes the plan to version to from a fresh observation.
func (e *Engine) Plan(ctx context.Context, to string) (plan.Plan, Snapshot, error) {
	snap, err := e.Observe(ctx)
	if err != nil {
		return plan.Plan{}, snap, err
	}
	p, err := plan.ComputePath(e.c, plan.Observed{Version: snap.Versions(), Down: snap.Down()}, to)
	return p, snap, err
}

// Begin plans an upgrade to version to and records it as the current
// upgrade; it refuses (store.ErrActive) while another one is running.
// An upgrade that cannot be zero-downtime is refused (ErrDowntime):
// BeginWith accepts it.
func (e *Engine) Begin(ctx context.Context, to string) (upgrade.Upgrade, error) {
	return e.BeginWith(ctx, to, BeginOptions{})
}

// BeginOptions are what an operator accepts when beginning an upgrade.
type BeginOptions struct {
	// AcceptDowntime: an upgrade with a phase whose strategy takes its
	// component down (offline) may begin (--accept-downtime).
	AcceptDowntime bool
}

// BeginWith is Begin with the operator's options.
func (e *Engine) BeginWith(ctx context.Context, to string, opts BeginOptions) (upgrade.Upgrade, error) {
	if cur, ok, err := e.cfg.Store.Current(); err != nil {
		return upgrade.Upgrade{}, err
	} else if ok && !cur.State.Terminal() {
		return cur, fmt.Errorf("%w: %s (%s, %s → %s); follow it with 'ferry upgrade status'", store.ErrActive, cur.ID, cur.State, cur.From, cur.To)
	}
	pf := e.RunPreflight(ctx, to)
	if !pf.OK() {
		if pf.planErr != nil && len(pf.Failed()) == 1 {
			return upgrade.Upgrade{}, pf.planErr // it says it best on its own
		}
		return upgrade.Upgrade{}, &PreflightError{Preflight: pf}
	}
	p, snap := *pf.Plan, pf.snap
	if err := nothingToDo(p); err != nil {
		return upgrade.Upgrade{}, err
	}
	if err := e.requireHostLocks(); err != nil {
		return upgrade.Upgrade{}, err
	}
	downtime := Downtime(e.c, p)
	if downtime != "" && !opts.AcceptDowntime {
		return upgrade.Upgrade{}, fmt.Errorf("%w: the upgrade to %s cannot be zero-downtime: %s; nothing was changed: give --accept-downtime to accept it", ErrDowntime, to, downtime)
	}
	now := e.now()
	u := upgrade.New(newID(now), p, snap.Versions(), nil, now)
	u.Description = e.c.Digest
	u.Downtime = downtime
	u.Ferry = e.ferryStep(u.To)
	if len(p.Path) > 1 {
		u.Final = p.Path[len(p.Path)-1]
	}
	f, err := e.cfg.Store.Fence()
	if err != nil {
		return upgrade.Upgrade{}, fmt.Errorf("engine: %w", err)
	}
	if _, err := e.cfg.Store.CreateAt(u, f); err != nil {
		return upgrade.Upgrade{}, err
	}
	msg := fmt.Sprintf("upgrade %s created: %s → %s", u.ID, u.From, u.To)
	if u.Final != "" {
		msg += fmt.Sprintf(" (step 1 of the path %s → %s)", u.From, strings.Join(p.Path, " → "))
	}
	evs := []store.Event{{Kind: "state", Message: msg}}
	for _, w := range SingleMembers(e.c, p) {
		evs = append(evs, store.Event{Kind: "warning", Message: w.Detail})
	}
	e.emit(f, now, u, evs...)
	return u, nil
}

// ErrDowntime is returned by Begin when the upgrade cannot keep every
// component serving (a phase of strategy offline) and the operator has
// not accepted it.
var ErrDowntime = errors.New("downtime not accepted")

// Downtime says, component by component, why plan p cannot keep every
// component serving ("" when it can): its phases whose strategy takes
// downtime.
func Downtime(c *config.Cluster, p plan.Plan) string {
	var why []string
	for _, ph := range p.Phases {
		comp := c.Component(ph.Component)
		if comp == nil {
			continue
		}
		var ms []strategy.Member
		for _, m := range ph.Members() {
			ms = append(ms, strategy.Member{Name: m})
		}
		if d := strategy.Downtime(ph.Strategy, ph.Settings, ms); d != "" {
			why = append(why, comp.Name+": "+d)
		}
	}
	return strings.Join(why, "; ")
}

// ErrNothingToDo is returned by Begin when every member runs the target
// already: an upgrade would move no member yet run the hooks and the
// release's migrations, and record a finalize, so none is recorded.
var ErrNothingToDo = errors.New("nothing to do")

// NothingToDo is the answer to a start that found nothing to do: what
// 'ferry upgrade start -o json' prints and what POST /v1/upgrade
// answers (200, no upgrade recorded).
type NothingToDo struct {
	NothingToDo bool   `json:"nothing_to_do"`
	To          string `json:"to"`
	Message     string `json:"message"`
}

// nothingToDo refuses plan p when it moves no member to the release (a
// flow's rollouts alone, restarting members already on it, are not an
// upgrade).
func nothingToDo(p plan.Plan) error {
	for _, ph := range p.Phases {
		if !ph.Rollout && len(ph.Members()) > 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: every member runs %s already; no upgrade was started, no hook or migration run", ErrNothingToDo, p.To)
}

func newID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "upg-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// emit stores events under fence f and hands them to OnEvent; a store
// error is logged, not fatal: the record is what resumes an upgrade.
// A refusal of the fence (another engine claimed the store since) is
// returned, and the events are neither stored nor handed on: they are
// no longer the upgrade's.
func (e *Engine) emit(f store.Fence, now time.Time, u upgrade.Upgrade, evs ...store.Event) error {
	for i := range evs {
		if evs[i].Time.IsZero() {
			evs[i].Time = now
		}
		evs[i].Upgrade = u.ID
	}
	stored, err := e.cfg.Store.Append(f, evs...)
	if errors.Is(err, store.ErrFenced) {
		e.cfg.Logger.Error("events not stored: this engine's claim on the store was taken over", "upgrade", u.ID, "err", err)
		return err
	}
	if err != nil {
		e.cfg.Logger.Error("store events", "err", err)
		stored = evs
	}
	e.publish(stored)
	return nil
}

func (e *Engine) publish(evs []store.Event) {
	// An action may publish too (ferry first's agents, one by one):
	// OnEvent is called by one goroutine at a time.
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	for _, ev := range evs {
		if ev.Output != "" {
			// A replaced instance's last lines: in the log too, where a
			// controller without a bundle keeps them.
			e.cfg.Logger.Info(ev.Message, "kind", ev.Kind, "member", ev.Member, "output", ev.Output)
		} else {
			e.cfg.Logger.Info(ev.Message, "kind", ev.Kind, "member", ev.Member)
		}
		if e.cfg.OnEvent != nil {
			e.cfg.OnEvent(ev)
		}
	}
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
