package strategy

import "fmt"

// OneAtATime moves one member at a time and keeps a quorum of healthy
// members up while it does (Ceph's ok-to-stop): the strategy of quorum
// members, monitors and raft voters.
const OneAtATime = "one-at-a-time"

func init() { Register(OneAtATime, oneAtATime{}) }

type oneAtATime struct{}

func (oneAtATime) Validate(s Settings, n int) []Problem {
	var ps []Problem
	if s.MaxBatch > 1 {
		ps = append(ps, Problem{"max_batch", "applies to canary only: one-at-a-time moves one member at a time"})
	}
	switch {
	case s.Quorum < 0:
		ps = append(ps, Problem{"quorum", "must not be negative (0 means a majority)"})
	case n == 0:
	case s.Quorum > n:
		ps = append(ps, Problem{"quorum", fmt.Sprintf("quorum %d is more than the %s", s.Quorum, plural(n, "member"))})
	case s.Quorum > 0 && s.Quorum >= n:
		ps = append(ps, Problem{"quorum", fmt.Sprintf("quorum %d of %s leaves no member free to stop: it must be less than the number of members", s.Quorum, plural(n, "member"))})
	case s.Quorum == 0 && majority(n) >= n:
		hint := "set quorum: 1, or use type: canary"
		if n == 1 {
			hint = "use type: canary to allow stopping it"
		}
		ps = append(ps, Problem{"", fmt.Sprintf("one-at-a-time keeps a majority up (quorum %d of %s), so no member can ever stop: %s", majority(n), plural(n, "member"), hint)})
	}
	return ps
}

func (oneAtATime) Quorum(s Settings, n int) int {
	if s.Quorum > 0 {
		return s.Quorum
	}
	return majority(n)
}

func (oneAtATime) Expected(_ Settings, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func (oneAtATime) Next(Settings, []Outcome) (int, string) { return 1, "one at a time" }

// majority is the smallest majority of n voters.
func majority(n int) int { return n/2 + 1 }
