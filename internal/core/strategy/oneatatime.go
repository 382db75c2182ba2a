package strategy

import "fmt"

// OneAtATime moves one member at a time and keeps a quorum of healthy
// members up while it does (Ceph's ok-to-stop): the strategy of quorum
// members, monitors and raft voters.
const OneAtATime = "one-at-a-time"

func init() { Register(OneAtATime, oneAtATime{}) }

type oneAtATime struct{}

func (oneAtATime) Validate(s Settings, members []Member) []Problem {
	n := len(members)
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

func (oneAtATime) Defaults(s Settings) Settings {
	if s.MaxBatch == 0 {
		s.MaxBatch = 1
	}
	return s
}

func (oneAtATime) Quorum(s Settings, n int) int {
	if s.Quorum > 0 {
		return s.Quorum
	}
	return majority(n)
}

func (oneAtATime) Expected(_ Settings, members []Member) ([][]string, string) {
	ones := make([]int, len(members))
	for i := range ones {
		ones[i] = 1
	}
	return Cut(DefaultOrder(members), ones), ""
}

func (oneAtATime) Next(r Round) Choice {
	return Choice{Members: Take(DefaultOrder(r.Candidates), 1, r.Admit), Size: 1, Why: "one at a time"}
}

func (oneAtATime) Explain() string { return "" }

// majority is the smallest majority of n voters.
func majority(n int) int { return n/2 + 1 }
