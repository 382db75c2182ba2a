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

func (canary) Validate(s Settings, _ []Member) []Problem { return growingProblems(Canary, s) }

// Defaults: a canary grows up to what the budget lets down at once.
func (canary) Defaults(s Settings) Settings { return growingDefaults(s) }

func (canary) Quorum(Settings, int) int { return 0 }

func (canary) Expected(s Settings, members []Member) ([][]string, string) {
	return Cut(DefaultOrder(members), growing(s, len(members))), ""
}

func (canary) Next(r Round) Choice {
	size, why := canarySize(r.Settings, Outcomes(r.Done))
	return Choice{Members: Take(DefaultOrder(r.Candidates), size, r.Admit), Size: size, Why: why}
}

func (canary) Explain() string {
	return "batches: the sizes expected when every batch goes well; a canary's next batch doubles after a clean batch and halves after a strained one, and members down go first, those holding a role last, as observed before each batch"
}

// growingProblems are the rules of a strategy whose batches grow
// (name's): bounded by max_unavailable, not by a quorum, and no batch
// larger than the budget.
func growingProblems(name string, s Settings) []Problem {
	var ps []Problem
	if s.Quorum != 0 {
		ps = append(ps, Problem{"quorum", "applies to one-at-a-time only; " + name + " is bounded by max_unavailable"})
	}
	if s.MaxBatch > s.MaxUnavailable && s.MaxUnavailable >= 1 {
		ps = append(ps, Problem{"max_batch", fmt.Sprintf("max_batch %d is more than max_unavailable %d: a batch that large could never move", s.MaxBatch, s.MaxUnavailable)})
	}
	return ps
}

// growingDefaults: batches grow up to what the budget lets down at
// once.
func growingDefaults(s Settings) Settings {
	if s.MaxBatch == 0 {
		s.MaxBatch = max(1, s.MaxUnavailable)
	}
	return s
}

// growing is the sizes of batches of n members that all go well: 1,
// 2, 4, … up to max_batch.
func growing(s Settings, n int) []int {
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

// canarySize is the size of the next batch after the batches done (in
// order), and why in words: 1 first, then doubled after a clean batch
// (up to max_batch), halved after a strained one, kept otherwise.
func canarySize(s Settings, done []Outcome) (int, string) {
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
