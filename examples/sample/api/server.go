package api

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
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultRetryBudget = 5 * time.Second
	defaultCoordBudget = 1500 * time.Millisecond
	minBackoff         = 20 * time.Millisecond
	maxBackoff         = 200 * time.Millisecond
	// attemptTimeout caps one try against one kv member, so that a
	// member that hangs costs part of the budget, not all of it.
	attemptTimeout = 3 * time.Second
	maxValueBytes  = 1 << 20
)

// Config is everything an api member needs. Listener lets tests hand in
// a listener on a port they already own.
type Config struct {
	Name     string
	HTTPAddr string
	// KVAddrs are the HTTP addresses of the kv members; any of them can
	// point the way to the leader.
	KVAddrs []string
	// CoordAddrs, if set, are the coordinator pair's HTTP addresses:
	// each write first gets a stamp from the active one (X-Stamp on the
	// answer), within CoordBudget; a write that gets none fails (503).
	CoordAddrs []string
	// CoordBudget bounds the wait for a stamp; 0 means 1.5s, less than
	// the pair's lease, so that an active stopped without a switchover
	// shows as failed writes.
	CoordBudget time.Duration
	Version     string
	// Pin is the release whose formats the member was told to keep to
	// (--pin), reported by GET /version.
	Pin    string
	Logger *slog.Logger

	// NeverReady makes /ready always answer 503 (a fault build).
	NeverReady bool
	// ReadyDelay keeps /ready at 503 that long after the start, as a
	// server warming a cache would.
	ReadyDelay time.Duration
	// ExtraLatency is added to every /v1/kv request (a fault build).
	ExtraLatency time.Duration
	// NeedsKVMajor, if set, fails every /v1/kv request (500) while the
	// kv leader reports a lower major version on its GET /version: a
	// release that cannot work against the store's previous release, a
	// mixed-version incompatibility (a fault build) that only a check
	// of the mixed state finds; /ready stays 200.
	NeedsKVMajor int

	Listener net.Listener
	// RetryBudget bounds how long one client request may spend finding
	// the kv leader; 0 means 5s.
	RetryBudget time.Duration
}

// Server is one api member.
type Server struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client

	mu     sync.Mutex
	leader string // cached kv leader HTTP address, "" when unknown
	// kvSeen is the version the kv leader reported last and when
	// (NeedsKVMajor), asked again after kvVersionTTL.
	kvSeen   string
	kvSeenAt time.Time
	active   string // the coordinator that stamped last, tried first

	reached  atomic.Bool // a kv leader answered at least once
	stopping atomic.Bool
	created  time.Time

	httpSrv *http.Server
	ln      net.Listener
	errc    chan error
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error
}

// New checks cfg and returns a member that is not started yet.
func New(cfg Config) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("api: name is required")
	}
	if len(cfg.KVAddrs) == 0 {
		return nil, errors.New("api: at least one kv address is required")
	}
	if cfg.RetryBudget <= 0 {
		cfg.RetryBudget = defaultRetryBudget
	}
	if cfg.CoordBudget <= 0 {
		cfg.CoordBudget = defaultCoordBudget
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 500 * time.Millisecond}).DialContext,
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Server{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "api", "name", cfg.Name),
		client:  &http.Client{Transport: tr},
		errc:    make(chan error, 1),
		created: time.Now(),
	}, nil
}

// Start serves HTTP and starts looking for the kv leader in the
// background, so that /ready turns 200 without waiting for a client.
func (s *Server) Start() error {
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("api: listen: %w", err)
		}
	}
	s.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", s.handleVersion)
	mux.HandleFunc("GET /ready", s.handleReady)
	mux.HandleFunc("PUT /v1/kv/{key}", s.handleKV)
	mux.HandleFunc("GET /v1/kv/{key}", s.handleKV)
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.findLeaderUntilReached(ctx)
	}()
	go func() {
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("api: serve: %w", err)
		}
	}()
	s.log.Info("started", "http", ln.Addr().String(), "kv", s.cfg.KVAddrs, "version", s.cfg.Version)
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Err reports a fatal serving error, if one happens.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown marks the member not ready, then stops accepting and waits
// for in-flight requests (bounded by ctx). Safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.httpSrv == nil {
		return nil // never started
	}
	s.shutdownOnce.Do(func() {
		s.stopping.Store(true)
		s.cancel()
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			s.shutdownErr = fmt.Errorf("api: shutdown: %w", err)
		}
		s.wg.Wait()
		s.client.CloseIdleConnections()
		s.log.Info("stopped")
	})
	return s.shutdownErr
}

// Ready reports whether the member should get traffic, and if not why.
func (s *Server) Ready() (bool, string) {
	switch {
	case s.stopping.Load():
		return false, "shutting down"
	case s.cfg.NeverReady:
		return false, "fault: never-ready"
	case time.Since(s.created) < s.cfg.ReadyDelay:
		return false, "warming up"
	case !s.reached.Load():
		return false, "kv leader not reached yet"
	}
	return true, ""
}

func (s *Server) findLeaderUntilReached(ctx context.Context) {
	for !s.reached.Load() {
		if addr, err := s.discover(ctx); err == nil {
			s.setLeader("", addr)
			s.reached.Store(true)
			s.log.Info("found kv leader", "leader_http", addr)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) cachedLeader() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader
}

// setLeader replaces the cached leader if it is still old, so that a
// slow request that learned something stale does not overwrite what a
// faster one learned since.
func (s *Server) setLeader(old, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leader == old {
		s.leader = addr
	}
}

type clusterStatus struct {
	Quorum     bool   `json:"quorum"`
	Leader     string `json:"leader"`
	LeaderHTTP string `json:"leader_http"`
}

// discover asks the kv members' /cluster, in turn, who leads. A member
// that reports quorum is believed first; a bare hint from one that does
// not is used only when nobody reports quorum.
func (s *Server) discover(ctx context.Context) (string, error) {
	var errs []error
	hint := ""
	for _, addr := range s.cfg.KVAddrs {
		st, err := s.clusterOf(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Quorum && st.LeaderHTTP != "" {
			return st.LeaderHTTP, nil
		}
		if hint == "" {
			hint = st.LeaderHTTP
		}
		errs = append(errs, fmt.Errorf("kv %s: no quorum", addr))
	}
	if hint != "" {
		return hint, nil
	}
	return "", fmt.Errorf("api: no kv leader known: %w", errors.Join(errs...))
}

func (s *Server) clusterOf(ctx context.Context, addr string) (clusterStatus, error) {
	var st clusterStatus
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/cluster", nil)
	if err != nil {
		return st, fmt.Errorf("kv %s: %w", addr, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return st, fmt.Errorf("kv %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("kv %s: decode /cluster: %w", addr, err)
	}
	return st, nil
}

// result is a kv response to relay to the client.
type result struct {
	status      int
	contentType string
	body        []byte
}

func (s *Server) attempt(ctx context.Context, method, target, key, rawQuery string, body []byte) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	u := "http://" + target + "/kv/" + url.PathEscape(key)
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kv %s: read response: %w", target, err)
	}
	return &result{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}, nil
}

var errBudget = errors.New("kv leader not reachable in time")

// forward sends one request to the kv leader, following the leader
// wherever it goes within the retry budget: a 421 names the new leader
// (followed at once, twice at most in a row, then with backoff); a 503
// or a failed connection means an election or a restart is under way
// (back off 20ms, doubling to 200ms, and ask the cluster again). PUT is
// a plain overwrite, so repeating one whose outcome was lost with a
// connection is safe.
func (s *Server) forward(ctx context.Context, method, key, rawQuery string, body []byte) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryBudget)
	defer cancel()
	backoff := minBackoff
	var lastErr error
	hops := 0
	wait := func() error {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(backoff*2, maxBackoff)
		hops = 0
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w (last: %w)", errBudget, ctx.Err(), lastErr)
		case <-t.C:
			return nil
		}
	}
	for {
		target := s.cachedLeader()
		if target == "" {
			addr, err := s.discover(ctx)
			if err != nil {
				lastErr = err
				if err := wait(); err != nil {
					return nil, err
				}
				continue
			}
			s.setLeader("", addr)
			target = addr
		}
		res, err := s.attempt(ctx, method, target, key, rawQuery, body)
		switch {
		case err != nil:
			lastErr = err
			s.setLeader(target, "")
		case res.status == http.StatusMisdirectedRequest:
			var hint clusterStatus
			_ = json.Unmarshal(res.body, &hint)
			lastErr = fmt.Errorf("kv %s: not leader (hint %q)", target, hint.LeaderHTTP)
			s.setLeader(target, hint.LeaderHTTP)
			if hint.LeaderHTTP != "" && hint.LeaderHTTP != target && hops < 2 {
				hops++
				continue
			}
		case res.status == http.StatusServiceUnavailable:
			lastErr = fmt.Errorf("kv %s: unavailable: %s", target, bytes.TrimSpace(res.body))
			s.setLeader(target, "")
		default:
			s.reached.Store(true)
			return res, nil
		}
		if err := wait(); err != nil {
			return nil, err
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	v := map[string]string{"name": s.cfg.Name, "component": "api", "version": s.cfg.Version}
	if s.cfg.Pin != "" {
		v["pin"] = s.cfg.Pin // only when pinned: an unpinned member's answer is unchanged
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	ok, reason := s.Ready()
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true})
}

func (s *Server) handleKV(w http.ResponseWriter, r *http.Request) {
	if d := s.cfg.ExtraLatency; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	key := r.PathValue("key")
	var body []byte
	if r.Method == http.MethodPut {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxValueBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "value too large"})
				return
			}
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read body: " + err.Error()})
			return
		}
		if body == nil {
			body = []byte{}
		}
	}
	if s.cfg.NeedsKVMajor > 0 {
		if v := s.kvVersion(r.Context()); MajorOf(v) < s.cfg.NeedsKVMajor {
			writeJSON(w, http.StatusInternalServerError, map[string]string{
				"error": fmt.Sprintf("mixed versions: api %s needs kv %d.x, the kv leader runs %q", s.cfg.Version, s.cfg.NeedsKVMajor, v)})
			return
		}
	}
	if r.Method == http.MethodPut && len(s.cfg.CoordAddrs) > 0 {
		st, err := s.stamp(r.Context())
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Warn("request failed: no stamp", "key", key, "err", err)
			}
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		w.Header().Set("X-Stamp", st)
	}
	res, err := s.forward(r.Context(), r.Method, key, r.URL.RawQuery, body)
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("request failed", "method", r.Method, "key", key, "err", err)
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	if res.contentType != "" {
		w.Header().Set("Content-Type", res.contentType)
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
}

// kvVersionTTL is how long the kv leader's reported version is
// believed (NeedsKVMajor).
const kvVersionTTL = 200 * time.Millisecond

// kvVersion is the version the kv leader (or, while none is known, the
// first kv member) reports on GET /version, "" if none answered.
func (s *Server) kvVersion(ctx context.Context) string {
	s.mu.Lock()
	v, at, target := s.kvSeen, s.kvSeenAt, s.leader
	s.mu.Unlock()
	if time.Since(at) < kvVersionTTL {
		return v
	}
	if target == "" {
		target = s.cfg.KVAddrs[0]
	}
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	v = ""
	if req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+"/version", nil); err == nil {
		if resp, err := s.client.Do(req); err == nil {
			var body struct {
				Version string `json:"version"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			v = body.Version
		}
	}
	s.mu.Lock()
	s.kvSeen, s.kvSeenAt = v, time.Now()
	s.mu.Unlock()
	return v
}

// MajorOf is the MAJOR of MAJOR.MINOR.PATCH[-suffix], 0 if v has none.
func MajorOf(v string) int {
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// stamp gets the next stamp from the active coordinator: the one that
// answered last first, then the others, again after a short backoff
// (a switchover in progress) until the budget is spent.
func (s *Server) stamp(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CoordBudget)
	defer cancel()
	backoff := minBackoff
	var lastErr error
	for {
		s.mu.Lock()
		first := s.active
		s.mu.Unlock()
		order := []string{}
		if first != "" {
			order = append(order, first)
		}
		for _, a := range s.cfg.CoordAddrs {
			if a != first {
				order = append(order, a)
			}
		}
		for _, addr := range order {
			st, err := s.stampFrom(ctx, addr)
			if err == nil {
				s.mu.Lock()
				s.active = addr
				s.mu.Unlock()
				return st, nil
			}
			lastErr = err
		}
		t := time.NewTimer(backoff)
		backoff = min(backoff*2, maxBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("no coordinator stamped within %s: %w", s.cfg.CoordBudget, lastErr)
		case <-t.C:
		}
	}
}

func (s *Server) stampFrom(ctx context.Context, addr string) (string, error) {
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, "http://"+addr+"/v1/stamp", nil)
	if err != nil {
		return "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("coordinator %s: %s: %s", addr, resp.Status, bytes.TrimSpace(b))
	}
	var r struct {
		Stamp uint64 `json:"stamp"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("coordinator %s: %w", addr, err)
	}
	return fmt.Sprint(r.Stamp), nil
}
