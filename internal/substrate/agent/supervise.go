package agent

import (
	"time"
)

// Restart backoff of members with policy on-failure: the first restart
// after DefaultRestartMin, each next one after twice the delay before,
// up to DefaultRestartMax; an instance that ran DefaultRestartReset or
// more starts the series again. A crash loop thus costs a restart every
// 10s at most, while a member that fails once a day comes back at once.
const (
	DefaultRestartMin   = 200 * time.Millisecond
	DefaultRestartMax   = 10 * time.Second
	DefaultRestartReset = 10 * time.Second
)

// backoff is the restart delay policy.
type backoff struct {
	min, max, reset time.Duration
}

// next returns the delay before the next restart, given the delay of
// the last one (0 if none) and how long the instance that just ended
// ran.
func (b backoff) next(last, ran time.Duration) time.Duration {
	if last <= 0 || ran >= b.reset {
		return b.min
	}
	return min(last*2, b.max)
}

// scheduleRestartLocked schedules the restart of m, whose instance
// just ended after running for ran; m.mu must be held, and the caller
// persists the record. The restart is made by a goroutine that waits
// for the delay, unless a PUT or a stop (which change m.gen and close
// the cancel channel) or the agent's Close come first.
func (s *Server) scheduleRestartLocked(m *member, ran time.Duration) {
	if s.closing.Load() {
		return
	}
	m.backoff = s.backoff.next(m.backoff, ran)
	delay := m.backoff
	if m.cancelRestart != nil {
		close(m.cancelRestart)
	}
	cancel := make(chan struct{})
	m.cancelRestart = cancel
	m.rec.RestartPending = true
	m.nextRestart = time.Now().Add(delay)
	gen := m.gen
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	s.log.Info("member will be restarted", "member", m.name, "in", delay, "restarts", m.rec.Restarts)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			s.restart(m, gen)
		case <-cancel:
		case <-s.ctx.Done():
		}
	}()
}

// cancelRestartLocked starts a new generation of m's operations (a PUT
// or a stop came): a pending restart is not made. It reports whether
// one was pending. m.mu must be held.
func (s *Server) cancelRestartLocked(m *member) bool {
	m.gen++
	if m.cancelRestart != nil {
		close(m.cancelRestart)
		m.cancelRestart = nil
	}
	m.nextRestart = time.Time{}
	was := m.rec.RestartPending
	m.rec.RestartPending = false
	return was
}

func (s *Server) cancelRestart(m *member) {
	m.mu.Lock()
	s.cancelRestartLocked(m)
	m.mu.Unlock()
}

// restart makes a scheduled restart, if it still stands: the agent is
// not closing, no PUT or stop came since it was scheduled, and the
// member is still down.
func (s *Server) restart(m *member, gen uint64) {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	if s.closing.Load() || m.gen != gen || m.proc != nil || !m.rec.RestartPending {
		m.mu.Unlock()
		return
	}
	m.cancelRestart = nil
	m.nextRestart = time.Time{}
	pd := m.rec.again(time.Now())
	m.mu.Unlock()
	// RestartPending stays set in the record written before the fork:
	// if the agent dies before the pid is recorded and no process is
	// found, the next agent restarts the member.
	if _, err := s.spawn(m, pd); err != nil {
		s.log.Error("member restart failed", "member", m.name, "err", err)
	}
}
