package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Adopted members. A member the description says how to find (adopt:)
// and that ferry did not start is reported by its substrate as running
// with a pid, Adopted, and no version: an agent knows processes, not
// what they are. The engine learns the version from the member itself,
// through its component's version call, where every other check is
// made; the agent stays a process supervisor. Once a step starts the
// member on a release, the substrate owns it and knows its version.

// learntVersion is what an adopted member's version call answered, for
// the process it was made on (pid and start).
type learntVersion struct {
	pid     int
	since   time.Time
	version string
	detail  string    // why the version is not known, when it is not
	at      time.Time // when the call was made
}

// versionRetry is how long a failed version call is trusted before it
// is made again.
const versionRetry = time.Second

// adoptSpec renders a member's adopt for its substrate: the pid file
// rendered and made absolute (relative to the description), the
// listening address the member's.
func adoptSpec(c *config.Cluster, a *config.Adopt, m *config.Member, data config.TemplateData) (*driver.Adopt, error) {
	if a.Listen {
		return &driver.Adopt{Listen: m.Address}, nil
	}
	p, err := config.Render(a.PIDFile, data)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: adopt.pid_file: %w", m.Name, err)
	}
	p = c.ResolvePath(p)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return &driver.Adopt{PIDFile: p}, nil
}

// learnVersions sets the version of each adopted member in sts: the
// one its version call answered for the process that runs now (made
// once per process, again after a failure once versionRetry passed), or
// for a stopped one, the version it last ran. The calls are made
// concurrently, each bounded by its own timeout.
func (e *Engine) learnVersions(ctx context.Context, sts []driver.Status) {
	now := e.now()
	var wg sync.WaitGroup
	for i := range sts {
		st := &sts[i]
		if !st.Adopted || st.Unknown || st.Version != "" {
			continue
		}
		info, ok := e.members[st.Name]
		if !ok {
			continue
		}
		e.learntMu.Lock()
		l, had := e.learnt[st.Name]
		e.learntMu.Unlock()
		same := had && l.pid == st.PID && l.since.Equal(st.Since)
		switch {
		case !st.Running:
			st.Version = l.version // what it last ran, as a substrate says of its own members
			continue
		case same && (l.version != "" || now.Sub(l.at) < versionRetry):
			st.Version = l.version
			if l.version == "" {
				st.Detail = l.detail
			}
			continue
		case info.comp.Version == nil:
			st.Detail = "the component has no version call"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := info.data
			data.PID = st.PID
			v, r := e.prober.Version(ctx, *info.comp.Version, data)
			if ctx.Err() != nil {
				return
			}
			nl := learntVersion{pid: st.PID, since: st.Since, version: v, at: e.now()}
			if !r.OK {
				nl.version, nl.detail = "", "version call: "+r.Detail
			}
			e.learntMu.Lock()
			e.learnt[st.Name] = nl
			e.learntMu.Unlock()
			st.Version = nl.version
			if nl.version == "" {
				st.Detail = nl.detail
			}
		}()
	}
	wg.Wait()
}
