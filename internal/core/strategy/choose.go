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
