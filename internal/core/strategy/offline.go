package strategy

import (
	"fmt"
	"strings"
)

// Offline upgrades a component that cannot avoid downtime: one member
// (StarlingX's simplex controller), or members that all live on one
// host and go down with it. Every member goes at once, in one batch;
// nothing of the component serves until they are back. Because that is
// downtime by design, an upgrade with an offline phase is refused
// unless the operator accepts it (--accept-downtime), the reason named
// (Downtime).
//
// A component upgraded offline may describe a backup (config's
// backup:): each member's data backed up with the member stopped,
// verified before the release is installed, restored if the upgrade
// goes back.
const Offline = "offline"

func init() { Register(Offline, offline{}) }

type offline struct{}

func (offline) Validate(s Settings, members []Member) []Problem {
	var ps []Problem
	if s.Quorum != 0 {
		ps = append(ps, Problem{"quorum", "offline keeps no quorum: every member goes down at once"})
	}
	if n := len(members); n > 1 && s.MaxUnavailable < n {
		ps = append(ps, Problem{"max_unavailable", fmt.Sprintf("offline takes every member down at once, but max_unavailable %d is less than the %s: set max_unavailable: %d", s.MaxUnavailable, plural(n, "member"), n)})
	}
	return ps
}

// Defaults: the batch is every member the budget lets go.
func (offline) Defaults(s Settings) Settings {
	if s.MaxBatch == 0 {
		s.MaxBatch = max(1, s.MaxUnavailable)
	}
	return s
}

func (offline) Quorum(Settings, int) int { return 0 }

func (offline) Expected(_ Settings, members []Member) ([][]string, string) {
	if len(members) == 0 {
		return nil, ""
	}
	return Cut(DefaultOrder(members), []int{len(members)}), "every member at once: the component is down until they are back (downtime accepted with --accept-downtime)"
}

func (offline) Next(r Round) Choice {
	n := len(r.Candidates)
	return Choice{Members: Take(DefaultOrder(r.Candidates), n, r.Admit), Size: n, Why: "every member at once (offline: downtime accepted)"}
}

func (offline) Explain() string { return "" }

// Downtime says why an offline phase cannot keep the component serving.
func (offline) Downtime(_ Settings, members []Member) string {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name
	}
	switch len(members) {
	case 0:
		return "strategy offline takes every member down at once"
	case 1:
		return fmt.Sprintf("strategy offline: its one member (%s) goes down for the upgrade, nothing else serves meanwhile", names[0])
	}
	return fmt.Sprintf("strategy offline: its %d members (%s) go down at once, nothing else serves meanwhile", len(members), strings.Join(names, ", "))
}

// DowntimeTaker is a strategy whose phases cannot keep their component
// serving (offline). Downtime says why, for the refusal an upgrade
// meets unless the operator accepts downtime.
type DowntimeTaker interface {
	Downtime(s Settings, members []Member) string
}

// Downtime says why the strategy registered as name cannot keep the
// members serving during their phase ("" when it can: it is no
// DowntimeTaker, or is not registered).
func Downtime(name string, s Settings, members []Member) string {
	st, _ := Lookup(name)
	if d, ok := st.(DowntimeTaker); ok {
		return d.Downtime(s, members)
	}
	return ""
}

// TakingDowntime lists the registered strategies that take downtime,
// sorted.
func TakingDowntime() []string {
	var out []string
	for _, n := range Names() {
		st, _ := Lookup(n)
		if _, ok := st.(DowntimeTaker); ok {
			out = append(out, n)
		}
	}
	return out
}
