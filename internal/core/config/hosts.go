package config

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// A host is something ferry locks and unlocks: its lock and unlock
// calls move its work away and back (StarlingX's host-lock, a
// balancer's maintenance mode), and its capacity call says whether one
// more host may be locked now. A release's flow upgrades components
// host by host in a hosts stage. This file holds what the description
// says of both: the calls a host has, the data they are rendered with,
// their defaults and their rules.

// DefaultHostsName is the name of a hosts stage that gives none: its
// state is upgrading-hosts, StarlingX's.
const DefaultHostsName = "hosts"

// DefaultLockDeadline bounds a host's lock when its stage gives no
// deadline.
const DefaultLockDeadline = Duration(2 * time.Minute)

// Empty reports whether no call is set.
func (h *HostCalls) Empty() bool {
	return len(h.Lock) == 0 && len(h.Unlock) == 0 && h.Capacity == nil && h.Commands == nil
}

// Bounds of a host's commands.
const (
	// DefaultHostCommandTimeout bounds a lock, unlock or migrate
	// command that gives no timeout.
	DefaultHostCommandTimeout = Duration(2 * time.Minute)
	// DefaultReinstallTimeout bounds a reinstall that gives none.
	DefaultReinstallTimeout = Duration(10 * time.Minute)
	// DefaultUnreachable bounds how long a reinstalling host may not
	// answer when its reinstall gives no bound.
	DefaultUnreachable = Duration(2 * time.Minute)
)

// CommandsOf returns host h's commands (its own calls' set, else
// host_defaults'), nil when it has none.
func (c *Cluster) CommandsOf(h *Host) *HostCommands { return c.CallsOf(h).Commands }

// HostCommandOf returns host name's command kind (lock, unlock,
// reinstall, migrate), nil when it has none.
func (c *Cluster) HostCommandOf(name, kind string) *HostCommand {
	h := c.Host(name)
	if h == nil {
		return nil
	}
	hc := c.CommandsOf(h)
	if hc == nil {
		return nil
	}
	for _, k := range hc.kinds() {
		if k.key == kind {
			return k.cmd
		}
	}
	return nil
}

// Host command kinds.
const (
	HostLock      = "lock"
	HostUnlock    = "unlock"
	HostReinstall = "reinstall"
	HostMigrate   = "migrate"
)

func (hc *HostCommands) kinds() []struct {
	key string
	cmd *HostCommand
} {
	return []struct {
		key string
		cmd *HostCommand
	}{{HostLock, hc.Lock}, {HostUnlock, hc.Unlock}, {HostReinstall, hc.Reinstall}, {HostMigrate, hc.Migrate}}
}

// RenderHostCommand renders host name's command hc for a move to
// version: its argv, and the host it runs on ("" when it follows a
// component's role, run_on: {active: C}: the caller asks who holds it
// as the command runs).
func (c *Cluster) RenderHostCommand(name string, hc *HostCommand, version string) (argv []string, on string, err error) {
	h := c.Host(name)
	if h == nil {
		return nil, "", fmt.Errorf("host %q is not in the description", name)
	}
	d := c.HostData(h)
	d.Version = version
	argv = make([]string, len(hc.Argv))
	for i, a := range hc.Argv {
		if argv[i], err = Render(a, d); err != nil {
			return nil, "", fmt.Errorf("host %s: argv[%d]: %w", name, i, err)
		}
	}
	if hc.RunOn.Active != "" {
		return argv, "", nil // the role holder's host, found as it runs
	}
	return argv, cmp.Or(hc.RunOn.Host, name), nil
}

// CallsOf returns the lock, unlock and capacity calls of host h: its
// own when it gives any, else the description's host_defaults.
func (c *Cluster) CallsOf(h *Host) *HostCalls {
	if !h.HostCalls.Empty() {
		return &h.HostCalls
	}
	return &c.HostDefaults
}

// AddressOf is host h's address: its address:, else the host part of
// its agent or of its sshd's address, else its name.
func (h *Host) AddressOf() string {
	if h.Address != "" {
		return h.Address
	}
	if host, _, err := net.SplitHostPort(h.Agent); err == nil && host != "" {
		return host
	}
	if h.SSH != nil {
		if host, _, err := net.SplitHostPort(h.SSH.Address); err == nil && host != "" {
			return host
		}
	}
	return h.Name
}

// HostData is the template data of host h's calls: .Name and .Host
// are the host's name, .Address and .Any its address, .Members the
// members on it, of every component in their order.
func (c *Cluster) HostData(h *Host) TemplateData {
	d := TemplateData{Name: h.Name, Host: h.Name, Address: h.AddressOf(), Any: h.AddressOf(), Vars: map[string]string{}}
	for _, comp := range c.ComponentsInOrder() {
		for _, m := range comp.Members {
			if m.Host == h.Name {
				d.Members = append(d.Members, MemberRef{Name: m.Name, Address: m.Address, Host: m.Host, Vars: m.Vars})
			}
		}
	}
	return d
}

// HostsStages are the hosts stages of release r's flow.
func (r *Release) HostsStages() []*FlowStage {
	var out []*FlowStage
	for i := range r.Flow {
		if r.Flow[i].Stage == StageHosts {
			out = append(out, &r.Flow[i])
		}
	}
	return out
}

// applyDefaults fills the calls' defaults (their timeouts: a hook's
// for lock and unlock, a check's for capacity).
func (h *HostCalls) applyDefaults() {
	applyHookDefaults(h.Lock)
	applyHookDefaults(h.Unlock)
	if h.Capacity != nil {
		h.Capacity.applyDefaults(DefaultCheckTimeout)
	}
	if hc := h.Commands; hc != nil {
		for _, k := range hc.kinds() {
			if k.cmd == nil {
				continue
			}
			if k.cmd.Timeout == 0 {
				k.cmd.Timeout = DefaultHostCommandTimeout
				if k.key == HostReinstall {
					k.cmd.Timeout = DefaultReinstallTimeout
				}
			}
			if k.key == HostReinstall && k.cmd.Unreachable == 0 {
				k.cmd.Unreachable = DefaultUnreachable
			}
		}
	}
}

// SelectsHosts reports whether hosts stage st names its hosts (hosts:
// or host_labels:) rather than moving every host of its components.
func (st *FlowStage) SelectsHosts() bool { return len(st.Hosts) > 0 || len(st.HostLabels) > 0 }

// Selects reports whether hosts stage st selects host h: by name, by
// every one of its host_labels, or, when it names none, any host.
func (st *FlowStage) Selects(h *Host) bool {
	if !st.SelectsHosts() {
		return true
	}
	if slices.Contains(st.Hosts, h.Name) {
		return true
	}
	if len(st.HostLabels) == 0 {
		return false
	}
	for k, v := range st.HostLabels {
		if h.Labels[k] != v {
			return false
		}
	}
	return true
}

// StageMembers are the members hosts stage st moves: those of its
// components on the hosts it selects, each component's in description
// order, the components in the stage's order. A component in several
// hosts stages has each member moved by the one that selects its host.
func (c *Cluster) StageMembers(st *FlowStage) map[string][]string {
	out := map[string][]string{}
	for _, name := range st.Components {
		comp := c.Component(name)
		if comp == nil {
			continue
		}
		for _, m := range comp.Members {
			if h := c.Host(m.Host); h != nil && st.Selects(h) || h == nil && !st.SelectsHosts() {
				out[name] = append(out[name], m.Name)
			}
		}
	}
	return out
}

// StageHosts are the hosts stage st moves: those it selects that carry
// a member of its components, in the description's order. Its budget
// in percent is a share of them.
func (c *Cluster) StageHosts(st *FlowStage) []string {
	on := map[string]bool{}
	for _, ms := range c.StageMembers(st) {
		for _, n := range ms {
			if _, m := c.MemberOf(n); m != nil {
				on[m.Host] = true
			}
		}
	}
	var out []string
	for i := range c.Hosts {
		if on[c.Hosts[i].Name] {
			out = append(out, c.Hosts[i].Name)
		}
	}
	return out
}

// stageComponents fills in the components of a hosts stage that
// selects its hosts and lists none: every component with a member on
// them, in the components' order.
func (c *Cluster) stageComponents(st *FlowStage) {
	if len(st.Components) > 0 || !st.SelectsHosts() {
		return
	}
	for _, comp := range c.ComponentsInOrder() {
		for _, m := range comp.Members {
			if h := c.Host(m.Host); h != nil && st.Selects(h) {
				st.Components = append(st.Components, comp.Name)
				break
			}
		}
	}
}

// applyHostsDefaults fills the defaults of hosts and of hosts stages.
func (c *Cluster) applyHostsDefaults() {
	c.HostDefaults.applyDefaults()
	for i := range c.Hosts {
		c.Hosts[i].HostCalls.applyDefaults()
	}
	for i := range c.Releases {
		for _, st := range c.Releases[i].HostsStages() {
			if st.Name == "" {
				st.Name = DefaultHostsName
			}
			if st.Deadline == 0 {
				st.Deadline = DefaultLockDeadline
			}
			c.stageComponents(st)
		}
	}
}

// hostCalls checks one set of host calls at path (a host, or
// host_defaults), rendered with samples: a lock needs its unlock (what
// ferry journals as its undo) and the other way round, and no call has
// an undo of its own (the unlock is the lock's).
func (v *validator) hostCalls(hc *HostCalls, path string, at func(string) int, samples []TemplateData) {
	switch {
	case len(hc.Lock) > 0 && len(hc.Unlock) == 0:
		v.add(at("lock"), path+".lock", "a lock needs its unlock: ferry journals the unlock as the lock's undo before the first lock call, and makes it once the host's members are done or its turn ends any other way")
	case len(hc.Unlock) > 0 && len(hc.Lock) == 0:
		v.add(at("unlock"), path+".unlock", "an unlock without a lock: nothing would lock the host")
	}
	for _, l := range []struct {
		key   string
		calls []Call
	}{{"lock", hc.Lock}, {"unlock", hc.Unlock}} {
		for i := range l.calls {
			rel := index(l.key, i)
			v.call(&l.calls[i], index(path+"."+l.key, i), at(rel), samples, false)
		}
	}
	if hc.Capacity != nil {
		v.call(hc.Capacity, path+".capacity", at("capacity"), samples, false)
	}
	if hc.Commands != nil {
		if !v.unread(FieldHostCommands, at("commands"), path+".commands") {
			v.hostCommands(hc, path, at, samples)
		}
	}
}

// Ranges of a host command's bounds.
var (
	hostCommandTimeoutRange = durRange{time.Second, 24 * time.Hour, DefaultHostCommandTimeout.D(), "how long the command may run"}
	unreachableRange        = durRange{time.Second, 24 * time.Hour, DefaultUnreachable.D(), "how long the host may not answer while it reinstalls"}
)

// hostCommands checks the commands of one set of host calls at path:
// each an argv that renders, run on a host of the description; a lock
// with its unlock and not beside lock calls; a reinstall's own keys on
// the reinstall only.
func (v *validator) hostCommands(hc *HostCalls, path string, at func(string) int, samples []TemplateData) {
	cs := hc.Commands
	cpath := path + ".commands"
	switch {
	case cs.Lock != nil && len(hc.Lock) > 0:
		v.add(at("commands.lock"), cpath+".lock", "the host has lock calls too: give its lock either as calls (made by ferry) or as a command (run on a host by the substrate), not both")
	case cs.Lock != nil && cs.Unlock == nil:
		v.add(at("commands.lock"), cpath+".lock", "a lock needs its unlock: ferry journals the unlock as the lock's undo before it runs the lock")
	case cs.Unlock != nil && cs.Lock == nil:
		v.add(at("commands.unlock"), cpath+".unlock", "an unlock without a lock: nothing would lock the host")
	}
	for _, k := range cs.kinds() {
		cmd := k.cmd
		if cmd == nil {
			continue
		}
		rel := "commands." + k.key
		kpath := cpath + "." + k.key
		if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
			v.add(at(rel), kpath+".argv", "must name a program: an argv such as [system, host-lock, \"{{.Host}}\"]")
		}
		for i, a := range cmd.Argv {
			for _, r := range v.render(at(rel+".argv"), index(kpath+".argv", i), a, samples) {
				if strings.IndexByte(r, 0) >= 0 {
					v.add(at(rel+".argv"), index(kpath+".argv", i), "renders to an argument with a NUL byte")
					break
				}
			}
		}
		switch ro := cmd.RunOn; {
		case ro.Host != "" && ro.Active != "":
			v.add(at(rel+".run_on"), kpath+".run_on", "names a host (%s) and a role's holder (active: %s): one of the two", ro.Host, ro.Active)
		case ro.Host != "" && v.c.Host(ro.Host) == nil:
			v.add(at(rel+".run_on"), kpath+".run_on", "%q is not a host of the description%s", ro.Host, knownList(hostNames(v.c)))
		case ro.Active != "":
			comp := v.c.Component(ro.Active)
			switch {
			case comp == nil:
				v.add(at(rel+".run_on"), kpath+".run_on.active", "no component %q%s", ro.Active, knownList(componentNames(v.c)))
			case comp.Role == nil || comp.Role.Check == nil:
				v.add(at(rel+".run_on"), kpath+".run_on.active", "component %s has no role check: nothing would say which of its members' hosts to run on", ro.Active)
			}
		}
		v.within(at(rel+".timeout"), kpath+".timeout", cmd.Timeout, hostCommandTimeoutRange)
		if k.key != HostReinstall {
			if cmd.Unreachable != 0 {
				v.add(at(rel+".unreachable"), kpath+".unreachable", "applies to a reinstall only: the other commands run on a host that answers")
			}
			if cmd.OnFailure != "" {
				v.add(at(rel+".on_failure"), kpath+".on_failure", "applies to a reinstall only: a failed %s is retried", k.key)
			}
			continue
		}
		v.within(at(rel+".unreachable"), kpath+".unreachable", cmd.Unreachable, unreachableRange)
		if cmd.OnFailure != "" && !contains(onFailures, cmd.OnFailure) {
			v.add(at(rel+".on_failure"), kpath+".on_failure", "unknown %q; known: %s (default the policy's on_failure)", cmd.OnFailure, strings.Join(onFailures, ", "))
		}
	}
}

// hostsCalls checks every host's calls and host_defaults.
func (v *validator) hostsCalls() {
	c := v.c
	var first []TemplateData
	for i := range c.Hosts {
		h := &c.Hosts[i]
		d := c.HostData(h)
		if first == nil {
			first = []TemplateData{d}
		}
		if h.HostCalls.Empty() {
			continue
		}
		path := index("hosts", i)
		line := h.pos.at("", c.pos.at(path))
		v.hostCalls(&h.HostCalls, path, func(rel string) int { return h.pos.at(rel, line) }, []TemplateData{d})
	}
	if first == nil {
		first = []TemplateData{{Name: "host", Host: "host", Address: "127.0.0.1", Any: "127.0.0.1", Vars: map[string]string{}}}
	}
	v.hostCalls(&c.HostDefaults, "host_defaults", func(rel string) int { return c.pos.at("host_defaults." + rel) }, first)
}

// hostsStage checks a hosts stage of a flow at spath (its line is at
// sat's): its components, named once, with no phase hooks (a hosts
// stage runs none); its name, which becomes its state (upgrading-NAME)
// and so must be no component's; its budgets.
func (v *validator) hostsStage(st *FlowStage, spath string, sat func(string) int, at func(string) int, rel string, names map[string]string) {
	if len(st.Components) == 0 {
		v.add(sat("stage"), spath+".components", "a hosts stage must list the components it upgrades host by host%s", knownList(componentNames(v.c)))
	}
	switch {
	case !isIdent(st.Name):
		v.add(sat("name"), spath+".name", "%q is not a name: letters, digits, _ and -, starting with a letter", st.Name)
	case v.c.Component(st.Name) != nil:
		what := "its name"
		if st.Name == DefaultHostsName && sat("name") == sat("stage") {
			what = "its name (hosts, the default)"
		}
		v.add(sat("name"), spath+".name", "%s is a component's too: the stage's state upgrading-%s would be the component's phase's; name the stage", what, st.Name)
	default:
		if first, dup := names[st.Name]; dup {
			v.add(sat("name"), spath+".name", "a second hosts stage %s (also %s): name each its own", st.Name, first)
		} else {
			names[st.Name] = spath
		}
	}
	for j, name := range st.Hosts {
		if v.c.Host(name) == nil {
			v.add(at(index(rel+".hosts", j)), index(spath+".hosts", j), "no host %q%s", name, knownList(hostNames(v.c)))
		}
	}
	if len(st.HostLabels) > 0 && !slices.ContainsFunc(v.c.Hosts, func(h Host) bool { return len(h.Labels) > 0 && st.Selects(&h) && !slices.Contains(st.Hosts, h.Name) }) {
		v.add(sat("host_labels"), spath+".host_labels", "no host has the labels %s: the stage would move nothing by them", labelsText(st.HostLabels))
	}
	if st.SelectsHosts() && len(st.Components) > 0 && len(v.c.StageMembers(st)) == 0 {
		v.add(sat("stage"), spath+".hosts", "the hosts it selects carry no member of %s: the stage would move nothing", strings.Join(st.Components, ", "))
	}
	if st.MaxUnavailable.Count < 0 {
		v.add(sat("max_unavailable"), spath+".max_unavailable", "must not be negative (got %d; 0 means 1 host at a time)", st.MaxUnavailable.Count)
	}
	budget := st.MaxUnavailable.Hosts(len(v.c.StageHosts(st)))
	switch {
	case st.MaxUnavailablePerDomain < 0:
		v.add(sat("max_unavailable_per_domain"), spath+".max_unavailable_per_domain", "must not be negative (got %d; 0 means no bound)", st.MaxUnavailablePerDomain)
	case st.MaxUnavailablePerDomain > budget:
		v.add(sat("max_unavailable_per_domain"), spath+".max_unavailable_per_domain", "%d is more than max_unavailable %d: it would never bind", st.MaxUnavailablePerDomain, budget)
	}
	v.within(sat("deadline"), spath+".deadline", st.Deadline, migrateDeadlineRange)
	if st.Strategy != "" && !slices.Contains(strategy.HostChoosers(), st.Strategy) {
		v.add(sat("strategy"), spath+".strategy", "%q is no strategy that orders hosts; this build's: %s", st.Strategy, strings.Join(strategy.HostChoosers(), ", "))
	}
	for j, name := range st.Components {
		comp := v.c.Component(name)
		if comp == nil {
			continue // said by the caller
		}
		for _, l := range []string{"pre_phase", "post_phase"} {
			if len(comp.Hooks.List(l)) > 0 && !slices.Contains(st.Components[:j], name) {
				v.add(at(index(rel+".components", j)), index(spath+".components", j),
					"component %s has %s hooks, which a hosts stage does not run (it has no phase of the component alone); move them to host_defaults' lock and unlock, or upgrade %s in a phase", name, l, name)
			}
		}
	}
}

// stageMoves records the members hosts stage st (flow[i]) moves: each
// once (a component spanning stages has each member moved by the
// stage that selects its host).
func (v *validator) stageMoves(st *FlowStage, i int, fpath string, sat func(string) int, moved map[string]int, byPhase map[string]bool) {
	spath := index(fpath, i)
	for _, name := range st.Components {
		if byPhase[name] {
			continue // said: a phase and a hosts stage
		}
		for _, n := range v.c.StageMembers(st)[name] {
			if first, dup := moved[n]; dup && first != i {
				v.add(sat("stage"), spath, "member %s of %s is moved by two hosts stages (also %s): select its host in one", n, name, index(fpath, first))
				continue
			}
			moved[n] = i
		}
	}
}

// stagesCover checks that every member of a component in hosts stages
// is moved by one: a member on a host no stage selects would stay on
// the release before.
func (v *validator) stagesCover(fpath string, at func(string) int, moved map[string]int, byPhase map[string]bool, lastAt map[string]int) {
	for _, comp := range v.c.ComponentsInOrder() {
		if _, staged := lastAt[comp.Name]; !staged || byPhase[comp.Name] {
			continue
		}
		var left []string
		for _, m := range comp.Members {
			if _, ok := moved[m.Name]; !ok {
				left = append(left, m.Name+" (on "+cmp.Or(m.Host, "no host")+")")
			}
		}
		if len(left) > 0 {
			v.add(at("flow"), fpath, "component %s: %s moved by no stage: the hosts stages of %s select none of their hosts", comp.Name, strings.Join(left, ", "), comp.Name)
		}
	}
}

// labelsText writes labels as k=v, sorted.
func labelsText(labels map[string]string) string {
	out := make([]string, 0, len(labels))
	for k, val := range labels {
		out = append(out, k+"="+val)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
