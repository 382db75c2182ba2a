// Package cli is ferry's command line: cobra commands that parse flags,
// build the parts (config, driver, store, engine) and print results.
// Every listing takes -o json, so that scripts never parse tables.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/surface/server"

	// Every substrate of this build, registered: the CLI reads
	// descriptions of any of them.
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
)

// Version is ferry's own version, set at build time.
var Version = "dev"

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// globals are the flags every command shares.
type globals struct {
	file    string
	dataDir string
	// addr, tokenFile and caFile reach a ferry server (remote.go).
	addr, tokenFile, caFile string
	output                  string
	verbose                 bool
	stdout                  io.Writer
	stderr                  io.Writer
}

// Main runs the CLI and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "ferry moves a live cluster from release N to N+1: planned, health-gated, resumable",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	pf := root.PersistentFlags()
	pf.StringVarP(&g.file, "file", "f", envOr("FERRY_FILE", "cluster.yaml"), "cluster description (env FERRY_FILE)")
	pf.StringVar(&g.dataDir, "data-dir", envOr("FERRY_DATA_DIR", ".ferry"), "ferry's data directory: the embedded store (env FERRY_DATA_DIR)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log every step to stderr")
	pf.StringVar(&g.addr, "addr", os.Getenv("FERRY_ADDR"), "a ferry server's address (host:port or URL): the commands go through its API (env FERRY_ADDR)")
	pf.StringVar(&g.tokenFile, "token-file", os.Getenv("FERRY_TOKEN_FILE"), "with --addr: the server's API token file (default DATA-DIR/api-token; env FERRY_TOKEN_FILE)")
	pf.StringVar(&g.caFile, "ca-file", os.Getenv("FERRY_CA_FILE"), "with --addr over https: the CA certificate that signs the server's (env FERRY_CA_FILE)")

	root.AddCommand(
		validateCmd(g), planCmd(g), healthCmd(g), releasesCmd(g), upgradeCmd(g), versionsCmd(g), membersCmd(g), eventsCmd(g),
		agentCmd(g), demoCmd(g), versionCmd(g), selfUpgradeCmd(g), simulateCmd(g), serverCmd(g), trafficCmd(g), controllerCmd(g), clusterCmd(g), bundleCmd(g), rehearseCmd(g),
	)
	ctx, done := onSignal(stderr)
	defer done()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "ferry:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// StopGrace is how long a command has, after SIGTERM or SIGINT ended
// its context, to stop on its own before the process exits anyway.
const StopGrace = 10 * time.Second

// onSignal returns a context that SIGTERM or SIGINT ends, so that a
// command stops cleanly (an upgrade stays recorded and resumes). So
// that ferry never ignores a signal, the first one also restores the
// default action (a second signal ends the process at once), and a
// command still running StopGrace after it is ended. Call done when the
// command has returned.
func onSignal(stderr io.Writer) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	returned := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case <-returned:
			return
		case sig = <-sigs:
		}
		cancel()
		signal.Stop(sigs) // the next signal: the default action
		t := time.NewTimer(StopGrace)
		defer t.Stop()
		select {
		case <-returned:
		case <-t.C:
			fmt.Fprintf(stderr, "ferry: still running %s after %s: exiting\n", StopGrace, sig)
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		}
	}()
	return ctx, func() {
		close(returned)
		signal.Stop(sigs)
		cancel()
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (g *globals) logger() *slog.Logger {
	if !g.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(g.stderr, nil))
}

// driverLogger is for what a driver does that the engine's events do
// not say (a drain waiting on a PodDisruptionBudget): warnings always,
// everything with -v.
func (g *globals) driverLogger() *slog.Logger {
	level := slog.LevelWarn
	if g.verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
}

func (g *globals) json() bool {
	return g.output == "json"
}

func (g *globals) checkOutput() error {
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("--output %q: want table or json", g.output)
	}
	return nil
}

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// load reads and validates the description named by -f. A description
// that cannot be read or is invalid exits 2 in every command, as the
// README's exit codes promise, not only in validate.
func (g *globals) load() (*config.Cluster, error) {
	if err := g.checkOutput(); err != nil {
		return nil, err
	}
	c, err := config.Load(g.file)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	// Releases imported through a server on this data directory
	// (POST /v1/releases) are in the catalog here too.
	if err := server.LoadImported(c, g.dataDir); err != nil {
		return nil, err
	}
	return c, nil
}

// newDriver builds the driver of the description's substrate through
// the registry (package substrate), which refuses a description that
// needs what its substrate cannot do before any driver exists.
func newDriver(c *config.Cluster, logger *slog.Logger) (driver.Driver, error) {
	return substrate.New(c, substrate.Options{Logger: logger})
}

// engineFor builds an engine over the description, its driver and the
// store, opened for reading and writing: to drive an upgrade.
func (g *globals) engineFor(c *config.Cluster, onEvent func(store.Event), judge ...func(from, to time.Time) (string, bool)) (*engine.Engine, *store.Store, error) {
	st, err := store.Open(g.dataDir)
	if err != nil {
		return nil, nil, err
	}
	return g.engineWith(c, st, onEvent, judge...)
}

// viewEngine builds an engine for a view (members, versions, releases,
// plan, health): its store is opened read-only, so that the views work
// on a data directory that cannot be written, and never create one.
func (g *globals) viewEngine(c *config.Cluster) (*engine.Engine, *store.Store, error) {
	st, err := store.OpenReadOnly(g.dataDir)
	if err != nil {
		return nil, nil, err
	}
	return g.engineWith(c, st, nil)
}

func (g *globals) engineWith(c *config.Cluster, st *store.Store, onEvent func(store.Event), judge ...func(from, to time.Time) (string, bool)) (*engine.Engine, *store.Store, error) {
	d, err := newDriver(c, g.driverLogger())
	if err != nil {
		return nil, nil, err
	}
	// Members of Kubernetes workloads are found now (the pods and nodes
	// that exist); a description that lists them keeps its list.
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := engine.Discover(dctx, c, d); err != nil {
		return nil, nil, err
	}
	cfg := engine.Config{Cluster: c, Driver: d, Store: st, Logger: g.logger(), OnEvent: onEvent}
	if len(judge) > 0 {
		cfg.Judge = judge[0]
	}
	e, err := engine.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return e, st, nil
}
