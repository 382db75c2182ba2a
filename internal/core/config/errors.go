package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a description.
type Problem struct {
	// File is the description's path as given to Parse or Load.
	File string
	// Line is the 1-based line the problem is on; 0 when the problem
	// has no line (the whole file, or a Cluster built in Go).
	Line int
	// Path is the field, like components[1].strategy.max_batch; empty
	// for problems with the whole document.
	Path   string
	Reason string
}

// String formats the problem as "file:line: path: reason", leaving out
// the parts that are not known.
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.File, p.Line)
	case p.File != "":
		fmt.Fprintf(&b, "%s: ", p.File)
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// Errors is every problem found in a description. Parse, Load and
// Validate return it (as error) when there is at least one problem.
type Errors struct {
	Problems []Problem
	// Omitted counts the problems found beyond those listed: a file
	// with thousands of problems is listed up to MaxProblems, so that
	// the message stays readable and its size bounded.
	Omitted int
}

// MaxProblems is the most problems an *Errors lists.
const MaxProblems = 100

// maxCollected bounds the problems the decoder and the validator keep
// before they are sorted and cut to MaxProblems (memory, for a file
// of a million bad lines).
const maxCollected = 10 * MaxProblems

// Error prints one problem per line, and how many more were found.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems), len(e.Problems)+1)
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	if e.Omitted > 0 {
		lines = append(lines, fmt.Sprintf("(and %s more, not listed: fix these first)", plural(e.Omitted, "problem")))
	}
	return strings.Join(lines, "\n")
}

// problemsOf sorts problems by line and keeps the first MaxProblems,
// counting the others as omitted.
func problemsOf(probs []Problem, omitted int) *Errors {
	sortProblems(probs)
	if len(probs) > MaxProblems {
		omitted += len(probs) - MaxProblems
		probs = probs[:MaxProblems:MaxProblems]
	}
	return &Errors{Problems: probs, Omitted: omitted}
}

// sortProblems orders problems by line, keeping the order they were
// found in for problems on the same line.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
}

// under reports whether path is p or lies below it
// (components[1] is under components; components[10] is not under
// components[1]).
func under(path, p string) bool {
	if p == "" || path == p {
		return true
	}
	if !strings.HasPrefix(path, p) {
		return false
	}
	switch path[len(p)] {
	case '.', '[':
		return true
	}
	return false
}
