package ssh

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// helperScript is ferry's helper on the hosts (helper.sh): sent with
// every command, so nothing is installed on a host but artifacts.
//
//go:embed helper.sh
var helperScript string

// Host is one host reached over SSH.
type Host struct {
	// Name is the host name members refer to (driver.Member.Host).
	Name string
	// Addr is its sshd, host:port.
	Addr string
	// User is the user ferry logs in as.
	User string
	// KnownHosts is the known_hosts file its key must be in.
	KnownHosts string
	// IdentityFiles are private key files (0600, not encrypted); the
	// keys of an SSH agent at $SSH_AUTH_SOCK are offered too.
	IdentityFiles []string
	// Dir is ferry's directory on the host (relative to the user's
	// home, or absolute).
	Dir string
	// MaxSessions bounds the channels open at once on its connection.
	MaxSessions int
	// ConnectTimeout bounds a dial and its handshake.
	ConnectTimeout time.Duration
}

// Defaults of a Host.
const (
	DefaultDir            = ".ferry"
	DefaultMaxSessions    = 4
	DefaultConnectTimeout = 5 * time.Second
)

// Op is an operation ferry does on a member's host; the description may
// mark each to run through sudo.
type Op string

// The operations.
const (
	OpStart   Op = "start"
	OpStop    Op = "stop"
	OpStatus  Op = "status"
	OpVersion Op = "version"
	OpLogs    Op = "logs"
	OpInstall Op = "install"
)

// Ops lists the operations, in the order the docs give them.
var Ops = []Op{OpStart, OpStop, OpStatus, OpVersion, OpLogs, OpInstall}

// Commands are a member's own commands (each an argv, rendered for the
// member; nil: ferry's helper does it) and the operations that run
// through sudo.
type Commands struct {
	Start, Stop, Status, Version, Logs []string
	Sudo                               map[Op]bool
}

// Driver timeouts.
const (
	// DefaultRequestTimeout bounds an Observe of one host (one session
	// for its members, and their status and version commands).
	DefaultRequestTimeout = 5 * time.Second
	// DefaultOpTimeout is added to a member's stop timeout to bound a
	// Start or a Stop (the artifact's check, a graceful stop).
	DefaultOpTimeout = time.Minute
	// DefaultUploadTimeout bounds the copy of one artifact to a host.
	DefaultUploadTimeout = 10 * time.Minute
	// DefaultKeepalive is how often a connection is asked whether it
	// is alive: a host cut off is known within three times as long.
	DefaultKeepalive = 2 * time.Second
	// defaultStopTimeout is a member's when it gives none.
	defaultStopTimeout = 10 * time.Second
	// MaxLogLines bounds the lines of output asked for at once.
	MaxLogLines = 10000
)

// Driver drives members on hosts over SSH, with no agent there: one
// connection per host, ferry's helper script (or the description's
// commands) for each operation, every argument quoted.
type Driver struct {
	hosts map[string]*conn
	cmds  map[string]Commands

	requestTimeout, opTimeout, uploadTimeout time.Duration

	// installed copies an artifact to a host once (by host and
	// sha256): a batch's starts copy it once.
	installed driver.OnceEach

	// sent counts the artifact bytes sent to hosts (a resumed copy
	// sends only what the host lacks).
	sent atomic.Int64
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Logger = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver, *[]func(*conn))

// WithRequestTimeout bounds an Observe of one host.
func WithRequestTimeout(t time.Duration) Option {
	return func(d *Driver, _ *[]func(*conn)) { d.requestTimeout = t }
}

// WithKeepalive sets how often each connection is asked whether it is
// alive.
func WithKeepalive(t time.Duration) Option {
	return func(_ *Driver, cs *[]func(*conn)) { *cs = append(*cs, func(c *conn) { c.keepalive = t }) }
}

// New returns a driver for hosts, with each member's own commands (by
// member name; a member without an entry uses ferry's helper for
// everything). It reads every host's known_hosts and identity files
// now: a key others may read, an encrypted key or an unreadable file
// is refused here, naming the host, before anything is touched.
func New(hosts []Host, cmds map[string]Commands, opts ...Option) (*Driver, error) {
	d := &Driver{
		hosts:          map[string]*conn{},
		cmds:           maps.Clone(cmds),
		requestTimeout: DefaultRequestTimeout,
		opTimeout:      DefaultOpTimeout,
		uploadTimeout:  DefaultUploadTimeout,
	}
	var connOpts []func(*conn)
	for _, o := range opts {
		o(d, &connOpts)
	}
	for _, h := range hosts {
		if _, dup := d.hosts[h.Name]; dup {
			return nil, fmt.Errorf("ssh: host %s given twice", h.Name)
		}
		h.Dir = cmp.Or(h.Dir, DefaultDir)
		if h.MaxSessions <= 0 {
			h.MaxSessions = DefaultMaxSessions
		}
		if h.ConnectTimeout <= 0 {
			h.ConnectTimeout = DefaultConnectTimeout
		}
		cb, algs, err := hostKeyCheck(h)
		if err != nil {
			return nil, err
		}
		c := &conn{h: h, hostKey: cb, algs: algs, sessions: make(chan struct{}, h.MaxSessions), keepalive: DefaultKeepalive}
		for _, f := range h.IdentityFiles {
			s, err := readIdentity(f)
			if err != nil {
				return nil, fmt.Errorf("ssh host %s: identity file: %w", h.Name, err)
			}
			c.signers = append(c.signers, s)
		}
		for _, o := range connOpts {
			o(c)
		}
		d.hosts[h.Name] = c
	}
	return d, nil
}

// Close closes every connection and waits for the driver's goroutines.
func (d *Driver) Close() error {
	for _, c := range d.hosts {
		c.close()
	}
	return nil
}

func (d *Driver) conn(m driver.Member) (*conn, error) {
	c, ok := d.hosts[m.Host]
	if !ok {
		return nil, fmt.Errorf("ssh driver: member %s: unknown host %q", m.Name, m.Host)
	}
	return c, nil
}

// helper is the command line that runs the helper's operation op with
// args, through sudo -n when sudo.
func helper(sudo bool, op string, args ...string) (string, error) {
	argv := make([]string, 0, len(args)+8)
	if sudo {
		argv = append(argv, "sudo", "-n", "--")
	}
	argv = append(argv, "sh", "-c", helperScript, "ferry-ssh", op)
	return Line(append(argv, args...))
}

// The helper's exit statuses (helper.sh).
const (
	exitNotRunning    = 3
	exitError         = 70
	exitNoArtifact    = 71
	exitChecksum      = 72
	exitNoOutput      = 73
	exitOffsetChanged = 74
	exitShort         = 75
)

// ErrChecksumMismatch: an artifact's copy on a host does not have its
// sha256 (it is removed there, and copied again at the next start).
var ErrChecksumMismatch = errors.New("ssh: checksum mismatch")

// ErrNotFound: no such output of a member (it is fs.ErrNotExist too).
var ErrNotFound = fmt.Errorf("ssh: not found: %w", fs.ErrNotExist)

// failure is the error of a command that ran and failed: its exit
// status and what it said.
func (c *conn) failure(what string, r result) error {
	msg := strings.TrimSpace(string(r.stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(r.stdout))
	}
	if len(msg) > 400 {
		msg = msg[:400] + "..."
	}
	err := fmt.Errorf("ssh host %s (%s): %s: exit status %d: %s", c.h.Name, c.h.Addr, what, r.code, cmp.Or(msg, "(no output)"))
	switch r.code {
	case exitChecksum:
		return fmt.Errorf("%w: %w", ErrChecksumMismatch, err)
	case exitNoOutput:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// Observe asks each host once (concurrently) for all its members, in
// one session, and returns the members' statuses in order. The members
// of a host that does not answer (it cannot be reached, its connection
// broke, it did not answer within the request timeout) are Unknown,
// the host named in Detail: the engine holds. A host that answers but
// refuses (its key changed, the login was refused, the helper failed)
// is an error: nothing is known, and nothing must move.
func (d *Driver) Observe(ctx context.Context, members []driver.Member) ([]driver.Status, error) {
	type group struct {
		c    *conn
		sudo bool
		idx  []int
	}
	var groups []*group
	byKey := map[string]*group{}
	for i, m := range members {
		c, err := d.conn(m)
		if err != nil {
			return nil, err
		}
		sudo := d.cmds[m.Name].Sudo[OpStatus]
		key := m.Host + "\x00" + strconv.FormatBool(sudo)
		g := byKey[key]
		if g == nil {
			g = &group{c: c, sudo: sudo}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	out := make([]driver.Status, len(members))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, d.requestTimeout)
			defer cancel()
			errs[gi] = d.observeHost(rctx, g.c, g.sudo, members, g.idx, out)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err // the caller gave up: that says nothing of the hosts
	}
	var refused []error
	for gi, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, driver.ErrUnreachable):
			for _, i := range groups[gi].idx {
				out[i] = driver.Status{Name: members[i].Name, Unknown: true, Detail: err.Error()}
			}
		default:
			refused = append(refused, err)
		}
	}
	if err := errors.Join(refused...); err != nil {
		return nil, err
	}
	return out, nil
}

// observeHost asks one host about the members at idx, writing their
// statuses into out.
func (d *Driver) observeHost(ctx context.Context, c *conn, sudo bool, members []driver.Member, idx []int, out []driver.Status) error {
	args := []string{c.h.Dir}
	for _, i := range idx {
		args = append(args, members[i].Name, adoptFile(members[i]))
	}
	line, err := helper(sudo, "status", args...)
	if err != nil {
		return err
	}
	r, err := c.run(ctx, line, nil)
	if err != nil {
		return err
	}
	if r.code != 0 {
		return c.failure("status", r)
	}
	sts, err := parseStatus(r.stdout)
	if err != nil {
		return fmt.Errorf("ssh host %s (%s): status: %w", c.h.Name, c.h.Addr, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(idx))
	for k, i := range idx {
		m := members[i]
		st, ok := sts[m.Name]
		if !ok {
			return fmt.Errorf("ssh host %s (%s): status: no line for member %s", c.h.Name, c.h.Addr, m.Name)
		}
		out[i] = st.driverStatus(m.Name)
		cmds := d.cmds[m.Name]
		if cmds.Status == nil && cmds.Version == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = d.ownStatus(ctx, c, m, cmds, st, &out[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ownStatus runs a member's own status and version commands, over what
// the helper recorded of it.
func (d *Driver) ownStatus(ctx context.Context, c *conn, m driver.Member, cmds Commands, rec memberStatus, st *driver.Status) error {
	if cmds.Status != nil {
		r, err := d.exec(ctx, c, m, cmds.Sudo[OpStatus], cmds.Status, execEnv{version: rec.version, sha: rec.sha})
		if err != nil {
			return err
		}
		switch r.code {
		case 0:
			st.Running, st.Detail = true, ""
			st.Adopted = rec.state == stateNone || rec.state == stateAdopted
			if st.Adopted {
				st.Version = ""
			}
		case exitNotRunning:
			*st = driver.Status{Name: m.Name, Version: rec.version, Since: rec.since, Detail: "its status command says it is not running"}
		default:
			*st = driver.Status{Name: m.Name, Version: rec.version, Since: rec.since, Detail: c.failure("status command of "+m.Name, r).Error()}
		}
	}
	if cmds.Version != nil && st.Running {
		r, err := d.exec(ctx, c, m, cmds.Sudo[OpVersion], cmds.Version, execEnv{version: rec.version, sha: rec.sha})
		if err != nil {
			return err
		}
		if r.code != 0 {
			st.Detail = c.failure("version command of "+m.Name, r).Error()
			return nil
		}
		v, _, _ := strings.Cut(strings.TrimSpace(string(r.stdout)), "\n")
		st.Version, st.Adopted = strings.TrimSpace(v), false
	}
	return nil
}

// execEnv is what a description's own command finds in its
// environment besides the member's name and directory.
type execEnv struct {
	version, sha string
	verify       bool
	lines        int
	previous     bool
}

// exec runs a description's own command for member m through the
// helper (which sets FERRY_* and enters the member's directory).
func (d *Driver) exec(ctx context.Context, c *conn, m driver.Member, sudo bool, argv []string, e execEnv) (result, error) {
	verify := "0"
	if e.verify {
		verify = "1"
	}
	args := append([]string{c.h.Dir, m.Name, e.version, e.sha, verify, strconv.Itoa(e.lines), strconv.FormatBool(e.previous), "--"}, argv...)
	line, err := helper(sudo, "exec", args...)
	if err != nil {
		return result{}, fmt.Errorf("ssh driver: member %s: %w", m.Name, err)
	}
	return c.run(ctx, line, nil)
}

func adoptFile(m driver.Member) string {
	if m.Adopt != nil {
		return m.Adopt.PIDFile
	}
	return ""
}

func (d *Driver) opTimeoutFor(stop time.Duration) time.Duration {
	if stop <= 0 {
		stop = defaultStopTimeout
	}
	return stop + d.opTimeout
}

// spec is what makes a running member the one asked for: a start with
// the same spec on a running member does nothing; another replaces it
// (a new version, or new arguments in a rollout).
func spec(m driver.Member, a driver.Artifact) string {
	h := sha256.New()
	for _, s := range append([]string{a.Version, strings.ToLower(a.SHA256)}, m.Args...) {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		fmt.Fprintf(h, "env %d:%s=%d:%s\n", len(k), k, len(m.Env[k]), m.Env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// signal is a stop signal as kill -s takes it: TERM for "" or SIGTERM.
func signal(s string) string {
	return cmp.Or(strings.TrimPrefix(strings.ToUpper(s), "SIG"), "TERM")
}

// Start makes the member run the artifact: the artifact is copied to
// the host once (resumed where a copy stopped) and its sha256 checked
// there; then the member is started (ferry's helper: a no-op if it runs
// that spec, a graceful swap if it runs another; or the description's
// start command). The artifact is checked again on the host before the
// old process is stopped: a wrong copy is refused with the old one
// still running.
func (d *Driver) Start(ctx context.Context, m driver.Member, a driver.Artifact) error {
	c, err := d.conn(m)
	if err != nil {
		return err
	}
	if a.Path == "" {
		return fmt.Errorf("ssh driver: member %s: artifact of version %s has no path (the ssh substrate copies binaries, not images)", m.Name, a.Version)
	}
	ctx, cancel := context.WithTimeout(ctx, d.opTimeoutFor(m.StopTimeout)+d.uploadTimeout)
	defer cancel()
	sum := strings.ToLower(a.SHA256)
	cmds := d.cmds[m.Name]
	sp := spec(m, a)
	for attempt := 0; ; attempt++ {
		if err := d.install(ctx, c, a, sum, cmds.Sudo[OpInstall]); err != nil {
			return fmt.Errorf("ssh driver: start %s on %s: %w", m.Name, a.Version, err)
		}
		r, err := d.start(ctx, c, m, a, sum, sp, cmds)
		if err != nil {
			return fmt.Errorf("ssh driver: start %s on %s: %w", m.Name, a.Version, err)
		}
		if r.code == exitNoArtifact && attempt == 0 {
			// The host lost it since (its directory was cleaned, or its
			// copy found corrupt and removed): once more, copied.
			d.forget(c, sum)
			continue
		}
		if r.code == exitChecksum {
			d.forget(c, sum)
		}
		if r.code != 0 {
			return fmt.Errorf("ssh driver: start %s on %s: %w", m.Name, a.Version, c.failure("start", r))
		}
		return nil
	}
}

func (d *Driver) start(ctx context.Context, c *conn, m driver.Member, a driver.Artifact, sum, sp string, cmds Commands) (result, error) {
	sudo := cmds.Sudo[OpStart]
	if cmds.Start != nil {
		r, err := d.exec(ctx, c, m, sudo, cmds.Start, execEnv{version: a.Version, sha: sum, verify: true})
		if err != nil || r.code != 0 {
			return r, err
		}
		line, err := helper(sudo, "record", c.h.Dir, m.Name, a.Version, sum, sp)
		if err != nil {
			return result{}, err
		}
		return c.run(ctx, line, nil)
	}
	stop := m.StopTimeout
	if stop <= 0 {
		stop = defaultStopTimeout
	}
	args := []string{c.h.Dir, m.Name, a.Version, sum, sp, strconv.FormatInt(stop.Milliseconds(), 10), signal(m.StopSignal), adoptFile(m), strconv.Itoa(len(m.Env))}
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		args = append(args, k+"="+m.Env[k])
	}
	args = append(append(args, "--"), m.Args...)
	line, err := helper(sudo, "start", args...)
	if err != nil {
		return result{}, fmt.Errorf("member %s: %w", m.Name, err)
	}
	return c.run(ctx, line, nil)
}

// Stop stops the member gracefully (its stop signal, SIGKILL after its
// stop timeout; or the description's stop command); stopping a stopped
// member is not an error.
func (d *Driver) Stop(ctx context.Context, m driver.Member) error {
	c, err := d.conn(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.opTimeoutFor(m.StopTimeout))
	defer cancel()
	cmds := d.cmds[m.Name]
	var r result
	if cmds.Stop != nil {
		r, err = d.exec(ctx, c, m, cmds.Sudo[OpStop], cmds.Stop, execEnv{})
	} else {
		stop := m.StopTimeout
		if stop <= 0 {
			stop = defaultStopTimeout
		}
		var line string
		line, err = helper(cmds.Sudo[OpStop], "stop", c.h.Dir, m.Name, strconv.FormatInt(stop.Milliseconds(), 10), signal(m.StopSignal), adoptFile(m))
		if err == nil {
			r, err = c.run(ctx, line, nil)
		}
	}
	if err != nil {
		return fmt.Errorf("ssh driver: stop %s: %w", m.Name, err)
	}
	if r.code != 0 {
		return fmt.Errorf("ssh driver: stop %s: %w", m.Name, c.failure("stop", r))
	}
	return nil
}

// Logs returns the last lines (1 to MaxLogLines) of the output of the
// member's current (or last) instance, or of the one before it
// (previous). A member without such output is errors.Is(err,
// ErrNotFound).
func (d *Driver) Logs(ctx context.Context, m driver.Member, previous bool, lines int) (string, error) {
	c, err := d.conn(m)
	if err != nil {
		return "", err
	}
	if lines < 1 || lines > MaxLogLines {
		return "", fmt.Errorf("ssh driver: logs of %s: lines must be between 1 and %d, got %d", m.Name, MaxLogLines, lines)
	}
	ctx, cancel := context.WithTimeout(ctx, d.requestTimeout*4)
	defer cancel()
	cmds := d.cmds[m.Name]
	var r result
	if cmds.Logs != nil {
		r, err = d.exec(ctx, c, m, cmds.Sudo[OpLogs], cmds.Logs, execEnv{lines: lines, previous: previous})
	} else {
		var line string
		line, err = helper(cmds.Sudo[OpLogs], "logs", c.h.Dir, m.Name, strconv.FormatBool(previous), strconv.Itoa(lines))
		if err == nil {
			r, err = c.run(ctx, line, nil)
		}
	}
	if err != nil {
		return "", fmt.Errorf("ssh driver: logs of %s: %w", m.Name, err)
	}
	if r.code != 0 {
		return "", fmt.Errorf("ssh driver: logs of %s: %w", m.Name, c.failure("logs", r))
	}
	return string(r.stdout), nil
}

// install makes sure the host has the artifact: asked once, copied from
// where a copy under way stopped (a partial copy continues), its sha256
// checked on the host before it is moved into place.
func (d *Driver) install(ctx context.Context, c *conn, a driver.Artifact, sum string, sudo bool) error {
	return d.installed.Do(c.h.Name+"\x00"+sum, func() error {
		var last error
		for try := 0; try < 3; try++ {
			have, offset, err := d.have(ctx, c, sum, sudo)
			if err != nil {
				return err
			}
			if have {
				return nil
			}
			have, err = d.put(ctx, c, a, sum, offset, sudo)
			switch {
			case errors.Is(err, errAgain):
				last = err
			case err != nil:
				return err
			case have:
				return nil
			}
		}
		return last
	})
}

// errAgain: a copy to try again at once from what the host has.
var errAgain = errors.New("ssh: copy again")

// have asks the host whether it has the artifact, and how much of a
// copy under way.
func (d *Driver) have(ctx context.Context, c *conn, sum string, sudo bool) (bool, int64, error) {
	line, err := helper(sudo, "have", c.h.Dir, sum)
	if err != nil {
		return false, 0, err
	}
	r, err := c.run(ctx, line, nil)
	if err != nil {
		return false, 0, err
	}
	if r.code != 0 {
		return false, 0, c.failure("artifact "+sum, r)
	}
	ans := strings.TrimSpace(string(r.stdout))
	if ans == "have" {
		return true, 0, nil
	}
	if n, ok := strings.CutPrefix(ans, "part "); ok {
		if off, err := strconv.ParseInt(n, 10, 64); err == nil && off >= 0 {
			return false, off, nil
		}
	}
	return false, 0, fmt.Errorf("ssh host %s (%s): artifact %s: unexpected answer %.80q", c.h.Name, c.h.Addr, sum, ans)
}

// put copies the artifact to the host from offset, and reports whether
// the host now has it (checked).
func (d *Driver) put(ctx context.Context, c *conn, a driver.Artifact, sum string, offset int64, sudo bool) (bool, error) {
	f, fi, err := safefile.Open(a.Path)
	if err != nil {
		return false, fmt.Errorf("artifact of version %s: %w", a.Version, err)
	}
	defer f.Close()
	size := fi.Size()
	from := min(offset, size)
	body := &counting{r: io.NewSectionReader(f, from, size-from), n: &d.sent}
	line, err := helper(sudo, "put", c.h.Dir, sum, strconv.FormatInt(offset, 10), strconv.FormatInt(size, 10))
	if err != nil {
		return false, err
	}
	uctx, cancel := context.WithTimeout(ctx, d.uploadTimeout)
	defer cancel()
	r, err := c.run(uctx, line, body)
	if err != nil {
		return false, fmt.Errorf("copying %s (version %s) to the host: %w", a.Path, a.Version, err)
	}
	switch {
	case r.code == 0 && bytes.Equal(bytes.TrimSpace(r.stdout), []byte("have")):
		return true, nil
	case r.code == exitOffsetChanged, offset > size && r.code == exitError:
		return false, fmt.Errorf("%w: %w", errAgain, c.failure("copy of "+a.Path, r))
	case r.code == exitChecksum && offset > 0:
		// What was there before was not the artifact's beginning: the
		// host removed it; once more from the start.
		return false, fmt.Errorf("%w: %w", errAgain, c.failure("copy of "+a.Path, r))
	case r.code == exitShort:
		return false, c.unreachable(c.failure("copy of "+a.Path, r))
	}
	return false, c.failure("copy of "+a.Path, r)
}

func (d *Driver) forget(c *conn, sum string) { d.installed.Forget(c.h.Name + "\x00" + sum) }

// counting counts what is read through it.
type counting struct {
	r io.Reader
	n *atomic.Int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
