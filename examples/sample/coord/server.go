package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultLease is how long a standby waits without a heartbeat before
// it takes the role over.
const DefaultLease = 3 * time.Second

// Roles as GET /role says them.
const (
	RoleActive  = "active"
	RoleStandby = "standby"
	RoleUnknown = "unknown"
)

// Peer is another member of the pair.
type Peer struct {
	Name string
	Addr string // its HTTP address, host:port
}

// ParsePeers parses --peer values: name=host:port, comma-separated or
// repeated.
func ParsePeers(values []string) ([]Peer, error) {
	var out []Peer
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			name, addr, ok := strings.Cut(item, "=")
			if !ok || name == "" || addr == "" {
				return nil, fmt.Errorf("peer %q: want name=host:port", item)
			}
			out = append(out, Peer{Name: name, Addr: addr})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no peer: a coordinator stands in a pair")
	}
	return out, nil
}

// Config is everything a member needs.
type Config struct {
	Name     string
	HTTPAddr string
	Peers    []Peer
	// Lease defaults to DefaultLease; heartbeats go every sixth of it.
	Lease time.Duration
	// HandoverDelay makes a handover wait that long before it happens
	// (a slow switchover); the active serves on meanwhile.
	HandoverDelay time.Duration
	Version, Pin  string
	Logger        *slog.Logger
	Listener      net.Listener
}

// Server is one member of the pair.
type Server struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client

	mu       sync.Mutex
	term     uint64
	holder   string    // who holds the role as this member knows it
	expires  time.Time // a standby's view of the holder's lease
	peerSeen time.Time // the active's last acknowledged heartbeat
	seq      uint64    // stamps issued in this term
	handing  bool      // a handover is being made: no stamps
	pending  *handover

	httpSrv *http.Server
	ln      net.Listener
	errc    chan error
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// handover is one handover under way, to a peer.
type handover struct {
	to     string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// New checks cfg and returns a member that is not started yet.
func New(cfg Config) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("coord: name is required")
	}
	if len(cfg.Peers) == 0 {
		return nil, errors.New("coord: a peer is required")
	}
	for _, p := range cfg.Peers {
		if p.Name == cfg.Name {
			return nil, fmt.Errorf("coord: %s is its own peer", p.Name)
		}
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return &Server{cfg: cfg, log: cfg.Logger.With("component", "coord", "name", cfg.Name),
		client: &http.Client{Timeout: cfg.Lease / 3}, errc: make(chan error, 1)}, nil
}

// Start serves HTTP and begins heartbeating (when active) or watching
// the active's lease (when standing by).
func (s *Server) Start() error {
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("coord: listen: %w", err)
		}
	}
	s.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", s.handleVersion)
	mux.HandleFunc("GET /ready", s.handleReady)
	mux.HandleFunc("GET /role", s.handleRole)
	mux.HandleFunc("GET /cluster", s.handleCluster)
	mux.HandleFunc("POST /v1/stamp", s.handleStamp)
	mux.HandleFunc("POST /admin/handover", s.handleHandover)
	mux.HandleFunc("POST /peer/heartbeat", s.handleHeartbeat)
	mux.HandleFunc("POST /peer/take", s.handleTake)
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.loop(ctx) }()
	go func() {
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("coord: serve: %w", err)
		}
	}()
	s.log.Info("started", "http", ln.Addr().String(), "peers", s.cfg.Peers, "lease", s.cfg.Lease)
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Err reports a fatal serving error.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown stops serving. An active member hands nothing over: its
// standby takes the role once the lease runs out, as after a crash.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.mu.Lock()
		if p := s.pending; p != nil {
			p.cancel()
		}
		s.mu.Unlock()
		if s.httpSrv != nil {
			err = s.httpSrv.Shutdown(ctx)
		}
		s.wg.Wait()
		s.log.Info("stopped")
	})
	return err
}

// Status is a member's view of the pair.
type Status struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Holder string `json:"holder,omitempty"`
	Term   uint64 `json:"term"`
	// Handover names the member a handover under way goes to.
	Handover string `json:"handover,omitempty"`
}

func (s *Server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked(time.Now())
}

func (s *Server) statusLocked(now time.Time) Status {
	st := Status{Name: s.cfg.Name, Role: RoleUnknown, Holder: s.holder, Term: s.term}
	if s.pending != nil {
		st.Handover = s.pending.to
	}
	switch {
	case s.holder == s.cfg.Name:
		st.Role = RoleActive
	case s.holder != "" && now.Before(s.expires):
		st.Role = RoleStandby
	default:
		st.Holder = ""
	}
	return st
}

func (s *Server) peer(name string) (Peer, bool) {
	for _, p := range s.cfg.Peers {
		if p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}

// loop heartbeats the peers while active, and watches the active's
// lease while not: one that ran out (or none known) is taken over.
func (s *Server) loop(ctx context.Context) {
	every := s.cfg.Lease / 6
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) tick(ctx context.Context) {
	s.mu.Lock()
	st := s.statusLocked(time.Now())
	s.mu.Unlock()
	switch st.Role {
	case RoleActive:
		for _, p := range s.cfg.Peers {
			s.heartbeat(ctx, p, st.Term)
		}
	case RoleUnknown:
		s.elect(ctx)
	}
}

// heartbeat renews the active's hold on its peer; a peer on a later
// term (or winning a tie) makes it stand by.
func (s *Server) heartbeat(ctx context.Context, p Peer, term uint64) {
	var reply Status
	code, err := s.post(ctx, p.Addr, "/peer/heartbeat", Status{Name: s.cfg.Name, Role: RoleActive, Holder: s.cfg.Name, Term: term}, &reply)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
	case code == http.StatusOK:
		s.peerSeen = time.Now()
	case code == http.StatusConflict && s.holder == s.cfg.Name && reply.Term >= s.term:
		s.log.Warn("the peer holds a later term: standing by", "peer", p.Name, "term", reply.Term)
		s.standBy(reply.Holder, reply.Term)
	}
}

// elect runs when no holder is known (at the start, or the lease ran
// out): a peer that is active is followed; a peer that still counts a
// lease (of this member before it restarted, say) is waited for, as
// the lease is what keeps two actives apart; one that does not answer
// is taken over from; between two that know no holder, the lower name
// takes it. So an active restarted without a handover leaves the pair
// without an active until its lease ran out.
func (s *Server) elect(ctx context.Context) {
	for _, p := range s.cfg.Peers {
		var st Status
		code, err := s.get(ctx, p.Addr, "/role", &st)
		if err == nil && code == http.StatusOK {
			switch {
			case st.Role == RoleActive:
				s.mu.Lock()
				if st.Term >= s.term {
					s.standBy(st.Name, st.Term)
				}
				s.mu.Unlock()
				return
			case st.Role == RoleStandby:
				return // its lease runs: it decides once it ran out
			case p.Name < s.cfg.Name:
				return // the lower name takes it
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statusLocked(time.Now()).Role != RoleUnknown {
		return
	}
	s.activate(s.term + 1)
	s.log.Info("took the role: no active answered", "term", s.term)
}

// activate makes this member the active on term (s.mu held).
func (s *Server) activate(term uint64) {
	s.term, s.holder, s.seq, s.handing = term, s.cfg.Name, 0, false
	s.peerSeen = time.Time{}
}

// standBy makes this member follow holder on term (s.mu held).
func (s *Server) standBy(holder string, term uint64) {
	if p := s.pending; p != nil {
		p.cancel()
	}
	s.term, s.holder, s.expires, s.handing = term, holder, time.Now().Add(s.cfg.Lease), false
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var hb Status
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&hb); err != nil || hb.Name == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {name, term}"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	active := s.holder == s.cfg.Name
	if hb.Term < s.term || active && hb.Term == s.term && hb.Name > s.cfg.Name {
		writeJSON(w, http.StatusConflict, s.statusLocked(time.Now()))
		return
	}
	if active {
		s.log.Warn("a peer is active on a later term (or wins the tie): standing by", "peer", hb.Name, "term", hb.Term)
	}
	s.standBy(hb.Name, hb.Term)
	writeJSON(w, http.StatusOK, s.statusLocked(time.Now()))
}

// handleTake: the active hands the role over to this member, on the
// term it names.
func (s *Server) handleTake(w http.ResponseWriter, r *http.Request) {
	var t Status
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&t); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {name, term}"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Term <= s.term && s.holder != t.Name {
		writeJSON(w, http.StatusConflict, s.statusLocked(time.Now()))
		return
	}
	s.activate(t.Term)
	s.log.Info("took the role, handed over", "from", t.Name, "term", t.Term)
	writeJSON(w, http.StatusOK, s.statusLocked(time.Now()))
}

// handleHandover hands the role to the member named by ?to=, made on
// any member (a standby passes it to the active). It answers once the
// handover is done: the member named holds the role. A handover to the
// active itself is done already, and cancels one under way (the undo
// of a switchover whose call was cancelled).
func (s *Server) handleHandover(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("to")
	_, isPeer := s.peer(to)
	if to != s.cfg.Name && !isPeer {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("to=%q is not a member of the pair", to)})
		return
	}
	s.mu.Lock()
	for s.pending != nil && s.handing {
		// A handover is being made this instant: see where it lands.
		p := s.pending
		s.mu.Unlock()
		select {
		case <-p.done:
		case <-r.Context().Done():
			return
		}
		s.mu.Lock()
	}
	st := s.statusLocked(time.Now())
	switch {
	case st.Role != RoleActive:
		// Passed on even to=the active: it cancels a handover it has
		// under way.
		s.mu.Unlock()
		s.passOn(w, r, st, to)
		return
	case to == s.cfg.Name:
		detail := to + " holds the role already"
		if p := s.pending; p != nil {
			p.cancel()
			detail = to + " holds the role already; the handover to " + p.to + " under way is cancelled"
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"holder": to, "term": st.Term, "detail": detail})
		return
	}
	p := s.pending
	if p == nil || p.to != to {
		if p != nil {
			p.cancel()
		}
		p = s.beginHandover(to)
	}
	s.mu.Unlock()
	select {
	case <-p.done:
	case <-r.Context().Done():
		return // the handover goes on; its caller left
	}
	if p.err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": p.err.Error()})
		return
	}
	st = s.status()
	writeJSON(w, http.StatusOK, map[string]any{"holder": st.Holder, "term": st.Term, "detail": "handed over to " + to})
}

// passOn sends a handover made on a standby to the active.
func (s *Server) passOn(w http.ResponseWriter, r *http.Request, st Status, to string) {
	active, ok := s.peer(st.Holder)
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no active known to hand over from"})
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+active.Addr+"/admin/handover?to="+url.QueryEscape(to), nil)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": "the active " + active.Name + ": " + err.Error()})
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 1<<16))
}

// beginHandover starts handing the role to peer to (s.mu held): after
// the configured delay (the active serves on meanwhile), stamps stop,
// the peer takes the next term, and this member stands by.
func (s *Server) beginHandover(to string) *handover {
	ctx, cancel := context.WithCancel(context.Background())
	p := &handover{to: to, cancel: cancel, done: make(chan struct{})}
	s.pending = p
	peer, _ := s.peer(to)
	s.log.Info("handing the role over", "to", to, "delay", s.cfg.HandoverDelay)
	go func() {
		defer close(p.done)
		defer cancel()
		if d := s.cfg.HandoverDelay; d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				p.err = errors.New("the handover was cancelled")
				s.finish(p)
				return
			case <-t.C:
			}
		}
		s.mu.Lock()
		if ctx.Err() != nil || s.holder != s.cfg.Name {
			s.mu.Unlock()
			p.err = errors.New("the handover was cancelled, or the role left first")
			s.finish(p)
			return
		}
		s.handing = true
		term := s.term + 1
		s.mu.Unlock()
		var reply Status
		code, err := s.post(context.Background(), peer.Addr, "/peer/take", Status{Name: s.cfg.Name, Term: term}, &reply)
		s.mu.Lock()
		switch {
		case err == nil && code == http.StatusOK:
			s.standBy(to, term)
			s.log.Info("handed the role over", "to", to, "term", term)
		default:
			s.handing = false
			p.err = fmt.Errorf("%s did not take the role: %v (status %d)", to, err, code)
		}
		s.mu.Unlock()
		s.finish(p)
	}()
	return p
}

func (s *Server) finish(p *handover) {
	s.mu.Lock()
	if s.pending == p {
		s.pending = nil
	}
	s.mu.Unlock()
}

// handleStamp issues the next stamp: only the active does.
func (s *Server) handleStamp(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	st := s.statusLocked(time.Now())
	if st.Role != RoleActive || s.handing {
		s.mu.Unlock()
		why := "standby"
		if s.handing {
			why = "handing the role over"
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": why, "active": st.Holder})
		return
	}
	s.seq++
	stamp := s.term<<32 | s.seq
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"stamp": stamp, "term": st.Term, "by": s.cfg.Name})
}

func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	v := map[string]string{"name": s.cfg.Name, "component": "coord", "version": s.cfg.Version}
	if s.cfg.Pin != "" {
		v["pin"] = s.cfg.Pin
	}
	writeJSON(w, http.StatusOK, v)
}

// handleReady: ready once it knows who holds the role (itself, or a
// peer whose lease runs).
func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	st := s.status()
	if st.Role == RoleUnknown {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "no active known yet"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "role": st.Role})
}

func (s *Server) handleRole(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.status())
}

// handleCluster says whether the pair is whole: a member holds the
// role and the other follows it (the active's heartbeats acknowledged
// within a lease, or heard by this standby).
func (s *Server) handleCluster(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	now := time.Now()
	st := s.statusLocked(now)
	ok, detail := false, ""
	switch st.Role {
	case RoleActive:
		ok = now.Sub(s.peerSeen) < s.cfg.Lease/2 // two heartbeats missed: not whole
		detail = "active; the standby follows"
		if !ok {
			detail = "active; the standby does not answer"
		}
	case RoleStandby:
		ok, detail = true, "standby of "+st.Holder
	default:
		detail = "no active known"
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"ok": ok, "holder": st.Holder, "term": st.Term, "detail": detail})
}

func (s *Server) post(ctx context.Context, addr, path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	return s.do(req, out)
}

func (s *Server) get(ctx context.Context, addr, path string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	return s.do(req, out)
}

func (s *Server) do(req *http.Request, out any) (int, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(out)
	return resp.StatusCode, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
