package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Raft timing tuned for loopback: a leader change (election or
// transfer) finishes well under a second, which is what lets an upgrade
// restart members one by one without clients noticing. The defaults
// (1s heartbeat, 500ms lease) are meant for real networks.
const (
	heartbeatTimeout   = 500 * time.Millisecond
	electionTimeout    = 500 * time.Millisecond
	leaderLeaseTimeout = 250 * time.Millisecond
	commitTimeout      = 20 * time.Millisecond

	// followerContactWindow is how recent a follower's last contact
	// with the leader must be for it to claim the cluster has quorum.
	followerContactWindow = time.Second

	maxValueBytes = 1 << 20
)

// Peer is one voter of the cluster: its raft server ID (the member
// name), its raft address, and its HTTP address (used for leader hints).
type Peer struct {
	ID       string
	RaftAddr string
	HTTPAddr string
}

// ParsePeers parses the --peers flag: a comma-separated list of
// name=raftaddr=httpaddr, one per voter.
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return nil, fmt.Errorf("peer %q: want name=raftaddr=httpaddr", item)
		}
		if seen[parts[0]] {
			return nil, fmt.Errorf("peer %q listed twice", parts[0])
		}
		seen[parts[0]] = true
		peers = append(peers, Peer{ID: parts[0], RaftAddr: parts[1], HTTPAddr: parts[2]})
	}
	if len(peers) == 0 {
		return nil, errors.New("no peers")
	}
	return peers, nil
}

// Config is everything a kv member needs. HTTPListener and RaftListener
// let tests hand in listeners on ports they already own, so no port is
// picked and then raced for.
type Config struct {
	// ID is this member's name and raft server ID; it must be in Peers.
	ID string
	// HTTPAddr and RaftAddr are the listen addresses; empty means this
	// member's entry in Peers. RaftAddr must equal that entry, since it
	// is what the other voters dial.
	HTTPAddr string
	RaftAddr string
	// Peers lists every voter, this member included.
	Peers []Peer
	// DataDir holds the raft log, stable store and snapshots.
	DataDir string
	// Version is reported by GET /version, and Pin, the release whose
	// formats the member was told to keep to (--pin), with it.
	Version string
	Pin     string
	Logger  *slog.Logger

	// NeverReady makes /ready always answer 503 (a fault build).
	NeverReady bool

	HTTPListener net.Listener
	RaftListener net.Listener

	// SnapshotThreshold overrides raft's (8192 entries); 0 keeps it.
	SnapshotThreshold uint64
}

// Server is one kv member: a raft node, its stores and its HTTP API.
type Server struct {
	cfg    Config
	log    *slog.Logger
	byID   map[string]Peer
	byRaft map[string]Peer

	fsm     *fsm
	store   *raftboltdb.BoltStore
	logs    raft.LogStore
	raft    *raft.Raft
	trans   *transport
	httpSrv *http.Server
	httpLn  net.Listener
	errc    chan error

	// checked: every command at or below this index is applied (see
	// caughtUp); it only grows.
	checked atomic.Uint64

	// held is the operator's reason to keep this member running
	// (PUT /admin/hold): while set, GET /admin/ok-to-stop says no.
	held atomic.Pointer[string]

	stopping     chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
}

// New checks cfg and returns a member that is not started yet.
func New(cfg Config) (*Server, error) {
	if cfg.ID == "" {
		return nil, errors.New("kv: id is required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("kv: data dir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "kv", "name", cfg.ID),
		byID:     map[string]Peer{},
		byRaft:   map[string]Peer{},
		fsm:      newFSM(knowsV2(cfg.Version)),
		errc:     make(chan error, 1),
		stopping: make(chan struct{}),
	}
	for _, p := range cfg.Peers {
		s.byID[p.ID] = p
		s.byRaft[p.RaftAddr] = p
	}
	self, ok := s.byID[cfg.ID]
	if !ok {
		return nil, fmt.Errorf("kv: id %q is not in peers", cfg.ID)
	}
	if s.cfg.RaftAddr == "" {
		s.cfg.RaftAddr = self.RaftAddr
	}
	if s.cfg.RaftAddr != self.RaftAddr {
		return nil, fmt.Errorf("kv: raft address %s differs from peers entry %s for %s", s.cfg.RaftAddr, self.RaftAddr, cfg.ID)
	}
	if s.cfg.HTTPAddr == "" {
		s.cfg.HTTPAddr = self.HTTPAddr
	}
	return s, nil
}

// Start opens the stores, starts raft (bootstrapping the cluster on a
// first start) and serves HTTP. It returns once the member is serving;
// it does not wait for a leader.
func (s *Server) Start() (err error) {
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("kv: create data dir: %w", err)
	}
	hl := newHclogAdapter(s.log, slog.LevelInfo)

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(s.cfg.DataDir, "raft.db")})
	if err != nil {
		return fmt.Errorf("kv: open raft store: %w", err)
	}
	closers = append(closers, func() { _ = store.Close() })
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return fmt.Errorf("kv: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(s.cfg.DataDir, 2, hl.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("kv: snapshot store: %w", err)
	}
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("kv: inspect existing state: %w", err)
	}

	rl := s.cfg.RaftListener
	if rl == nil {
		if rl, err = net.Listen("tcp", s.cfg.RaftAddr); err != nil {
			return fmt.Errorf("kv: listen raft: %w", err)
		}
	}
	closers = append(closers, func() { _ = rl.Close() })
	trans := newTransport(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  streamLayer{rl},
		MaxPool: 3,
		Timeout: 2 * time.Second,
		Logger:  hl.Named("net"),
	}))
	closers = append(closers, func() { _ = trans.Close() })

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.cfg.ID)
	rc.HeartbeatTimeout = heartbeatTimeout
	rc.ElectionTimeout = electionTimeout
	rc.LeaderLeaseTimeout = leaderLeaseTimeout
	rc.CommitTimeout = commitTimeout
	rc.Logger = hl
	if s.cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	}
	r, err := raft.NewRaft(rc, s.fsm, logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("kv: start raft: %w", err)
	}
	closers = append(closers, func() { _ = r.Shutdown().Error() })

	if !existing {
		// Every member bootstraps the same configuration on its first
		// start; raft refuses a second bootstrap with ErrCantBootstrap,
		// which is harmless.
		var servers []raft.Server
		for _, p := range s.cfg.Peers {
			servers = append(servers, raft.Server{
				Suffrage: raft.Voter,
				ID:       raft.ServerID(p.ID),
				Address:  raft.ServerAddress(p.RaftAddr),
			})
		}
		err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("kv: bootstrap: %w", err)
		}
		s.log.Info("bootstrapped cluster", "voters", len(servers))
	} else {
		s.log.Info("resuming from existing state", "data", s.cfg.DataDir)
	}

	hln := s.cfg.HTTPListener
	if hln == nil {
		if hln, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("kv: listen http: %w", err)
		}
	}
	s.store, s.logs, s.raft, s.trans, s.httpLn = store, logs, r, trans, hln
	s.httpSrv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.httpSrv.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("kv: serve http: %w", err)
		}
	}()
	s.log.Info("started", "http", hln.Addr().String(), "raft", rl.Addr().String(), "version", s.cfg.Version)
	return nil
}

// HTTPAddr is the address the HTTP API listens on.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// Err reports a fatal serving error, if one happens.
func (s *Server) Err() <-chan error { return s.errc }

// Snapshot asks raft for a snapshot now, which also compacts the log.
func (s *Server) Snapshot() error {
	if err := s.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("kv: snapshot: %w", err)
	}
	return nil
}

// Shutdown stops the member gracefully: a leader hands leadership to
// another voter first (so writes pause for a transfer, not an election
// timeout), then HTTP stops taking requests and finishes those in
// flight, then raft stops and the stores close. It is safe to call more
// than once.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.raft == nil {
		return nil // never started
	}
	s.shutdownOnce.Do(func() {
		close(s.stopping)
		if s.raft.State() == raft.Leader {
			tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			leader, err := s.transferLeadership(tctx)
			cancel()
			if err != nil {
				s.log.Warn("leadership transfer before shutdown failed; the others will elect", "err", err)
			} else {
				s.log.Info("handed leadership over before shutdown", "leader", leader)
			}
		}
		var errs []error
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kv: stop http: %w", err))
		}
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("kv: stop raft: %w", err))
		}
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("kv: close store: %w", err))
		}
		s.shutdownErr = errors.Join(errs...)
		s.log.Info("stopped")
	})
	return s.shutdownErr
}

// await waits for a raft future, but no longer than ctx allows. Raft
// futures always resolve eventually (at the latest on shutdown), so the
// goroutine left behind on a timeout does not leak for long.
func await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leader returns the known leader's ID and HTTP address, both empty
// when no leader is known.
func (s *Server) leader() (id, httpAddr string) {
	addr, lid := s.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	if p, ok := s.byID[string(lid)]; ok {
		return p.ID, p.HTTPAddr
	}
	if p, ok := s.byRaft[string(addr)]; ok {
		return string(lid), p.HTTPAddr
	}
	return string(lid), ""
}

// transferLeadership moves leadership to another voter and waits until
// this member sees the new leader. A member that is not the leader just
// reports the leader it knows. Raft picks the most up-to-date follower
// itself, which may be one that is down when nothing was written since
// it went; so when a voter is not answering, the target is chosen here
// among those that are. A failed transfer (the target was slow to
// catch up) is tried again while ctx allows.
func (s *Server) transferLeadership(ctx context.Context) (string, error) {
	var lastErr error
	for attempt := 0; s.raft.State() == raft.Leader && attempt < 3; attempt++ {
		f := s.transferFuture()
		if f == nil {
			return "", errors.New("leadership transfer: no other voter is answering")
		}
		err := await(ctx, f)
		// ErrLeadershipTransferInProgress: another caller started one;
		// waiting for its outcome below is what this caller wants too.
		if err == nil || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			lastErr = nil
			break
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr != nil && s.raft.State() == raft.Leader {
		return "", fmt.Errorf("leadership transfer: %w", lastErr)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		id, _ := s.leader()
		if s.raft.State() != raft.Leader && id != "" && id != s.cfg.ID {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for a new leader: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// transferFuture starts a transfer to a voter that is answering; nil
// when none is.
func (s *Server) transferFuture() raft.Future {
	var alive []Peer
	others := 0
	for _, p := range s.cfg.Peers {
		if p.ID == s.cfg.ID {
			continue
		}
		others++
		if s.trans.answeredWithin(raft.ServerAddress(p.RaftAddr), 3*heartbeatTimeout/2) {
			alive = append(alive, p)
		}
	}
	switch len(alive) {
	case 0:
		return nil
	case others:
		return s.raft.LeadershipTransfer()
	}
	p := alive[0]
	return s.raft.LeadershipTransferToServer(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr))
}

// ReadyStatus is the body of GET /ready. The reason comes second, so
// that a health check that quotes the start of the body says why.
type ReadyStatus struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	State  string `json:"state"`
	Leader string `json:"leader"`
}

// Ready reports whether this member can serve: it knows a leader, a
// follower has heard from it recently, the member has applied the log
// up to the commit index it knows (for a follower, the leader's commit
// index as last sent, see transport), and its release reads the format
// the cluster is pinned to (a 1.x member after finalize answers every
// read and write 503, so it is not ready). Having applied the log is
// what tells an upgrade that a restarted member has caught up, so that
// restarting the next one cannot leave the leader without a majority
// of up-to-date followers. Applying lags committing by a moment under
// load, so it waits up to 250ms for it.
func (s *Server) Ready(ctx context.Context) ReadyStatus {
	st := ReadyStatus{State: s.raft.State().String()}
	st.Leader, _ = s.leader()
	notReady := func(reason string) ReadyStatus {
		st.Reason = reason
		return st
	}
	select {
	case <-s.stopping:
		return notReady("shutting down")
	default:
	}
	if s.cfg.NeverReady {
		return notReady("fault: never-ready")
	}
	if st.Leader == "" {
		return notReady("no known leader")
	}
	state := s.raft.State()
	if state == raft.Follower {
		if since := time.Since(s.raft.LastContact()); since > followerContactWindow {
			return notReady(fmt.Sprintf("no contact with leader for %s", since.Round(time.Millisecond)))
		}
	} else if state != raft.Leader {
		return notReady("state " + state.String())
	}
	target := s.raft.CommitIndex()
	if state == raft.Follower {
		// Raft caps a follower's commit index at the end of its own log;
		// the leader's, as last sent, says how far behind it really is.
		seen := s.trans.leaderCommit.Load()
		if seen == 0 {
			return notReady("no log entries from the leader yet")
		}
		target = max(target, seen)
	}
	ctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	for {
		ok, err := s.caughtUp(target)
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			reason := fmt.Sprintf("catching up: applied through %d, committed %d",
				max(s.fsm.appliedIndex(), s.checked.Load()), target)
			if err != nil {
				reason += ": " + err.Error()
			}
			return notReady(reason)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Checked once caught up: the compat level is in the log it applies.
	if s.fsm.status(s.cfg.Version).Compat >= 2 && !s.fsm.v2 {
		// Every read and write would answer 503: a member that cannot
		// serve its cluster's format must not be taken for healthy.
		return notReady(fmt.Sprintf("cluster format 2 is newer than this release (%s) understands", s.cfg.Version))
	}
	st.Ready = true
	return st
}

// caughtUp reports whether the map reflects every command up to index
// target. The FSM only sees commands, so the entries between its last
// command and target (no-ops, barriers, configuration changes) are
// looked up in the log to check that none of them is a command; s.checked
// remembers how far that is known, so each entry is looked at once.
// Entries compacted out of the log are in the snapshot the FSM was
// restored from.
func (s *Server) caughtUp(target uint64) (bool, error) {
	c := max(s.fsm.appliedIndex(), s.checked.Load())
	if c >= target {
		return true, nil
	}
	first, err := s.logs.FirstIndex()
	if err != nil {
		return false, fmt.Errorf("first log index: %w", err)
	}
	if first == 0 {
		first = target + 1 // empty log: all of it is in the snapshot
	}
	c = max(c, first-1)
	defer func() {
		for cur := s.checked.Load(); c > cur && !s.checked.CompareAndSwap(cur, c); cur = s.checked.Load() {
		}
	}()
	for idx := c + 1; idx <= target; idx++ {
		var l raft.Log
		if err := s.logs.GetLog(idx, &l); err != nil {
			return false, fmt.Errorf("log entry %d: %w", idx, err)
		}
		if l.Type == raft.LogCommand && s.fsm.appliedIndex() < idx {
			return false, nil
		}
		c = idx
	}
	return true, nil
}

// ClusterStatus is the body of GET /cluster.
type ClusterStatus struct {
	Quorum     bool   `json:"quorum"`
	Leader     string `json:"leader"`
	LeaderHTTP string `json:"leader_http"`
	Voters     int    `json:"voters"`
	// Term is raft's current term as this member knows it: each
	// election (a leadership moved) raises it.
	Term uint64 `json:"term"`
}

// Cluster reports whether, as far as this member can tell, the cluster
// has a leader backed by a majority: on the leader by confirming it
// with a round of heartbeats (VerifyLeader), on a follower by recent
// contact with the leader.
func (s *Server) Cluster(ctx context.Context) ClusterStatus {
	var st ClusterStatus
	st.Leader, st.LeaderHTTP = s.leader()
	st.Voters = len(s.cfg.Peers)
	st.Term = s.raft.CurrentTerm()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	f := s.raft.GetConfiguration()
	if err := await(cctx, f); err == nil {
		n := 0
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				n++
			}
		}
		st.Voters = n
	}
	cancel()
	switch s.raft.State() {
	case raft.Leader:
		vctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		st.Quorum = await(vctx, s.raft.VerifyLeader()) == nil
		cancel()
	case raft.Follower:
		st.Quorum = st.Leader != "" && time.Since(s.raft.LastContact()) < followerContactWindow
	}
	return st
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", s.handleVersion)
	mux.HandleFunc("GET /ready", s.handleReady)
	mux.HandleFunc("GET /cluster", s.handleCluster)
	mux.HandleFunc("PUT /kv/{key}", s.handlePut)
	mux.HandleFunc("GET /kv/{key}", s.handleGet)
	mux.HandleFunc("POST /admin/step-down", s.handleStepDown)
	mux.HandleFunc("GET /admin/format", s.handleFormat)
	mux.HandleFunc("POST /admin/compat", s.handleCompat)
	mux.HandleFunc("POST /admin/migrate", s.handleMigrate)
	mux.HandleFunc("POST /admin/contract", s.handleContract)
	mux.HandleFunc("GET /admin/ok-to-stop", s.handleOKToStop)
	mux.HandleFunc("PUT /admin/hold", s.handleHold)
	mux.HandleFunc("DELETE /admin/hold", s.handleHold)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error      string `json:"error"`
	Leader     string `json:"leader,omitempty"`
	LeaderHTTP string `json:"leader_http,omitempty"`
}

func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	v := map[string]string{"name": s.cfg.ID, "component": "kv", "version": s.cfg.Version}
	if s.cfg.Pin != "" {
		v["pin"] = s.cfg.Pin // only when pinned: an unpinned member's answer is unchanged
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	st := s.Ready(r.Context())
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	// ?delay=5s makes the check slow, as a real cluster-wide check can
	// be (for tests of an orchestrator's gates); bounded to a minute.
	// A shutdown cuts the delay short: a slow check must not hold the
	// member's graceful stop.
	if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil && d > 0 {
		t := time.NewTimer(min(d, time.Minute))
		select {
		case <-r.Context().Done():
		case <-s.stopping:
		case <-t.C:
		}
		t.Stop()
	}
	st := s.Cluster(r.Context())
	code := http.StatusOK
	if !st.Quorum {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

// notLeader answers a request that only the leader may serve: 421 with
// the leader's address so the caller can go there, or 503 when no
// leader is known (an election is under way; retry shortly).
func (s *Server) notLeader(w http.ResponseWriter) {
	id, addr := s.leader()
	if id == "" || id == s.cfg.ID {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "no leader"})
		return
	}
	writeJSON(w, http.StatusMisdirectedRequest, errorBody{Error: "not leader", Leader: id, LeaderHTTP: addr})
}

// raftError maps a failed raft operation to a status. Everything that
// means "leadership is moving" is a 503 so that callers retry; the api
// tier does, which is what hides leader changes from clients.
func (s *Server) raftError(w http.ResponseWriter, op string, err error) {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		s.notLeader(w)
	case errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: op + ": " + err.Error()})
	default:
		s.log.Error(op+" failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: op + ": " + err.Error()})
	}
}

func validKey(w http.ResponseWriter, key string) bool {
	if key == "" || !utf8.ValidString(key) {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "key must be non-empty UTF-8"})
		return false
	}
	return true
}

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !validKey(w, key) {
		return
	}
	if s.raft.State() != raft.Leader {
		s.notLeader(w)
		return
	}
	val, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxValueBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: "value too large"})
			return
		}
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "read body: " + err.Error()})
		return
	}
	op := opSet
	if st := s.fsm.status(s.cfg.Version); st.Compat >= 2 {
		if !s.fsm.v2 {
			s.tooNew(w)
			return
		}
		op = opSet2
	}
	cmd, err := json.Marshal(command{Op: op, Key: key, Value: val})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	// Apply's future resolves once the entry is committed and applied
	// here, so 204 means the write is durable on a majority.
	f := s.raft.Apply(cmd, 2*time.Second)
	if err := await(ctx, f); err != nil {
		s.raftError(w, "apply", err)
		return
	}
	if err, ok := f.Response().(error); ok && err != nil {
		s.raftError(w, "apply", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleGet reads a key. By default the read is linearizable: a raft
// Barrier commits through a majority (proving this member still leads)
// and waits until everything before it is applied, so the read sees
// every write acknowledged before it started. ?stale=1 skips that and
// reads whatever this member has applied.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !validKey(w, key) {
		return
	}
	if r.URL.Query().Get("stale") == "" || r.URL.Query().Get("stale") == "0" {
		if s.raft.State() != raft.Leader {
			s.notLeader(w)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := await(ctx, s.raft.Barrier(2*time.Second)); err != nil {
			s.raftError(w, "barrier", err)
			return
		}
	}
	v, ok, err := s.fsm.read(key)
	switch {
	case errors.Is(err, errTooNew):
		s.tooNew(w)
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "key " + key + ": " + err.Error()})
		return
	case !ok:
		writeJSON(w, http.StatusNotFound, errorBody{Error: "not found"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.WriteString(w, v)
}

func (s *Server) handleStepDown(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	wasLeader := s.raft.State() == raft.Leader
	leader, err := s.transferLeadership(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
		return
	}
	_, addr := s.leader()
	if wasLeader {
		s.log.Info("stepped down", "leader", leader)
	}
	writeJSON(w, http.StatusOK, map[string]string{"leader": leader, "leader_http": addr})
}

// maxHoldReason bounds the reason of a hold.
const maxHoldReason = 1 << 10

// handleOKToStop answers whether this member may stop now, as a system
// that knows its own state answers an orchestrator (Ceph's ok-to-stop):
// 200 when it may, 409 with the reason in plain words when it is held.
func (s *Server) handleOKToStop(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why := s.held.Load(); why != nil {
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, "held by the operator: "+*why+"\n")
		return
	}
	_, _ = io.WriteString(w, "ok to stop\n")
}

// handleHold holds this member (PUT, the body is the reason, kept in
// memory: a restart releases it) or releases it (DELETE).
func (s *Server) handleHold(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		s.held.Store(nil)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxHoldReason+1))
	why := strings.TrimSpace(string(b))
	switch {
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "reading the reason: " + err.Error()})
		return
	case why == "" || len(b) > maxHoldReason || !utf8.ValidString(why) || strings.ContainsAny(why, "\r\n"):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("the body is the reason of the hold: one line of text, at most %d bytes", maxHoldReason)})
		return
	}
	s.held.Store(&why)
	s.log.Info("held", "reason", why)
	w.WriteHeader(http.StatusNoContent)
}
