package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/api"
	"github.com/ferry-upgrade/ferry/examples/sample/coord"
	"github.com/ferry-upgrade/ferry/examples/sample/kv"
	"github.com/ferry-upgrade/ferry/examples/sample/lb"
)

var (
	version = "dev"
	// fault makes a kv or api build misbehave on purpose, so that ferry
	// can be shown to detect a bad release and roll it back. One of
	// exit-at-start, never-ready, crash-after, slow, needs-new-kv (an
	// api that fails its requests while the kv leader runs an older
	// major release: a mixed-version incompatibility); empty is healthy.
	fault = ""
)

const (
	faultExitAtStart = "exit-at-start"
	faultNeverReady  = "never-ready"
	faultCrashAfter  = "crash-after"
	faultSlow        = "slow"
	faultNeedsNewKV  = "needs-new-kv"

	crashDelay   = 4 * time.Second
	slowLatency  = 200 * time.Millisecond
	stopDeadline = 20 * time.Second
)

const usage = `usage: sample kv|api|lb|coord [flags]

  sample kv    --id kv-1 --http 127.0.0.1:8101 --raft 127.0.0.1:9101 \
               --peers kv-1=127.0.0.1:9101=127.0.0.1:8101,... --data DIR
  sample api   --name api-1 --http 127.0.0.1:8201 --kv 127.0.0.1:8101,... \
               [--coord 127.0.0.1:8301,127.0.0.1:8302]
  sample lb    --http 127.0.0.1:8000 --admin 127.0.0.1:8001 \
               --backend api-1=127.0.0.1:8201 --backend api-2=...
  sample coord --name coord-1 --http 127.0.0.1:8301 --peer coord-2=127.0.0.1:8302

Every subcommand takes --version. Run "sample CMD -h" for its flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// member is what every subcommand runs: start, serve until a signal or
// a fatal error, then stop gracefully.
type member interface {
	Start() error
	Shutdown(ctx context.Context) error
	Err() <-chan error
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("version", version)
	if fault != "" {
		log = log.With("fault", fault)
	}
	var (
		m     member
		ready func() bool
		code  int
	)
	switch args[0] {
	case "kv":
		m, ready, code = setupKV(args[1:], stdout, stderr, log)
	case "api":
		m, ready, code = setupAPI(args[1:], stdout, stderr, log)
	case "lb":
		m, code = setupLB(args[1:], stdout, stderr, log)
	case "coord":
		m, ready, code = setupCoord(args[1:], stdout, stderr, log)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, version)
		return 0
	default:
		fmt.Fprintf(stderr, "sample: unknown subcommand %q\n\n%s", args[0], usage)
		return 2
	}
	if m == nil {
		return code
	}
	return serve(m, ready, log)
}

// parseFlags parses a subcommand's flags, handling --version. done is
// true when the process should exit with code.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, code int) {
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, 0
		}
		return true, 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version)
		return true, 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %q\n", fs.Args())
		return true, 2
	}
	return false, 0
}

// parseMember parses a member's flags and applies the build's fault:
// parseFlags, then checkFault.
func parseMember(fs *flag.FlagSet, args []string, stdout io.Writer, log *slog.Logger) (done bool, code int) {
	if done, code := parseFlags(fs, args, stdout); done {
		return done, code
	}
	return checkFault(log)
}

// checkFault validates the build's fault and applies exit-at-start.
// done is true when the process should exit with code.
func checkFault(log *slog.Logger) (done bool, code int) {
	switch fault {
	case "", faultNeverReady, faultCrashAfter, faultSlow, faultNeedsNewKV:
		return false, 0
	case faultExitAtStart:
		log.Error("fault build: exiting at start")
		return true, 1
	default:
		log.Error("unknown fault in this build", "want", "exit-at-start|never-ready|crash-after|slow|needs-new-kv")
		return true, 1
	}
}

func setupKV(args []string, stdout, stderr io.Writer, log *slog.Logger) (member, func() bool, int) {
	fs := flag.NewFlagSet("sample kv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "member name and raft server ID, e.g. kv-1 (required)")
	httpAddr := fs.String("http", "", "HTTP listen address (default: this member's entry in --peers)")
	raftAddr := fs.String("raft", "", "raft listen address (default: this member's entry in --peers)")
	peersFlag := fs.String("peers", "", "every voter as name=raftaddr=httpaddr, comma-separated, this member included (required)")
	data := fs.String("data", "", "data directory for the raft log, stable store and snapshots (required)")
	pin := fs.String("pin", "", pinUsage)
	if done, code := parseMember(fs, args, stdout, log); done {
		return nil, nil, code
	}
	peers, err := kv.ParsePeers(*peersFlag)
	if err != nil {
		log.Error("bad --peers", "err", err)
		return nil, nil, 2
	}
	srv, err := kv.New(kv.Config{
		ID: *id, HTTPAddr: *httpAddr, RaftAddr: *raftAddr, Peers: peers, DataDir: *data,
		Version: version, Pin: *pin, Logger: log, NeverReady: fault == faultNeverReady,
	})
	if err != nil {
		log.Error("bad configuration", "err", err)
		return nil, nil, 2
	}
	ready := func() bool { return srv.Ready(context.Background()).Ready }
	return srv, ready, 0
}

func setupAPI(args []string, stdout, stderr io.Writer, log *slog.Logger) (member, func() bool, int) {
	fs := flag.NewFlagSet("sample api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "member name, e.g. api-1 (required)")
	httpAddr := fs.String("http", "127.0.0.1:8201", "HTTP listen address")
	kvFlag := fs.String("kv", "", "kv members' HTTP addresses, comma-separated (required)")
	coordFlag := fs.String("coord", "", "the coordinator pair's HTTP addresses, comma-separated: each write gets a stamp from the active one first")
	fs.DurationVar(&lameDuck, "lame-duck", 0, "after SIGTERM, keep serving this long before shutting down (as servers behind a slow load balancer do)")
	readyDelay := fs.Duration("ready-delay", 0, "answer /ready 503 this long after the start (a warm-up)")
	pin := fs.String("pin", "", pinUsage)
	if done, code := parseMember(fs, args, stdout, log); done {
		return nil, nil, code
	}
	kvAddrs := splitList(*kvFlag)
	cfg := api.Config{Name: *name, HTTPAddr: *httpAddr, KVAddrs: kvAddrs, CoordAddrs: splitList(*coordFlag), Version: version, Pin: *pin, Logger: log,
		NeverReady: fault == faultNeverReady, ReadyDelay: *readyDelay}
	if fault == faultSlow {
		cfg.ExtraLatency = slowLatency
	}
	if fault == faultNeedsNewKV {
		cfg.NeedsKVMajor = api.MajorOf(version)
	}
	srv, err := api.New(cfg)
	if err != nil {
		log.Error("bad configuration", "err", err)
		return nil, nil, 2
	}
	ready := func() bool { ok, _ := srv.Ready(); return ok }
	return srv, ready, 0
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(v string) []string {
	var out []string
	for a := range strings.SplitSeq(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func setupCoord(args []string, stdout, stderr io.Writer, log *slog.Logger) (member, func() bool, int) {
	fs := flag.NewFlagSet("sample coord", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "member name, e.g. coord-1 (required)")
	httpAddr := fs.String("http", "127.0.0.1:8301", "HTTP listen address")
	var peers listFlag
	fs.Var(&peers, "peer", "the other member as name=host:port (required)")
	lease := fs.Duration("lease", coord.DefaultLease, "how long a standby waits without the active's heartbeat before it takes the role")
	delay := fs.Duration("handover-delay", 0, "wait this long before a handover happens (a slow switchover)")
	pin := fs.String("pin", "", pinUsage)
	if done, code := parseMember(fs, args, stdout, log); done {
		return nil, nil, code
	}
	ps, err := coord.ParsePeers(peers)
	if err != nil {
		log.Error("bad --peer", "err", err)
		return nil, nil, 2
	}
	srv, err := coord.New(coord.Config{Name: *name, HTTPAddr: *httpAddr, Peers: ps, Lease: *lease, HandoverDelay: *delay,
		Version: version, Pin: *pin, Logger: log})
	if err != nil {
		log.Error("bad configuration", "err", err)
		return nil, nil, 2
	}
	return srv, nil, 0
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func setupLB(args []string, stdout, stderr io.Writer, log *slog.Logger) (member, int) {
	fs := flag.NewFlagSet("sample lb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "127.0.0.1:8000", "client-facing listen address")
	adminAddr := fs.String("admin", "127.0.0.1:8001", "admin API listen address")
	var backends listFlag
	fs.Var(&backends, "backend", "backend as name=host:port, or name=host:port@host (locked with its host: POST /admin/hosts/HOST/lock); repeatable or comma-separated (required)")
	if done, code := parseFlags(fs, args, stdout); done {
		return nil, code
	}
	bs, err := lb.ParseBackends(backends)
	if err != nil {
		log.Error("bad --backend", "err", err)
		return nil, 2
	}
	l, err := lb.New(lb.Config{HTTPAddr: *httpAddr, AdminAddr: *adminAddr, Backends: bs, Version: version, Logger: log})
	if err != nil {
		log.Error("bad configuration", "err", err)
		return nil, 2
	}
	return l, 0
}

// pinUsage says what kv's and api's --pin is: the release whose formats
// the member keeps to (Ironic's pin_release_version), reported on GET
// /version so that a test can see which pin each process started with.
const pinUsage = "the release whose formats this member keeps to (reported on GET /version); empty: its own"

// lameDuck is how long a member keeps serving after SIGTERM (api's
// --lame-duck).
var lameDuck time.Duration

// serve starts m, waits for SIGTERM/SIGINT or a fatal error, and stops
// m gracefully. A crash-after build exits 2 a few seconds after it
// first becomes ready, without stopping gracefully: it stands for a
// release that passes its first health checks and then falls over.
func serve(m member, ready func() bool, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := m.Start(); err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	if fault == faultCrashAfter && ready != nil {
		go func() {
			for !ready() {
				time.Sleep(50 * time.Millisecond)
			}
			log.Warn("fault build: ready; crashing soon", "in", crashDelay)
			time.Sleep(crashDelay)
			log.Error("fault build: crashing")
			os.Exit(2)
		}()
	}
	code := 0
	select {
	case <-ctx.Done():
		log.Info("signal received; shutting down")
	case err := <-m.Err():
		log.Error("fatal", "err", err)
		code = 1
	}
	stop()
	if lameDuck > 0 && code == 0 {
		log.Info("lame duck: serving on before the shutdown", "for", lameDuck)
		time.Sleep(lameDuck)
	}
	sctx, cancel := context.WithTimeout(context.Background(), stopDeadline)
	defer cancel()
	if err := m.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return code
}
