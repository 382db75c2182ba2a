package engine

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// A hosts stage's side effects: a host's lock (its lock calls, or the
// driver's own when it has none: capability lock-host), its unlock (the
// undo of the lock's effect, which the machine journaled in the record
// written before the lock), and its capacity call, asked by the
// observer like a member's ok_to_stop.

// hostCalls returns host name's calls and the data they render with,
// for a call about version (the upgrade's target) under pin.
func (e *Engine) hostCalls(name, version, pin string) (*config.Host, *config.HostCalls, config.TemplateData, error) {
	h := e.c.Host(name)
	if h == nil {
		return nil, nil, config.TemplateData{}, fmt.Errorf("host %q is not in the description", name)
	}
	data := e.c.HostData(h)
	data.Version, data.Pin = version, pin
	return h, e.c.CallsOf(h), data, nil
}

// lockHost locks (lock) or unlocks host name for an upgrade to version
// under pin: its lock or unlock calls, or, when it has none, the
// driver's, with the host's lock or unlock command when it gives one.
func (e *Engine) lockHost(ctx context.Context, name, version, pin string, lock bool) (string, error) {
	h, calls, data, err := e.hostCalls(name, version, pin)
	if err != nil {
		return "", err
	}
	what, list := config.HostUnlock, calls.Unlock
	if lock {
		what, list = config.HostLock, calls.Lock
	}
	if len(calls.Lock) > 0 {
		return e.callList(ctx, what, list, data)
	}
	l, ok := e.cfg.Driver.(driver.HostLocker)
	if !ok {
		return "", fmt.Errorf("host %s has no %s calls, and the %s driver cannot %s a host (capability lock-host)", h.Name, what, e.c.Substrate, what)
	}
	cmd, err := e.hostCommand(ctx, name, what, version, "")
	if err != nil {
		return "", err
	}
	if lock {
		return "", l.LockHost(ctx, cmd)
	}
	return "", l.UnlockHost(ctx, cmd)
}

// hostCommand renders host name's command kind for a move to version
// (key names a run of a long one); a host without that command gets
// one with no argv, for a driver that knows how by itself.
func (e *Engine) hostCommand(ctx context.Context, name, kind, version, key string) (driver.HostCommand, error) {
	hc := e.c.HostCommandOf(name, kind)
	if hc == nil {
		return driver.HostCommand{Host: name}, nil
	}
	argv, on, err := e.c.RenderHostCommand(name, hc, version)
	if err != nil {
		return driver.HostCommand{}, err
	}
	if comp := hc.RunOn.Active; comp != "" {
		if on, err = e.roleHolderHost(ctx, comp); err != nil {
			return driver.HostCommand{}, fmt.Errorf("host %s's %s command (run_on: {active: %s}): %w", name, kind, comp, err)
		}
	}
	return driver.HostCommand{Host: name, On: on, Argv: argv, Sudo: hc.Sudo, Timeout: hc.Timeout.D(), Key: key}, nil
}

// reinstallHost reinstalls host name with release version (its
// reinstall command, through the driver), or migrates its data
// (migrate), for upgrade id.
func (e *Engine) reinstallHost(ctx context.Context, id, name, version string, migrate bool) error {
	r, ok := e.cfg.Driver.(driver.HostReinstaller)
	if !ok {
		return fmt.Errorf("host %s: the %s driver cannot reinstall a host (capability reinstall-host)", name, e.c.Substrate)
	}
	kind := config.HostReinstall
	if migrate {
		kind = config.HostMigrate
	}
	if e.c.HostCommandOf(name, kind) == nil {
		return fmt.Errorf("host %s has no %s command", name, kind)
	}
	cmd, err := e.hostCommand(ctx, name, kind, version, id+"-"+version)
	if err != nil {
		return err
	}
	if migrate {
		return r.MigrateHost(ctx, cmd)
	}
	return r.ReinstallHost(ctx, cmd, e.c.HostCommandOf(name, kind).Unreachable.D())
}

// hostTimeout bounds a lock (lock) or an unlock of host name: its
// calls' timeouts, or a driver operation's.
func (e *Engine) hostTimeout(name string, lock bool) (calls []config.Call, driverOp bool) {
	h := e.c.Host(name)
	if h == nil {
		return nil, true
	}
	hc := e.c.CallsOf(h)
	switch {
	case len(hc.Lock) == 0:
		return nil, true
	case lock:
		return hc.Lock, false
	}
	return hc.Unlock, false
}

// hostCommandTimeout bounds a driver's run of host name's command kind:
// the command's own timeout, or a driver operation's.
func (e *Engine) hostCommandTimeout(name, kind string) time.Duration {
	if hc := e.c.HostCommandOf(name, kind); hc != nil {
		return hc.Timeout.D() + actionMargin
	}
	return driverUndoBound
}

// capacity is what the observer knows of the hosts' capacity calls:
// each host's latest answer, and the hosts being asked about now.
type capacity struct {
	answers map[string]upgrade.Answer
	asking  map[string]bool
}

// askCapacity makes each named host's capacity call, each in its own
// goroutine bounded by its timeout, like an ok_to_stop call; a host
// being asked about already is not asked twice. The answer wakes the
// engine.
func (o *observer) askCapacity(hosts []string) {
	for _, name := range hosts {
		h := o.e.c.Host(name)
		if h == nil || o.e.c.CallsOf(h).Capacity == nil {
			continue
		}
		o.mu.Lock()
		ctx := o.ctx
		if o.capacity.asking == nil {
			o.capacity.asking, o.capacity.answers = map[string]bool{}, map[string]upgrade.Answer{}
		}
		if ctx == nil || ctx.Err() != nil || o.capacity.asking[name] {
			o.mu.Unlock()
			continue
		}
		o.capacity.asking[name] = true
		o.asks.Add(1)
		o.mu.Unlock()
		go func() {
			defer o.asks.Done()
			data := o.e.c.HostData(h)
			start := o.e.now()
			res := o.e.prober.Do(ctx, *o.e.c.CallsOf(h).Capacity, data)
			o.mu.Lock()
			delete(o.capacity.asking, name)
			if ctx.Err() == nil && !start.Before(o.capacity.answers[name].Asked) {
				o.capacity.answers[name] = upgrade.Answer{Yes: res.OK, Words: res.Detail, Asked: start}
				o.gen++
			}
			o.mu.Unlock()
			o.notify()
		}()
	}
}

// snapshot copies the answers; o.mu is held.
func (c *capacity) snapshot() map[string]upgrade.Answer {
	if len(c.answers) == 0 {
		return nil
	}
	return maps.Clone(c.answers)
}

// hostChanges describes, as events, each host whose step changed from
// record a to b: locked, its members moving, unlocked.
func hostChanges(a, b upgrade.Upgrade) []store.Event {
	var evs []store.Event
	for _, n := range sortedKeys(b.Hosts) {
		hb, ha := b.Hosts[n], a.Hosts[n]
		if ha != nil && ha.Step == hb.Step {
			continue
		}
		from := upgrade.HostStep("")
		if ha != nil {
			from = ha.Step
		}
		evs = append(evs, store.Event{Kind: "host", Message: fmt.Sprintf("host %s: %s → %s", n, from, hb.Step)})
	}
	return evs
}

// requireHostLocks refuses, before anything moves, a description whose
// hosts stage locks a host that has no lock calls when the driver
// cannot lock a host itself, or reinstalls one when it cannot
// reinstall, by the capability's name and the host (a substrate
// declares lock-host exactly when its driver is a driver.HostLocker,
// reinstall-host a driver.HostReinstaller: substrate.CheckDriver).
func (e *Engine) requireHostLocks() error {
	_, locks := e.cfg.Driver.(driver.HostLocker)
	_, reinstalls := e.cfg.Driver.(driver.HostReinstaller)
	for _, n := range substrate.Needs(e.c) {
		if n.Capability == substrate.LockHost && !locks || n.Capability == substrate.ReinstallHost && !reinstalls {
			return &substrate.IncapableError{Substrate: e.c.Substrate, Capability: n.Capability, For: n.Path}
		}
	}
	return nil
}

// roleHolderHost is the host of the member of component comp that
// holds its role now, each member's role check asked as the command is
// about to run (a swact moves it: StarlingX's commands run on the
// active controller), not the observer's last verdict.
func (e *Engine) roleHolderHost(ctx context.Context, comp string) (string, error) {
	c := e.c.Component(comp)
	if c == nil || c.Role == nil || c.Role.Check == nil {
		return "", fmt.Errorf("component %s has no role check", comp)
	}
	var said []string
	for i := range c.Members {
		m := &c.Members[i]
		info, ok := e.members[m.Name]
		if !ok {
			continue
		}
		res := e.prober.Do(ctx, c.Role.Check.Call, info.data)
		if res.OK {
			return m.Host, nil
		}
		said = append(said, m.Name+": "+res.Detail)
	}
	return "", fmt.Errorf("no member of %s holds its role %s now (%s)", comp, c.Role.Name, strings.Join(said, "; "))
}
