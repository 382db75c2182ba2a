package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

const (
	// DefaultTimeout bounds a call whose Timeout is 0.
	DefaultTimeout = 5 * time.Second
	// MaxBody is how much of an HTTP response is read.
	MaxBody = 1 << 20
	// outputTail is how much of a command's output a Detail keeps.
	outputTail = 200
	// bodyInDetail is how much of an unexpected response a Detail quotes.
	bodyInDetail = 120
)

// Result is the outcome of one call.
type Result struct {
	OK bool
	// Detail says what was seen ("GET http://…/ready: 200 OK") or what
	// was wrong ("quorum = false, want true"); it is never empty.
	Detail string
	// Duration is how long the call took, rendering included.
	Duration time.Duration
}

// Prober makes calls. Its zero value is usable and uses the package's
// default HTTP client; NewProber gives one with a client of its own.
// A Prober is safe for concurrent use.
type Prober struct {
	// Client makes the HTTP calls; nil means the default client, which
	// keeps no idle connections, follows no redirects and uses no proxy.
	// A client's own Timeout, if any, applies on top of the call's.
	Client *http.Client
}

// NewProber returns a Prober with an HTTP client of its own.
func NewProber() *Prober { return &Prober{Client: newClient()} }

var defaultProber = NewProber()

// Do makes call with the default Prober. See Prober.Do.
func Do(ctx context.Context, call config.Call, d config.TemplateData) Result {
	return defaultProber.Do(ctx, call, d)
}

// Do renders call's templated strings over d and makes it within its
// timeout (DefaultTimeout when 0). It never panics; every failure —
// a template that does not render included — is OK=false with the
// reason in Detail.
func (p *Prober) Do(ctx context.Context, call config.Call, d config.TemplateData) Result {
	r, _ := p.do(ctx, call, d, false)
	return r
}

// Version makes a version call (a component's version:) and returns
// the version it read: the string at the call's json.path (a number is
// written as JSON writes it), or the first group of its pattern in the
// response's body or the command's output. OK is false, with the
// reason, when the call failed or the version is not in its answer.
func (p *Prober) Version(ctx context.Context, call config.Call, d config.TemplateData) (string, Result) {
	r, v := p.do(ctx, call, d, true)
	return v, r
}

// do makes a call; read: it is a version call, whose answer is read
// rather than compared.
func (p *Prober) do(ctx context.Context, call config.Call, d config.TemplateData, read bool) (Result, string) {
	start := time.Now()
	timeout := call.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r Result
	var out, value string
	switch {
	case call.HTTP != "":
		r, out, value = p.http(ctx, call, d, timeout, read)
	case call.TCP != "":
		r = dial(ctx, call, d, timeout)
	case len(call.Exec) > 0:
		r, out = run(ctx, call, d, timeout, call.Pattern != "")
	default:
		r = Result{Detail: "the call has none of http, tcp and exec"}
	}
	if r.OK && call.Pattern != "" {
		r, value = matchPattern(r, call.Pattern, out)
	}
	if read && r.OK && value == "" {
		r = Result{Detail: r.Detail + ": no version in the answer (give json.path or a pattern with one group)"}
	}
	r.Duration = time.Since(start)
	return r, value
}

// patterns caches compiled patterns: a check's pattern is matched at
// every probe. The description's patterns are few.
var patterns sync.Map // string -> *regexp.Regexp or error

// matchPattern matches an answer against a call's pattern: no match
// fails the call; a match returns the first group (or the whole match
// when the pattern has no group).
func matchPattern(r Result, pattern, out string) (Result, string) {
	v, ok := patterns.Load(pattern)
	if !ok {
		re, err := regexp.Compile(pattern)
		if err != nil {
			v = err
		} else {
			v = re
		}
		patterns.Store(pattern, v)
	}
	re, ok := v.(*regexp.Regexp)
	if !ok {
		return Result{Detail: fmt.Sprintf("%s: pattern %q is not a regular expression: %v", r.Detail, pattern, v)}, ""
	}
	m := re.FindStringSubmatch(out)
	if m == nil {
		return Result{Detail: fmt.Sprintf("%s: the answer does not match %q", r.Detail, pattern)}, ""
	}
	value := m[0]
	if len(m) > 1 {
		value = m[1]
	}
	r.Detail += fmt.Sprintf(", matches %q (%s)", pattern, shorten(oneLine(value), 60))
	return r, value
}

// dial is a TCP call: OK when the address accepts a connection.
func dial(ctx context.Context, call config.Call, d config.TemplateData, timeout time.Duration) Result {
	addr, err := config.Render(call.TCP, d)
	if err != nil {
		return Result{Detail: "tcp address: " + err.Error()}
	}
	var dl net.Dialer
	conn, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Result{Detail: "tcp " + addr + ": " + explain(ctx, err, timeout)}
	}
	_ = conn.Close()
	return Result{OK: true, Detail: "tcp " + addr + ": connected"}
}

// explain turns a network error into the few words an operator needs:
// "connection refused", "no answer within 2s".
func explain(ctx context.Context, err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	var dns *net.DNSError
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s", timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without a response"
	case errors.As(err, &dns):
		return fmt.Sprintf("cannot resolve %s: %s", dns.Name, dns.Err)
	}
	return err.Error()
}

// oneLine makes text fit one line of a table or an event: line breaks
// become " | ", invalid UTF-8 is dropped, the ends are trimmed.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), " | ")
}
