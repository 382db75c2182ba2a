package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/health"
)

// Clock is the time an engine reads and waits on: the wall clock
// (RealClock) in a real upgrade, a virtual one in a simulation
// (internal/substrate/sim), so that the engine's deadlines, ticks and probes can
// be driven without waiting for them. Every time the engine reads or
// waits on goes through it; nothing in the engine calls time.Now.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed.
	NewTimer(d time.Duration) Timer
	// WithTimeout returns a context that ends once d has passed on this
	// clock, with context.DeadlineExceeded, or when parent ends.
	WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// Timer is a Clock's timer, used like a time.Timer: Reset and Stop
// leave no stale value to receive from C.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// RealClock is the wall clock, the default of Config.Clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (RealClock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, d)
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
func (r realTimer) Stop() bool                 { return r.t.Stop() }

// now is the time on the engine's clock.
func (e *Engine) now() time.Time { return e.cfg.Clock.Now() }

// since is how long ago t was on the engine's clock.
func (e *Engine) since(t time.Time) time.Duration { return e.now().Sub(t) }

// Caller makes a description's calls; *health.Prober is the real one.
type Caller interface {
	Do(ctx context.Context, call config.Call, d config.TemplateData) health.Result
	Version(ctx context.Context, call config.Call, d config.TemplateData) (string, health.Result)
}

var _ Caller = (*health.Prober)(nil)

// prober makes every call of the engine through its Caller, bounded by
// the call's timeout on the engine's clock: a probe slower than its
// timeout is cut off, on a virtual clock too, and says so.
type prober struct {
	calls Caller
	clock Clock
}

func (p prober) Do(ctx context.Context, call config.Call, d config.TemplateData) health.Result {
	_, r := p.do(ctx, call, func(ctx context.Context) (string, health.Result) { return "", p.calls.Do(ctx, call, d) })
	return r
}

func (p prober) Version(ctx context.Context, call config.Call, d config.TemplateData) (string, health.Result) {
	return p.do(ctx, call, func(ctx context.Context) (string, health.Result) { return p.calls.Version(ctx, call, d) })
}

func (p prober) do(ctx context.Context, call config.Call, f func(context.Context) (string, health.Result)) (string, health.Result) {
	timeout := call.Timeout.D()
	if timeout <= 0 {
		timeout = health.DefaultTimeout
	}
	start := p.clock.Now()
	cctx, cancel := p.clock.WithTimeout(ctx, timeout)
	defer cancel()
	v, r := f(cctx)
	if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil && (r.OK || r.Detail == "") {
		// Cut off at its timeout: an answer after it does not count.
		v, r = "", health.Result{Detail: fmt.Sprintf("%s: no answer within %s", callName(call), timeout)}
	}
	r.Duration = p.clock.Now().Sub(start)
	return v, r
}

// callName says which call it was, for a call cut off.
func callName(c config.Call) string {
	switch {
	case c.HTTP != "":
		return "http " + c.HTTP
	case c.TCP != "":
		return "tcp " + c.TCP
	case len(c.Exec) > 0:
		return "exec " + c.Exec[0]
	}
	return "call"
}
