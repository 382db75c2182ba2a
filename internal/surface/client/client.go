// Package client is the ferry server's API (/v1) as the CLI uses it:
// the same commands work on a local data directory or, with --addr
// (FERRY_ADDR), through a running 'ferry server', so that operators
// script one set of commands and the server stays the only process
// that drives the cluster.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Client calls one ferry server.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// Options are how to reach and trust the server.
type Options struct {
	// Addr is host:port or a URL (http://, https://).
	Addr string
	// Token is the bearer token (the server's DATA-DIR/api-token).
	Token string
	// CAFile, if set, is the PEM certificate(s) that sign the server's
	// TLS certificate; otherwise the system's roots are trusted.
	CAFile string
}

// maxCAFile bounds the --ca-file read: a bundle of CA certificates is
// far smaller.
const maxCAFile = 4 << 20

// New checks the address and builds a client.
func New(o Options) (*Client, error) {
	addr := o.Addr
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("server address %q: want host:port or an http(s) URL", o.Addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pem, err := safefile.Read(o.CAFile, maxCAFile, safefile.DefaultTimeout)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", o.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Client{base: u, token: o.Token, hc: &http.Client{Transport: tr}}, nil
}

// Error is an error answer of the API: its status, stable code and
// message.
type Error struct {
	Status  int
	Code    string
	Message string
	// Body is the whole answer, for codes with details (a preflight's
	// checks).
	Body json.RawMessage
}

func (e *Error) Error() string {
	return fmt.Sprintf("server: %s (%d %s)", e.Message, e.Status, e.Code)
}

// Do sends in (JSON, if not nil) and decodes the answer into out (if
// not nil). An answer that is not 2xx is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("server %s: reading the answer: %w", c.base.Host, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode, Body: b}
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &eb) == nil {
			e.Code, e.Message = eb.Error.Code, eb.Error.Message
			if e.Code == "" {
				e.Code, e.Message = eb.Code, eb.Message
			}
		}
		if e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
			if e.Message == "" {
				e.Message = http.StatusText(resp.StatusCode)
			}
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("server %s %s: the answer is not what this ferry expects: %w", method, path, err)
		}
	}
	return nil
}

// Stream follows the server's events (GET /v1/events/stream) from the
// one after id after, calling fn for each, until fn returns false, ctx
// ends or the server closes the stream.
func (c *Client) Stream(ctx context.Context, after uint64, fn func(store.Event) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+"/v1/events/stream?after="+strconv.FormatUint(after, 10), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.hc
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var ev store.Event
			err := json.Unmarshal([]byte(data.String()), &ev)
			data.Reset()
			if err != nil {
				continue // a comment or a keep-alive of another shape
			}
			if !fn(ev) {
				return nil
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return fmt.Errorf("server %s: event stream: %w", c.base.Host, err)
	}
	return ctx.Err()
}

// WaitHealthy waits until the server answers /v1/healthz, or limit.
func (c *Client) WaitHealthy(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		if last = c.Do(ctx, http.MethodGet, "/v1/healthz", nil, nil); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s not healthy after %s: %w", c.base.Host, limit, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
