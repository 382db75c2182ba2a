package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-upgrade/ferry/internal/trust/bearer"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/selfupgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Config is what a server works with.
type Config struct {
	Cluster *config.Cluster
	Driver  driver.Driver
	// Store keeps the records, events and engine lock: store.Store
	// (bbolt, one machine) or one shared by several servers that is an
	// Elector (etcdstore).
	Store Store
	// DataDir holds the token, the artifacts uploaded and (without a
	// CatalogKeeper store) the imported releases; default: the bbolt
	// store's directory.
	DataDir string
	// Advertise is this server's URL as the other servers reach it, the
	// election's value on a shared store (default: the URL it listens
	// on).
	Advertise string
	// Token is the bearer token every call but /v1/healthz and the
	// dashboard's files must carry (LoadOrCreateToken), named TokenName;
	// Tokens are named tokens ('ferry server --tokens'). A request's
	// identity, what the server records as who made a change (an
	// override's "by"), is its token's name. At least one is required.
	Token  string
	Tokens []bearer.Named
	Logger *slog.Logger
	// ObserveTTL is how long one observation of the cluster serves the
	// views (default 500ms).
	ObserveTTL time.Duration
	// Poll is how often the store is read for new events and the
	// current record, when the server's own engine did not signal a
	// change (default 250ms): other processes write there too.
	Poll time.Duration
	// Retry is how often an upgrade that no process drives is taken up
	// again after a failed attempt (default 2s).
	Retry time.Duration
	// ArtifactRoots are the directories, besides the data directory's
	// artifact store (DATA-DIR/artifacts, where uploads land), under
	// which the artifacts of an imported release may lie, symbolic links
	// resolved ('ferry server --artifact-root'). Nothing else is read:
	// an import must not read whatever the server can.
	ArtifactRoots []string
	// MaxArtifactSize bounds an imported or uploaded artifact (default
	// DefaultMaxArtifactSize).
	MaxArtifactSize int64
	// ImportTimeout bounds the check of an import's artifacts and the
	// reception of an upload (default DefaultImportTimeout).
	ImportTimeout time.Duration
	// BodyTimeout bounds the reception of a JSON request body (default
	// DefaultBodyTimeout): a client that stalls gets 408 then.
	BodyTimeout time.Duration
}

// Defaults of the imports' bounds.
const (
	DefaultMaxArtifactSize = 1 << 30
	DefaultImportTimeout   = 10 * time.Minute
)

func (c *Config) defaults() error {
	if c.Cluster == nil || c.Driver == nil || c.Store == nil {
		return errors.New("server: cluster, driver and store are required")
	}
	if c.DataDir == "" {
		p, ok := c.Store.(interface{ Path() string })
		if !ok {
			return errors.New("server: a data directory is required with a store that is not in one")
		}
		c.DataDir = filepath.Dir(p.Path())
	}
	if c.Token == "" && len(c.Tokens) == 0 {
		return errors.New("server: a token of at least 16 characters is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ObserveTTL <= 0 {
		c.ObserveTTL = 500 * time.Millisecond
	}
	if c.Poll <= 0 {
		c.Poll = 250 * time.Millisecond
	}
	if c.Retry <= 0 {
		c.Retry = 2 * time.Second
	}
	if c.MaxArtifactSize <= 0 {
		c.MaxArtifactSize = DefaultMaxArtifactSize
	}
	if c.ImportTimeout <= 0 {
		c.ImportTimeout = DefaultImportTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	return nil
}

// named is every token the server accepts: Token as TokenName, then
// Tokens.
func (c *Config) named() []bearer.Named {
	if c.Token == "" {
		return c.Tokens
	}
	return append([]bearer.Named{{Name: TokenName, Token: c.Token}}, c.Tokens...)
}

// secrets are the tokens' values, for what scrubs them (a bundle).
func (c *Config) secrets() []string {
	var out []string
	for _, n := range c.named() {
		out = append(out, n.Token)
	}
	return out
}

// Server is ferry's API, dashboard and metrics over one cluster.
type Server struct {
	cfg     Config
	log     *slog.Logger
	tokens  *bearer.Identities
	handler http.Handler
	routes  []route
	metrics *metrics
	hub     *hub

	// drive runs upgrades (one goroutine at a time); view serves the
	// API's observations, under viewMu; check its preflights, under
	// checkMu (an engine's checksum cache is not safe for concurrent
	// preflights), so that a view never waits on a preflight, which may
	// hash artifacts for seconds.
	drive *engine.Engine
	view  *engine.Engine
	check *engine.Engine

	checkMu sync.Mutex
	viewMu  sync.Mutex
	snap    engine.Snapshot
	snapAt  time.Time
	snapErr error

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	// reexec carries the path of a newer ferry binary to
	// ListenAndServe, which then stops and returns a *ReexecError
	// (selfupgrade.go); reexecing is set by the one request that sends.
	reexec    chan string
	reexecing atomic.Bool
	// buildsMu guards the agents' releases GET /v1/versions last asked
	// (builds, selfupgrade.go).
	buildsMu    sync.Mutex
	buildsCache selfupgrade.Builds
	buildsAt    time.Time
	start       sync.Once

	// lockMu is held around every take of the engine lock by this
	// server, and by drivenBy around its look at busy and its probe of
	// the lock: an flock conflicts within the process too, so a probe
	// made while the server takes the lock would refuse the server its
	// own lock; and a view never sees ensureDriving between its
	// reservation and its answer (busy, but maybe not driving).
	lockMu sync.Mutex

	// loadsImporting counts the imports in flight by version (their
	// load state importing), under loadsMu.
	loadsMu        sync.Mutex
	loadsImporting map[string]int

	// advertise is the server's URL in the election (Config.Advertise,
	// else the URL it listens on).
	advertise string

	mu   sync.Mutex
	busy bool          // an engine goroutine drives, or is being started, or an import commits
	idle chan struct{} // closed when busy ends
	// importing: busy for an import's change of the catalog (reserveImport),
	// a few milliseconds; no engine runs.
	importing bool
	driving   string             // the upgrade it drives
	stopRun   context.CancelFunc // ends the engine goroutine's run (a lost lease)
	// blocked holds the upgrades this server will not drive, and why
	// (begun with another description: the cluster lock).
	blocked  map[string]string
	lastTry  time.Time
	lastNote string // why the server does not drive the current upgrade
	cur      *upgrade.Upgrade
	lastSeq  uint64
	// drove is who drove each upgrade this server saw run, by id
	// (DrivenByServer or DrivenByOther): what the API says once it ended.
	drove map[string]string

	// catalogMu: API handlers read the catalog under it; an import
	// (releases.go) writes it.
	catalogMu catalogLock
	// catalogSeen is the shared catalog as the watcher last read it
	// (syncCatalog), when the store keeps it.
	catalogSeen []byte
	// roots are the directories imports may read artifacts from.
	roots []artifactRoot

	// The proof session of the last upgrade started with traffic
	// (traffic.go): live until that upgrade ends, kept for its series.
	trafficM    *trafficMetrics
	trafficMu   sync.Mutex
	session     *proof.Session
	sessionUp   string // the upgrade it runs around ("" while its baseline runs)
	sessionLive bool   // its traffic runs; batches are judged against it
	report      *proof.Report
	// reporting: the session of an ended upgrade runs its "after" and
	// reads its writes back; its report comes next (GET
	// /v1/upgrade/report answered 404 "no report" meanwhile).
	reporting bool
}

// New builds a server; Start begins its background work.
func New(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tokens, err := bearer.NewIdentities(cfg.named())
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, advertise: cfg.Advertise, tokens: tokens,
		hub: newHub(), kick: make(chan struct{}, 1), reexec: make(chan string, 1), blocked: map[string]string{}, drove: map[string]string{}}
	if b, err := s.readImported(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	} else if err := addImported(cfg.Cluster, s.importedWhere(), b); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.roots, err = artifactRoots(filepath.Join(cfg.DataDir, ArtifactsDir), cfg.ArtifactRoots); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.drive, err = engine.New(engine.Config{Cluster: cfg.Cluster, Driver: cfg.Driver, Store: cfg.Store, Logger: cfg.Logger,
		OnEvent: func(store.Event) { s.signal() }, Judge: s.judge})
	if err != nil {
		return nil, err
	}
	s.view, err = engine.New(engine.Config{Cluster: cfg.Cluster, Driver: cfg.Driver, Store: cfg.Store})
	if err != nil {
		return nil, err
	}
	s.check, err = engine.New(engine.Config{Cluster: cfg.Cluster, Driver: cfg.Driver, Store: cfg.Store})
	if err != nil {
		return nil, err
	}
	s.metrics = newMetrics(cfg.Cluster)
	s.trafficM = newTrafficMetrics(s.metrics.reg)
	s.handler = s.buildRoutes()
	return s, nil
}

// Handler is the server's HTTP handler: /v1, /metrics and the dashboard.
func (s *Server) Handler() http.Handler { return s.handler }

// Start begins the server's background work until Close: reading the
// store for events and the current record, and driving the current
// upgrade whenever it has not ended and no other process drives it.
func (s *Server) Start() error {
	var err error
	s.start.Do(func() {
		// Events written before the server started are history: the
		// stream and the metrics begin after them.
		var evs []store.Event
		for {
			evs, err = s.cfg.Store.Events("", s.lastSeq, 10000)
			if err != nil || len(evs) == 0 {
				break
			}
			s.lastSeq = evs[len(evs)-1].Seq
		}
		if err != nil {
			return
		}
		s.refresh()
		s.wg.Add(1)
		go s.watch()
		if el, ok := s.cfg.Store.(Elector); ok {
			if s.advertise == "" {
				err = errors.New("server: a shared store needs the server's URL (Config.Advertise) for the election")
				return
			}
			s.wg.Add(1)
			go s.campaign(el)
		}
	})
	return err
}

// Close stops the engine goroutine (the upgrade stays recorded: a new
// server or 'ferry upgrade resume' takes it up), the event streams and
// the background work, and waits for them.
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
}

// signal wakes the watcher: the server's engine stored something.
func (s *Server) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// watch reads the store for what changed, publishes new events, and
// reconciles: an upgrade that has not ended is driven by this server
// unless another process drives it.
func (s *Server) watch() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		s.refresh()
		s.reconcile()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// refresh reads the current record and the events after the last one
// seen, and hands the events to the stream and the metrics.
func (s *Server) refresh() {
	s.syncCatalog()
	u, ok, err := s.cfg.Store.Current()
	if err != nil {
		s.log.Warn("server: read the current upgrade", "err", err)
		return
	}
	var cur *upgrade.Upgrade
	if ok {
		cur = &u
	}
	s.mu.Lock()
	s.cur = cur
	after := s.lastSeq
	s.mu.Unlock()
	s.metrics.setUpgrade(cur)
	s.reapTraffic(cur)
	for {
		evs, err := s.cfg.Store.Events("", after, 1000)
		if err != nil {
			s.log.Warn("server: read events", "err", err)
			return
		}
		for _, ev := range evs {
			s.metrics.event(ev)
			s.hub.publish(ev)
			after = ev.Seq
		}
		s.mu.Lock()
		s.lastSeq = after
		s.mu.Unlock()
		if len(evs) < 1000 {
			return
		}
	}
}

// current is the record as last read by the watcher.
func (s *Server) current() (upgrade.Upgrade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return upgrade.Upgrade{}, false
	}
	return *s.cur, true
}

// reconcile takes up the current upgrade if it has not ended and
// nothing drives it, at most every Retry after a failed attempt.
func (s *Server) reconcile() {
	s.mu.Lock()
	cur := s.cur
	skip := cur == nil || cur.State.Terminal() || s.busy || s.blocked[cur.ID] != "" || time.Since(s.lastTry) < s.cfg.Retry
	s.mu.Unlock()
	if skip {
		return
	}
	if _, err := s.ensureDriving(); err != nil {
		s.log.Warn("server: cannot drive the current upgrade", "upgrade", cur.ID, "err", err)
	}
}

// Who drives the current upgrade, as the API reports it.
const (
	DrivenByServer = "server"        // this server's engine
	DrivenByOther  = "other-process" // another ferry process holds the engine lock
	DrivenByNone   = "none"          // nobody: the server may not (cluster lock), or it ended unseen by this server
)

var errBusy = errors.New("server: an upgrade is being driven by this server")

// reserve marks the server busy before an engine goroutine starts, so
// that two requests never start two.
func (s *Server) reserve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy {
		return false
	}
	s.busy = true
	s.idle = make(chan struct{})
	s.lastTry = time.Now()
	return true
}

// reserveImport marks the server busy while an import changes the
// catalog, which the engine reads: no engine starts meanwhile. It is not
// an attempt to drive (reconcile's Retry does not count it).
func (s *Server) reserveImport() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy {
		return false
	}
	s.busy, s.importing = true, true
	s.idle = make(chan struct{})
	return true
}

func (s *Server) release() {
	s.mu.Lock()
	s.busy, s.driving, s.importing, s.stopRun = false, "", false, nil
	close(s.idle)
	s.mu.Unlock()
}

// reserveAfterEnd reserves the server, waiting up to limit for an
// engine goroutine whose upgrade has ended (its record says so) to
// return, or for an import's change of the catalog to end: a client
// that saw the end may start the next at once.
func (s *Server) reserveAfterEnd(ctx context.Context, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for !s.reserve() {
		s.mu.Lock()
		idle, importing := s.idle, s.importing
		s.mu.Unlock()
		if !importing {
			u, ok, err := s.cfg.Store.Current()
			if err != nil || !ok || !u.State.Terminal() {
				return false
			}
		}
		select {
		case <-idle:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// ensureDriving starts the engine goroutine on the current upgrade
// unless one runs; it says who drives the upgrade now.
func (s *Server) ensureDriving() (string, error) {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if !s.reserve() {
		return DrivenByServer, nil
	}
	unlock, err := s.cfg.Store.LockEngine()
	if err != nil {
		s.release()
		if errors.Is(err, store.ErrLocked) {
			s.note("another ferry process drives the upgrade: " + err.Error())
			s.mu.Lock()
			if s.cur != nil && !s.cur.State.Terminal() {
				s.drove[s.cur.ID] = DrivenByOther
			}
			s.mu.Unlock()
			return DrivenByOther, nil
		}
		return DrivenByNone, err
	}
	s.run(unlock)
	return DrivenByServer, nil
}

// lockEngine takes the engine lock for a caller that has reserved the
// server, under lockMu (see there).
func (s *Server) lockEngine() (func(), error) {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	return s.cfg.Store.LockEngine()
}

func (s *Server) note(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg != s.lastNote {
		s.lastNote = msg
		s.log.Info("server: " + msg)
	}
}

// run drives the current upgrade in a goroutine owned by the server,
// holding the engine lock until it ends or the server closes. The
// caller has reserved the server.
func (s *Server) run(unlock func()) {
	if cur, ok, err := s.cfg.Store.Current(); err == nil && ok {
		s.mu.Lock()
		s.driving = cur.ID
		s.drove[cur.ID] = DrivenByServer
		s.mu.Unlock()
	}
	s.note("driving the current upgrade")
	ctx, stop := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.stopRun = stop
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.signal()
		defer s.release()
		defer unlock()
		defer stop()
		u, err := s.drive.Run(ctx)
		switch {
		case err == nil:
			s.stopTraffic(&u) // the report, with the record as it ended
		case ctx.Err() != nil, errors.Is(err, engine.ErrLocked):
			s.stopTraffic(nil)
		default:
			// Taken up again after Retry: the traffic goes on, and the
			// report comes at the end.
		}
		switch {
		case err == nil:
			s.log.Info("server: upgrade ended", "upgrade", u.ID, "state", u.State, "reason", u.Reason)
		case s.ctx.Err() != nil:
			s.log.Info("server: stopped driving the upgrade; it resumes at the next start", "upgrade", u.ID)
		case ctx.Err() != nil:
			s.log.Warn("server: stopped driving the upgrade: this server no longer leads; the leader takes it up", "upgrade", u.ID)
		case errors.Is(err, engine.ErrLocked):
			s.mu.Lock()
			s.blocked[u.ID] = err.Error()
			s.mu.Unlock()
			s.note(err.Error())
		default:
			s.log.Error("server: driving the upgrade failed; retrying", "upgrade", u.ID, "err", err)
		}
	}()
}

// drivenBy says who drives the current upgrade u or, once it ended,
// who drove it as this server saw it (none when it did not see it run).
func (s *Server) drivenBy(u upgrade.Upgrade) string {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	s.mu.Lock()
	busy := s.busy && !s.importing
	drove := s.drove[u.ID]
	s.mu.Unlock()
	switch {
	case busy:
		return DrivenByServer
	case u.State.Terminal() && drove != "":
		return drove
	case u.State.Terminal():
		return DrivenByNone
	}
	unlock, err := s.cfg.Store.LockEngine()
	if err != nil {
		s.mu.Lock()
		s.drove[u.ID] = DrivenByOther
		s.mu.Unlock()
		return DrivenByOther
	}
	unlock()
	return DrivenByNone
}

// observe returns an observation of the cluster no older than
// ObserveTTL, shared by every view.
func (s *Server) observe(ctx context.Context) (engine.Snapshot, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.snapErr == nil && !s.snapAt.IsZero() && time.Since(s.snapAt) < s.cfg.ObserveTTL {
		return s.snap, nil
	}
	snap, err := s.view.Observe(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return snap, err
		}
		s.snapErr, s.snapAt = err, time.Now()
		return snap, errf(http.StatusServiceUnavailable, CodeObserveFailed, "the cluster could not be observed: %v", err)
	}
	s.snap, s.snapAt, s.snapErr = snap, time.Now(), nil
	return snap, nil
}

// preflight runs the engine's preflight for the API.
func (s *Server) preflight(ctx context.Context, to string) engine.Preflight {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	pf := s.check.RunPreflight(ctx, to)
	s.metrics.setPreflight(pf)
	return pf
}

// hub fans events out to the streams.
type hub struct {
	mu   sync.Mutex
	subs map[chan store.Event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan store.Event]struct{}{}} }

// subscribe returns a channel of events published from now on. A
// subscriber that falls more than its buffer behind is dropped (its
// channel closed): an event stream client reconnects with
// Last-Event-ID and misses nothing.
func (h *hub) subscribe() (chan store.Event, func()) {
	ch := make(chan store.Event, 1024)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

func (h *hub) publish(ev store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}
