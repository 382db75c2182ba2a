package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// conn is ferry's one connection to a host's sshd, opened at first use
// and again after it broke, with at most cap(sessions) channels open on
// it at once: a batch of many members on one host queues for a
// channel rather than opening connections (TiUP's users met the
// connection storms the other way makes).
type conn struct {
	h        Host
	signers  []gossh.Signer
	hostKey  gossh.HostKeyCallback
	algs     []string
	sessions chan struct{}
	// keepalive is how often a keepalive request is sent; a connection
	// whose answer has not come within twice as long is closed (a host
	// cut off keeps a TCP connection open and silent).
	keepalive time.Duration

	mu      sync.Mutex
	client  *gossh.Client
	dialing chan struct{} // closed when the dial in flight ends
	dialErr error         // the last dial's failure, answered until redialAt
	redial  time.Time
	closed  bool
	opened  int // connections opened, for the tests
	// lost says why the last connection was closed by ferry (a
	// keepalive not answered), for the errors of what it broke.
	lost string
	wg   sync.WaitGroup

	// trace, if set, is told each command line run (tests).
	trace func(line string)
}

// redialAfter is how long a failed dial's error is answered without
// dialing again: an Observe of a host that does not answer returns at
// once rather than waiting out a connect timeout at every tick.
const redialAfter = time.Second

// errClosed: the driver was closed.
var errClosed = errors.New("ssh: the driver is closed")

// unreachable wraps err as the host not answering: worth retrying, not
// a verdict on a member.
func (c *conn) unreachable(err error) error {
	return fmt.Errorf("%w: ssh host %s (%s) does not answer: %w", driver.ErrUnreachable, c.h.Name, c.h.Addr, err)
}

// client returns the host's connection, dialing it if there is none.
func (c *conn) get(ctx context.Context) (*gossh.Client, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, errClosed
		case c.client != nil:
			cl := c.client
			c.mu.Unlock()
			return cl, nil
		case c.dialErr != nil && time.Now().Before(c.redial):
			err := c.dialErr
			c.mu.Unlock()
			return nil, err
		case c.dialing != nil:
			ch := c.dialing
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, c.unreachable(ctx.Err())
			}
		}
		ch := make(chan struct{})
		c.dialing = ch
		c.mu.Unlock()
		// The dial is everyone's: bounded by the connect timeout, not
		// by the context of the caller who happened to start it.
		cl, err := c.dial(context.WithoutCancel(ctx))
		c.mu.Lock()
		c.dialing = nil
		close(ch)
		if err != nil {
			c.dialErr, c.redial = err, time.Now().Add(redialAfter)
			c.mu.Unlock()
			return nil, err
		}
		if c.closed {
			c.mu.Unlock()
			cl.Close()
			return nil, errClosed
		}
		c.client, c.dialErr, c.lost = cl, nil, ""
		c.opened++
		c.wg.Add(1)
		go c.keep(cl)
		c.mu.Unlock()
		return cl, nil
	}
}

// dial opens a connection: TCP, the host's key checked against
// known_hosts, then the user's keys (the identity files', the SSH
// agent's).
func (c *conn) dial(ctx context.Context) (*gossh.Client, error) {
	h := c.h
	ctx, cancel := context.WithTimeout(ctx, h.ConnectTimeout)
	defer cancel()
	raw, err := (&net.Dialer{KeepAlive: 15 * time.Second}).DialContext(ctx, "tcp", h.Addr)
	if err != nil {
		return nil, c.unreachable(err)
	}
	_ = raw.SetDeadline(time.Now().Add(h.ConnectTimeout))
	signers := c.signers
	agentKeys, agentConn, err := agentKeys()
	if err != nil && len(signers) == 0 {
		raw.Close()
		return nil, fmt.Errorf("ssh host %s: %w", h.Name, err)
	}
	if agentConn != nil {
		defer agentConn.Close()
		signers = append(append([]gossh.Signer(nil), signers...), agentKeys...)
	}
	if len(signers) == 0 {
		raw.Close()
		return nil, fmt.Errorf("ssh host %s: no key to log in with: name identity_files in its ssh:, or run ferry with an SSH agent (SSH_AUTH_SOCK) that holds one", h.Name)
	}
	cfg := &gossh.ClientConfig{
		User:              h.User,
		Auth:              []gossh.AuthMethod{gossh.PublicKeys(signers...)},
		HostKeyCallback:   c.hostKey,
		HostKeyAlgorithms: c.algs,
		Timeout:           h.ConnectTimeout,
	}
	sc, chans, reqs, err := gossh.NewClientConn(raw, h.Addr, cfg)
	if err != nil {
		raw.Close()
		var ke *HostKeyError
		switch {
		case errors.As(err, &ke):
			return nil, ke
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("ssh host %s (%s): login as %s refused: none of the %d key(s) ferry offers is in the user's authorized_keys: %w", h.Name, h.Addr, h.User, len(signers), err)
		}
		return nil, c.unreachable(err)
	}
	_ = raw.SetDeadline(time.Time{})
	return gossh.NewClient(sc, chans, reqs), nil
}

// keep sends keepalive requests on cl and closes it when one is not
// answered in time, or forgets it when it closed otherwise, so that the
// next use dials again.
func (c *conn) keep(cl *gossh.Client) {
	defer c.wg.Done()
	closed := make(chan struct{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = cl.Wait()
		close(closed)
	}()
	defer c.forget(cl)
	t := time.NewTicker(c.keepalive)
	defer t.Stop()
	for {
		select {
		case <-closed:
			return
		case <-t.C:
		}
		answered := make(chan error, 1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			_, _, err := cl.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		timer := time.NewTimer(2 * c.keepalive)
		select {
		case err := <-answered:
			timer.Stop()
			if err != nil {
				c.lose(cl, fmt.Sprintf("its connection broke: %v", err))
				return
			}
		case <-timer.C:
			c.lose(cl, fmt.Sprintf("no answer to a keepalive within %s: connection closed", 2*c.keepalive))
			return
		case <-closed:
			timer.Stop()
			return
		}
	}
}

// lose closes cl, saying why.
func (c *conn) lose(cl *gossh.Client, why string) {
	c.mu.Lock()
	if c.client == cl {
		c.lost = why
	}
	c.mu.Unlock()
	cl.Close()
}

// broken is the error of a use of cl that failed: the reason ferry
// closed it, when it did.
func (c *conn) broken(cl *gossh.Client, what string, err error) error {
	c.mu.Lock()
	why := c.lost
	current := c.client == cl
	c.mu.Unlock()
	if !current && why != "" {
		return c.unreachable(errors.New(why))
	}
	return c.unreachable(fmt.Errorf("%s: %w", what, err))
}

func (c *conn) forget(cl *gossh.Client) {
	c.mu.Lock()
	if c.client == cl {
		c.client = nil
	}
	c.mu.Unlock()
}

// close closes the connection and waits for its goroutines.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	cl := c.client
	c.client = nil
	c.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	c.wg.Wait()
}

// result is what a command did on the host.
type result struct {
	stdout, stderr []byte
	code           int
}

// Bounds of what a command's output is kept of.
const (
	maxStdout = 16 << 20
	maxStderr = 64 << 10
)

// run runs the command line on the host in a session of its own (one
// of the connection's bounded channels), stdin fed from stdin if not
// nil, and returns its output and exit status. A connection that broke
// or a context that ended is an unreachable host; an exit status is the
// command's answer.
func (c *conn) run(ctx context.Context, line string, stdin io.Reader) (result, error) {
	if c.trace != nil {
		c.trace(line)
	}
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return result{}, c.unreachable(fmt.Errorf("waiting for one of its %d sessions: %w", cap(c.sessions), ctx.Err()))
	}
	release := func() { <-c.sessions }
	cl, err := c.get(ctx)
	if err != nil {
		release()
		return result{}, err
	}
	sess, err := cl.NewSession()
	if err != nil {
		release()
		return result{}, c.broken(cl, "a session", err)
	}
	out := &capped{max: maxStdout}
	errb := &capped{max: maxStderr}
	sess.Stdout, sess.Stderr = out, errb
	if stdin != nil {
		sess.Stdin = stdin
	}
	if err := sess.Start(line); err != nil {
		sess.Close()
		release()
		return result{}, c.broken(cl, "starting a command", err)
	}
	done := make(chan error, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		// The channel stays counted until the session is over, even
		// when its caller gave up on it.
		defer release()
		done <- sess.Wait()
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Close()
		return result{}, c.unreachable(ctx.Err())
	}
	r := result{stdout: out.bytes(), stderr: errb.bytes()}
	var ee *gossh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitStatus()
	default: // the connection broke, or the command ended with no status
		return result{}, c.broken(cl, "the command", err)
	}
	return r, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (w *capped) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *capped) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b
}
