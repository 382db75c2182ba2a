package strategy

import "fmt"

// Canary moves one member first, then batches that adapt to how the
// last one went: doubled after a clean batch (up to max_batch), halved
// (down to 1) after a strained one, kept otherwise. A healthy
// release therefore goes 1, 2, 4, … max_batch, the canary deployment
// Rook's design asks for, and a struggling one slows down by itself
// before it fails.
const Canary = "canary"

func init() { Register(Canary, canary{}) }

type canary struct{}

func (canary) Validate(s Settings, _ int) []Problem {
	var ps []Problem
	if s.Quorum != 0 {
		ps = append(ps, Problem{"quorum", "applies to one-at-a-time only; canary is bounded by max_unavailable"})
	}
	if s.MaxBatch > s.MaxUnavailable && s.MaxUnavailable >= 1 {
		ps = append(ps, Problem{"max_batch", fmt.Sprintf("max_batch %d is more than max_unavailable %d: a batch that large could never move", s.MaxBatch, s.MaxUnavailable)})
	}
	return ps
}

func (canary) Quorum(Settings, int) int { return 0 }

func (canary) Expected(s Settings, n int) []int {
	var out []int
	size := 1
	for n > 0 {
		k := min(size, n)
		out = append(out, k)
		n -= k
		size = min(2*size, max(1, s.MaxBatch))
	}
	return out
}

func (canary) Next(s Settings, done []Outcome) (int, string) {
	if len(done) == 0 {
		return 1, "the canary: one member first"
	}
	last := done[len(done)-1]
	cap := max(1, s.MaxBatch)
	prev := max(1, last.Size)
	switch {
	case last.Strained:
		n := max(1, prev/2)
		return n, fmt.Sprintf("halved from %d: the last batch was strained (%s)", prev, last.Why)
	case last.Clean && prev >= cap:
		return cap, fmt.Sprintf("%d, max_batch: the last batch was clean", cap)
	case last.Clean:
		n := min(2*prev, cap)
		return n, fmt.Sprintf("doubled from %d: the last batch was clean", prev)
	default:
		why := "the last batch was neither clean nor strained"
		if last.Why != "" {
			why = "the last batch: " + last.Why
		}
		return min(prev, cap), fmt.Sprintf("kept at %d: %s", min(prev, cap), why)
	}
}
