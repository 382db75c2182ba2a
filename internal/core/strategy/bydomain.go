package strategy

import (
	"fmt"
	"slices"
	"strings"
)

// ByDomain moves one failure domain at a time (cephadm upgrades a
// cluster's OSDs one CRUSH bucket at a time): every member of a domain,
// in batches that grow 1, 2, 4 … up to max_batch within the domain
// like a canary's (halved after a strained batch), before any member of
// the next domain, so that members of two domains are never down
// together for the upgrade's sake. The domain with a member down goes
// first (its members are out already); the domain holding the role
// goes last (role_last would refuse its holder before every other
// member moved); members without a domain move after every domain, as
// one group of their own, since nothing says which fate they share. A
// domain that has only its role holder left yields to the next, and
// its holder goes last.
const ByDomain = "by-domain"

func init() { Register(ByDomain, byDomain{}) }

var _ HostChooser = byDomain{}

type byDomain struct{}

func (byDomain) Validate(s Settings, members []Member) []Problem {
	ps := growingProblems(ByDomain, s)
	if len(members) > 0 && !anyDomain(members) {
		ps = append(ps, Problem{"", fmt.Sprintf("by-domain moves one failure domain at a time, but none of the %s has a domain: set domain: on the members or their hosts (a zone, a rack)", plural(len(members), "member"))})
	}
	return ps
}

// Defaults: batches grow within a domain up to what the budget lets
// down at once, as a canary's do.
func (byDomain) Defaults(s Settings) Settings { return growingDefaults(s) }

func (byDomain) Quorum(Settings, int) int { return 0 }

// Expected shows the domains as the description gives them, in the
// order they would go (no role is known before the upgrade); members
// found at run time (a workload's pods) have no domain yet, and then
// the plan shows them as one group and says so.
func (byDomain) Expected(s Settings, members []Member) ([][]string, string) {
	if len(members) == 0 {
		return nil, ""
	}
	var out [][]string
	var parts []string
	for _, g := range rankGroups(domainGroups(members)) {
		out = append(out, Cut(DefaultOrder(g.members), growing(s, len(g.members)))...)
		parts = append(parts, fmt.Sprintf("%s (%d)", g.label(), len(g.members)))
	}
	if !anyDomain(members) {
		return out, "no member's failure domain is known: they move as one group, in growing batches"
	}
	return out, "one failure domain at a time: " + strings.Join(parts, ", ")
}

func (byDomain) Next(r Round) Choice {
	groups := domainGroups(r.Candidates)
	if len(groups) == 0 {
		return Choice{Size: 1, Why: "nothing left to move"}
	}
	// The domain in progress is finished first, unless only its role
	// holder is left while other domains wait (it goes last).
	cur := ""
	if len(r.Done) > 0 && len(r.Done[len(r.Done)-1].Members) > 0 {
		cur = r.Done[len(r.Done)-1].Members[0].Domain
	}
	var pick *group
	for i := range groups {
		if g := &groups[i]; g.domain == cur && len(r.Done) > 0 && (len(groups) == 1 || !g.onlyRole()) {
			pick = g
		}
	}
	first := pick == nil
	if first {
		ranked := rankGroups(groups)
		pick = &ranked[0]
	}
	// The batches of this domain so far: the last ones done, while
	// they are of it.
	var run []Outcome
	if !first {
		for i := len(r.Done) - 1; i >= 0; i-- {
			if len(r.Done[i].Members) == 0 || r.Done[i].Members[0].Domain != pick.domain {
				break
			}
			run = append([]Outcome{r.Done[i].Outcome}, run...)
		}
	}
	size, why := canarySize(r.Settings, run)
	if first {
		why = "one member first"
		switch rankOf(*pick) {
		case rankDown:
			why += ", the domain with a member down goes first"
		case rankRole:
			why += ", the domain holding the role goes last"
		case rankNoDomain:
			why += ", after every domain"
		}
	}
	return Choice{Members: Take(DefaultOrder(pick.members), size, r.Admit), Size: size, Why: pick.label() + ": " + why}
}

// NextHosts, in a hosts stage whose strategy is by-domain: one failure
// domain's hosts at a time, as its members go in a phase. The domain of
// the last host begun goes on while it has hosts left (a host of it
// refused now waits: no second domain is opened); then the first domain
// by rank: a host with a member down first, one holding a role last,
// hosts without a domain after every domain. Within a domain, hosts go
// in OrderHosts's order, up to the batch's size.
func (byDomain) NextHosts(r HostRound) []string {
	gs := hostGroups(r.Candidates)
	if len(gs) == 0 {
		return nil
	}
	pick := gs[0].domain
	if n := len(r.Begun); n > 0 {
		for _, g := range gs {
			if g.domain == r.Begun[n-1].Domain {
				pick = g.domain
			}
		}
	}
	return takeHosts(hostsIn(r.Candidates, pick), r.Size, r.Admit)
}

// ExpectedHosts shows the domains one after the other, in rank, each
// cut into batches of up to max_unavailable hosts (and
// max_unavailable_per_domain, which one domain at a time makes the
// bound).
func (byDomain) ExpectedHosts(maxUnavailable, perDomain int, hosts []Host) ([][]string, string) {
	size := max(1, maxUnavailable)
	if perDomain > 0 {
		size = min(size, perDomain)
	}
	var out [][]string
	var parts []string
	for _, g := range hostGroups(hosts) {
		var names []string
		for _, h := range hostsIn(hosts, g.domain) {
			names = append(names, h.Name)
		}
		for i := 0; i < len(names); i += size {
			out = append(out, names[i:min(i+size, len(names))])
		}
		label := g.domain
		if label == "" {
			label = "hosts without a domain"
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", label, len(names)))
	}
	return out, fmt.Sprintf("one failure domain's hosts at a time, %d host%s at a time: %s; %s", size, pluralS(size), strings.Join(parts, ", "), hostTurn)
}

// hostGroups are the hosts' failure domains ranked as by-domain ranks
// its members' (a host is down when a member on it is, holds a role
// when a member on it does).
func hostGroups(hs []Host) []group {
	ms := make([]Member, len(hs))
	for i, h := range hs {
		ms[i] = Member{Name: h.Name, Domain: h.Domain, Healthy: len(h.Down) == 0, Role: h.Role}
	}
	return rankGroups(domainGroups(ms))
}

// hostsIn are the hosts of domain d, in OrderHosts's order.
func hostsIn(hs []Host, d string) []Host {
	var out []Host
	for _, h := range hs {
		if h.Domain == d {
			out = append(out, h)
		}
	}
	return OrderHosts(out)
}

func (byDomain) Explain() string {
	return "batches: one failure domain at a time, in the sizes expected when every batch goes well; within a domain the next batch doubles after a clean batch and halves after a strained one, the domain with a member down goes first and the one holding a role last, as observed before each batch"
}

// group is the candidates of one failure domain ("": those without one).
type group struct {
	domain  string
	members []Member
}

func (g group) label() string {
	if g.domain == "" {
		return "members without a domain"
	}
	return "domain " + g.domain
}

// onlyRole: every member left holds the role.
func (g group) onlyRole() bool {
	return !slices.ContainsFunc(g.members, func(m Member) bool { return !m.Role })
}

// anyDomain: some member has a failure domain.
func anyDomain(ms []Member) bool {
	return slices.ContainsFunc(ms, func(m Member) bool { return m.Domain != "" })
}

// domainGroups groups members by domain, the domains in the order
// their first member comes.
func domainGroups(ms []Member) []group {
	var out []group
	at := map[string]int{}
	for _, m := range ms {
		i, ok := at[m.Domain]
		if !ok {
			i = len(out)
			at[m.Domain] = i
			out = append(out, group{domain: m.Domain})
		}
		out[i].members = append(out[i].members, m)
	}
	return out
}

const (
	rankDown = iota
	rankPlain
	rankNoDomain
	rankRole
)

// rankOf places a group: a domain with a member down first, a domain
// holding the role last, members without a domain after every other
// domain (before the role's, if that is a domain).
func rankOf(g group) int {
	role := slices.ContainsFunc(g.members, func(m Member) bool { return m.Role })
	switch {
	case g.domain == "" && !role:
		return rankNoDomain
	case g.domain != "" && slices.ContainsFunc(g.members, func(m Member) bool { return !m.Healthy }):
		return rankDown
	case role:
		return rankRole
	}
	return rankPlain
}

// rankGroups orders groups by rankOf, the plan's order otherwise.
func rankGroups(gs []group) []group {
	out := slices.Clone(gs)
	slices.SortStableFunc(out, func(a, b group) int { return rankOf(a) - rankOf(b) })
	return out
}
