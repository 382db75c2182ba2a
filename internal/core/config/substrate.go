package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// config names no substrate. Each substrate's package hands its rules
// for a description to RegisterSubstrate when it registers itself
// (package substrate's Register, from the substrate package's init), and
// Validate asks the rules of the description's substrate. A program or
// test that reads descriptions links the substrates it knows
// (internal/substrate/all); config's own tests do so from an external
// test file, which links them into the same test binary without an
// import cycle.

// SubstrateRules are one substrate's rules for a description: what it
// reads and what it requires of the fields that are its own.
type SubstrateRules struct {
	// Default makes the substrate that of a description that names
	// none (at most one registered substrate is the default).
	Default bool
	// FindsMembers says the substrate finds a component's members at run
	// time (pods, nodes): a component may list none, and a listed
	// member's host and address may be left out (the substrate knows
	// them; its host is then the substrate's, not one of hosts).
	FindsMembers bool
	// Runs is what an artifact is on the substrate: a binary (its path
	// must be set) or an image.
	Runs ArtifactKind
	// Reads lists the keys the substrate reads among those not every
	// substrate does (Field*); a key written in a description of a
	// substrate that does not read it is refused.
	Reads []Field
	// Unread, for a key the substrate does not read, says why, when the
	// default answer ("applies to the X substrate only") is not the
	// clearest.
	Unread map[Field]string
	// Host checks the substrate's own fields of a host (its name and the
	// form of its agent are checked already).
	Host func(n Node, h *Host)
	// Component checks the substrate's own fields of a component (the
	// count of its members is checked already).
	Component func(n Node, comp *Component)
}

// ArtifactKind is what an artifact is on a substrate.
type ArtifactKind int

// Artifact kinds: ArtifactAny checks neither path nor image.
const (
	ArtifactAny ArtifactKind = iota
	ArtifactBinary
	ArtifactImage
)

// Field is a key of a component that only some substrates read.
type Field string

// The keys only some substrates read.
const (
	FieldWorkload Field = "workload"
	FieldAdopt    Field = "adopt"
	FieldRunFiles Field = "run.files"
	FieldCommands Field = "commands"
	// FieldHostSSH is a host's key of that name (hosts[].KEY).
	FieldHostSSH Field = "hosts[].ssh"
	// FieldHostCommands is a host's (or host_defaults') commands, run
	// on hosts by the substrate's driver.
	FieldHostCommands Field = "hosts[].commands"
)

var substrates struct {
	sync.RWMutex
	rules map[string]SubstrateRules
}

// RegisterSubstrate adds a substrate's rules under its name. Package
// substrate calls it; a second registration of a name, or a second
// default, is a programming error and panics at init.
func RegisterSubstrate(name string, r SubstrateRules) {
	substrates.Lock()
	defer substrates.Unlock()
	if substrates.rules == nil {
		substrates.rules = map[string]SubstrateRules{}
	}
	if _, dup := substrates.rules[name]; dup || name == "" {
		panic(fmt.Sprintf("config: substrate %q registered twice or without a name", name))
	}
	if r.Default {
		if d := defaultSubstrateLocked(); d != "" {
			panic(fmt.Sprintf("config: substrates %s and %s are both the default", d, name))
		}
	}
	substrates.rules[name] = r
}

// SubstrateNames lists the substrates registered in this build, sorted.
func SubstrateNames() []string {
	substrates.RLock()
	defer substrates.RUnlock()
	names := make([]string, 0, len(substrates.rules))
	for n := range substrates.rules {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultSubstrate is the substrate of a description that names none,
// or "" when no registered substrate is the default.
func DefaultSubstrate() string {
	substrates.RLock()
	defer substrates.RUnlock()
	return defaultSubstrateLocked()
}

func defaultSubstrateLocked() string {
	for n, r := range substrates.rules {
		if r.Default {
			return n
		}
	}
	return ""
}

func substrateRules(name string) (SubstrateRules, bool) {
	substrates.RLock()
	defer substrates.RUnlock()
	r, ok := substrates.rules[name]
	return r, ok
}

// readers lists the substrates that read f, sorted.
func readers(f Field) []string {
	substrates.RLock()
	defer substrates.RUnlock()
	var out []string
	for n, r := range substrates.rules {
		if slices.Contains(r.Reads, f) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// linkSubstrates is the hint when this build has no substrate: the
// program forgot to link them.
const linkSubstrates = "a program or test that reads descriptions imports internal/substrate/all"

// UnknownSubstrate says that name is no substrate of this build, and
// which are: the words of `ferry validate`, shared by whoever looks a
// substrate up.
func UnknownSubstrate(name string) string {
	names := SubstrateNames()
	if len(names) == 0 {
		return fmt.Sprintf("unknown substrate %q; this build has none (%s)", name, linkSubstrates)
	}
	return fmt.Sprintf("unknown substrate %q; this build has: %s", name, strings.Join(names, ", "))
}

// Node is a part of a description (a host, a component) as a
// substrate's rules see it: its path and the lines of its keys, so
// that a problem they report names the file, the line and the key like
// every other.
type Node struct {
	v    *validator
	path string
	pos  *positions
	line int
	// under is the node's own key in pos when pos is its parent's (a
	// flow stage's keys are its release's: flow[2].name).
	under string
}

// Path is the path of key rel of the node (components[1].workload.kind
// for "workload.kind"); rel "" is the node itself.
func (n Node) Path(rel string) string {
	if rel == "" {
		return n.path
	}
	return n.path + "." + rel
}

// Line is the line of key rel of the node, or of the closest key
// written above it.
func (n Node) Line(rel string) int {
	switch {
	case n.under == "":
	case rel == "":
		rel = n.under
	default:
		rel = n.under + "." + rel
	}
	return n.pos.at(rel, n.line)
}

// Add reports a problem with key rel of the node, at its line.
func (n Node) Add(rel, format string, args ...any) {
	n.v.add(n.Line(rel), n.Path(rel), format, args...)
}

// AddAt reports a problem with key rel at the line of key lineRel:
// what is wrong with a table is said where the wrong key is.
func (n Node) AddAt(lineRel, rel, format string, args ...any) {
	n.v.add(n.Line(lineRel), n.Path(rel), format, args...)
}

// Said reports whether a problem with key rel was reported already (a
// rule that builds on a value's form stays silent when its form was
// refused).
func (n Node) Said(rel string) bool {
	p := n.Path(rel)
	for _, pr := range n.v.probs {
		if pr.Path == p {
			return true
		}
	}
	return false
}

// Within checks the duration at key rel against [min, max]: what it
// is, for the message, and its default (0: none).
func (n Node) Within(rel string, d Duration, min, max, def time.Duration, what string) {
	n.v.within(n.Line(rel), n.Path(rel), d, durRange{min: min, max: max, def: def, what: what})
}

// Substrate is the description's substrate.
func (n Node) Substrate() string { return n.v.c.Substrate }

// unread refuses key f of a node (at line, path) when the description's
// substrate does not read it; false when it does.
func (v *validator) unread(f Field, line int, path string) bool {
	if !v.rulesKnown || slices.Contains(v.rules.Reads, f) {
		return false
	}
	if why := v.rules.Unread[f]; why != "" {
		v.add(line, path, "%s", why)
		return true
	}
	if rs := readers(f); len(rs) == 1 {
		v.add(line, path, "applies to the %s substrate only (this description's is %s)", rs[0], v.c.Substrate)
	} else if len(rs) > 1 {
		v.add(line, path, "applies to the %s substrates only (this description's is %s)", strings.Join(rs, " and "), v.c.Substrate)
	} else {
		v.add(line, path, "applies to no substrate of this build (this description's is %s)", v.c.Substrate)
	}
	return true
}

// CheckHostPort reports what is wrong with a host:port (its host set,
// its port a number from 1 to 65535), for a substrate's own addresses.
func CheckHostPort(s string) error { return checkHostPort(s) }

// Render renders tmpl, the value of key rel of the node, for each of
// samples (the component's members, Samples), reporting a template
// that does not parse or render at the key's line; it returns what
// rendered.
func (n Node) Render(rel, tmpl string, samples []TemplateData) []string {
	return n.v.render(n.Line(rel), n.Path(rel), tmpl, samples)
}

// Samples are the template data a component's templates are checked
// with at validation (a few of its members, the first release's
// version).
func (n Node) Samples(comp *Component) []TemplateData { return n.v.samples(comp) }
