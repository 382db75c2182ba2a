package strategy

import (
	"fmt"
	"sort"
	"sync"
)

// Settings are a component's strategy settings, as written in its
// description (strategy: {type, quorum, max_batch, max_unavailable,
// max_unavailable_per_host, max_unavailable_per_domain}), defaults
// applied.
type Settings struct {
	// Type names the registered strategy.
	Type string `json:"type"`
	// Quorum is how many healthy members must remain while one is
	// stopped; 0 means a majority (strategies that keep one).
	Quorum int `json:"quorum,omitempty"`
	// MaxBatch caps the batch size.
	MaxBatch int `json:"max_batch,omitempty"`
	// MaxUnavailable bounds the component's members down at once,
	// counting those down for any reason.
	MaxUnavailable int `json:"max_unavailable"`
	// MaxUnavailablePerHost and MaxUnavailablePerDomain bound them per
	// host and per failure domain (0: no bound).
	MaxUnavailablePerHost   int `json:"max_unavailable_per_host,omitempty"`
	MaxUnavailablePerDomain int `json:"max_unavailable_per_domain,omitempty"`
}

// Problem is one thing wrong with settings: the YAML key at fault and
// why.
type Problem struct {
	Field  string
	Reason string
}

// Outcome is how one finished batch went: what adaptive sizing reads.
// A batch is Clean when each member became healthy within its expected
// time (half its deadline), no action of it needed a retry and the gate
// before it passed at its first check; Strained when an action needed
// retries, a member's soak broke or a member came close to its
// deadline (three quarters of it). A batch may be neither.
type Outcome struct {
	Size     int    `json:"size"`
	Clean    bool   `json:"clean,omitempty"`
	Strained bool   `json:"strained,omitempty"`
	Why      string `json:"why,omitempty"`
}

// Strategy is one way of batching a component's members.
type Strategy interface {
	// Validate checks settings for a component of members members
	// (0 when they are found at run time) beyond the rules every
	// strategy shares (see Validate).
	Validate(s Settings, members int) []Problem
	// Quorum is the number of healthy members the strategy keeps up
	// while one of n is stopped (0: no quorum).
	Quorum(s Settings, n int) int
	// Expected is the batch sizes for n members when every batch goes
	// well: what a plan shows.
	Expected(s Settings, n int) []int
	// Next is the size of the next batch after the batches done (in
	// order), and why in words.
	Next(s Settings, done []Outcome) (int, string)
}

var (
	mu         sync.RWMutex
	strategies = map[string]Strategy{}
)

// Register makes a strategy known by name; a second registration of a
// name panics (it is a programming error, found at start-up).
func Register(name string, s Strategy) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := strategies[name]; dup {
		panic("strategy: " + name + " registered twice")
	}
	strategies[name] = s
}

// Lookup returns the strategy registered as name.
func Lookup(name string) (Strategy, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := strategies[name]
	return s, ok
}

// Names lists the registered strategies, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(strategies))
	for n := range strategies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Validate checks settings for a component of members members: the
// type is registered, the budgets shared by every strategy are sane,
// and the strategy's own rules hold.
func Validate(s Settings, members int) []Problem {
	st, ok := Lookup(s.Type)
	if !ok {
		return []Problem{{"type", fmt.Sprintf("unknown strategy %q; known: %s", s.Type, joinNames(Names()))}}
	}
	var ps []Problem
	switch {
	case s.MaxUnavailable < 1:
		ps = append(ps, Problem{"max_unavailable", fmt.Sprintf("must be at least 1 (got %d): with 0 no member could ever be upgraded", s.MaxUnavailable)})
	case members > 0 && s.MaxUnavailable > members:
		ps = append(ps, Problem{"max_unavailable", fmt.Sprintf("max_unavailable %d is more than the %s", s.MaxUnavailable, plural(members, "member"))})
	}
	for _, b := range []struct {
		field string
		v     int
	}{{"max_unavailable_per_host", s.MaxUnavailablePerHost}, {"max_unavailable_per_domain", s.MaxUnavailablePerDomain}} {
		switch {
		case b.v < 0:
			ps = append(ps, Problem{b.field, fmt.Sprintf("must not be negative (got %d; 0 means no bound)", b.v)})
		case b.v > 0 && s.MaxUnavailable >= 1 && b.v > s.MaxUnavailable:
			ps = append(ps, Problem{b.field, fmt.Sprintf("%d is more than max_unavailable %d: it would never bind", b.v, s.MaxUnavailable)})
		}
	}
	if s.MaxBatch < 1 {
		ps = append(ps, Problem{"max_batch", fmt.Sprintf("must be at least 1 (got %d)", s.MaxBatch)})
	}
	return append(ps, st.Validate(s, members)...)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
