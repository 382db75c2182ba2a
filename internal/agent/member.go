package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/checksum"
	"github.com/ferry-upgrade/ferry/internal/safefile"
)

// member is one member the agent answers for.
type member struct {
	name string
	// op serializes the operations (ensure, stop) on the member, so
	// that two concurrent PUTs cannot start two processes.
	op sync.Mutex

	mu sync.Mutex // guards the fields below and the member's state file
	// known is false until the member has a record (a start was tried
	// or a state file was read); unknown members are not listed.
	known bool
	rec   record
	// proc is the member's process while it runs (or until its exit is
	// recorded); nil otherwise.
	proc *proc
}

// proc is one process of a member.
type proc struct {
	pid   int
	start uint64 // /proc/<pid>/stat start time
	// child is true for processes this agent started (reaped by
	// cmd.Wait) and false for adopted ones (watched by polling).
	child bool
	done  chan struct{} // closed once the exit is recorded
	once  sync.Once
	// stopNote is set (under member.mu) when the agent signals the
	// process, so that its exit reads as a stop.
	stopNote string
}

func (m *member) status() (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known {
		return Status{}, false
	}
	return m.rec.status(), true
}

// getMember returns the member, creating an (unknown) entry if create.
func (s *Server) getMember(name string, create bool) *member {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.members[name]
	if m == nil && create {
		m = &member{name: name, rec: record{Name: name}}
		s.members[name] = m
	}
	return m
}

// persistLocked writes the member's record; m.mu must be held. After
// Close nothing is written: a newer agent may own the directory.
func (s *Server) persistLocked(m *member) error {
	if s.closed.Load() {
		return nil
	}
	if err := s.writeRecord(&m.rec); err != nil {
		s.log.Error("cannot persist member state", "member", m.name, "err", err)
		return err
	}
	return nil
}

// markGone records that p exited, once; later calls do nothing.
func (s *Server) markGone(m *member, p *proc, detail string, code *int) {
	m.mu.Lock()
	if m.proc == p {
		m.proc = nil
		if p.stopNote != "" {
			detail = "stopped (" + p.stopNote + "): " + detail
		}
		m.rec.Running = false
		m.rec.Detail = detail
		m.rec.ExitCode = code
		s.persistLocked(m)
		if !s.closed.Load() {
			s.log.Info("member exited", "member", m.name, "pid", p.pid, "detail", detail)
		}
	}
	m.mu.Unlock()
	p.once.Do(func() { close(p.done) })
}

const adoptedExit = "exited (status unknown: the process was adopted after an agent restart)"

// alive reports whether the process p names still runs: its pid
// exists, has the same start time (not a reused pid) and is not a
// zombie.
func alive(p *proc) bool {
	if p.start == 0 {
		return false
	}
	if err := syscall.Kill(p.pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	state, start, err := procStat(p.pid)
	if err != nil || start != p.start {
		return false
	}
	return state != 'Z' && state != 'X' && state != 'x'
}

// adopt takes over a member from its state file: if the recorded
// process still runs it is watched, otherwise the member is recorded
// as exited.
func (s *Server) adopt(r *record) {
	m := &member{name: r.Name, known: true, rec: *r}
	s.mu.Lock()
	s.members[r.Name] = m
	s.mu.Unlock()
	if r.Starting != nil {
		s.recoverStart(m)
		return
	}
	if !r.Running {
		return
	}
	p := &proc{pid: r.PID, start: r.StartTime, done: make(chan struct{})}
	if r.PID <= 0 || !alive(p) {
		m.mu.Lock()
		m.rec.Running = false
		m.rec.Detail = "exited while the agent was down (status unknown)"
		m.rec.ExitCode = nil
		s.persistLocked(m)
		m.mu.Unlock()
		s.log.Info("member exited while the agent was down", "member", r.Name, "pid", r.PID)
		return
	}
	m.proc = p
	s.log.Info("adopted running member", "member", r.Name, "pid", r.PID, "version", r.Version)
	s.wg.Add(1)
	go s.watch(m, p)
}

// recoverStart finishes a start the previous agent died in: the
// process may have been started before its pid was recorded. A
// session leader running the artifact in the member's directory is
// that process; it is adopted. Otherwise the start never happened.
func (s *Server) recoverStart(m *member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pd := m.rec.Starting
	m.rec.Starting = nil
	pid, start, ok := findMemberProcess(filepath.Join(s.dir, "members", m.name), pd.Artifact)
	if !ok {
		s.persistLocked(m)
		s.log.Info("agent died before starting member; not started", "member", m.name, "version", pd.Version)
		return
	}
	m.rec = record{
		Name:          m.name,
		Version:       pd.Version,
		SHA256:        pd.SHA256,
		Artifact:      pd.Artifact,
		Args:          pd.Args,
		Env:           pd.Env,
		StopTimeoutMS: pd.StopTimeoutMS,
		Running:       true,
		PID:           pid,
		StartTime:     start,
		Since:         pd.Since,
	}
	p := &proc{pid: pid, start: start, done: make(chan struct{})}
	m.proc = p
	s.persistLocked(m)
	s.log.Info("adopted member started by a previous agent that died", "member", m.name, "pid", pid, "version", pd.Version)
	s.wg.Add(1)
	go s.watch(m, p)
}

// watch polls an adopted process (not our child, so it cannot be
// waited for) until it is gone or the agent closes.
func (s *Server) watch(m *member, p *proc) {
	defer s.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-p.done:
			return
		case <-t.C:
			if !alive(p) {
				s.markGone(m, p, adoptedExit, nil)
				return
			}
		}
	}
}

// reap waits for a child and records how it exited.
func (s *Server) reap(m *member, p *proc, cmd *exec.Cmd) {
	err := cmd.Wait()
	detail, code := describeExit(cmd.ProcessState, err)
	s.markGone(m, p, detail, code)
}

func describeExit(ps *os.ProcessState, err error) (string, *int) {
	if ps == nil {
		return fmt.Sprintf("exited (wait failed: %v)", err), nil
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return ps.String(), nil
	case ws.Exited():
		c := ws.ExitStatus()
		return fmt.Sprintf("exited with status %d", c), &c
	case ws.Signaled():
		d := "killed by " + signalName(ws.Signal())
		if ws.CoreDump() {
			d += " (core dumped)"
		}
		return d, nil
	}
	return ps.String(), nil
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// ensure makes the member run exactly the artifact of spec.
func (s *Server) ensure(name string, spec MemberSpec) (Status, error) {
	m := s.getMember(name, true)
	m.op.Lock()
	defer m.op.Unlock()

	m.mu.Lock()
	p := m.proc
	same := p != nil && m.rec.Version == spec.Version && m.rec.SHA256 == spec.SHA256
	stopDefault := m.rec.StopTimeoutMS
	m.mu.Unlock()
	if same && !p.child && !alive(p) {
		s.markGone(m, p, adoptedExit, nil)
		same = false
	}
	if same {
		st, _ := m.status()
		return st, nil
	}

	// The artifact is checked before anything is stopped: a bad
	// artifact leaves the old process running.
	artifact, err := s.prepareArtifact(spec)
	if err != nil {
		return Status{}, err
	}

	timeout := time.Duration(spec.StopTimeoutMS) * time.Millisecond
	if timeout == 0 {
		timeout = time.Duration(stopDefault) * time.Millisecond
	}
	if err := s.stopLocked(m, timeout); err != nil {
		return Status{}, err
	}
	return s.startLocked(m, spec, artifact)
}

// stop stops the member gracefully; timeout 0 means the member's own.
func (s *Server) stop(name string, timeout time.Duration) (Status, error) {
	m := s.getMember(name, false)
	if m == nil {
		return Status{Name: name}, nil
	}
	m.op.Lock()
	defer m.op.Unlock()
	if timeout == 0 {
		m.mu.Lock()
		timeout = time.Duration(m.rec.StopTimeoutMS) * time.Millisecond
		m.mu.Unlock()
	}
	if err := s.stopLocked(m, timeout); err != nil {
		return Status{}, err
	}
	st, ok := m.status()
	if !ok {
		return Status{Name: name}, nil
	}
	return st, nil
}

// killWait bounds how long a process may take to disappear after
// SIGKILL.
const killWait = 10 * time.Second

// stopLocked stops the member's process, if any: SIGTERM to its
// process group, then SIGKILL after timeout. m.op must be held.
func (s *Server) stopLocked(m *member, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultStopTimeout
	}
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	if !p.child && !alive(p) {
		s.markGone(m, p, adoptedExit, nil)
		return nil
	}
	s.log.Info("stopping member", "member", m.name, "pid", p.pid, "timeout", timeout)
	m.mu.Lock()
	p.stopNote = "SIGTERM"
	m.mu.Unlock()
	// The member leads its own session and process group (Setsid), so
	// the group id is its pid: this reaches the processes it started.
	signalGroup(p.pid, syscall.SIGTERM)
	if s.waitGone(m, p, timeout) {
		return nil
	}
	m.mu.Lock()
	p.stopNote = fmt.Sprintf("SIGKILL after %v", timeout)
	m.mu.Unlock()
	s.log.Warn("member did not stop in time; killing it", "member", m.name, "pid", p.pid, "timeout", timeout)
	if p.child || alive(p) {
		signalGroup(p.pid, syscall.SIGKILL)
	}
	if s.waitGone(m, p, killWait) {
		return nil
	}
	return fmt.Errorf("member %s: process %d did not exit %v after SIGKILL", m.name, p.pid, killWait)
}

func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); errors.Is(err, syscall.ESRCH) {
		// No group (the process left it): signal the process alone.
		syscall.Kill(pid, sig)
	}
}

// waitGone waits up to d for p to be gone; true if it is.
func (s *Server) waitGone(m *member, p *proc, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	if p.child {
		select {
		case <-p.done:
			return true
		case <-timer.C:
			return false
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return true
		case <-timer.C:
			return false
		case <-tick.C:
			if !alive(p) {
				s.markGone(m, p, adoptedExit, nil)
				return true
			}
		}
	}
}

// startLocked starts the artifact for the member; m.op must be held
// and the member must not be running.
func (s *Server) startLocked(m *member, spec MemberSpec, artifact string) (Status, error) {
	cwd := filepath.Join(s.dir, "members", m.name)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return Status{}, err
	}
	logPath := filepath.Join(s.dir, "logs", m.name+".log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return Status{}, err
	}
	now := time.Now()
	fmt.Fprintf(logf, "--- ferry agent %s: starting %s version %s (sha256 %s)\n",
		now.Format(time.RFC3339Nano), m.name, spec.Version, spec.SHA256)

	// Record the start before it happens: if the agent dies between
	// the fork and the record of the pid, the next agent finds the
	// process instead of starting a second one.
	m.mu.Lock()
	m.rec.Name = m.name
	m.rec.Starting = &pending{
		Version:       spec.Version,
		SHA256:        spec.SHA256,
		Artifact:      artifact,
		Args:          spec.Args,
		Env:           spec.Env,
		StopTimeoutMS: spec.StopTimeoutMS,
		Since:         now,
	}
	err = s.persistLocked(m)
	if err != nil {
		m.rec.Starting = nil
	}
	m.mu.Unlock()
	if err != nil {
		logf.Close()
		return Status{}, fmt.Errorf("member %s not started: %w", m.name, err)
	}

	env := os.Environ()
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k]) // later entries win in exec
	}
	var cmd *exec.Cmd
	for attempt := 0; ; attempt++ {
		cmd = &exec.Cmd{
			Path:   artifact,
			Args:   append([]string{artifact}, spec.Args...),
			Env:    env,
			Dir:    cwd,
			Stdout: logf,
			Stderr: logf,
			// A new session: signals to the agent's process group, and
			// the agent's death, do not reach the member.
			SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		}
		err = cmd.Start()
		// ETXTBSY: another goroutine's fork may briefly hold a write
		// descriptor of a freshly copied artifact (golang.org/issue/22315).
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 5 {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintf(logf, "--- ferry agent: start failed: %v\n", err)
		logf.Close()
		m.mu.Lock()
		m.known = true
		m.rec.Starting = nil
		m.rec.Running = false
		m.rec.Detail = fmt.Sprintf("start of version %s failed: %v", spec.Version, err)
		m.rec.ExitCode = nil
		s.persistLocked(m)
		m.mu.Unlock()
		s.log.Error("member start failed", "member", m.name, "version", spec.Version, "err", err)
		return Status{}, &apiError{http.StatusInternalServerError, CodeStartFailed,
			fmt.Sprintf("starting %s: %v", m.name, err)}
	}
	logf.Close() // the child has its own descriptor

	// The child is not reaped before reap runs, so its /proc entry is
	// there to read.
	pid := cmd.Process.Pid
	_, start, serr := procStat(pid)
	if serr != nil {
		s.log.Warn("cannot read process start time; the member will not be re-adopted after an agent restart",
			"member", m.name, "pid", pid, "err", serr)
	}
	p := &proc{pid: pid, start: start, child: true, done: make(chan struct{})}
	m.mu.Lock()
	m.known = true
	m.proc = p
	m.rec = record{
		Name:          m.name,
		Version:       spec.Version,
		SHA256:        spec.SHA256,
		Artifact:      artifact,
		Args:          spec.Args,
		Env:           spec.Env,
		StopTimeoutMS: spec.StopTimeoutMS,
		Running:       true,
		PID:           pid,
		StartTime:     start,
		Since:         now,
	}
	perr := s.persistLocked(m)
	st := m.rec.status()
	m.mu.Unlock()
	go s.reap(m, p, cmd)
	s.log.Info("member started", "member", m.name, "pid", pid, "version", spec.Version)
	if perr != nil {
		return Status{}, fmt.Errorf("member %s started (pid %d) but its state was not saved: %w", m.name, pid, perr)
	}
	return st, nil
}

// prepareArtifact returns the agent's copy of the artifact,
// Dir/artifacts/<sha256>/<basename>, verified against spec.SHA256. An
// existing copy with the right checksum is reused; otherwise the
// source is hashed while it is copied, and only a copy with the right
// checksum is renamed into place.
func (s *Server) prepareArtifact(spec MemberSpec) (string, error) {
	dir := filepath.Join(s.dir, "artifacts", spec.SHA256)
	dst := filepath.Join(dir, filepath.Base(spec.Path))
	if sum, err := hashFile(dst); err == nil && sum == spec.SHA256 {
		return dst, nil
	}
	// A FIFO or a device is refused at once (an open of a FIFO would
	// block the request forever).
	src, _, err := safefile.Open(spec.Path)
	if err != nil {
		return "", badRequest("artifact: %v", err)
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(spec.Path)+".*.tmp")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, h), src)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("copying artifact %s: %w", spec.Path, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != spec.SHA256 {
		os.Remove(tmp.Name())
		os.Remove(dir) // only if empty
		return "", &apiError{http.StatusUnprocessableEntity, CodeChecksumMismatch,
			fmt.Sprintf("artifact %s has sha256 %s, want %s", spec.Path, sum, spec.SHA256)}
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("artifact: %w", err)
	}
	return dst, nil
}

func hashFile(path string) (string, error) { return checksum.File(path) }
