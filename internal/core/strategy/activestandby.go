package strategy

import "fmt"

// ActiveStandby upgrades an active/standby pair (or an active member
// and its standbys): the standby members first, max_batch at a time;
// then the role (the component's "active") is switched over to an
// upgraded member and the cluster gate must be green, and only then
// does the former active go, alone. StarlingX upgrades its controllers
// this way (the standby, a swact, then the former active); cephadm its
// managers (the standbys, "mgr fail", then the old active).
//
// The switchover is a step of its own that the machine runs before the
// former active's batch (package step's switching-over, named in the
// Choice), journaled with its undo: an abort or a rollback hands the
// role back to the former active. Who holds the role is observed before
// each batch (the component's role check), never written in the plan.
const ActiveStandby = "active-standby"

// switchingOver is package step's SwitchingOver, by name (this package
// imports nothing of ferry).
const switchingOver = "switching-over"

func init() { Register(ActiveStandby, activeStandby{}) }

type activeStandby struct{}

func (activeStandby) Validate(s Settings, members []Member) []Problem {
	ps := growingProblems(ActiveStandby, s)
	if n := len(members); n == 1 {
		ps = append(ps, Problem{"", "active-standby switches the role over to an upgraded standby before the active goes, but the component has 1 member: it needs at least 2 (use type: canary for one member)"})
	}
	return ps
}

// Defaults: one standby at a time, as StarlingX's one standby
// controller.
func (activeStandby) Defaults(s Settings) Settings {
	if s.MaxBatch == 0 {
		s.MaxBatch = 1
	}
	return s
}

func (activeStandby) Quorum(Settings, int) int { return 0 }

// Adds: the switchover, before the batch of the member holding the
// role.
func (activeStandby) Adds() []string { return []string{switchingOver} }

// Expected shows the members max_batch at a time, the last alone: no
// role is known before the upgrade, so which member is the active (and
// goes last, after the switchover) is said in the note.
func (activeStandby) Expected(s Settings, members []Member) ([][]string, string) {
	if len(members) == 0 {
		return nil, ""
	}
	return Cut(DefaultOrder(members), HolderLast(len(members), s)), "the standbys first; the member holding the role (observed at run time) goes last, alone, after a switchover to an upgraded member"
}

func (activeStandby) Next(r Round) Choice {
	size := max(1, r.Settings.MaxBatch)
	rs := SplitByRole(r)
	standbys, holders, down := rs.Others, rs.Holders, rs.Down
	switch {
	case !rs.Seen:
		// Who is active is not known: a member down may go (replacing it
		// costs nothing), a healthy one may be the active whose role is
		// not seen yet, and waits.
		return Choice{Members: Take(down, size, r.Admit), Size: size,
			Why: "no member holds the role right now: only members down may go until one does"}
	case len(standbys) > 0:
		why := "the standbys first"
		if size > 1 {
			why = fmt.Sprintf("the standbys first, %d at a time", size)
		}
		return Choice{Members: Take(DefaultOrder(standbys), size, r.Admit), Size: size, Why: why}
	}
	// Only the role's holder is left: alone, once the role is switched
	// over to an upgraded member.
	return Choice{Members: Take(holders, 1, r.Admit), Size: 1, Before: []string{switchingOver},
		Why: "the active last, alone, once the role is switched over to an upgraded member"}
}

func (activeStandby) Explain() string {
	return "batches: the standbys first, max_batch at a time; then the member holding the role, alone, after its role is switched over to an upgraded member (hooks.switchover) and the cluster gate is green; who holds the role is observed before each batch"
}
