// Package process is the driver for members that run as local
// processes: it is the client of the ferry agent (internal/substrate/agent) on
// each host, which owns the processes. Killing ferry does not disturb
// the members; a new ferry finds them through the agents.
package process

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// Host is one host's agent.
type Host struct {
	// Name is the host name members refer to (driver.Member.Host).
	Name string
	// Addr is the agent's host:port (or a http:// or https:// URL).
	Addr string
	// Token is the agent's bearer token.
	Token string
	// Fingerprint pins the agent's TLS certificate ("sha256:<hex>", as
	// the agent prints it), or CA holds the PEM certificates its
	// certificate must verify against (for the host name or IP address
	// of Addr). With either the driver speaks HTTPS to the agent and
	// accepts no other certificate; with neither, plain HTTP.
	Fingerprint string
	CA          []byte
}

// tls reports whether the driver speaks HTTPS to h.
func (h Host) tls() bool {
	return h.Fingerprint != "" || len(h.CA) > 0 || strings.HasPrefix(h.Addr, "https://")
}

// Defaults for the Driver's timeouts.
const (
	// DefaultRequestTimeout bounds calls that do not wait on a
	// process: Observe and Health.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultOpTimeout is added to a member's stop timeout to bound
	// Start and Stop, which may wait for a graceful stop and hash an
	// artifact.
	DefaultOpTimeout = time.Minute
	// DefaultUploadTimeout bounds the upload of one artifact to an
	// agent (the agent's own bound is the same).
	DefaultUploadTimeout = wire.DefaultUploadTimeout
)

// Driver drives members through their hosts' agents.
type Driver struct {
	hosts          map[string]Host
	client         *http.Client
	requestTimeout time.Duration
	opTimeout      time.Duration
	uploadTimeout  time.Duration

	// clients are the HTTPS clients of the hosts with TLS, by host
	// name; tlsErr says why a host's TLS settings are unusable (a
	// malformed pin or CA), returned by every call to it.
	clients map[string]*http.Client
	tlsErr  map[string]error

	// stored knows, by host and sha256, the artifacts an agent is
	// known to have (it answered for them, or took their upload), so
	// that a Start asks once, and serializes the upload of one
	// artifact to one agent: a batch's Starts upload it once.
	stored driver.OnceEach

	// adoptMu guards adoptTried: when the adoption of each member not
	// known to its agent was last tried, so that a member that is not
	// running is looked for at most every adoptEvery, not at every
	// observation.
	adoptMu    sync.Mutex
	adoptTried map[string]time.Time
}

// adoptEvery is how often a member that may be adopted but was not
// found is looked for again.
const adoptEvery = time.Second

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Logger = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver)

// WithHTTPClient makes the driver use c for the agents it speaks plain
// HTTP to. Its timeouts apply on top of the driver's own. The agents
// with TLS (Host.Fingerprint, Host.CA) get a client of the driver's
// own, whose TLS settings are those of their host only.
func WithHTTPClient(c *http.Client) Option { return func(d *Driver) { d.client = c } }

// WithUploadTimeout bounds the upload of one artifact to an agent.
func WithUploadTimeout(t time.Duration) Option { return func(d *Driver) { d.uploadTimeout = t } }

// WithRequestTimeout bounds Observe and Health calls (per host).
func WithRequestTimeout(t time.Duration) Option { return func(d *Driver) { d.requestTimeout = t } }

// WithOpTimeout sets what is added to a member's stop timeout to bound
// a Start or Stop call.
func WithOpTimeout(t time.Duration) Option { return func(d *Driver) { d.opTimeout = t } }

// New returns a driver for the agents of hosts. Host names are
// unique; a later host of the same name replaces an earlier one.
func New(hosts []Host, opts ...Option) *Driver {
	d := &Driver{
		adoptTried:     map[string]time.Time{},
		hosts:          make(map[string]Host, len(hosts)),
		requestTimeout: DefaultRequestTimeout,
		opTimeout:      DefaultOpTimeout,
		uploadTimeout:  DefaultUploadTimeout,
		clients:        map[string]*http.Client{},
		tlsErr:         map[string]error{},
	}
	for _, h := range hosts {
		d.hosts[h.Name] = h
	}
	for _, o := range opts {
		o(d)
	}
	if d.client == nil {
		d.client = newClient(nil)
	}
	for _, h := range d.hosts {
		if !h.tls() {
			continue
		}
		var cfg *tls.Config
		var err error
		switch {
		case h.Fingerprint != "" && len(h.CA) > 0:
			err = errors.New("give the agent's certificate fingerprint or a CA, not both")
		case h.Fingerprint != "":
			cfg, err = tlspin.Pinned(h.Fingerprint)
		case len(h.CA) > 0:
			cfg, err = tlspin.WithCA(h.CA)
			if err != nil {
				err = fmt.Errorf("its CA: %w", err)
			}
		default:
			// An https:// address with neither: the system's roots.
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if err != nil {
			d.tlsErr[h.Name] = fmt.Errorf("process driver: host %s: TLS: %w", h.Name, err)
			continue
		}
		d.clients[h.Name] = newClient(cfg)
	}
	return d
}

// newClient returns the client of the agents: tlsCfg, if not nil, is
// the TLS of the one agent it speaks to.
func newClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy: nil, // agents are addressed directly
			DialContext: (&net.Dialer{
				Timeout:   5 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			TLSClientConfig:     tlsCfg,
			TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		},
		// Every call also has a context deadline (see above); this
		// is a last bound for a call that somehow has none.
		Timeout: time.Hour + DefaultOpTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// clientFor returns the client that speaks to h's agent.
func (d *Driver) clientFor(h Host) (*http.Client, error) {
	if err := d.tlsErr[h.Name]; err != nil {
		return nil, err
	}
	if c := d.clients[h.Name]; c != nil {
		return c, nil
	}
	return d.client, nil
}

// APIError is an error answer of an agent.
type APIError struct {
	Host, Addr string
	// Status is the HTTP status.
	Status int
	// Code is the agent's error code (wire.CodeChecksumMismatch...).
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" { // not the agent's answer, or not one it names
		return fmt.Sprintf("agent of host %s (%s): HTTP %d: %s", e.Host, e.Addr, e.Status, e.Message)
	}
	return fmt.Sprintf("agent of host %s (%s): %s (%d): %s", e.Host, e.Addr, e.Code, e.Status, e.Message)
}

// Is makes errors.Is(err, ErrChecksumMismatch) (and the other Err
// values below) match an APIError of that code. An answer of a proxy
// in front of an agent that could not reach it (502, 503, 504 without
// an agent error body) is driver.ErrUnreachable. A not-found answer is
// fs.ErrNotExist too, so callers that read output need not know this driver.
func (e *APIError) Is(target error) bool {
	if target == fs.ErrNotExist {
		return e.Code == wire.CodeNotFound
	}
	if t, ok := target.(*APIError); ok {
		return t.Code != "" && t.Code == e.Code && t.Host == "" && t.Status == 0
	}
	return target == driver.ErrUnreachable && e.Code == "" &&
		(e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout)
}

// Values to match API errors by code with errors.Is.
var (
	ErrBadRequest       = &APIError{Code: wire.CodeBadRequest}
	ErrUnauthorized     = &APIError{Code: wire.CodeUnauthorized}
	ErrNotFound         = &APIError{Code: wire.CodeNotFound}
	ErrChecksumMismatch = &APIError{Code: wire.CodeChecksumMismatch}
	ErrArtifactUnknown  = &APIError{Code: wire.CodeArtifactUnknown}
	ErrStartFailed      = &APIError{Code: wire.CodeStartFailed}
	ErrInternal         = &APIError{Code: wire.CodeInternal}
)

// apiError turns a non-2xx answer into an *APIError. A body that is
// not an agent error (a proxy's page) leaves Code empty and is kept,
// shortened, as the message.
func apiError(host Host, status int, body []byte) *APIError {
	e := &APIError{Host: host.Name, Addr: host.Addr, Status: status}
	var eb wire.ErrorBody
	if err := json.Unmarshal(body, &eb); err == nil && eb.Code != "" {
		e.Code, e.Message = eb.Code, eb.Message
		return e
	}
	msg := strings.TrimSpace(string(body))
	if status == http.StatusBadRequest && strings.Contains(msg, "HTTP request to an HTTPS server") {
		// Go's TLS server answers a plain request so.
		e.Message = fmt.Sprintf("the agent speaks HTTPS, and this host has no tls: in the description: pin its certificate with tls: {fingerprint: \"sha256:...\"} on host %s (the agent prints it at start and writes it to its DIR/tls/fingerprint), or give tls: {ca_file: PATH}", host.Name)
		return e
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Message = msg
	return e
}

func (d *Driver) host(name string) (Host, error) {
	h, ok := d.hosts[name]
	if !ok {
		return Host{}, fmt.Errorf("process driver: unknown host %q", name)
	}
	return h, nil
}

// baseURL is the agent's URL: https:// when the host has TLS settings,
// whatever scheme its address was written with.
func baseURL(h Host) string {
	addr := strings.TrimSuffix(h.Addr, "/")
	if h.tls() {
		addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
		return "https://" + addr
	}
	if strings.HasPrefix(addr, "http://") {
		return addr
	}
	return "http://" + addr
}

// call makes one API call to a host's agent and decodes a 2xx answer
// into out. Transport failures wrap driver.ErrUnreachable; error
// answers are *APIError.
func (d *Driver) call(ctx context.Context, h Host, timeout time.Duration, method, path string, in, out any) error {
	b, err := d.do(ctx, h, timeout, method, path, "application/json", in)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("process driver: agent of host %s (%s): %s %s: bad answer: %w", h.Name, h.Addr, method, path, err)
		}
	}
	return nil
}

// do makes one API call and returns the body of a 2xx answer.
func (d *Driver) do(ctx context.Context, h Host, timeout time.Duration, method, path, accept string, in any) ([]byte, error) {
	var body io.Reader
	contentType := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("process driver: %w", err)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}
	return d.send(ctx, h, timeout, method, path, accept, contentType, body, -1)
}

// send makes one API call with a body of contentType (size bytes, -1
// for unknown) and returns the body of a 2xx answer.
func (d *Driver) send(ctx context.Context, h Host, timeout time.Duration, method, path, accept, contentType string, body io.Reader, size int64) ([]byte, error) {
	client, err := d.clientFor(h)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, baseURL(h)+path, body)
	if err != nil {
		return nil, fmt.Errorf("process driver: host %s: bad agent address %q: %w", h.Name, h.Addr, err)
	}
	if size >= 0 {
		req.ContentLength = size
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", accept)
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, d.transportError(ctx, h, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, d.transportError(ctx, h, method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, apiError(h, resp.StatusCode, b)
	}
	return b, nil
}

func (d *Driver) transportError(ctx context.Context, h Host, method, path string, err error) error {
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about the agent.
		return fmt.Errorf("process driver: agent of host %s (%s): %w", h.Name, h.Addr, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is in the message already
	}
	// A certificate refused is no outage to wait out: something else
	// answers on the address, or the description is wrong. Said so,
	// and not errors.Is(err, driver.ErrUnreachable).
	var pinErr *tlspin.PinError
	var verifyErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &pinErr):
		return fmt.Errorf("agent of host %s at %s: %s %s: refused: %w (hosts[].tls.fingerprint of %s)", h.Name, h.Addr, method, path, err, h.Name)
	case errors.As(err, &verifyErr):
		against := "the host's tls.ca_file"
		if len(h.CA) == 0 {
			against = "the system's CAs"
		}
		return fmt.Errorf("agent of host %s at %s: %s %s: refused: its certificate does not verify against %s for %s: %w", h.Name, h.Addr, method, path, against, h.Addr, err)
	case errors.As(err, &recordErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("agent of host %s at %s: %s %s: the agent speaks plain HTTP, not TLS, but host %s has tls: in the description: start the agent with TLS (the default beyond loopback; --tls on loopback), or on loopback remove tls: from the host: %w", h.Name, h.Addr, method, path, h.Name, err)
	}
	return fmt.Errorf("%w: agent of host %s at %s: %s %s: %w", driver.ErrUnreachable, h.Name, h.Addr, method, path, err)
}

// Observe asks each host's agent once (concurrently) for all its
// members, and returns the members' statuses in order. A member its
// agent does not know is down with no version; the members of an
// agent that does not answer are Unknown, with the error in Detail.
func (d *Driver) Observe(ctx context.Context, members []driver.Member) ([]driver.Status, error) {
	var order []string
	seen := map[string]bool{}
	for _, m := range members {
		if _, err := d.host(m.Host); err != nil {
			return nil, fmt.Errorf("process driver: member %s: unknown host %q", m.Name, m.Host)
		}
		if !seen[m.Host] {
			seen[m.Host] = true
			order = append(order, m.Host)
		}
	}
	lists := make([]map[string]wire.Status, len(order))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, name := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := d.hosts[name]
			var sts []wire.Status
			if err := d.call(ctx, h, d.requestTimeout, http.MethodGet, "/v1/members", nil, &sts); err != nil {
				errs[i] = err
				return
			}
			byName := make(map[string]wire.Status, len(sts))
			for _, s := range sts {
				byName[s.Name] = s
			}
			lists[i] = byName
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err // the caller gave up: that says nothing of the agents
	}
	var refused []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, driver.ErrUnreachable) {
			refused = append(refused, err) // it answered, and said no (a wrong token)
		}
	}
	if err := errors.Join(refused...); err != nil {
		return nil, err
	}
	index := make(map[string]int, len(order))
	for i, name := range order {
		index[name] = i
	}
	out := make([]driver.Status, len(members))
	for i, m := range members {
		if err := errs[index[m.Host]]; err != nil {
			// The agent did not answer: nothing is known of its members,
			// which is not to say they are down.
			out[i] = driver.Status{Name: m.Name, Unknown: true, Detail: err.Error()}
			continue
		}
		s, ok := lists[index[m.Host]][m.Name]
		if !ok && m.Adopt != nil {
			s, ok = d.adopt(ctx, d.hosts[m.Host], m)
		}
		if !ok {
			out[i] = driver.Status{Name: m.Name}
			continue
		}
		out[i] = driver.Status{
			Name:     m.Name,
			Running:  s.Running,
			Version:  s.Version,
			Since:    s.Since,
			Detail:   s.Detail,
			PID:      s.PID,
			Restarts: s.Restarts,
			Adopted:  s.Adopted,
		}
	}
	return out, nil
}

// adopt asks the agent to find member m's process, which it does not
// know (ferry never started it): found, it is the member from now on,
// adopted. Only members their agent does not know are looked for: once
// ferry started or adopted a member, it owns it, and a member it
// stopped stays stopped. A member not found is down, and looked for
// again after adoptEvery.
func (d *Driver) adopt(ctx context.Context, h Host, m driver.Member) (wire.Status, bool) {
	d.adoptMu.Lock()
	last, tried := d.adoptTried[m.Name]
	if tried && time.Since(last) < adoptEvery {
		d.adoptMu.Unlock()
		return wire.Status{}, false
	}
	d.adoptTried[m.Name] = time.Now()
	d.adoptMu.Unlock()
	req := wire.AdoptRequest{PIDFile: m.Adopt.PIDFile, Listen: m.Adopt.Listen,
		StopTimeoutMS: m.StopTimeout.Milliseconds(), StopSignal: m.StopSignal}
	var st wire.Status
	if err := d.call(ctx, h, d.requestTimeout, http.MethodPost, memberPath(m.Name)+"/adopt", req, &st); err != nil {
		return wire.Status{}, false // not found (404), or the agent is older: down, as before
	}
	return st, true
}

func (d *Driver) opTimeoutFor(stop time.Duration) time.Duration {
	if stop <= 0 {
		stop = wire.DefaultStopTimeout
	}
	return stop + d.opTimeout
}

// Start makes the member run the artifact (PUT): a no-op if it runs
// that version and checksum, a graceful swap if it runs another. The
// agent runs only artifacts of its own store: the driver uploads the
// artifact (a.Path, a file on ferry's host) first if the agent does
// not have it, and the agent keeps it only if its sha256 is a.SHA256:
// errors.Is(err, ErrChecksumMismatch) otherwise, before anything is
// stopped, and the old process still runs.
func (d *Driver) Start(ctx context.Context, m driver.Member, a driver.Artifact) error {
	h, err := d.host(m.Host)
	if err != nil {
		return fmt.Errorf("process driver: member %s: %w", m.Name, err)
	}
	if a.Path == "" {
		return fmt.Errorf("process driver: member %s: artifact of version %s has no path (the process substrate runs binaries, not images)", m.Name, a.Version)
	}
	spec := wire.MemberSpec{
		Version:       a.Version,
		SHA256:        strings.ToLower(a.SHA256),
		Args:          m.Args,
		Env:           m.Env,
		StopTimeoutMS: m.StopTimeout.Milliseconds(),
		Restart:       m.Restart,
		StopSignal:    m.StopSignal,
	}
	for _, f := range m.Files {
		spec.Files = append(spec.Files, wire.FileSpec{Path: f.Path, Mode: memberfile.FormatMode(f.Mode), Content: f.Content})
	}
	var st wire.Status
	for attempt := 0; ; attempt++ {
		if err := d.ensureStored(ctx, h, a); err != nil {
			return fmt.Errorf("process driver: start %s on %s: %w", m.Name, a.Version, err)
		}
		err := d.call(ctx, h, d.opTimeoutFor(m.StopTimeout), http.MethodPut, memberPath(m.Name), spec, &st)
		if attempt == 0 && errors.Is(err, ErrArtifactUnknown) {
			// The agent lost it since (its store was cleaned, or its
			// copy found corrupt and removed): once more, uploaded.
			d.forgetStored(h, spec.SHA256)
			continue
		}
		if err != nil {
			return fmt.Errorf("process driver: start %s on %s: %w", m.Name, a.Version, err)
		}
		return nil
	}
}

// ensureStored makes sure h's agent has the artifact in its store:
// asked once (GET /v1/artifacts/{sha256}), uploaded when it has not.
func (d *Driver) ensureStored(ctx context.Context, h Host, a driver.Artifact) error {
	sum := strings.ToLower(a.SHA256)
	return d.stored.Do(h.Name+"\x00"+sum, func() error {
		err := d.call(ctx, h, d.requestTimeout, http.MethodGet, artifactPath(sum), nil, nil)
		if errors.Is(err, ErrNotFound) {
			err = d.upload(ctx, h, a, sum)
		}
		return err
	})
}

func (d *Driver) forgetStored(h Host, sum string) { d.stored.Forget(h.Name + "\x00" + sum) }

// upload sends the artifact's file to h's agent (PUT
// /v1/artifacts/{sha256}), which keeps it only if its sum is sum. The
// file is read as every file a user names is: a FIFO or a device in
// the catalog is refused at once.
func (d *Driver) upload(ctx context.Context, h Host, a driver.Artifact, sum string) error {
	f, fi, err := safefile.Open(a.Path)
	if err != nil {
		return fmt.Errorf("artifact of version %s: %w", a.Version, err)
	}
	defer f.Close()
	q := url.Values{}
	if name := filepath.Base(a.Path); wire.ValidArtifactName(name) {
		q.Set("name", name) // the program's name in ps on the agent's host
	}
	path := artifactPath(sum)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err = d.send(ctx, h, d.uploadTimeout, http.MethodPut, path, "application/json", "application/octet-stream", f, fi.Size())
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w (the agent has no artifact store: it is older than this ferry; upgrade the agent)", err)
	}
	if err != nil {
		return fmt.Errorf("uploading %s (version %s) to the agent: %w", a.Path, a.Version, err)
	}
	return nil
}

func artifactPath(sum string) string { return "/v1/artifacts/" + url.PathEscape(sum) }

// Stop stops the member gracefully (SIGTERM, SIGKILL after its
// StopTimeout); stopping a stopped member is not an error.
func (d *Driver) Stop(ctx context.Context, m driver.Member) error {
	h, err := d.host(m.Host)
	if err != nil {
		return fmt.Errorf("process driver: member %s: %w", m.Name, err)
	}
	req := wire.StopRequest{TimeoutMS: m.StopTimeout.Milliseconds(), Signal: m.StopSignal}
	var st wire.Status
	if err := d.call(ctx, h, d.opTimeoutFor(m.StopTimeout), http.MethodPost, memberPath(m.Name)+"/stop", req, &st); err != nil {
		return fmt.Errorf("process driver: stop %s: %w", m.Name, err)
	}
	return nil
}

// Logs returns the last lines (1 to wire.MaxLogLines) of the output of
// the member's current (or last) instance, or of the one before it
// (previous). A member the agent does not know, or without a previous
// instance, is errors.Is(err, ErrNotFound).
func (d *Driver) Logs(ctx context.Context, m driver.Member, previous bool, lines int) (string, error) {
	h, err := d.host(m.Host)
	if err != nil {
		return "", fmt.Errorf("process driver: member %s: %w", m.Name, err)
	}
	if lines < 1 || lines > wire.MaxLogLines {
		return "", fmt.Errorf("process driver: logs of %s: lines must be between 1 and %d, got %d", m.Name, wire.MaxLogLines, lines)
	}
	q := url.Values{"previous": {strconv.FormatBool(previous)}, "lines": {strconv.Itoa(lines)}}
	b, err := d.do(ctx, h, d.requestTimeout, http.MethodGet, memberPath(m.Name)+"/logs?"+q.Encode(), "text/plain", nil)
	if err != nil {
		return "", fmt.Errorf("process driver: logs of %s: %w", m.Name, err)
	}
	return string(b), nil
}

// Health checks, for preflight, that the host's agent answers and
// accepts the driver's token.
func (d *Driver) Health(ctx context.Context, host string) error {
	h, err := d.host(host)
	if err != nil {
		return err
	}
	var hb wire.Health
	if err := d.call(ctx, h, d.requestTimeout, http.MethodGet, "/v1/health", nil, &hb); err != nil {
		return fmt.Errorf("process driver: health: %w", err)
	}
	if !hb.OK {
		return fmt.Errorf("process driver: agent of host %s (%s) says it is not healthy", h.Name, h.Addr)
	}
	// Health needs no token; the member list does.
	if err := d.call(ctx, h, d.requestTimeout, http.MethodGet, "/v1/members", nil, nil); err != nil {
		return fmt.Errorf("process driver: health: %w", err)
	}
	return nil
}

func memberPath(name string) string {
	return "/v1/members/" + url.PathEscape(name)
}
