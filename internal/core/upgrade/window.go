package upgrade

import (
	"time"
)

// Held is an upgrade held outside its policy's maintenance windows:
// no batch is formed until Until, when the next window opens.
type Held struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Windows are the policy's windows, in words.
	Windows string `json:"windows"`
}

// outsideWindow reports whether phase name may not go on with what
// ("starting the next batch") now because the time is outside the
// policy's maintenance windows, and says why and until when: the batch
// in flight has finished (no batch is formed while one runs), and the
// machine asks to be stepped when the next window opens, so that it
// goes on by itself. A rollback is not held: it repairs what a failure
// left, and waiting a day with half the members moved is no safer.
// Level-triggered: the answer is the time's alone.
func (s *stepper) outsideWindow(name, what string) bool {
	u := &s.u
	ws := s.c.Policy.MaintenanceWindows()
	if len(ws) == 0 || u.RollingBack() {
		u.Held = nil
		return false
	}
	open, until := ws.At(s.now)
	if open {
		if u.Held != nil {
			s.notes = append(s.notes, "the maintenance window "+ws.String()+" opened at "+stamp(u.Held.Until, ws[0].Zone)+": going on")
			u.Held = nil
		}
		return false
	}
	if u.Held == nil || !u.Held.Until.Equal(until) {
		u.Held = &Held{Since: s.now, Until: until, Windows: ws.String()}
	}
	// No wait on admission or a gate runs while held: each starts anew
	// when the window opens.
	u.WaitSince, u.GateSince, u.WaitRefused = time.Time{}, time.Time{}, false
	s.wait("%s: not %s: outside the maintenance windows (%s): holding until the next opens at %s", name, what, ws, stamp(until, ws[0].Zone))
	s.wake(until)
	return true
}

// stamp writes t in zone, with its offset: "2026-11-27T22:00:00+01:00".
func stamp(t time.Time, zone *time.Location) string {
	if zone != nil {
		t = t.In(zone)
	}
	return t.Format(time.RFC3339)
}
