package strategy

import "slices"

// DefaultOrder is the order one-at-a-time and canary take candidates
// in: members down first (replacing one costs no availability), those
// holding the component's role last (the role moves once, at the end),
// the plan's order otherwise. It returns a new slice.
func DefaultOrder(ms []Member) []Member {
	rank := func(m Member) int {
		switch {
		case !m.Healthy:
			return 0
		case m.Role:
			return 2
		}
		return 1
	}
	return byRank(ms, rank)
}

// byRank returns xs sorted by rank, stably: their order otherwise.
func byRank[T any](xs []T, rank func(T) int) []T {
	out := slices.Clone(xs)
	slices.SortStableFunc(out, func(a, b T) int { return rank(a) - rank(b) })
	return out
}

// Take walks candidates in order and chooses up to size of those that
// admit lets go down now, each chosen one counted as down for the
// next: the members of a batch when order is all a strategy decides.
func Take(candidates []Member, size int, admit Admission) []string {
	var chosen []string
	for _, c := range candidates {
		if len(chosen) >= size {
			break
		}
		if admit(c, chosen) != nil {
			continue
		}
		chosen = append(chosen, c.Name)
	}
	return chosen
}

// Outcomes are how the batches done went, in order.
func Outcomes(done []Done) []Outcome {
	out := make([]Outcome, len(done))
	for i, d := range done {
		out[i] = d.Outcome
	}
	return out
}

// Cut cuts members, in order, into batches of the given sizes (the
// rest, if any, into one last batch).
func Cut(members []Member, sizes []int) [][]string {
	var out [][]string
	for _, n := range sizes {
		if len(members) == 0 {
			break
		}
		n = min(max(1, n), len(members))
		out = append(out, nameList(members[:n]))
		members = members[n:]
	}
	if len(members) > 0 {
		out = append(out, nameList(members))
	}
	return out
}

func nameList(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// RoleSplit is a round's candidates as a strategy that moves the member
// holding the component's role last sees them: the others, in the
// round's order, and those down among them; the holders; and whether a
// member of the phase, candidate or done, was seen holding the role
// (until one is, a healthy member may be its holder, not seen yet).
type RoleSplit struct {
	Others, Down, Holders []Member
	Seen                  bool
}

// SplitByRole splits round r's candidates by the component's role.
func SplitByRole(r Round) RoleSplit {
	var s RoleSplit
	for _, c := range r.Candidates {
		switch {
		case c.Role:
			s.Holders, s.Seen = append(s.Holders, c), true
		default:
			s.Others = append(s.Others, c)
			if !c.Healthy {
				s.Down = append(s.Down, c)
			}
		}
	}
	for _, d := range r.Done {
		for _, m := range d.Members {
			s.Seen = s.Seen || m.Role
		}
	}
	return s
}

// HolderLast is the batch sizes of n members moved max_batch at a time
// with the last alone (the member holding the role, known only at run
// time): what strategies that hand the role over before its holder
// goes expect. None for no member.
func HolderLast(n int, s Settings) []int {
	if n == 0 {
		return nil
	}
	var sizes []int
	for left := n - 1; left > 0; left -= max(1, s.MaxBatch) {
		sizes = append(sizes, min(left, max(1, s.MaxBatch)))
	}
	return append(sizes, 1)
}
