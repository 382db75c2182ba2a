package ssh

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// A host's own commands (capabilities lock-host and reinstall-host):
// the description's lock, unlock, reinstall and data migration of a
// host, each an argv run through the helper on the host the
// description names (the host itself, or another: StarlingX runs
// `system host-lock controller-1` on the active controller), sudo only
// where it is marked.

var (
	_ driver.HostLocker      = (*Driver)(nil)
	_ driver.HostReinstaller = (*Driver)(nil)
)

// Bounds of a host's commands when the caller gives none.
const (
	defaultHostCommandTimeout = 2 * time.Minute
	defaultReinstallTimeout   = 10 * time.Minute
	// reinstallPoll is how often a reinstall under way is asked about.
	reinstallPoll = 500 * time.Millisecond
)

// hostConn is the connection of host name.
func (d *Driver) hostConn(name string) (*conn, error) {
	c, ok := d.hosts[name]
	if !ok {
		return nil, fmt.Errorf("ssh driver: unknown host %q", name)
	}
	return c, nil
}

// LockHost runs the host's lock command where it says.
func (d *Driver) LockHost(ctx context.Context, c driver.HostCommand) error {
	return d.runHost(ctx, "lock", c)
}

// UnlockHost runs the host's unlock command where it says.
func (d *Driver) UnlockHost(ctx context.Context, c driver.HostCommand) error {
	return d.runHost(ctx, "unlock", c)
}

// MigrateHost runs the host's data migration where it says.
func (d *Driver) MigrateHost(ctx context.Context, c driver.HostCommand) error {
	return d.runHost(ctx, "data migration", c)
}

// runHost runs command c (what: its kind, for errors) on c.On (or the
// host itself) and waits for its exit status.
func (d *Driver) runHost(ctx context.Context, what string, c driver.HostCommand) error {
	_, err := d.runHostOut(ctx, what, c)
	return err
}

// runHostOut is runHost, with the command's output.
func (d *Driver) runHostOut(ctx context.Context, what string, c driver.HostCommand) (string, error) {
	on := cmp.Or(c.On, c.Host)
	if len(c.Argv) == 0 {
		return "", fmt.Errorf("ssh driver: host %s has no %s command (hosts[].commands)", c.Host, what)
	}
	cn, err := d.hostConn(on)
	if err != nil {
		return "", fmt.Errorf("ssh driver: %s of host %s: %w", what, c.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(c.Timeout, defaultHostCommandTimeout))
	defer cancel()
	key := rand.Text() // names this run of the command on its host
	line, err := helper(c.Sudo, "host", append([]string{cn.h.Dir, c.Host, key, "--"}, c.Argv...)...)
	if err != nil {
		return "", fmt.Errorf("ssh driver: %s of host %s: %w", what, c.Host, err)
	}
	r, err := cn.run(ctx, line, nil)
	if err != nil {
		if ctx.Err() != nil {
			// Given up on (an abort, its timeout): stopped on the host
			// before the caller goes on, or its undo could run first.
			if kerr := d.hostKill(cn, c, key); kerr != nil {
				err = fmt.Errorf("%w; and it may still run there: %w", err, kerr)
			}
		}
		return "", fmt.Errorf("ssh driver: %s of host %s (run on %s): %w", what, c.Host, on, err)
	}
	if r.code != 0 {
		return "", fmt.Errorf("ssh driver: %w", cn.failure(what+" of host "+c.Host, r))
	}
	return string(r.stdout), nil
}

// hostKill stops host command key of c, which its caller gave up on, on
// the host where it runs, and returns once it is gone: SIGTERM to its
// process group, the command's own timeout to end (a command that
// must not stop half way, a swact, ignores the signal and ends), then
// SIGKILL. A session closed does not stop a command without a
// terminal, and sshd's signal request is refused by some builds
// ("session signalling requires privilege separation"): the helper
// signals the group itself.
func (d *Driver) hostKill(cn *conn, c driver.HostCommand, key string) error {
	grace := cmp.Or(c.Timeout, defaultHostCommandTimeout)
	line, err := helper(c.Sudo, "hostkill", cn.h.Dir, c.Host, key, strconv.FormatInt(grace.Milliseconds(), 10))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace+2*cn.h.ConnectTimeout+5*time.Second)
	defer cancel()
	r, err := cn.run(ctx, line, nil)
	if err != nil {
		return err
	}
	if r.code != 0 {
		return cn.failure("stopping it", r)
	}
	return nil
}

// ReinstallHost runs the host's reinstall in a session of its own on
// the host where it runs (so that it outlives the connection), and
// asks about it every half second until it ends: the host may stop
// answering meanwhile (its sshd restarts, its link goes down), for at
// most unreachable at a time; each answer comes over a connection
// dialed again, the host's key checked again against known_hosts (a
// host that comes back with another key is refused, ErrNotTrusted,
// never accepted). A second call with the same key joins the run under
// way, or reports the one that ended well, rather than running it
// again.
func (d *Driver) ReinstallHost(ctx context.Context, c driver.HostCommand, unreachable time.Duration) error {
	on := cmp.Or(c.On, c.Host)
	if len(c.Argv) == 0 {
		return fmt.Errorf("ssh driver: host %s has no reinstall command (hosts[].commands.reinstall)", c.Host)
	}
	cn, err := d.hostConn(on)
	if err != nil {
		return fmt.Errorf("ssh driver: reinstall of host %s: %w", c.Host, err)
	}
	timeout := cmp.Or(c.Timeout, defaultReinstallTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := reinstallKey(c)
	start, err := helper(c.Sudo, "bg", append([]string{cn.h.Dir, c.Host, key, "start", "--"}, c.Argv...)...)
	if err != nil {
		return fmt.Errorf("ssh driver: reinstall of host %s: %w", c.Host, err)
	}
	poll, err := helper(c.Sudo, "bg", cn.h.Dir, c.Host, key, "poll", "--")
	if err != nil {
		return fmt.Errorf("ssh driver: reinstall of host %s: %w", c.Host, err)
	}
	began := time.Now()
	var lost time.Time // since when the host does not answer
	line := start
	for {
		rctx, rcancel := context.WithTimeout(ctx, d.requestTimeout)
		r, err := cn.run(rctx, line, nil)
		rcancel()
		var ans string
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("ssh driver: reinstall of host %s (run on %s): not done within %s: %w", c.Host, on, timeout, ctx.Err())
		case errors.Is(err, driver.ErrUnreachable):
			if lost.IsZero() {
				lost = time.Now()
			}
			if away := time.Since(lost); away > unreachable {
				return fmt.Errorf("ssh driver: reinstall of host %s (run on %s): the host did not answer for %s, more than its bound %s (%s after the reinstall began): %w",
					c.Host, on, away.Round(time.Millisecond), unreachable, time.Since(began).Round(time.Millisecond), err)
			}
		case err != nil:
			return fmt.Errorf("ssh driver: reinstall of host %s (run on %s): %w", c.Host, on, err)
		case r.code != 0:
			return fmt.Errorf("ssh driver: %w", cn.failure("reinstall of host "+c.Host, r))
		default:
			lost = time.Time{}
			ans = strings.TrimSpace(string(r.stdout))
		}
		first, rest, _ := strings.Cut(ans, "\n")
		switch {
		case ans == "":
		case first == "running":
			line = poll
		case first == "none":
			line = start // the start's answer was lost before it began
		case first == "exit 0":
			return nil
		case strings.HasPrefix(first, "exit "):
			return fmt.Errorf("ssh driver: reinstall of host %s (run on %s): exit status %s: %s", c.Host, on, strings.TrimPrefix(first, "exit "), cmp.Or(lastLines(rest, 400), "(no output)"))
		case first == "gone":
			return fmt.Errorf("ssh driver: reinstall of host %s (run on %s): its process is gone without an exit status (the host restarted under it?)", c.Host, on)
		default:
			return fmt.Errorf("ssh driver: reinstall of host %s: unexpected answer %.80q", c.Host, ans)
		}
		select {
		case <-ctx.Done():
		case <-time.After(reinstallPoll):
		}
	}
}

// reinstallKey names a run of a reinstall on its host: the caller's
// key, with the command's own digest (another command is another run).
func reinstallKey(c driver.HostCommand) string {
	h := sha256.New()
	for _, a := range c.Argv {
		fmt.Fprintf(h, "%d:%s\n", len(a), a)
	}
	k := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, c.Key)
	if len(k) > 80 {
		k = k[:80]
	}
	return "reinstall-" + k + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// lastLines is the end of s, at most n bytes, trimmed.
func lastLines(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
