package agent

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// Config configures an agent.
type Config struct {
	// Dir holds everything the agent keeps: artifacts/, members/,
	// logs/ and state/. It is created (0700) if it does not exist.
	Dir string
	// TokenFile holds the bearer token; it is created with a random
	// token (mode 0600) if it does not exist. Empty means Dir/token.
	TokenFile string
	// Logger receives the agent's log; nil discards it.
	Logger *slog.Logger

	// How Serve listens (see TLSMode): TLS with CertFile and KeyFile
	// (PEM, both or neither), or with a certificate generated into
	// Dir/tls; plain HTTP beyond loopback only with InsecureListen.
	TLS               TLSMode
	CertFile, KeyFile string
	InsecureListen    bool
	// OnListen, if set, is called by Serve once it listens.
	OnListen func(Listening)
	// MaxArtifactSize bounds an artifact upload; 0 means
	// DefaultMaxArtifactSize.
	MaxArtifactSize int64
	// ReexecArgs are the arguments the agent runs a new ferry binary
	// with when asked to re-execute itself on it (POST
	// /v1/agent/reexec, served by Serve alone); nil means os.Args[1:],
	// the arguments this agent was started with.
	ReexecArgs []string

	// For tests: the restart backoff and the output bound (0 means the
	// Default values), and how often the output is bounded.
	restartMin, restartMax, restartReset time.Duration
	logLimit                             int
	logEvery                             time.Duration
	uploadTimeout                        time.Duration
}

// Server is an agent: it owns the member processes of one host and
// answers for them over HTTP (see Handler).
type Server struct {
	dir     string
	log     *slog.Logger
	token   bearer.Checker
	handler http.Handler

	mu      sync.Mutex
	members map[string]*member

	backoff  backoff
	logLimit int
	logEvery time.Duration

	// The artifact store (artifacts.go): its bounds, and storeMu,
	// which serializes the placing of uploaded artifacts.
	maxArtifact   int64
	uploadTimeout time.Duration
	storeMu       sync.Mutex
	// listening is how Serve listens, for GET /v1/health; nil when the
	// handler is served by someone else.
	listening atomic.Pointer[Listening]
	// reexec carries the path of the binary to re-execute on to Serve
	// (nil when the handler is served by someone else: refused, 409);
	// reexecing is set by the one request that sends on it.
	reexec    chan string
	reexecing atomic.Bool

	// closing is set first by Close: no restart is scheduled or made
	// from then on (set under mu, so that no goroutine joins wg once
	// Close waits for it). closed is set once those goroutines are
	// done: no state is written from then on.
	closing atomic.Bool
	closed  atomic.Bool
	ctx     context.Context // cancelled by Close; stops the goroutines
	cancel  context.CancelFunc
	wg      sync.WaitGroup // watchers, pending restarts, the output keeper
}

// New opens (or creates) the agent's directory and token, reads the
// members' state and re-adopts those still running. It starts no
// process; the only goroutines it starts watch re-adopted members.
func New(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("agent: Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	for sub, mode := range map[string]os.FileMode{
		"artifacts": 0o755, "members": 0o755, "logs": 0o750, "state": 0o700,
	} {
		if err := os.MkdirAll(filepath.Join(dir, sub), mode); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tokenFile := cfg.TokenFile
	if tokenFile == "" {
		tokenFile = filepath.Join(dir, "token")
	}
	tok, err := loadToken(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	s := &Server{
		dir:     dir,
		log:     log,
		token:   bearer.NewChecker(tok),
		members: make(map[string]*member),
		backoff: backoff{
			min:   cmp.Or(cfg.restartMin, DefaultRestartMin),
			max:   cmp.Or(cfg.restartMax, DefaultRestartMax),
			reset: cmp.Or(cfg.restartReset, DefaultRestartReset),
		},
		logLimit: cmp.Or(cfg.logLimit, DefaultLogLimit),
		logEvery: cmp.Or(cfg.logEvery, logKeepEvery),

		maxArtifact:   cmp.Or(cfg.MaxArtifactSize, DefaultMaxArtifactSize),
		uploadTimeout: cmp.Or(cfg.uploadTimeout, wire.DefaultUploadTimeout),
	}
	if s.maxArtifact < 0 {
		return nil, fmt.Errorf("agent: MaxArtifactSize %d: want a number of bytes above 0", s.maxArtifact)
	}
	s.removeUploadLeftovers()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.handler = s.routes()

	recs, err := s.readRecords()
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("agent: reading state: %w", err)
	}
	for _, r := range recs {
		s.adopt(r)
	}
	s.wg.Add(1)
	go s.keepLogs()
	return s, nil
}

// Handler returns the agent's HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the agent's goroutines. It does not stop the members:
// they keep running, and a new agent on the same Dir re-adopts them.
// The goroutines waiting on children this server started cannot be
// stopped (only a parent can reap its child); after Close they reap
// the child when it exits but record nothing.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closing.Swap(true) {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.closed.Store(true)
}

// Serve runs an agent on addr until ctx ends, then shuts the HTTP
// server down (members keep running) and returns nil. It returns an
// error if the agent cannot start or the listener fails, and refuses
// to serve plain HTTP beyond loopback unless cfg.InsecureListen (see
// TLSMode).
func Serve(ctx context.Context, addr string, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	s.reexec = make(chan string, 1)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	// Decided on the address listened on, not the one asked for: a
	// name or a wildcard says where only once it is bound.
	tlsCfg, l, err := s.listenTLS(addr, ln.Addr(), cfg)
	if err != nil {
		ln.Close()
		return err
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.listening.Store(&l)
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// No WriteTimeout: a stop may take its whole stop timeout.
	}
	switch {
	case l.TLS:
		s.log.Info("agent listening", "addr", l.Addr, "dir", s.dir, "tls", true, "fingerprint", l.Fingerprint)
		if l.Generated {
			s.log.Info(fmt.Sprintf("agent TLS: a self-signed certificate; pin it in the description: hosts: [{..., agent: HOST:PORT, tls: {fingerprint: %q}}] (also in %s)",
				l.Fingerprint, filepath.Join(s.dir, tlsDir, fingerprintName)))
		}
	case l.Warning != "":
		s.log.Warn("agent listening", "addr", l.Addr, "dir", s.dir, "tls", false)
		s.log.Warn(l.Warning, "addr", l.Addr)
	default:
		s.log.Info("agent listening", "addr", l.Addr, "dir", s.dir, "tls", false)
	}
	if cfg.OnListen != nil {
		cfg.OnListen(l)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		<-errc
		s.log.Info("agent stopped; members keep running")
		return nil
	case path := <-s.reexec:
		sctx, cancel := context.WithTimeout(context.Background(), reexecGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		<-errc
		s.Close()
		args := cfg.ReexecArgs
		if args == nil {
			args = os.Args[1:]
		}
		s.log.Info("agent stopped serving; re-executing; members keep running", "path", path)
		err := buildinfo.Reexec(path, args)
		return fmt.Errorf("agent: %w; the members keep running: start the agent again", err)
	case err := <-errc:
		return fmt.Errorf("agent: %w", err)
	}
}

// apiError is an error with its HTTP status and API code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /v1/artifacts", s.handleListArtifacts)
	mux.HandleFunc("GET /v1/artifacts/{sha256}", s.handleGetArtifact)
	mux.HandleFunc("PUT /v1/artifacts/{sha256}", s.handlePutArtifact)
	mux.HandleFunc("GET /v1/members", s.handleList)
	mux.HandleFunc("GET /v1/members/{name}", s.handleGet)
	mux.HandleFunc("PUT /v1/members/{name}", s.handlePut)
	mux.HandleFunc("POST /v1/members/{name}/stop", s.handleStop)
	mux.HandleFunc("POST /v1/members/{name}/adopt", s.handleAdopt)
	mux.HandleFunc("GET /v1/members/{name}/logs", s.handleLogs)
	mux.HandleFunc("POST /v1/agent/reexec", s.handleReexec)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{http.StatusNotFound, wire.CodeNotFound,
			fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeError(w, fmt.Errorf("internal error: %v", v))
			}
		}()
		health := r.URL.Path == "/v1/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		if !health && s.token.Check(r) != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ferry-agent"`)
			writeError(w, &apiError{http.StatusUnauthorized, wire.CodeUnauthorized,
				"missing or wrong bearer token"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.List())
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !wire.ValidName(name) {
		writeError(w, badName(name))
		return
	}
	st, ok := s.Get(name)
	if !ok {
		writeError(w, &apiError{http.StatusNotFound, wire.CodeNotFound,
			fmt.Sprintf("member %s is not known to this agent", name)})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !wire.ValidName(name) {
		writeError(w, badName(name))
		return
	}
	body, err := readBody(w, r, maxSpecBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	spec, err := DecodeMemberSpec(body)
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := s.ensure(name, spec)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !wire.ValidName(name) {
		writeError(w, badName(name))
		return
	}
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := DecodeStopRequest(body)
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := s.stop(name, time.Duration(req.TimeoutMS)*time.Millisecond, req.Signal)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !wire.ValidName(name) {
		writeError(w, badName(name))
		return
	}
	q := r.URL.Query()
	previous := false
	if v := q.Get("previous"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, badRequest("previous=%q: want true or false", truncate(v, 20)))
			return
		}
		previous = b
	}
	lines := defaultLogLines
	if v := q.Get("lines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, badRequest("lines=%q: want a number of lines, 1 to %d", truncate(v, 20), wire.MaxLogLines))
			return
		}
		lines = n
	}
	b, err := s.Logs(name, previous, lines)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func badName(name string) error {
	return badRequest("invalid member name %q: want ^[a-z0-9][a-z0-9._-]{0,62}$", truncate(name, 80))
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, badRequest("body larger than %d bytes", limit)
		}
		return nil, badRequest("reading body: %v", err)
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(wire.ErrorBody{Code: wire.CodeInternal, Message: err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case isBadRequest(err):
		ae = &apiError{http.StatusBadRequest, wire.CodeBadRequest, err.Error()}
	default:
		ae = &apiError{http.StatusInternalServerError, wire.CodeInternal, err.Error()}
	}
	writeJSON(w, ae.status, wire.ErrorBody{Code: ae.code, Message: ae.msg})
}

// List returns the status of every member the agent knows, by name.
func (s *Server) List() []wire.Status {
	s.mu.Lock()
	ms := make([]*member, 0, len(s.members))
	for _, m := range s.members {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	out := make([]wire.Status, 0, len(ms))
	for _, m := range ms {
		if st, ok := m.status(); ok {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b wire.Status) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Get returns the status of one member; false if the agent never
// knew it.
func (s *Server) Get(name string) (wire.Status, bool) {
	s.mu.Lock()
	m := s.members[name]
	s.mu.Unlock()
	if m == nil {
		return wire.Status{}, false
	}
	return m.status()
}
