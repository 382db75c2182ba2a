// Package cpuburn loads the machine on purpose, so that the impact
// verdict can be shown not to blame an upgrade for a slow machine: a
// few goroutines spin in bursts of seeded random lengths with seeded
// pauses between, for a bounded time, and stop when told. The load
// varies over time the way other work on a shared machine does.
package cpuburn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a burner's parameters; String prints them, seed included,
// so that a run can be repeated.
type Config struct {
	// Workers is the number of spinning goroutines (default 2: as many
	// as this machine's cores).
	Workers int
	// Seed draws the bursts and pauses (0: from the clock).
	Seed uint64
	// Burst and Pause bound each burst's and each pause's length: each
	// is drawn uniformly in [X/2, 3X/2] (defaults 300 ms and 200 ms).
	Burst, Pause time.Duration
	// Limit bounds the whole run (default 5 minutes): a burner a test
	// forgot to stop ends by itself.
	Limit time.Duration
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Burst <= 0 {
		c.Burst = 300 * time.Millisecond
	}
	if c.Pause <= 0 {
		c.Pause = 200 * time.Millisecond
	}
	if c.Limit <= 0 {
		c.Limit = 5 * time.Minute
	}
	return c
}

func (c Config) String() string {
	return fmt.Sprintf("cpu burner: %d workers, bursts of %s±50%%, pauses of %s±50%%, at most %s, seed %d",
		c.Workers, c.Burst, c.Pause, c.Limit, c.Seed)
}

// Burner is a running burn.
type Burner struct {
	cfg    Config
	cancel context.CancelFunc
	wg     sync.WaitGroup
	busy   atomic.Int64 // nanoseconds spent spinning, all workers
	bursts atomic.Int64
}

// Stats is what a burner did.
type Stats struct {
	Bursts int64         `json:"bursts"`
	Busy   time.Duration `json:"busy"` // spinning, summed over workers
}

// Start starts the workers and returns at once; they stop at Stop, at
// ctx's end or after cfg.Limit, whichever comes first.
func Start(ctx context.Context, cfg Config) *Burner {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Limit)
	b := &Burner{cfg: cfg, cancel: cancel}
	for w := range cfg.Workers {
		b.wg.Add(1)
		go b.work(ctx, rand.New(rand.NewPCG(cfg.Seed, uint64(w))))
	}
	return b
}

// Config is the burner's parameters, defaults filled in.
func (b *Burner) Config() Config { return b.cfg }

// Stop stops the workers, waits for them and says what they did.
func (b *Burner) Stop() Stats {
	b.cancel()
	b.wg.Wait()
	return Stats{Bursts: b.bursts.Load(), Busy: time.Duration(b.busy.Load())}
}

func (b *Burner) work(ctx context.Context, rng *rand.Rand) {
	defer b.wg.Done()
	draw := func(d time.Duration) time.Duration { return d/2 + time.Duration(rng.Int64N(int64(d))) }
	for ctx.Err() == nil {
		start := time.Now()
		spin(ctx, start.Add(draw(b.cfg.Burst)))
		b.busy.Add(int64(time.Since(start)))
		b.bursts.Add(1)
		t := time.NewTimer(draw(b.cfg.Pause))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// sink keeps the spinning arithmetic from being optimised away.
var sink atomic.Uint64

// spin keeps a core busy until the deadline or ctx's end, looking at
// the clock every few thousand steps.
func spin(ctx context.Context, until time.Time) {
	x := uint64(1)
	for ctx.Err() == nil && time.Now().Before(until) {
		for range 4096 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Add(x)
}
