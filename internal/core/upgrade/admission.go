package upgrade

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// The admission view (stepper.view) holds every member of the
// description as admission sees it. It is asked for at each batch and
// again at each member's stop: built anew each time, ten thousand
// members stopping made a hundred million entries. So its members are
// kept, as of one observation and one record, in an admission that a
// summarized observation (Summarize) carries from step to step: what
// the observation says of each member is filled in once, and what the
// record says (in flight, pending) is brought up to date from the
// record's lineage (the members the last step or outcome copied) and
// the members whose step changed since (stepper.setStep). Without a
// summary, each step makes its own.

// admission is the admission view's members as of one observation.
type admission struct {
	members []strategy.Member // every member of the description, in its order
	index   map[string]int    // members' positions by name
	own     map[string][2]int // each component's members: members[from:to]
	// tally counts the members as the predicates do, kept with them.
	tally *strategy.Tally
	// steps are the members' steps in the record (as members), which
	// runBatch reads to pass over those done; batchPos are the
	// positions of the members of the batch whose members' list
	// starts at batchOf.
	steps    []MemberStep
	batchOf  *string
	batchPos []int
	// health is what the observation says of each member (as members),
	// for runBatch's walk.
	health []MemberHealth
	// effects indexes the journal's member effects (memberEffects),
	// kept from step to step while the journal stays the same.
	effects effectIndex
	// waits are the members' lines waiting to be healthy
	// (waitHealthy), for their target, said anew with the observation.
	waits []waitLine
	// asOf is the members map of the record whose steps the members'
	// InFlight and Pending say; phase the phase Pending is of, and
	// inPhase that phase's members.
	asOf    map[string]*Member
	phase   phaseKey
	inPhase map[string]bool
}

// waitLine is a member's line waiting to be healthy on target.
type waitLine struct{ line, target string }

// phaseKey names a phase of the active plan.
type phaseKey struct {
	index       int
	rollingBack bool
	component   string
}

// VerifyAdmission, when set, makes every admission view be checked
// against one built anew from the record and the observation, and the
// machine panic at a difference: for tests (slow).
var VerifyAdmission bool

// admission returns the admission of this step's observation, up to
// date with the record as it stands and with phase ph.
func (s *stepper) admission(ph plan.Phase) *admission {
	a := s.adm
	if a == nil {
		a = &admission{}
		if sum := s.obs.summary; sum != nil {
			if sum.admission == nil {
				sum.admission = a
			}
			a = sum.admission
		}
		s.adm = a
		if a.members == nil {
			a.build(s)
		} else {
			a.catchUp(s)
		}
	}
	if key := (phaseKey{s.u.Phase, s.u.RollingBack(), ph.Component}); key != a.phase {
		a.phase, a.inPhase = key, map[string]bool{}
		for _, n := range ph.Members() {
			a.inPhase[n] = true
		}
		for i := range a.members {
			a.refresh(s, i)
		}
	}
	a.patch(s, s.stepped)
	s.stepped = s.stepped[:0]
	a.asOf = s.u.Members
	if VerifyAdmission {
		a.verify(s)
	}
	return a
}

// build fills in every member from the observation and the record.
func (a *admission) build(s *stepper) {
	a.index, a.own = map[string]int{}, map[string][2]int{}
	for i := range s.c.Components {
		cc := &s.c.Components[i]
		a.own[cc.Name] = [2]int{len(a.members), len(a.members) + len(cc.Members)}
		for j := range cc.Members {
			mm := &cc.Members[j]
			a.index[mm.Name] = len(a.members)
			o := s.obs.Members[mm.Name]
			a.members = append(a.members, observedMember(cc, mm, o))
			a.health = append(a.health, o)
			a.steps = append(a.steps, "")
			a.waits = append(a.waits, waitLine{})
		}
	}
	a.tally = nil // counted once every member is in
	for i := range a.members {
		a.refresh(s, i)
	}
	a.tally = strategy.NewTally(a.members)
	s.stepped = s.stepped[:0]
	a.asOf = s.u.Members
}

// observe says anew what observation obs says of each member, and
// returns the summary of obs's members (Summarize's) it found meanwhile,
// and whether they were all of obs's members.
func (a *admission) observe(obs Observation) (*summary, bool) {
	sum, seen, found := &summary{}, false, 0
	for i := range a.members {
		m := &a.members[i]
		o, ok := obs.Members[m.Name]
		if ok {
			found++
			sum.note(m.Name, o, obs.Since, &seen)
		}
		was := *m
		m.Healthy, m.Unknown, m.Role, m.Version = o.Healthy, o.Unknown, o.Role, o.Version
		a.tally.Change(was, *m)
		a.health[i] = o
		a.waits[i] = waitLine{}
	}
	sum.sort()
	return sum, found == len(obs.Members)
}

// observedMember is member mm of cc as admission sees it from the
// description and what was observed of it, o.
func observedMember(cc *config.Component, mm *config.Member, o MemberHealth) strategy.Member {
	return strategy.Member{Name: mm.Name, Component: cc.Name, Host: mm.Host, Domain: mm.Domain,
		Healthy: o.Healthy, Unknown: o.Unknown, Role: o.Role, Version: o.Version}
}

// refresh sets what the record says of the member at i: in flight,
// pending in the phase.
func (a *admission) refresh(s *stepper, i int) {
	m := &a.members[i]
	r := s.u.Members[m.Name]
	was := *m
	m.InFlight = r != nil && r.Step.InFlight()
	m.Pending = r != nil && r.Step == StepPending && a.inPhase[m.Name]
	a.tally.Change(was, *m)
	a.steps[i] = ""
	if r != nil {
		a.steps[i] = r.Step
	}
}

// positions are the positions of batch members ms (-1 for a name the
// description does not have), kept for the batch.
func (a *admission) positions(ms []string) []int {
	if len(ms) > 0 && a.batchOf == &ms[0] && len(a.batchPos) == len(ms) {
		return a.batchPos
	}
	a.batchPos = make([]int, len(ms))
	for i, n := range ms {
		if p, ok := a.index[n]; ok {
			a.batchPos[i] = p
		} else {
			a.batchPos[i] = -1
		}
	}
	if len(ms) > 0 {
		a.batchOf = &ms[0]
	}
	return a.batchPos
}

// catchUp brings the members up to date with the record this step was
// given (and what the step changed so far): from the lineage when the
// record was made from the one they say, else member by member.
func (a *admission) catchUp(s *stepper) {
	in := s.in
	switch {
	case sameMap(a.asOf, in.Members):
	case in.from != nil && sameMap(in.from, a.asOf):
		a.patch(s, in.changed)
	default:
		for i := range a.members {
			a.refresh(s, i)
		}
		s.stepped = s.stepped[:0]
	}
}

// patch refreshes the named members.
func (a *admission) patch(s *stepper, names []string) {
	for _, n := range names {
		if i, ok := a.index[n]; ok {
			a.refresh(s, i)
		}
	}
}

// settle brings the admission of a summarized observation up to date
// with the record the step returns, when the step did not ask for it
// (it did: brought up to date at its end), so that the next step
// catches up from this record's lineage.
func (s *stepper) settle() {
	sum := s.obs.summary
	switch {
	case sum == nil || sum.admission == nil || sum.admission.members == nil:
		return
	case s.adm == nil:
		s.adm = sum.admission
		s.adm.catchUp(s)
	}
	s.adm.patch(s, s.stepped)
	s.stepped = s.stepped[:0]
	s.adm.asOf = s.u.Members
}

// verifySummary panics if the summary obs carries differs from its
// members' summarized anew.
func verifySummary(obs Observation) {
	sum := obs.summary
	if sum == nil {
		return
	}
	made := obs.Summarize().summary
	if !slices.Equal(sum.unknown, made.unknown) || !slices.Equal(sum.unchecked, made.unchecked) || !sum.oldestSeen.Equal(made.oldestSeen) {
		panic(fmt.Sprintf("upgrade: the observation's summary (%v not known, %v not checked, oldest seen %s) differs from its members' (%v, %v, %s)",
			sum.unknown, sum.unchecked, sum.oldestSeen, made.unknown, made.unchecked, made.oldestSeen))
	}
}

// verify panics if the members differ from those built anew, or the
// effects' index, when it is of the journal as it is, from one made
// anew.
func (a *admission) verify(s *stepper) {
	if x := a.effects; x.at != nil {
		var fresh effectIndex
		fresh.of(s.u.Effects, "")
		if x.first == fresh.first && x.n == fresh.n && x.last == fresh.last && !maps.EqualFunc(x.at, fresh.at, slices.Equal[[]int]) {
			panic(fmt.Sprintf("upgrade: the effects' index says %v, the journal %v", x.at, fresh.at))
		}
	}
	fresh := &admission{phase: a.phase, inPhase: a.inPhase}
	saved := slices.Clone(s.stepped)
	fresh.build(s)
	s.stepped = saved
	if !a.tally.Equal(fresh.tally) {
		panic("upgrade: the admission view's tally differs from its members' counted anew")
	}
	if !slices.Equal(a.members, fresh.members) || !maps.Equal(a.index, fresh.index) || !maps.Equal(a.own, fresh.own) || !slices.Equal(a.steps, fresh.steps) ||
		!slices.Equal(a.health, fresh.health) {
		for i := range fresh.members {
			if i >= len(a.members) || a.members[i] != fresh.members[i] {
				panic(fmt.Sprintf("upgrade: the admission view says %+v, the record and observation %+v", a.members[min(i, len(a.members)-1)], fresh.members[i]))
			}
			if a.health[i] != fresh.health[i] {
				panic(fmt.Sprintf("upgrade: the admission view says %s was seen %+v, the observation %+v", fresh.members[i].Name, a.health[i], fresh.health[i]))
			}
			if a.steps[i] != fresh.steps[i] {
				panic(fmt.Sprintf("upgrade: the admission view says %s is %s, the record %s", fresh.members[i].Name, a.steps[i], fresh.steps[i]))
			}
		}
		panic("upgrade: the admission view's members differ from the record and observation")
	}
}
