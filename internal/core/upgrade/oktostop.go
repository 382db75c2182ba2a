package upgrade

import (
	"sort"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// The system's own answer to whether a member may stop (a component's
// ok_to_stop call). The machine cannot make calls: when a candidate
// needs an answer it has not got, Step names it in Decision.Ask, the
// engine asks (each call in its own goroutine, bounded by its timeout)
// and the answer arrives in Observation.Answers. An answer counts for
// an admission if it was asked after the last batch ended (after a
// resume, after the engine's watch began), like a gate's verdict; for
// a stop, if asked after the member's drain ended, so that the system
// judges the member as it is about to stop (its leadership moved, out
// of rotation), as cephadm asks just before it stops a daemon.

// askAgain is how long a no is trusted before the system is asked
// again about the same member.
const askAgain = time.Second

// Answer is the system's answer about one member, as observed.
type Answer struct {
	// Yes: its ok_to_stop call passed.
	Yes bool
	// Words are what the system said: the call's detail (its status
	// and body, or the command's output).
	Words string
	// Asked is when the call that gave this answer began.
	Asked time.Time
}

// answerSince is when an answer about member m must have been asked
// after to count: for its admission, the last batch's end; at its stop
// (stopping), the end of its drain, when it was drained.
func (s *stepper) answerSince(m *Member, stopping bool) time.Time {
	since := s.u.Boundary
	for _, t := range []time.Time{s.u.Resumed, s.obs.Since} {
		if t.After(since) {
			since = t
		}
	}
	if stopping && m != nil && m.Since.After(m.Began) && m.Since.After(since) {
		since = m.Since
	}
	return since
}

// systemAnswer is the system's answer about member m as admission sees
// it: not answered unless asked recently enough.
func (s *stepper) systemAnswer(m *Member, name string, stopping bool) strategy.Answer {
	a, ok := s.obs.Answers[name]
	if !ok || a.Asked.Before(s.answerSince(m, stopping)) {
		return strategy.Answer{}
	}
	return strategy.Answer{Answered: true, Yes: a.Yes, Words: a.Words}
}

// admit asks every admission predicate about member n. A refusal by
// ok_to_stop has the system asked, if mayAsk: at once when it has no
// answer that counts (awaiting is then set: the refusal only awaits
// the answer), again once a no is askAgain old.
func (s *stepper) admit(v *strategy.View, n string, mayAsk bool) (r *strategy.Refusal, awaiting bool) {
	c := s.admissionMember(v, n)
	r = strategy.Admit(v, c, s.overridden)
	if r == nil || r.Predicate != strategy.PredOKToStop || !mayAsk {
		return r, false
	}
	if a, ok := s.obs.Answers[n]; s.tooSoon(a, ok && c.System.Answered) {
		return r, false
	}
	s.ask[n] = true
	return r, !c.System.Answered
}

// tooSoon reports whether answer a, when it counts, is a no younger
// than askAgain: it is not asked again yet (the machine wakes then).
func (s *stepper) tooSoon(a Answer, counts bool) bool {
	if !counts || a.Yes {
		return false
	}
	if next := a.Asked.Add(askAgain); s.now.Before(next) {
		s.wake(next)
		return true
	}
	return false
}

// asked lists the members the system is to be asked about now.
func (s *stepper) asked() []string {
	out := make([]string, 0, len(s.ask))
	for n := range s.ask {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
