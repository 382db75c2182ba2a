package strategy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Member is one member of the cluster as admission sees it.
type Member struct {
	Name      string
	Component string
	Host      string
	// Domain is the member's failure domain (zone, rack), "" if none.
	Domain string
	// Healthy: running healthy, as observed.
	Healthy bool
	// InFlight: being moved by ferry now (drained, stopped, starting,
	// soaking, rejoining).
	InFlight bool
	// Unknown: its substrate did not answer, nothing is known of it.
	Unknown bool
	// Role: it holds its component's role (the leader) right now.
	Role bool
	// Pending: in the current phase and not moved yet.
	Pending bool
	// Version is the version it runs, as observed ("" if unknown).
	Version string
	// System is the system's own answer to whether it may stop (its
	// component's ok_to_stop call), when the view asks the system.
	System Answer
}

// Answer is the system's own answer to whether a member may stop, as
// admission sees it: peers ask the system (Ceph's ok-to-stop, Kafka's
// in-sync replicas) rather than count for it.
type Answer struct {
	// Answered: asked recently enough to count (after the last batch
	// ended; at a stop, after the member's drain ended) and answered.
	Answered bool
	Yes      bool
	// Words are the system's own (what its call answered).
	Words string
}

// Gate is a component's cluster gate as admission sees it.
type Gate struct {
	Component string
	Healthy   bool
	// Fresh: its verdict comes from a check made after the last batch
	// ended (a green from before a batch says nothing after it).
	Fresh  bool
	Detail string
}

// View is what predicates judge a candidate against.
type View struct {
	Component string
	Settings  Settings
	// Quorum is the strategy's quorum for the component (0: none).
	Quorum int
	// RoleName names the component's role ("leader"), "" if it has none.
	RoleName string
	// Members are every member of the cluster.
	Members []Member
	// Own, if set, are the members of the view's component among
	// Members, apart: the predicates that count the component's own
	// look at those only (a view of ten thousand members is asked at
	// each stop). Without it they are found in Members.
	Own []Member
	// Gates must be green (and fresh) before a member is admitted; none
	// while rolling back (a red gate may be what the rollback repairs).
	Gates []Gate
	// Admitted are the members admitted earlier in the same round:
	// they count as down.
	Admitted map[string]bool
	// Index, if set, holds the positions of Members by name: a budget
	// then finds the admitted members there, instead of looking each
	// member up in Admitted (ten thousand lookups per candidate).
	Index map[string]int
	// Tally, if set with Index, counts Members as they stand (kept with
	// them): the budgets, the quorum and the substrate then read their
	// counts there, and the admitted members' from what Admit counted,
	// instead of walking Members for each candidate. Verify checks
	// every such count against the walk (tests; it panics at a
	// difference).
	Tally  *Tally
	Verify bool
	// admitted counts what Admit added to Admitted.
	admitted admittedTally
	// Stopping: the check is made again at the moment a member that was
	// admitted goes down (another member may have failed meanwhile);
	// only the budgets, quorum and substrate apply then.
	Stopping bool
	// RollingBack: the batches follow the rollback's plan (the reverse
	// of the upgrade's), so the role order does not apply.
	RollingBack bool
	// AskSystem: the component describes an ok_to_stop call, whose
	// answer (Member.System) a healthy candidate needs.
	AskSystem bool
	// ByHost: a hosts stage moves the members, host by host; the
	// hosts' order (the one holding a role last) does role_last's work.
	ByHost bool
}

// Predicate is one named rule that may refuse a member's admission.
type Predicate struct {
	Name string
	// Doc says what the rule protects.
	Doc string
	// Check returns why candidate c may not go down now, or "".
	Check func(v *View, c Member) string
	// atAdmission: checked when a batch is formed only, not again when
	// an admitted member stops.
	atAdmission bool
}

// Refusal is one predicate's refusal of one member.
type Refusal struct {
	Predicate string `json:"predicate"`
	Member    string `json:"member"`
	Reason    string `json:"reason"`
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s refused %s (%s)", r.Predicate, r.Member, r.Reason)
}

// The predicates' names.
const (
	PredSubstrate        = "substrate"
	PredGate             = "gate"
	PredRoleLast         = "role_last"
	PredMaxUnavailable   = "max_unavailable"
	PredPerHost          = "max_unavailable_per_host"
	PredPerDomain        = "max_unavailable_per_domain"
	PredQuorum           = "quorum"
	PredOKToStop         = "ok_to_stop"
	maxNamedInAReason    = 5
	defaultRoleNameInMsg = "its role"
)

// Predicates are every admission predicate, in the order they are
// asked; the first refusal is the one reported.
var Predicates = []Predicate{
	{Name: PredSubstrate, Doc: "the substrate answers for the component's members (an agent or API server away is not a member's failure)", Check: substrate},
	{Name: PredGate, Doc: "every cluster gate is green, checked after the last batch ended", Check: gate, atAdmission: true},
	{Name: PredRoleLast, Doc: "a member holding the component's role (the leader) goes after every other member of its phase", Check: roleLast, atAdmission: true},
	{Name: PredMaxUnavailable, Doc: "at most max_unavailable members of the component down at once, counting those down for any reason", Check: maxUnavailable},
	{Name: PredPerHost, Doc: "at most max_unavailable_per_host members down on one host, counting the members of every component on it", Check: perHost},
	{Name: PredPerDomain, Doc: "at most max_unavailable_per_domain members of the component down in one failure domain", Check: perDomain},
	{Name: PredQuorum, Doc: "stopping a member leaves at least quorum healthy members of the component (ok-to-stop)", Check: quorum},
	// Last: the system is asked only about a candidate ferry's own
	// counting admits. Asked again at the stop, after the drain.
	{Name: PredOKToStop, Doc: "the system itself says the member may stop (the component's ok_to_stop call, asked after the last batch ended and again after its drain)", Check: okToStop},
}

// Known reports whether name is a predicate's name (a member's or a
// host's).
func Known(name string) bool {
	return slices.Contains(PredicateNames(), name)
}

// PredicateNames lists the predicates' names in order: the members',
// then the hosts' own.
func PredicateNames() []string {
	out := make([]string, 0, len(Predicates)+len(HostPredicates))
	for _, p := range Predicates {
		out = append(out, p.Name)
	}
	for _, p := range HostPredicates {
		if !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	return out
}

// Admit asks every predicate whether candidate c may go down now and
// returns the first refusal, or nil. off reports a predicate the
// operator switched off for c.
func Admit(v *View, c Member, off func(predicate, member string) bool) *Refusal {
	for _, p := range Predicates {
		if v.Stopping && p.atAdmission {
			continue
		}
		if off != nil && off(p.Name, c.Name) {
			continue
		}
		if why := p.Check(v, c); why != "" {
			return &Refusal{Predicate: p.Name, Member: c.Name, Reason: why}
		}
	}
	return nil
}

func substrate(v *View, c Member) string {
	if c.Unknown {
		return "its substrate does not answer"
	}
	if v.counted() && v.Tally.unknown[v.Component] == 0 && !v.Verify {
		return ""
	}
	var away []string
	for _, m := range v.mine() {
		if m.Component == v.Component && m.Unknown {
			away = append(away, m.Name)
		}
	}
	if v.Verify && v.counted() && (v.Tally.unknown[v.Component] == 0) != (len(away) == 0) {
		panic(fmt.Sprintf("strategy: the tally counts %d of %s not known, the members %d", v.Tally.unknown[v.Component], v.Component, len(away)))
	}
	if len(away) > 0 {
		return "the substrate does not answer for " + names(away) + ": the budgets cannot be counted"
	}
	return ""
}

func gate(v *View, _ Member) string {
	var red []string
	for _, g := range v.Gates {
		switch {
		case !g.Fresh:
			red = append(red, fmt.Sprintf("cluster gate %s not checked since the last batch", g.Component))
		case !g.Healthy:
			red = append(red, fmt.Sprintf("cluster gate %s red: %s", g.Component, cmp.Or(g.Detail, "-")))
		}
	}
	return strings.Join(red, "; ")
}

func roleLast(v *View, c Member) string {
	if !c.Role || v.RollingBack || v.ByHost {
		return ""
	}
	var before []string
	for _, m := range v.mine() {
		if m.Component == v.Component && m.Name != c.Name && m.Pending && !v.Admitted[m.Name] && !m.Role {
			before = append(before, m.Name)
		}
	}
	if len(before) == 0 {
		return ""
	}
	role := v.RoleName
	if role == "" {
		role = defaultRoleNameInMsg
	}
	return fmt.Sprintf("it holds %s: it goes after %s", role, names(before))
}

// cost is what taking c down costs a budget: nothing if it is already
// down.
func cost(c Member) int {
	if c.Healthy {
		return 1
	}
	return 0
}

// counts reports whether member m counts against a budget of c: not
// c, matching in, and down, in flight or admitted in this round.
func counts(v *View, c, m Member, in func(Member) bool) bool {
	return m.Name != c.Name && in(m) && (m.InFlight || v.Admitted[m.Name] || !m.Healthy)
}

// unavailable lists the members, among those given, that count against
// a budget of c.
func unavailable(v *View, c Member, among []Member, in func(Member) bool) []string {
	var out []string
	for _, m := range among {
		if !counts(v, c, m, in) {
			continue
		}
		switch {
		case m.InFlight:
			out = append(out, m.Name+" in progress")
		case v.Admitted[m.Name]:
			out = append(out, m.Name+" admitted")
		case !m.Healthy:
			out = append(out, m.Name+" down")
		}
	}
	return out
}

// budget refuses c when more than max of the members among those given
// and matching in would be down with it. among holds every member of
// the view that matches in.
func budget(v *View, c Member, max int, label string, scope int, among []Member, in func(Member) bool) string {
	if max < 1 {
		return ""
	}
	// Counted first, named only when refused: admission asks at every
	// stop, with a thousand members in flight in a large batch.
	var n int
	ok := v.counted()
	if ok {
		n = v.countTallied(c, scope)
		if v.Verify {
			if walked, _ := countIndexed(v, c, among, in); walked != n {
				panic(fmt.Sprintf("strategy: the tally counts %d against %s's budget %q, the members %d", n, c.Name, label, walked))
			}
		}
	} else {
		n, ok = countIndexed(v, c, among, in)
	}
	if !ok {
		n = 0
		for _, m := range among {
			if counts(v, c, m, in) {
				n++
			}
		}
	}
	if n+cost(c) <= max {
		return ""
	}
	down := unavailable(v, c, among, in)
	if label != "" {
		label += ": "
	}
	return fmt.Sprintf("%s%d of %d already down: %s", label, len(down), max, names(down))
}

// countIndexed counts what counts does, through the view's Index: the
// members down or in flight among those given, then the admitted ones
// that are neither, found by name; false without an Index that holds
// every admitted name where Members has it.
func countIndexed(v *View, c Member, among []Member, in func(Member) bool) (int, bool) {
	if v.Index == nil {
		return 0, false
	}
	n := 0
	for name, yes := range v.Admitted {
		if !yes {
			continue
		}
		i, found := v.Index[name]
		if !found {
			continue // no member of the view: counted by none
		}
		if i >= len(v.Members) || v.Members[i].Name != name {
			return 0, false
		}
		if m := v.Members[i]; !m.InFlight && m.Healthy && m.Name != c.Name && in(m) {
			n++
		}
	}
	for i := range among {
		if m := &among[i]; (m.InFlight || !m.Healthy) && m.Name != c.Name && in(*m) {
			n++
		}
	}
	return n, true
}

func maxUnavailable(v *View, c Member) string {
	return budget(v, c, max(1, v.Settings.MaxUnavailable), "", scopeComponent, v.mine(), v.own)
}

// perHost counts the members of every component on c's host: a host
// carries them all, and a hosts stage moves them together.
func perHost(v *View, c Member) string {
	if c.Host == "" {
		return ""
	}
	return budget(v, c, v.Settings.MaxUnavailablePerHost, "host "+c.Host, scopeHost, v.Members, func(m Member) bool { return m.Host == c.Host })
}

func perDomain(v *View, c Member) string {
	if c.Domain == "" {
		return ""
	}
	return budget(v, c, v.Settings.MaxUnavailablePerDomain, c.Domain, scopeDomain, v.mine(), func(m Member) bool { return v.own(m) && m.Domain == c.Domain })
}

// own reports whether m is of the view's component.
func (v *View) own(m Member) bool { return m.Component == v.Component }

// mine are the members to look among for the component's own: Own when
// the view has them apart, else every member (each predicate still
// checks the component).
func (v *View) mine() []Member {
	if v.Own != nil {
		return v.Own
	}
	return v.Members
}

func quorum(v *View, c Member) string {
	if v.Quorum < 1 || cost(c) == 0 {
		return ""
	}
	counted := v.counted()
	if counted && !v.Verify && v.quorumTallied(c) >= v.Quorum {
		return ""
	}
	healthy := 0
	var down []string
	for _, m := range v.mine() {
		if m.Component != v.Component || m.Name == c.Name {
			continue
		}
		switch {
		case m.InFlight:
			down = append(down, m.Name+" in progress")
		case v.Admitted[m.Name]:
			down = append(down, m.Name+" admitted")
		case !m.Healthy:
			down = append(down, m.Name+" down")
		default:
			healthy++
		}
	}
	if counted && v.Verify && v.quorumTallied(c) != healthy {
		panic(fmt.Sprintf("strategy: the tally counts %d healthy beside %s, the members %d", v.quorumTallied(c), c.Name, healthy))
	}
	if healthy >= v.Quorum {
		return ""
	}
	msg := fmt.Sprintf("stopping it would leave %d healthy of quorum %d", healthy, v.Quorum)
	if len(down) > 0 {
		msg += ": " + names(down)
	}
	return msg
}

// AskingTheSystem is the reason of an ok_to_stop refusal while the
// system's answer is awaited.
const AskingTheSystem = "asking the system"

// okToStop refuses a candidate the system said no to, or has not
// answered for yet. A member already down costs the system nothing to
// stop (and its own call would not answer).
func okToStop(v *View, c Member) string {
	switch {
	case !v.AskSystem || cost(c) == 0:
		return ""
	case !c.System.Answered:
		return AskingTheSystem
	case !c.System.Yes:
		return "the system says no: " + cmp.Or(c.System.Words, "-")
	}
	return ""
}

func names(ns []string) string {
	if len(ns) <= maxNamedInAReason {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:maxNamedInAReason], ", "), len(ns)-maxNamedInAReason)
}
