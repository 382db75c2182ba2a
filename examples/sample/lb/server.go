package lb

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
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	defaultHealthInterval = 200 * time.Millisecond
	defaultHealthTimeout  = 500 * time.Millisecond
	// failuresToDown consecutive failed checks take a backend out;
	// one success brings it back.
	failuresToDown = 2
	// maxAttempts is how many backends one request may be tried on.
	maxAttempts         = 3
	maxBodyBytes        = 8 << 20
	defaultDrainTimeout = 10 * time.Second
)

// Backend is one api member behind the balancer, and the host it runs
// on ("" if not said): a locked host's backends leave the rotation.
type Backend struct {
	Name string
	Addr string
	Host string
}

// ParseBackends parses --backend values; each is name=addr or
// name=addr@host, and one value may hold several separated by commas.
func ParseBackends(values []string) ([]Backend, error) {
	var out []Backend
	seen := map[string]bool{}
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			name, addr, ok := strings.Cut(item, "=")
			addr, host, _ := strings.Cut(addr, "@")
			if !ok || name == "" || addr == "" {
				return nil, fmt.Errorf("backend %q: want name=host:port (or name=host:port@host)", item)
			}
			if seen[name] {
				return nil, fmt.Errorf("backend %q listed twice", name)
			}
			seen[name] = true
			out = append(out, Backend{Name: name, Addr: addr, Host: host})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no backends")
	}
	return out, nil
}

// Config is everything the balancer needs. The listeners let tests
// hand in ports they already own.
type Config struct {
	// Name is reported by GET /version; default "lb".
	Name      string
	HTTPAddr  string
	AdminAddr string
	Backends  []Backend
	Version   string
	Logger    *slog.Logger

	HTTPListener  net.Listener
	AdminListener net.Listener

	// HealthInterval and HealthTimeout default to 200ms and 500ms.
	HealthInterval time.Duration
	HealthTimeout  time.Duration
}

// backend is a Backend with its rotation and health state; every
// field after Backend is guarded by LB.mu.
type backend struct {
	Backend
	enabled  bool
	healthy  bool
	fails    int
	inflight int
	served   uint64
	failed   uint64
}

// LB is the load balancer: a proxy listener, an admin listener and one
// health-check loop per backend.
type LB struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	backends []*backend
	byName   map[string]*backend
	next     int
	// flags are cluster-wide flags an operator sets for a while (like
	// Ceph's noout): the balancer only keeps them, for orchestrators
	// to set and unset and for tests to read.
	flags map[string]bool
	// locked are the hosts in maintenance (hosts.go).
	locked map[string]bool

	proxy  *http.Client
	health *http.Client

	dataSrv, adminSrv *http.Server
	dataLn, adminLn   net.Listener
	errc              chan error
	cancel            context.CancelFunc
	wg                sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error
}

// New checks cfg and returns a balancer that is not started yet. Every
// backend starts enabled and unhealthy; Start checks them once before
// it serves.
func New(cfg Config) (*LB, error) {
	if len(cfg.Backends) == 0 {
		return nil, errors.New("lb: at least one backend is required")
	}
	if cfg.Name == "" {
		cfg.Name = "lb"
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = defaultHealthInterval
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = defaultHealthTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	l := &LB{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "lb", "name", cfg.Name),
		byName: map[string]*backend{},
		errc:   make(chan error, 2),
	}
	for _, b := range cfg.Backends {
		if _, dup := l.byName[b.Name]; dup {
			return nil, fmt.Errorf("lb: backend %q listed twice", b.Name)
		}
		be := &backend{Backend: b, enabled: true}
		l.backends = append(l.backends, be)
		l.byName[b.Name] = be
	}
	dialer := &net.Dialer{Timeout: time.Second}
	l.proxy = &http.Client{
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
		},
		// Redirects are the client's business, not the balancer's.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	l.health = &http.Client{Transport: &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}}
	return l, nil
}

// Start runs one round of health checks, then serves both listeners
// and keeps checking in the background.
func (l *LB) Start() error {
	var err error
	dataLn, adminLn := l.cfg.HTTPListener, l.cfg.AdminListener
	if dataLn == nil {
		if dataLn, err = net.Listen("tcp", l.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("lb: listen http: %w", err)
		}
	}
	if adminLn == nil {
		if adminLn, err = net.Listen("tcp", l.cfg.AdminAddr); err != nil {
			_ = dataLn.Close()
			return fmt.Errorf("lb: listen admin: %w", err)
		}
	}
	l.dataLn, l.adminLn = dataLn, adminLn

	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	var first sync.WaitGroup
	for _, b := range l.backends {
		first.Add(1)
		go func() {
			defer first.Done()
			l.check(ctx, b)
		}()
	}
	first.Wait()
	for _, b := range l.backends {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.healthLoop(ctx, b)
		}()
	}

	l.dataSrv = &http.Server{Handler: http.HandlerFunc(l.serveProxy), ReadHeaderTimeout: 5 * time.Second}
	admin := http.NewServeMux()
	admin.HandleFunc("GET /version", l.handleVersion)
	admin.HandleFunc("GET /admin/backends", l.handleList)
	admin.HandleFunc("GET /admin/backends/{name}", l.handleGet)
	admin.HandleFunc("POST /admin/backends/{name}/drain", l.handleDrain)
	admin.HandleFunc("POST /admin/backends/{name}/enable", l.handleEnable)
	admin.HandleFunc("GET /admin/flags", l.handleFlags)
	admin.HandleFunc("PUT /admin/flags/{name}", l.handleSetFlag)
	admin.HandleFunc("DELETE /admin/flags/{name}", l.handleSetFlag)
	admin.HandleFunc("GET /admin/hosts", l.handleHosts)
	admin.HandleFunc("POST /admin/hosts/{host}/lock", l.handleLock)
	admin.HandleFunc("POST /admin/hosts/{host}/unlock", l.handleUnlock)
	admin.HandleFunc("GET /admin/hosts/{host}/capacity", l.handleCapacity)
	l.adminSrv = &http.Server{Handler: admin, ReadHeaderTimeout: 5 * time.Second}
	for _, p := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{l.dataSrv, dataLn}, {l.adminSrv, adminLn}} {
		go func() {
			if err := p.srv.Serve(p.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				l.errc <- fmt.Errorf("lb: serve %s: %w", p.ln.Addr(), err)
			}
		}()
	}
	l.log.Info("started", "http", dataLn.Addr().String(), "admin", adminLn.Addr().String(), "backends", len(l.backends), "version", l.cfg.Version)
	return nil
}

// Addr and AdminAddr are the addresses the two listeners are on.
func (l *LB) Addr() string      { return l.dataLn.Addr().String() }
func (l *LB) AdminAddr() string { return l.adminLn.Addr().String() }

// Err reports a fatal serving error, if one happens.
func (l *LB) Err() <-chan error { return l.errc }

// Shutdown stops health checks, then stops both listeners and waits for
// in-flight requests (bounded by ctx). Safe to call more than once.
func (l *LB) Shutdown(ctx context.Context) error {
	if l.dataSrv == nil {
		return nil // never started
	}
	l.shutdownOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		var errs []error
		if err := l.dataSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lb: stop http: %w", err))
		}
		if err := l.adminSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lb: stop admin: %w", err))
		}
		l.proxy.CloseIdleConnections()
		l.health.CloseIdleConnections()
		l.shutdownErr = errors.Join(errs...)
		l.log.Info("stopped")
	})
	return l.shutdownErr
}

func (l *LB) healthLoop(ctx context.Context, b *backend) {
	t := time.NewTicker(l.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.check(ctx, b)
		}
	}
}

// check probes GET /ready once and updates the backend's health.
func (l *LB) check(ctx context.Context, b *backend) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.HealthTimeout)
	defer cancel()
	ok := false
	var why string
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+b.Addr+"/ready", nil)
	if err == nil {
		var resp *http.Response
		if resp, err = l.health.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			ok = resp.StatusCode >= 200 && resp.StatusCode < 300
			why = resp.Status
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: not the backend's fault
		}
		why = err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		if !b.healthy {
			l.log.Info("backend up", "backend", b.Name)
		}
		b.healthy, b.fails = true, 0
		return
	}
	b.fails++
	if b.healthy && b.fails >= failuresToDown {
		b.healthy = false
		l.log.Warn("backend down", "backend", b.Name, "reason", why)
	}
}

// pick chooses the next backend round robin and counts the request as
// in flight on it, under the same lock as Drain's state change, so once
// a drain has begun no new request can land on the drained backend.
// It prefers enabled, healthy backends not yet tried for this request;
// then enabled ones whose health check fails (a check can be behind;
// trying costs a retry, refusing costs an error); then an enabled one
// already tried, since a connection the backend closed while idle in
// our pool fails once and works on a fresh one.
func (l *LB) pick(tried map[*backend]bool) *backend {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.backends)
	choose := func(ok func(*backend) bool) *backend {
		for i := range n {
			idx := (l.next + i) % n
			if b := l.backends[idx]; ok(b) {
				l.next = (idx + 1) % n
				b.inflight++
				return b
			}
		}
		return nil
	}
	if b := choose(func(b *backend) bool { return l.inRotation(b) && b.healthy && !tried[b] }); b != nil {
		return b
	}
	if b := choose(func(b *backend) bool { return l.inRotation(b) && !tried[b] }); b != nil {
		return b
	}
	return choose(func(b *backend) bool { return l.inRotation(b) })
}

func (l *LB) release(b *backend, served bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.inflight--
	if served {
		b.served++
	} else {
		b.failed++
	}
}

// hopHeaders are meaningful for one connection only and are not
// forwarded (RFC 9110 section 7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		dst[k] = append([]string(nil), vv...)
	}
	for _, f := range src.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// buffered is a 502/503 answer kept aside while another backend is
// tried, so it can still be relayed if no other backend is left.
type buffered struct {
	status int
	header http.Header
	body   []byte
}

// serveProxy forwards one client request. The body is read up front so
// the request can be replayed on another backend: a transport error
// (refused, reset, EOF before a response) or a 502/503 answer moves it
// to the next backend, up to maxAttempts, which is how a backend that
// dies between two health checks costs the client nothing.
func (l *LB) serveProxy(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: "request body too large"})
			return
		}
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "read request body: " + err.Error()})
		return
	}
	tried := map[*backend]bool{}
	var lastErr error
	var kept *buffered
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		b := l.pick(tried)
		if b == nil {
			break
		}
		tried[b] = true
		resp, err := l.send(r, b, body)
		if err != nil {
			l.release(b, false)
			if r.Context().Err() != nil {
				return // the client went away; nobody to answer
			}
			lastErr = fmt.Errorf("backend %s: %w", b.Name, err)
			l.log.Debug("retrying after transport error", "backend", b.Name, "attempt", attempt, "err", err)
			continue
		}
		retryable := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable
		if retryable && attempt < maxAttempts {
			rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			l.release(b, false)
			resp.Header.Del("Content-Length") // the body kept may be cut short
			kept = &buffered{status: resp.StatusCode, header: resp.Header, body: rb}
			lastErr = fmt.Errorf("backend %s: %s", b.Name, resp.Status)
			l.log.Debug("retrying after status", "backend", b.Name, "attempt", attempt, "status", resp.StatusCode)
			continue
		}
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, err = io.Copy(w, resp.Body)
		resp.Body.Close()
		l.release(b, true)
		if err != nil && r.Context().Err() == nil {
			l.log.Warn("response cut short", "backend", b.Name, "err", err)
		}
		return
	}
	switch {
	case kept != nil:
		copyHeader(w.Header(), kept.header)
		w.WriteHeader(kept.status)
		_, _ = w.Write(kept.body)
	case lastErr != nil:
		l.log.Warn("request failed on every backend tried", "method", r.Method, "path", r.URL.Path, "err", lastErr)
		writeJSON(w, http.StatusBadGateway, errorBody{Error: lastErr.Error()})
	default:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "no backend in rotation"})
	}
}

func (l *LB) send(r *http.Request, b *backend, body []byte) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+b.Addr+r.URL.RequestURI(), rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	copyHeader(out.Header, r.Header)
	out.Host = r.Host
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			host = strings.Join(prior, ", ") + ", " + host
		}
		out.Header.Set("X-Forwarded-For", host)
	}
	resp, err := l.proxy.Do(out)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	return resp, nil
}

// ErrUnknownBackend is returned for a backend name not in the config.
var ErrUnknownBackend = errors.New("unknown backend")

// Drain takes the backend out of rotation at once, then waits until it
// has no request in flight or ctx ends; it returns the requests still
// in flight. Draining a drained backend just waits again.
func (l *LB) Drain(ctx context.Context, name string) (int, error) {
	l.mu.Lock()
	b, ok := l.byName[name]
	if !ok {
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: %q", ErrUnknownBackend, name)
	}
	if b.enabled {
		b.enabled = false
		l.log.Info("backend drained", "backend", name, "inflight", b.inflight)
	}
	l.mu.Unlock()
	return l.waitIdle(ctx, "backend "+name, func(o *backend) bool { return o == b })
}

// waitIdle waits until the backends that of selects have no request in
// flight, or ctx ends; it returns the requests still in flight, and
// what (a backend, a host) they are of in the error.
func (l *LB) waitIdle(ctx context.Context, what string, of func(*backend) bool) (int, error) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		l.mu.Lock()
		n := 0
		for _, b := range l.backends {
			if of(b) {
				n += b.inflight
			}
		}
		l.mu.Unlock()
		if n == 0 {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%s still has %d in flight: %w", what, n, ctx.Err())
		case <-t.C:
		}
	}
}

// Enable puts the backend back into rotation; it gets traffic once its
// health check passes.
func (l *LB) Enable(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownBackend, name)
	}
	if !b.enabled {
		b.enabled = true
		l.log.Info("backend enabled", "backend", name, "healthy", b.healthy)
	}
	return nil
}

// BackendStatus is one entry of GET /admin/backends.
type BackendStatus struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	State    string `json:"state"`
	Healthy  bool   `json:"healthy"`
	Inflight int    `json:"inflight"`
	Served   uint64 `json:"served"`
	Failed   uint64 `json:"failed"`
}

func statusOf(b *backend) BackendStatus {
	st := BackendStatus{Name: b.Name, Address: b.Addr, State: "enabled", Healthy: b.healthy,
		Inflight: b.inflight, Served: b.served, Failed: b.failed}
	if !b.enabled {
		st.State = "drained"
	}
	return st
}

// Backends reports every backend, in configuration order.
func (l *LB) Backends() []BackendStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]BackendStatus, 0, len(l.backends))
	for _, b := range l.backends {
		out = append(out, statusOf(b))
	}
	return out
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (l *LB) handleVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"name": l.cfg.Name, "component": "lb", "version": l.cfg.Version})
}

func (l *LB) handleList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, l.Backends())
}

func (l *LB) one(w http.ResponseWriter, name string) {
	l.mu.Lock()
	b, ok := l.byName[name]
	var st BackendStatus
	if ok {
		st = statusOf(b)
	}
	l.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("unknown backend %q", name)})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (l *LB) handleGet(w http.ResponseWriter, r *http.Request) {
	l.one(w, r.PathValue("name"))
}

// handleDrain answers 200 once the backend has nothing in flight, or
// 504 (still drained, with the count left) if ?timeout= ran out first.
func (l *LB) handleDrain(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	timeout, ok := durationParam(w, r, "timeout", defaultDrainTimeout)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	n, err := l.Drain(ctx, name)
	switch {
	case errors.Is(err, ErrUnknownBackend):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusGatewayTimeout, map[string]any{"name": name, "state": "drained", "inflight": n, "error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "state": "drained", "inflight": 0})
	}
}

func (l *LB) handleEnable(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := l.Enable(name); err != nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
		return
	}
	l.one(w, name)
}

// handleFlags lists the flags set: {"flags": ["maintenance"]}.
func (l *LB) handleFlags(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	out := []string{}
	for f := range l.flags {
		out = append(out, f)
	}
	l.mu.Unlock()
	sort.Strings(out)
	writeJSON(w, http.StatusOK, map[string][]string{"flags": out})
}

// handleSetFlag sets (PUT) or clears (DELETE) a flag; both are
// idempotent.
func (l *LB) handleSetFlag(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	l.mu.Lock()
	if l.flags == nil {
		l.flags = map[string]bool{}
	}
	if r.Method == http.MethodPut {
		l.flags[name] = true
	} else {
		delete(l.flags, name)
	}
	l.mu.Unlock()
	l.log.Info("flag", "name", name, "set", r.Method == http.MethodPut)
	w.WriteHeader(http.StatusNoContent)
}
