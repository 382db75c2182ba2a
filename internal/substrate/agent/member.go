package agent

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
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
	// gen grows at every PUT and stop: a restart scheduled under an
	// older gen is not made (see supervise.go). cancelRestart, if not
	// nil, wakes the pending restart's goroutine to give up.
	gen           uint64
	cancelRestart chan struct{}
	// backoff is the delay of the last restart; nextRestart when the
	// pending one is due.
	backoff     time.Duration
	nextRestart time.Time

	// logMu serializes the rotation, bounding and reading of the
	// member's output files.
	logMu sync.Mutex
}

// proc is one process of a member.
type proc struct {
	pid   int
	start uint64 // /proc/<pid>/stat start time
	// child is true for processes this agent started (reaped by
	// cmd.Wait) and false for adopted ones (watched by polling).
	child bool
	// adopted is true for a process no agent started (found by an
	// adopt request): it is signalled alone, never its process group,
	// which is not known to be its own.
	adopted bool
	done    chan struct{} // closed once the exit is recorded
	once    sync.Once
	// stopNote is set (under member.mu) when the agent signals the
	// process, so that its exit reads as a stop.
	stopNote string
}

func (m *member) status() (wire.Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known {
		return wire.Status{}, false
	}
	return m.statusLocked(), true
}

// runningStatus is the member's status if a process of it runs (its
// own or adopted).
func (m *member) runningStatus() (wire.Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known || m.proc == nil {
		return wire.Status{}, false
	}
	return m.statusLocked(), true
}

func (m *member) statusLocked() wire.Status {
	st := m.rec.status()
	if m.rec.RestartPending && !m.nextRestart.IsZero() {
		t := m.nextRestart
		st.NextRestart = &t
	}
	return st
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

// markGone records that p exited, once; later calls do nothing. An
// exit nobody asked for of a member with policy on-failure schedules
// its restart.
func (s *Server) markGone(m *member, p *proc, detail string, code *int) {
	m.mu.Lock()
	if m.proc == p {
		m.proc = nil
		asked := p.stopNote != ""
		if asked {
			detail = "stopped (" + p.stopNote + "): " + detail
		}
		m.rec.Running = false
		m.rec.Detail = detail
		m.rec.ExitCode = code
		if !s.closed.Load() {
			s.log.Info("member exited", "member", m.name, "pid", p.pid, "detail", detail)
		}
		if !asked && m.rec.Restart == wire.RestartOnFailure {
			s.scheduleRestartLocked(m, time.Since(m.rec.Since))
		}
		s.persistLocked(m)
	}
	m.mu.Unlock()
	p.once.Do(func() { close(p.done) })
}

const adoptedExit = "exited (status unknown: the process was adopted after an agent restart)"

// exitUnknown says how a process that was not the agent's child
// exited: its status is its parent's to know.
func exitUnknown(p *proc) string {
	if p.adopted {
		return "exited (status unknown: no agent started the process, it was adopted)"
	}
	return adoptedExit
}

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
	if state == 'Z' && !p.child {
		// The same process (its start time matched), exited: reaped
		// here when it is this process's child from before a re-exec
		// (a child of this program is reaped by its cmd.Wait alone).
		reapIfChild(p.pid)
		return false
	}
	return state != 'X' && state != 'x'
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
		if r.RestartPending && r.Restart == wire.RestartOnFailure {
			// The agent before died with a restart pending.
			m.mu.Lock()
			s.scheduleRestartLocked(m, 0)
			m.mu.Unlock()
		}
		return
	}
	p := &proc{pid: r.PID, start: r.StartTime, adopted: r.Adopted, done: make(chan struct{})}
	if r.PID <= 0 || !alive(p) {
		m.mu.Lock()
		m.rec.Running = false
		m.rec.Detail = "exited while the agent was down (status unknown)"
		m.rec.ExitCode = nil
		if m.rec.Restart == wire.RestartOnFailure {
			s.scheduleRestartLocked(m, 0)
		}
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
		if m.rec.RestartPending && m.rec.Restart == wire.RestartOnFailure {
			// It was a restart of the agent's own: it is still due.
			s.scheduleRestartLocked(m, 0)
		}
		s.persistLocked(m)
		s.log.Info("agent died before starting member; not started", "member", m.name, "version", pd.Version)
		return
	}
	m.rec = pd.running(m.name, m.rec.Instance+1, pid, start)
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
				s.markGone(m, p, exitUnknown(p), nil)
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
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// ensure makes the member run exactly the artifact of spec, with its
// files.
func (s *Server) ensure(name string, spec wire.MemberSpec) (wire.Status, error) {
	m := s.getMember(name, true)
	m.op.Lock()
	defer m.op.Unlock()

	digest := filesDigest(spec.Files)
	m.mu.Lock()
	p := m.proc
	same := p != nil && !m.rec.Adopted && m.rec.Version == spec.Version && m.rec.SHA256 == spec.SHA256 && m.rec.FilesDigest == digest
	stopDefault, sigDefault := m.rec.StopTimeoutMS, m.rec.StopSignal
	m.mu.Unlock()
	if same && !p.child && !alive(p) {
		s.markGone(m, p, exitUnknown(p), nil)
		same = false
	}
	if same {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.rec.Restart != spec.Restart {
			// A change of policy is no reason to restart the process.
			m.rec.Restart = spec.Restart
			s.persistLocked(m)
		}
		return m.statusLocked(), nil
	}

	// The artifact is checked before anything is stopped: a bad
	// artifact leaves the old process running (and a pending restart
	// pending).
	artifact, err := s.prepareArtifact(spec)
	if err != nil {
		return wire.Status{}, err
	}

	s.cancelRestart(m) // the PUT starts the member now
	timeout := time.Duration(spec.StopTimeoutMS) * time.Millisecond
	if timeout == 0 {
		timeout = time.Duration(stopDefault) * time.Millisecond
	}
	sig := spec.StopSignal
	if sig == "" {
		sig = sigDefault
	}
	// An adopted process is stopped like any other: gracefully, then
	// killed after the timeout; from now on the member is the agent's.
	if err := s.stopLocked(m, timeout, stopSignal(sig)); err != nil {
		return wire.Status{}, err
	}
	return s.startLocked(m, spec, artifact)
}

// stop stops the member gracefully; timeout 0 and signal "" mean the
// member's own.
func (s *Server) stop(name string, timeout time.Duration, signal string) (wire.Status, error) {
	m := s.getMember(name, false)
	if m == nil {
		return wire.Status{Name: name}, nil
	}
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	if s.cancelRestartLocked(m) {
		s.persistLocked(m)
	}
	if timeout == 0 {
		timeout = time.Duration(m.rec.StopTimeoutMS) * time.Millisecond
	}
	if signal == "" {
		signal = m.rec.StopSignal
	}
	m.mu.Unlock()
	if err := s.stopLocked(m, timeout, stopSignal(signal)); err != nil {
		return wire.Status{}, err
	}
	st, ok := m.status()
	if !ok {
		return wire.Status{Name: name}, nil
	}
	return st, nil
}

// killWait bounds how long a process may take to disappear after
// SIGKILL.
const killWait = 10 * time.Second

// stopLocked stops the member's process, if any: sig (its graceful
// stop signal) to its process group (to the process alone when it was
// adopted), then SIGKILL after timeout. m.op must be held.
func (s *Server) stopLocked(m *member, timeout time.Duration, sig syscall.Signal) error {
	if timeout <= 0 {
		timeout = wire.DefaultStopTimeout
	}
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	if !p.child && !alive(p) {
		s.markGone(m, p, exitUnknown(p), nil)
		return nil
	}
	s.log.Info("stopping member", "member", m.name, "pid", p.pid, "signal", signalName(sig), "timeout", timeout, "adopted", p.adopted)
	m.mu.Lock()
	p.stopNote = signalName(sig)
	m.mu.Unlock()
	// The member leads its own session and process group (Setsid), so
	// the group id is its pid: this reaches the processes it started.
	// A process the agent adopted may share its group with others.
	signalProc(p, sig)
	if s.waitGone(m, p, timeout) {
		return nil
	}
	m.mu.Lock()
	p.stopNote = fmt.Sprintf("SIGKILL after %v", timeout)
	m.mu.Unlock()
	s.log.Warn("member did not stop in time; killing it", "member", m.name, "pid", p.pid, "timeout", timeout)
	if p.child || alive(p) {
		signalProc(p, syscall.SIGKILL)
	}
	if s.waitGone(m, p, killWait) {
		return nil
	}
	return fmt.Errorf("member %s: process %d did not exit %v after SIGKILL", m.name, p.pid, killWait)
}

// signalProc signals a member's process: its group, or, for an
// adopted process, the process alone.
func signalProc(p *proc, sig syscall.Signal) {
	if p.adopted {
		syscall.Kill(p.pid, sig)
		return
	}
	signalGroup(p.pid, sig)
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
				s.markGone(m, p, exitUnknown(p), nil)
				return true
			}
		}
	}
}

// startLocked starts the artifact for the member after a PUT: its
// files first, then the process, with its restart count back at 0.
// m.op must be held and the member must not be running.
func (s *Server) startLocked(m *member, spec wire.MemberSpec, artifact string) (wire.Status, error) {
	cwd := filepath.Join(s.dir, "members", m.name)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return wire.Status{}, err
	}
	if err := writeFiles(cwd, spec.Files); err != nil {
		err = fmt.Errorf("member %s not started: writing its files: %w", m.name, err)
		m.mu.Lock()
		if m.known {
			m.rec.Detail = err.Error()
			s.persistLocked(m)
		}
		m.mu.Unlock()
		return wire.Status{}, err
	}
	return s.spawn(m, pending{
		Version:       spec.Version,
		SHA256:        spec.SHA256,
		Artifact:      artifact,
		Args:          spec.Args,
		Env:           spec.Env,
		StopTimeoutMS: spec.StopTimeoutMS,
		Restart:       spec.Restart,
		StopSignal:    spec.StopSignal,
		FilesDigest:   filesDigest(spec.Files),
		Since:         time.Now(),
	})
}

// spawn starts one process of the member as pd says, a new instance
// with its own output file; m.op must be held and the member must not
// be running. A start that fails at exec is recorded; a restart that
// does is scheduled again (supervise.go).
func (s *Server) spawn(m *member, pd pending) (wire.Status, error) {
	if err := s.checkStored(pd.Artifact, pd.SHA256); err != nil {
		s.log.Error("member not started", "member", m.name, "err", err)
		return wire.Status{}, err
	}
	cwd := filepath.Join(s.dir, "members", m.name)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return wire.Status{}, err
	}
	m.logMu.Lock()
	logf, err := s.newInstanceLog(m.name)
	m.logMu.Unlock()
	if err != nil {
		return wire.Status{}, fmt.Errorf("member %s not started: its output file: %w", m.name, err)
	}
	m.mu.Lock()
	instance := m.rec.Instance + 1
	m.mu.Unlock()
	restart := ""
	if pd.Restarts > 0 {
		restart = fmt.Sprintf(" (restart %d)", pd.Restarts)
	}
	fmt.Fprintf(logf, "--- ferry agent %s: starting %s version %s (sha256 %s), instance %d%s\n",
		pd.Since.Format(time.RFC3339Nano), m.name, pd.Version, pd.SHA256, instance, restart)

	// Record the start before it happens: if the agent dies between
	// the fork and the record of the pid, the next agent finds the
	// process instead of starting a second one.
	m.mu.Lock()
	m.rec.Name = m.name
	m.rec.Starting = &pd
	err = s.persistLocked(m)
	if err != nil {
		m.rec.Starting = nil
	}
	m.mu.Unlock()
	if err != nil {
		logf.Close()
		return wire.Status{}, fmt.Errorf("member %s not started: %w", m.name, err)
	}

	env := os.Environ()
	keys := make([]string, 0, len(pd.Env))
	for k := range pd.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+pd.Env[k]) // later entries win in exec
	}
	var cmd *exec.Cmd
	for attempt := 0; ; attempt++ {
		cmd = &exec.Cmd{
			Path:   pd.Artifact,
			Args:   append([]string{pd.Artifact}, pd.Args...),
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
		m.rec.ExitCode = nil
		if pd.Restarts > 0 {
			m.rec.Detail = fmt.Sprintf("restart of version %s failed: %v", pd.Version, err)
			s.scheduleRestartLocked(m, 0)
		} else {
			m.rec.Detail = fmt.Sprintf("start of version %s failed: %v", pd.Version, err)
		}
		s.persistLocked(m)
		m.mu.Unlock()
		s.log.Error("member start failed", "member", m.name, "version", pd.Version, "err", err)
		return wire.Status{}, &apiError{http.StatusInternalServerError, wire.CodeStartFailed,
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
	m.rec = pd.running(m.name, instance, pid, start)
	perr := s.persistLocked(m)
	st := m.statusLocked()
	m.mu.Unlock()
	go s.reap(m, p, cmd)
	s.log.Info("member started", "member", m.name, "pid", pid, "version", pd.Version,
		"instance", instance, "restarts", pd.Restarts)
	if perr != nil {
		return wire.Status{}, fmt.Errorf("member %s started (pid %d) but its state was not saved: %w", m.name, pid, perr)
	}
	return st, nil
}

func hashFile(path string) (string, error) { return checksum.File(path) }
