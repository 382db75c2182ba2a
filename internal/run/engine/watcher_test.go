package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// watchingDriver is a driver.Watcher that counts its observations:
// nothing runs, and a test says when its view changed.
type watchingDriver struct {
	observed atomic.Int64
	changed  chan struct{}
}

func (d *watchingDriver) Observe(_ context.Context, ms []driver.Member) ([]driver.Status, error) {
	d.observed.Add(1)
	out := make([]driver.Status, len(ms))
	for i, m := range ms {
		out[i] = driver.Status{Name: m.Name, Running: true, Version: "1.0.0"}
	}
	return out, nil
}
func (d *watchingDriver) Start(context.Context, driver.Member, driver.Artifact) error { return nil }
func (d *watchingDriver) Stop(context.Context, driver.Member) error                   { return nil }
func (d *watchingDriver) Changed() <-chan struct{}                                    { return d.changed }

// TestWatcherWakesTheObserver: a driver that says its view changed
// (driver.Watcher) is asked again at once, not at the next tick (a
// minute here); without the wake the second observation never comes
// within the test's deadline.
func TestWatcherWakesTheObserver(t *testing.T) {
	c, err := config.Parse([]byte(`cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: api
    strategy: {type: canary, max_unavailable: 1}
    members: [{name: api-1, host: h1, address: 127.0.0.1:8201}]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
policy: {tick: 1m}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &watchingDriver{changed: make(chan struct{}, 1)}
	e, err := New(Config{Cluster: c, Driver: d, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := e.newObserver()
	done := o.start(ctx)
	defer func() { cancel(); <-done }()
	waitObserved := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for d.observed.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("observed %d times, want %d: the driver's change did not wake the observer", d.observed.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitObserved(1) // the first poll, at the start
	for want := int64(2); want <= 4; want++ {
		d.changed <- struct{}{}
		waitObserved(want)
	}
}
