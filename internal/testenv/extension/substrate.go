package extension

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// InMemory is a substrate whose members live in the memory of the
// process that drives them (World): nothing runs, but every start,
// stop and observation goes through the driver interface the engine
// uses for real processes. A member runs the catalog's first release
// until ferry starts it on another. It can start and stop members and
// keep their output (each start and stop, as lines); an artifact is an
// image name, which it does not fetch; a host has no agent.
const InMemory = "inmemory"

func init() {
	substrate.Register(substrate.Substrate{
		Name: InMemory,
		Can:  substrate.Can(substrate.StartStop, substrate.Output),
		Rules: config.SubstrateRules{
			Runs: config.ArtifactImage,
			Host: func(n config.Node, h *config.Host) {
				if h.Agent != "" {
					n.Add("agent", "a host of the in-memory substrate has no agent: its members live in ferry's own memory")
				}
			},
		},
		New: func(c *config.Cluster, _ substrate.Options) (driver.Driver, error) { return NewWorld(c), nil },
	})
}

// World is the in-memory substrate's driver: its members, and the
// order of what was done to them (Ops).
type World struct {
	mu      sync.Mutex
	first   string // the catalog's first release: what a member runs before ferry starts it
	members map[string]*instance
	ops     []string
	pids    int
}

// instance is one member as the world holds it.
type instance struct {
	running bool
	version string
	since   time.Time
	pid     int
	lines   []string
}

var (
	_ driver.Driver = (*World)(nil)
	_ driver.Logger = (*World)(nil)
)

// NewWorld is the world of description c: every member on its
// catalog's first release.
func NewWorld(c *config.Cluster) *World {
	w := &World{members: map[string]*instance{}}
	if len(c.Releases) > 0 {
		w.first = c.Releases[0].Version
	}
	return w
}

// member is the instance of member name, made running the first
// release when first asked of. w.mu is held.
func (w *World) member(name string) *instance {
	in := w.members[name]
	if in == nil {
		w.pids++
		in = &instance{running: true, version: w.first, since: time.Now(), pid: w.pids}
		w.members[name] = in
	}
	return in
}

// Observe reports each member as the world holds it.
func (w *World) Observe(_ context.Context, ms []driver.Member) ([]driver.Status, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		in := w.member(m.Name)
		out[i] = driver.Status{Name: m.Name, Running: in.running, Version: in.version, Since: in.since}
		if in.running {
			out[i].PID = in.pid
		}
	}
	return out, nil
}

// Start runs m on a's version: a no-op if it runs it already, a swap
// (a new instance) otherwise.
func (w *World) Start(_ context.Context, m driver.Member, a driver.Artifact) error {
	if a.Version == "" {
		return fmt.Errorf("inmemory driver: start %s: the artifact names no version", m.Name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.member(m.Name)
	if in.running && in.version == a.Version {
		return nil
	}
	w.pids++
	in.running, in.version, in.since, in.pid = true, a.Version, time.Now(), w.pids
	w.did(in, "start "+m.Name+" "+a.Version)
	return nil
}

// Stop stops m; a stopped member stays stopped.
func (w *World) Stop(_ context.Context, m driver.Member) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if in := w.member(m.Name); in.running {
		in.running = false
		w.did(in, "stop "+m.Name)
	}
	return nil
}

// Logs are the last lines of what was done to m (there is no instance
// before the current one to tell of apart).
func (w *World) Logs(_ context.Context, m driver.Member, previous bool, lines int) (string, error) {
	if previous {
		return "", fmt.Errorf("inmemory driver: %s: no previous instance's output: %w", m.Name, fs.ErrNotExist)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := w.member(m.Name).lines
	if lines > 0 && len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n"), nil
}

// did records op, done to in. w.mu is held.
func (w *World) did(in *instance, op string) {
	w.ops = append(w.ops, op)
	in.lines = append(in.lines, op)
}

// Ops are the starts and stops done, in order ("start api-3 2.0.0",
// "stop api-3").
func (w *World) Ops() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ops...)
}

// Version is what member name runs, "" if it is stopped.
func (w *World) Version(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if in := w.member(name); in.running {
		return in.version
	}
	return ""
}
