// Package substrate is the registry of the substrates members run on
// (local processes through agents, Kubernetes, and whatever comes
// next). Each substrate is a package that registers itself in its init
// under its name: the rules of its own fields of a description, what
// it can do (its Capabilities), and how its driver is built from a
// description. Nothing outside a substrate's package and this registry
// names one: config validates through the registered rules, the CLI
// builds drivers through New, and the engine refuses a command the
// substrate cannot carry out, by the capability's name, before anything
// moves.
package substrate

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Capability is one thing a substrate can do. A command, a step or a
// description that needs one is refused on a substrate without it.
type Capability uint

// The capabilities. Their names (String) are what refusals and
// `ferry validate` say.
const (
	// StartStop: start a member on an artifact, stop it.
	StartStop Capability = 1 << iota
	// ClusterUp: bring a whole cluster up from nothing and down
	// (`ferry cluster up|down`): the substrate starts members that have
	// no workload of their own to start them.
	ClusterUp
	// Adopt: take over a member's process that the substrate did not
	// start (adopt: in the description).
	Adopt
	// LockHost: lock a host (move its work away) and unlock it.
	LockHost
	// Output: collect a member's output (driver.Logger).
	Output
	// Discover: find a component's members at run time
	// (driver.Discoverer), so a description need not list them.
	Discover
	// Undo: undo the changes the driver journals (driver.Undoer).
	Undo
	// ReinstallHost: reinstall a host's software and migrate its data
	// in its move (driver.HostReinstaller).
	ReinstallHost
	// BackupOnHost: keep a member's backup on its own host and run the
	// backup's commands there (driver.HostBackups).
	BackupOnHost

	lastCapability = BackupOnHost
)

var capabilityNames = map[Capability][2]string{
	StartStop:     {"start-stop", "start and stop members"},
	ClusterUp:     {"cluster-up", "bring a cluster up and down"},
	Adopt:         {"adopt", "adopt a member it did not start"},
	LockHost:      {"lock-host", "lock a host"},
	Output:        {"output", "collect a member's output"},
	Discover:      {"discover", "find members at run time"},
	Undo:          {"undo", "undo the changes it makes outside members"},
	ReinstallHost: {"reinstall-host", "reinstall a host"},
	BackupOnHost:  {"backup-on-host", "back a member up on its own host"},
}

// String is the capability's name, as refusals give it.
func (c Capability) String() string {
	if n, ok := capabilityNames[c]; ok {
		return n[0]
	}
	return fmt.Sprintf("capability(%d)", uint(c))
}

// What says what the capability does, after "cannot".
func (c Capability) What() string {
	if n, ok := capabilityNames[c]; ok {
		return n[1]
	}
	return c.String()
}

// Capabilities is a set of capabilities.
type Capabilities Capability

// Can makes a set of capabilities.
func Can(cs ...Capability) Capabilities {
	var s Capabilities
	for _, c := range cs {
		s |= Capabilities(c)
	}
	return s
}

// Has reports whether the set holds c.
func (s Capabilities) Has(c Capability) bool { return s&Capabilities(c) == Capabilities(c) }

// List is the set's capabilities in their order.
func (s Capabilities) List() []Capability {
	var out []Capability
	for c := StartStop; c <= lastCapability; c <<= 1 {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// String lists the set's names: "start-stop, output".
func (s Capabilities) String() string {
	var names []string
	for _, c := range s.List() {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// Options are what a driver is built with besides the description.
type Options struct {
	// Logger receives what a driver does that the engine's events do
	// not say; nil discards it.
	Logger *slog.Logger
}

// Substrate is one registered substrate.
type Substrate struct {
	// Name is what a description's substrate: key says.
	Name string
	// Can is what the substrate can do.
	Can Capabilities
	// Rules are its rules for a description (config.SubstrateRules).
	// Register derives what they do not say from Can: members found
	// at run time with Discover, adopt: read with Adopt.
	Rules config.SubstrateRules
	// New builds the substrate's driver for a valid description: the
	// files it names (tokens, CAs, kubeconfigs) are read here, not in
	// validation.
	New func(c *config.Cluster, o Options) (driver.Driver, error)

	// dir is the directory of the package that registered it (set by
	// Register): its own package, where its name may be written.
	dir string
}

// Dir is the directory of the source file that registered the
// substrate: its own package, the one place besides this registry
// that names it (internal/substrate/all's test holds the rest of the
// tree to that).
func (s Substrate) Dir() string { return s.dir }

var registry struct {
	sync.RWMutex
	byName map[string]Substrate
}

// Register adds s to the registry and its rules to config's. It is
// called from the substrate package's init; a name registered twice is
// a programming error and panics.
func Register(s Substrate) {
	if s.Name == "" || s.New == nil || !s.Can.Has(StartStop) {
		panic(fmt.Sprintf("substrate: %q registered without a name, a constructor or start-stop", s.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = map[string]Substrate{}
	}
	if _, dup := registry.byName[s.Name]; dup {
		panic(fmt.Sprintf("substrate: %s registered twice", s.Name))
	}
	if _, file, _, ok := runtime.Caller(1); ok {
		s.dir = filepath.Dir(file)
	}
	r := s.Rules
	r.FindsMembers = s.Can.Has(Discover)
	if s.Can.Has(Adopt) {
		r.Reads = append(append([]config.Field(nil), r.Reads...), config.FieldAdopt)
	}
	s.Rules = r
	config.RegisterSubstrate(s.Name, r)
	registry.byName[s.Name] = s
}

// ErrUnknown: the description names a substrate this build does not
// have.
var ErrUnknown = errors.New("substrate: unknown")

// ErrIncapable: the substrate cannot do what a command or a
// description needs (an *IncapableError says what).
var ErrIncapable = errors.New("substrate: lacks a capability")

// IncapableError is a refusal by a capability's name: "substrate
// kubernetes cannot bring a cluster up and down (capability
// cluster-up)", and what needed it.
type IncapableError struct {
	Substrate  string
	Capability Capability
	// For says what needed it, if not the command itself:
	// "components[0].adopt".
	For string
}

func (e *IncapableError) Error() string {
	s := fmt.Sprintf("substrate %s cannot %s (capability %s)", e.Substrate, e.Capability.What(), e.Capability)
	if e.For != "" {
		s += ", which " + e.For + " needs"
	}
	return s
}

// Is makes errors.Is(err, ErrIncapable) hold.
func (e *IncapableError) Is(target error) bool { return target == ErrIncapable }

// Lookup finds a registered substrate by name; the error lists those
// this build has.
func Lookup(name string) (Substrate, error) {
	registry.RLock()
	s, ok := registry.byName[name]
	registry.RUnlock()
	if !ok {
		return Substrate{}, fmt.Errorf("%w: %s", ErrUnknown, config.UnknownSubstrate(name))
	}
	return s, nil
}

// Names lists the registered substrates, sorted.
func Names() []string { return config.SubstrateNames() }

// Require returns nil when s can do c, and an *IncapableError naming
// both otherwise.
func (s Substrate) Require(c Capability) error {
	if s.Can.Has(c) {
		return nil
	}
	return &IncapableError{Substrate: s.Name, Capability: c}
}

// Require refuses, by name, a command that needs c on the
// description's substrate when the substrate cannot do it (or is not
// in this build).
func Require(c *config.Cluster, cp Capability) error {
	s, err := Lookup(c.Substrate)
	if err != nil {
		return err
	}
	return s.Require(cp)
}

// Need is a capability a description needs, and the key that needs it.
type Need struct {
	Capability Capability
	Path       string
}

// Needs lists what a description needs of its substrate: start-stop
// always; adopt for each adopt: written; discover for a component that
// lists no members; lock-host for a host a hosts stage locks that has
// no lock calls of its own (nor host_defaults'); reinstall-host for
// such a host with a reinstall or migrate command.
func Needs(c *config.Cluster) []Need {
	needs := []Need{{Capability: StartStop}}
	for i := range c.Components {
		comp := &c.Components[i]
		cpath := fmt.Sprintf("components[%d]", i)
		if comp.Adopt != nil {
			needs = append(needs, Need{Adopt, cpath + ".adopt"})
		}
		for j := range comp.Members {
			if comp.Members[j].Adopt != nil {
				needs = append(needs, Need{Adopt, fmt.Sprintf("%s.members[%d].adopt", cpath, j)})
			}
		}
		if len(comp.Members) == 0 {
			needs = append(needs, Need{Discover, cpath + ".members"})
		}
	}
	return append(needs, hostLockNeeds(c)...)
}

// hostLockNeeds are the hosts a hosts stage locks without lock calls
// (the driver must lock them itself), or reinstalls (the driver
// reinstalls them).
func hostLockNeeds(c *config.Cluster) []Need {
	staged := map[string]bool{}
	for i := range c.Releases {
		for _, st := range c.Releases[i].HostsStages() {
			for _, n := range st.Components {
				staged[n] = true
			}
		}
	}
	var needs []Need
	for i := range c.Hosts {
		h := &c.Hosts[i]
		for j := range c.Components {
			comp := &c.Components[j]
			if !staged[comp.Name] || !slices.ContainsFunc(comp.Members, func(m config.Member) bool { return m.Host == h.Name }) {
				continue
			}
			if len(c.CallsOf(h).Lock) == 0 {
				needs = append(needs, Need{LockHost, fmt.Sprintf("hosts[%d] (no lock calls, locked by a hosts stage of %s)", i, comp.Name)})
			}
			if hc := c.CommandsOf(h); hc != nil && (hc.Reinstall != nil || hc.Migrate != nil) {
				needs = append(needs, Need{ReinstallHost, fmt.Sprintf("hosts[%d].commands (a reinstall or migrate in a hosts stage of %s)", i, comp.Name)})
			}
			break
		}
	}
	return needs
}

// Check refuses a description that needs what its substrate cannot
// do, naming the first capability missing and the key that needs it.
func (s Substrate) Check(c *config.Cluster) error {
	for _, n := range Needs(c) {
		if !s.Can.Has(n.Capability) {
			return &IncapableError{Substrate: s.Name, Capability: n.Capability, For: n.Path}
		}
	}
	return nil
}

// New builds the driver of the description's substrate, having checked
// that the substrate can do what the description needs: before any
// driver exists, so before anything moves.
func New(c *config.Cluster, o Options) (driver.Driver, error) {
	s, err := Lookup(c.Substrate)
	if err != nil {
		return nil, err
	}
	if err := s.Check(c); err != nil {
		return nil, err
	}
	return s.New(c, o)
}

// CheckDriver reports a driver that does not have the methods the
// capabilities its substrate declares need, or has methods of one it
// does not declare (the engine would use them, yet refuse commands by
// the declaration): a programming error a substrate's tests catch.
func (s Substrate) CheckDriver(d driver.Driver) error {
	var errs []error
	for _, c := range []struct {
		cap  Capability
		has  bool
		what string
	}{
		{Output, implements[driver.Logger](d), "driver.Logger"},
		{Discover, implements[driver.Discoverer](d), "driver.Discoverer"},
		{Undo, implements[driver.Undoer](d), "driver.Undoer"},
		{LockHost, implements[driver.HostLocker](d), "driver.HostLocker"},
		{ReinstallHost, implements[driver.HostReinstaller](d), "driver.HostReinstaller"},
		{BackupOnHost, implements[driver.HostBackups](d), "driver.HostBackups"},
	} {
		switch {
		case s.Can.Has(c.cap) && !c.has:
			errs = append(errs, fmt.Errorf("substrate %s declares %s, but its driver %T is no %s", s.Name, c.cap, d, c.what))
		case !s.Can.Has(c.cap) && c.has:
			errs = append(errs, fmt.Errorf("substrate %s does not declare %s, but its driver %T is a %s", s.Name, c.cap, d, c.what))
		}
	}
	return errors.Join(errs...)
}

func implements[I any](d driver.Driver) bool {
	_, ok := d.(I)
	return ok
}
