package realsys

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// newDriver is the description's process driver, as the CLI builds it.
func newDriver(c *config.Cluster) (driver.Driver, error) {
	var hosts []process.Host
	for _, h := range c.Hosts {
		b, err := os.ReadFile(c.ResolvePath(h.TokenFile))
		if err != nil {
			return nil, fmt.Errorf("realsys: host %s: token_file: %w", h.Name, err)
		}
		hosts = append(hosts, process.Host{Name: h.Name, Addr: h.Agent, Token: strings.TrimSpace(string(b))})
	}
	return process.New(hosts), nil
}

// Naive upgrades every member to version the way a shell loop does, through
// the same agent ferry uses: for each member in the description's order
// (no leader last, no quorum check, no gate), stop it (its graceful stop,
// the same signal as ferry's), start it on the new release, wait until
// its member check passes, then sleep settle. It returns the wall time
// from the first stop to the end of the last settle.
func (c *Cluster) Naive(ctx context.Context, version string, settle time.Duration) (time.Duration, error) {
	e, _, err := c.Engine()
	if err != nil {
		return 0, err
	}
	cfg, err := config.Load(c.File)
	if err != nil {
		return 0, err
	}
	d, err := newDriver(cfg)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for _, m := range e.Members() {
		comp := cfg.Component(m.Component)
		art, err := e.Artifact(m.Component, version)
		if err != nil {
			return 0, err
		}
		c.log("naive: %s: stop", m.Name)
		if err := d.Stop(ctx, m); err != nil {
			return 0, fmt.Errorf("naive: stop %s: %w", m.Name, err)
		}
		if err := d.Start(ctx, m, art); err != nil {
			return 0, fmt.Errorf("naive: start %s on %s: %w", m.Name, version, err)
		}
		_, mem := cfg.MemberOf(m.Name)
		data := cfg.DataFor(comp, mem)
		data.Version = version
		err = waitUntil(ctx, comp.Deadline.D(), "naive: "+m.Name+" healthy", func() (bool, error) {
			return health.Do(ctx, comp.Health.Member.Call, data).OK, nil
		})
		if err != nil {
			return 0, err
		}
		c.log("naive: %s: healthy on %s after %.1fs; settle %s", m.Name, version, time.Since(start).Seconds(), settle)
		t := time.NewTimer(settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
	return time.Since(start), nil
}
