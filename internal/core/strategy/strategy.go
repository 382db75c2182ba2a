package strategy

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
)

// Default is the strategy of a component whose description names none:
// one member at a time, a quorum of the others healthy, the safest
// choice for members ferry knows nothing more of.
const Default = OneAtATime

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

// Done is one batch of the phase that ended: who moved in it (as
// admission saw them when the next batch is formed) and how it went.
type Done struct {
	Members []Member
	Outcome Outcome
}

// Admission is the state machine's admission, handed to a strategy:
// why candidate c may not go down now, the members already chosen for
// the batch counted as down, or nil. It asks every admission predicate
// (see Admit) and is pure; the machine keeps each refusal it returns,
// so a strategy need not report them.
type Admission func(c Member, chosen []string) *Refusal

// Round is what a strategy forms the next batch from.
type Round struct {
	Settings Settings
	// Candidates are the phase's members still to move, in the plan's
	// order, each as admission sees it now (health, role, version,
	// host, domain, in flight).
	Candidates []Member
	// Done are the phase's batches that ended, in order.
	Done []Done
	// Admit asks the admission predicates; never nil.
	Admit Admission
}

// Choice is a strategy's next batch.
type Choice struct {
	// Members are the chosen candidates, in the order they go.
	Members []string
	// Size is how many the strategy meant to take (fewer may have been
	// admitted); Why says why, in words, for the events.
	Size int
	Why  string
	// Before names the extra steps (package step's, by name) the machine
	// runs before the batch's moves, in order: active-standby's
	// switchover before the member holding the role goes. Strategies
	// that add none leave it empty.
	Before []string
}

// StepAdder is a strategy that adds steps before some batches
// (Choice.Before). Adds names every step it may add, so that a
// description is checked for what those steps need (their hook list, a
// role) before anything moves.
type StepAdder interface {
	Adds() []string
}

// Adds lists the extra steps the strategy registered as name may add
// before a batch, nil if none (or if it is not registered).
func Adds(name string) []string {
	st, _ := Lookup(name)
	if a, ok := st.(StepAdder); ok {
		return a.Adds()
	}
	return nil
}

// Strategy is one way of choosing which of a component's members move
// together, and when.
//
// A strategy may add steps before a batch's moves (active-standby: a
// switchover call and a wait until an upgraded member holds the role,
// before the former active goes): it names them in its Choice (Before)
// and lists them in Adds (StepAdder); the machine walks them like every
// other step, journaled with their undo.
type Strategy interface {
	// Validate checks settings for a component's members (none when
	// they are found at run time; then only Name is known of each)
	// beyond the rules every strategy shares (see Validate).
	Validate(s Settings, members []Member) []Problem
	// Defaults returns s with the zero fields the strategy has a
	// default for filled (canary's max_batch is its max_unavailable);
	// a written value is the caller's to keep.
	Defaults(s Settings) Settings
	// Quorum is the number of healthy members the strategy keeps up
	// while one of n is stopped (0: no quorum). A component whose
	// strategy keeps one bootstraps as a group.
	Quorum(s Settings, n int) int
	// Expected is the batches the members to move (as planned: health
	// and domain known, no role) form when every batch goes well, in
	// order, and a note on what shaped them ("" if nothing worth
	// saying): what a plan shows.
	Expected(s Settings, members []Member) (batches [][]string, note string)
	// Next chooses the members of the next batch from the round's
	// candidates, asking r.Admit for each; the machine checks each
	// chosen member again and forms no batch of none.
	Next(r Round) Choice
	// Explain says in a sentence how the batches formed at run time may
	// differ from the expected ones, for a plan's reader ("" if they
	// do not in a way worth saying).
	Explain() string
}

var (
	mu         sync.RWMutex
	strategies = map[string]Strategy{}
	dirs       = map[string]string{} // name -> the directory of the file that registered it
)

// Register makes a strategy known by name; a second registration of a
// name panics (it is a programming error, found at start-up). A
// strategy may be registered from any package (its own file, in its
// init): that package is where its name may be spelled (Dir).
func Register(name string, s Strategy) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := strategies[name]; dup {
		panic("strategy: " + name + " registered twice")
	}
	strategies[name] = s
	if _, file, _, ok := runtime.Caller(1); ok {
		dirs[name] = filepath.Dir(file)
	}
}

// Dir is the directory of the source file that registered strategy
// name: its package, the one place besides this one that may spell its
// name (TestNoStrategyNameOutsideTheRegistry holds the tree to that).
func Dir(name string) string {
	mu.RLock()
	defer mu.RUnlock()
	return dirs[name]
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

// Validate checks settings for a component's members: the type is
// registered, the budgets shared by every strategy are sane, and the
// strategy's own rules hold.
func Validate(s Settings, members []Member) []Problem {
	st, ok := Lookup(s.Type)
	if !ok {
		return []Problem{{"type", fmt.Sprintf("unknown strategy %q; known: %s", s.Type, joinNames(Names()))}}
	}
	n := len(members)
	var ps []Problem
	switch {
	case s.MaxUnavailable < 1:
		ps = append(ps, Problem{"max_unavailable", fmt.Sprintf("must be at least 1 (got %d): with 0 no member could ever be upgraded", s.MaxUnavailable)})
	case n > 0 && s.MaxUnavailable > n:
		ps = append(ps, Problem{"max_unavailable", fmt.Sprintf("max_unavailable %d is more than the %s", s.MaxUnavailable, plural(n, "member"))})
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
