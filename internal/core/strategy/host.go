package strategy

import (
	"cmp"
	"fmt"
	"strings"
)

// A hosts stage moves hosts, not members: each host is locked (its
// work moved away), every member on it upgraded, and it is unlocked.
// Which hosts go next, and whether one may be locked now, is this
// file's: the order (a host with a member down first, one holding a
// role last), the expected batches a plan shows, and the named host
// predicates a refusal is reported by. The members on a locked host
// are then admitted one by one by the member predicates, with their
// own component's settings.

// Host is one host as a hosts stage's admission sees it.
type Host struct {
	Name string
	// Domain is the host's failure domain, "" if none.
	Domain string
	// Locked: ferry has it locked, or is locking or unlocking it.
	Locked bool
	// Down names the members on it not healthy now (of every
	// component): the host is out of service in part already.
	Down []string
	// Unknown: the substrate does not answer for a member on it.
	Unknown bool
	// Role: a member on it holds its component's role (the leader).
	Role bool
	// AskCapacity: the host has a capacity call, whose answer
	// (Capacity) it needs before it is locked.
	AskCapacity bool
	Capacity    Answer
	// CapacityWait, if set, says why its capacity cannot be asked now
	// (another host is being locked or unlocked: the answer would
	// judge the hosts as they were).
	CapacityWait string
}

// HostView is what host predicates judge a candidate host against.
type HostView struct {
	// MaxUnavailable bounds the hosts locked at once (0 means 1),
	// counting those with a member down; MaxUnavailablePerDomain per
	// failure domain (0: no bound).
	MaxUnavailable          int
	MaxUnavailablePerDomain int
	// Hosts are every host of the stage.
	Hosts []Host
	// Gates must be green (and fresh) before a host is locked; none
	// while rolling back.
	Gates []Gate
	// Admitted are the hosts chosen earlier in the same round: they
	// count as locked.
	Admitted map[string]bool
}

// HostPredicate is one named rule that may refuse to lock a host now.
type HostPredicate struct {
	Name string
	// Doc says what the rule protects.
	Doc string
	// Check returns why host h may not be locked now, or "".
	Check func(v *HostView, h Host) string
}

// The host predicates' names (substrate and gate are the member
// predicates' too: overriding one overrides it for both).
const (
	PredHostsUnavailable = "max_unavailable_hosts"
	PredHostsPerDomain   = "max_unavailable_hosts_per_domain"
	PredHostCapacity     = "host_capacity"
)

// HostPredicates are every host predicate, in the order they are
// asked; the first refusal is the one reported.
var HostPredicates = []HostPredicate{
	{Name: PredSubstrate, Doc: "the substrate answers for every member on the host", Check: hostSubstrate},
	{Name: PredGate, Doc: "every cluster gate is green, checked after the last batch ended", Check: func(v *HostView, _ Host) string { return gate(&View{Gates: v.Gates}, Member{}) }},
	{Name: PredHostsUnavailable, Doc: "at most the hosts stage's max_unavailable hosts locked at once, counting those with a member down for any reason", Check: hostsUnavailable},
	{Name: PredHostsPerDomain, Doc: "at most the hosts stage's max_unavailable_per_domain hosts locked in one failure domain", Check: hostsPerDomain},
	// Last: the system is asked only about a host ferry's own counting
	// admits.
	{Name: PredHostCapacity, Doc: "the host's capacity call says the other hosts can take its load now", Check: hostCapacity},
}

// AdmitHost asks every host predicate whether host h may be locked now
// and returns the first refusal (its Member is the host), or nil. off
// reports a predicate the operator switched off for h.
func AdmitHost(v *HostView, h Host, off func(predicate, name string) bool) *Refusal {
	for _, p := range HostPredicates {
		if off != nil && off(p.Name, h.Name) {
			continue
		}
		if why := p.Check(v, h); why != "" {
			return &Refusal{Predicate: p.Name, Member: h.Name, Reason: why}
		}
	}
	return nil
}

func hostSubstrate(_ *HostView, h Host) string {
	if h.Unknown {
		return "its substrate does not answer for a member on it"
	}
	return ""
}

// hostCost is what locking h costs a host budget: nothing when it is
// locked already. A host with a member down still serves with the
// others: locking it takes them out too (it goes first, see OrderHosts).
func hostCost(h Host) int {
	if h.Locked {
		return 0
	}
	return 1
}

// hostsOut lists the hosts other than h matching in that are locked,
// admitted in this round, or have a member down.
func hostsOut(v *HostView, h Host, in func(Host) bool) []string {
	var out []string
	for _, o := range v.Hosts {
		if o.Name == h.Name || !in(o) {
			continue
		}
		switch {
		case o.Locked:
			out = append(out, o.Name+" locked")
		case v.Admitted[o.Name]:
			out = append(out, o.Name+" admitted")
		case len(o.Down) > 0:
			out = append(out, fmt.Sprintf("%s (%s down)", o.Name, names(o.Down)))
		}
	}
	return out
}

func hostBudget(v *HostView, h Host, limit int, label string, in func(Host) bool) string {
	if limit < 1 {
		return ""
	}
	out := hostsOut(v, h, in)
	if len(out)+hostCost(h) <= limit {
		return ""
	}
	return fmt.Sprintf("%s%d of %d hosts already out: %s", label, len(out), limit, names(out))
}

func hostsUnavailable(v *HostView, h Host) string {
	return hostBudget(v, h, max(1, v.MaxUnavailable), "", func(Host) bool { return true })
}

func hostsPerDomain(v *HostView, h Host) string {
	if h.Domain == "" {
		return ""
	}
	return hostBudget(v, h, v.MaxUnavailablePerDomain, h.Domain+": ", func(o Host) bool { return o.Domain == h.Domain })
}

func hostCapacity(_ *HostView, h Host) string {
	switch {
	case !h.AskCapacity || hostCost(h) == 0:
		return ""
	case h.CapacityWait != "":
		return h.CapacityWait
	case !h.Capacity.Answered:
		return AskingTheSystem
	case !h.Capacity.Yes:
		return "the hosts left cannot take its load: " + cmp.Or(h.Capacity.Words, "-")
	}
	return ""
}

// OrderHosts is the order hosts are locked in: a host with a member
// down first (its members are out already), a host where a member
// holds its component's role last (the role moves once, at the end),
// the plan's order otherwise. It returns a new slice.
func OrderHosts(hs []Host) []Host {
	rank := func(h Host) int {
		switch {
		case len(h.Down) > 0:
			return 0
		case h.Role:
			return 2
		}
		return 1
	}
	return byRank(hs, rank)
}

// NextHosts chooses the hosts of the next batch from the candidates
// (the hosts still to move, in the plan's order), up to size of them,
// each asked of admit with those chosen before it counted as locked.
func NextHosts(candidates []Host, size int, admit func(h Host, chosen []string) *Refusal) []string {
	return takeHosts(OrderHosts(candidates), size, admit)
}

// takeHosts walks hosts in order and chooses up to size of those admit
// lets go, those chosen before counted as locked.
func takeHosts(hosts []Host, size int, admit func(h Host, chosen []string) *Refusal) []string {
	var chosen []string
	for _, h := range hosts {
		if len(chosen) >= max(1, size) {
			break
		}
		if admit(h, chosen) != nil {
			continue
		}
		chosen = append(chosen, h.Name)
	}
	return chosen
}

// HostRound is what a strategy that orders hosts forms a hosts stage's
// next batch from.
type HostRound struct {
	// Candidates are the hosts still to move, in the plan's order, as
	// the host predicates see them now.
	Candidates []Host
	// Begun are the hosts of the stage's batches begun so far, in the
	// order they were locked.
	Begun []Host
	// Size is how many hosts the batch may take.
	Size int
	// Admit asks the host predicates, the hosts chosen before counted
	// as locked; never nil.
	Admit func(h Host, chosen []string) *Refusal
}

// HostChooser is a strategy that also orders a hosts stage's hosts,
// named by the stage's strategy key (by-domain: one failure domain's
// hosts at a time). Without one, hosts go in OrderHosts's order.
type HostChooser interface {
	// NextHosts chooses the hosts of the next batch, asking r.Admit for
	// each; the machine checks each again and forms no batch of none.
	NextHosts(r HostRound) []string
	// ExpectedHosts is the host batches a plan shows, each up to
	// maxUnavailable hosts (0 means 1) and perDomain of one domain (0:
	// no bound), and a note on what shaped them.
	ExpectedHosts(maxUnavailable, perDomain int, hosts []Host) ([][]string, string)
}

// hostChooser is the strategy registered as name if it orders hosts.
func hostChooser(name string) (HostChooser, bool) {
	st, ok := Lookup(name)
	if !ok {
		return nil, false
	}
	hc, ok := st.(HostChooser)
	return hc, ok
}

// HostChoosers lists the registered strategies that order hosts,
// sorted: what a hosts stage's strategy may name.
func HostChoosers() []string {
	var out []string
	for _, n := range Names() {
		if _, ok := hostChooser(n); ok {
			out = append(out, n)
		}
	}
	return out
}

// NextHostsBy chooses the next host batch with the strategy registered
// as name when it orders hosts, in OrderHosts's order otherwise ("": a
// hosts stage that names none).
func NextHostsBy(name string, r HostRound) []string {
	if hc, ok := hostChooser(name); ok {
		return hc.NextHosts(r)
	}
	return NextHosts(r.Candidates, r.Size, r.Admit)
}

// ExpectedHostsBy is ExpectedHosts with the strategy registered as name
// when it orders hosts.
func ExpectedHostsBy(name string, maxUnavailable, perDomain int, hosts []Host) ([][]string, string) {
	if hc, ok := hostChooser(name); ok {
		return hc.ExpectedHosts(maxUnavailable, perDomain, hosts)
	}
	return ExpectedHosts(maxUnavailable, perDomain, hosts)
}

// ExpectedHosts is the host batches a plan shows: the hosts in order
// (those with a member down first), each batch up to maxUnavailable
// hosts (0 means 1) and at most perDomain of one failure domain (0: no
// bound), and a note on what shaped them.
func ExpectedHosts(maxUnavailable, perDomain int, hosts []Host) ([][]string, string) {
	size := max(1, maxUnavailable)
	var out [][]string
	left := OrderHosts(hosts)
	for len(left) > 0 {
		var batch []string
		inDomain := map[string]int{}
		var rest []Host
		for _, h := range left {
			if len(batch) >= size || (perDomain > 0 && h.Domain != "" && inDomain[h.Domain] >= perDomain) {
				rest = append(rest, h)
				continue
			}
			batch = append(batch, h.Name)
			inDomain[h.Domain]++
		}
		out = append(out, batch)
		left = rest
	}
	note := fmt.Sprintf("%d host%s at a time", size, pluralS(size))
	if perDomain > 0 {
		note += fmt.Sprintf(", at most %d per failure domain", perDomain)
	}
	var down []string
	for _, h := range hosts {
		if len(h.Down) > 0 {
			down = append(down, h.Name)
		}
	}
	if len(down) > 0 {
		note += "; " + strings.Join(down, ", ") + " first: a member on it is down"
	}
	return out, note + "; " + hostTurn
}

// hostTurn says what a host's turn is, for a plan's note.
const hostTurn = "each host locked, its members upgraded in the components' order, unlocked"

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
