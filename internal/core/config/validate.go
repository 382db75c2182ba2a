package config

import (
	"github.com/ferry-upgrade/ferry/internal/core/window"

	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// Failure policies.
var onFailures = []string{"rollback", "pause"}

var onImpacts = []string{"continue", "pause", "rollback"}

var finalizes = []string{"auto", "manual"}

var (
	componentNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)
	memberNameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envNameRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerNameRE    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	sha256RE        = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	// memberFieldRE finds the fields a cluster check has no value for.
	memberFieldRE = regexp.MustCompile(`\.(Name|Address|Host|Vars)\b`)
)

// Validate checks the cluster and returns an *Errors with every
// problem found, or nil. It expects the defaults applied (Parse does;
// a Cluster built in Go calls ApplyDefaults first). The rules are
// listed, one by one, in validate_test.go.
func (c *Cluster) Validate() error {
	v := &validator{c: c, hostIndex: c.hostIndex()}
	v.rules, v.rulesKnown = substrateRules(c.Substrate)
	v.cluster()
	if len(v.probs) == 0 {
		return nil
	}
	return problemsOf(v.probs, v.omitted)
}

type validator struct {
	c     *Cluster
	probs []Problem
	// undoOK: the calls being checked may have an undo.
	undoOK bool
	// omitted counts the problems beyond maxCollected, not kept.
	omitted int
	// badHostName: a host's name is missing or refused.
	badHostName bool
	// hostIndex finds a host by name (Cluster.Host is a scan: 20,000
	// members on 2,000 hosts made it a third of a parse).
	hostIndex map[string]*Host
	// defTimeout is the default timeout of the calls being checked,
	// for messages (checks and hooks have different ones).
	defTimeout Duration
	// rules are the description's substrate's (substrate.go); when it
	// is no substrate of this build (said once, at substrate:), no rule
	// of a substrate applies.
	rules      SubstrateRules
	rulesKnown bool
}

func (v *validator) add(line int, path, format string, args ...any) {
	if len(v.probs) >= maxCollected {
		v.omitted++
		return
	}
	v.probs = append(v.probs, Problem{File: v.c.File, Line: line, Path: path, Reason: fmt.Sprintf(format, args...)})
}

// at returns the line of rel (a key, or a path below the node such as
// "args[2]" or "policy.tick") in p: the closest line known, falling
// back to the enclosing key and then to the node; then to the lines
// given, for a node that was never written.
func (p positions) at(rel string, fallback ...int) int {
	for rel != "" {
		if l := p.sub[rel]; l > 0 {
			return l
		}
		if l := p.keys[rel]; l > 0 {
			return l
		}
		i := strings.LastIndexAny(rel, ".[")
		if i < 0 {
			break
		}
		rel = rel[:i]
	}
	if p.line > 0 {
		return p.line
	}
	for _, l := range fallback {
		if l > 0 {
			return l
		}
	}
	return 0
}

func (v *validator) cluster() {
	c := v.c
	switch {
	case strings.TrimSpace(c.Name) == "":
		v.add(c.pos.at("cluster"), "cluster", "must be set: the name of the cluster")
	case len(c.Name) > maxNameLen || !printable(c.Name):
		v.add(c.pos.at("cluster"), "cluster", "%q is not a cluster name: at most %d characters, none of them control characters", truncate(c.Name, 40), maxNameLen)
	}
	switch {
	case v.rulesKnown:
	case c.Substrate == "" && len(SubstrateNames()) == 0:
		// Most descriptions name none: the hint is needed here most.
		v.add(c.pos.at("substrate"), "substrate", "must be set: this build has no substrate (%s)", linkSubstrates)
	case c.Substrate == "":
		v.add(c.pos.at("substrate"), "substrate", "must be set: this build has no default substrate; it has: %s", strings.Join(SubstrateNames(), ", "))
	default:
		v.add(c.pos.at("substrate"), "substrate", "%s", UnknownSubstrate(c.Substrate))
	}
	v.hosts()
	v.components()
	v.addresses()
	v.releases()
	v.policy()
	v.traffic()
	v.upgradeHooks()
	v.alarms()
	v.applications()
}

// upgradeHooks checks the cluster's pre_upgrade and post_upgrade hooks:
// made once for the whole cluster, with no member of their own.
func (v *validator) upgradeHooks() {
	c := v.c
	samples := []TemplateData{{Version: "0.0.0"}}
	if len(c.Releases) > 0 {
		samples[0].Version = c.Releases[0].Version
	}
	for _, l := range []struct {
		key   string
		calls []Call
		undo  bool
	}{{"pre_upgrade", c.Hooks.PreUpgrade, true}, {"post_upgrade", c.Hooks.PostUpgrade, false}} {
		v.undoOK = l.undo
		for i := range l.calls {
			rel := index("hooks."+l.key, i)
			v.call(&l.calls[i], rel, c.pos.at(rel), samples, false)
		}
		v.undoOK = false
	}
}

// alarms checks the health query's named checks: a name each, once,
// and a call that renders for the target release.
func (v *validator) alarms() {
	c := v.c
	samples := []TemplateData{{Version: "0.0.0"}}
	if len(c.Releases) > 0 {
		samples[0].Version = c.Releases[0].Version
	}
	seen := map[string]int{}
	for i := range c.Alarms {
		a := &c.Alarms[i]
		rel := index("alarms", i)
		line := c.pos.at(rel)
		if first, dup := seen[a.Name]; dup && a.Name != "" {
			v.add(line, rel+".name", "duplicate alarm %q (also alarms[%d])", a.Name, first)
		} else if a.Name == "" {
			v.add(line, rel+".name", "must be set: the health query lists the check by it")
		}
		seen[a.Name] = i
		v.call(&a.Call, rel, line, samples, false)
	}
}

func (v *validator) hosts() {
	c := v.c
	seen := map[string]int{}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		path := index("hosts", i)
		line := h.pos.at("", c.pos.at(index("hosts", i)))
		if h.Name == "" {
			v.badHostName = true
			v.add(h.pos.at("name", line), path+".name", "must be set")
		} else if len(h.Name) > maxNameLen || !printable(h.Name) {
			v.badHostName = true
			v.add(h.pos.at("name", line), path+".name", "%q is not a host name: at most %d characters, none of them control characters", truncate(h.Name, 40), maxNameLen)
		} else if first, dup := seen[h.Name]; dup {
			v.add(h.pos.at("name", line), path+".name", "duplicate host %q (also hosts[%d])", h.Name, first)
		} else {
			seen[h.Name] = i
		}
		if h.Agent != "" {
			if err := checkHostPort(h.Agent); err != nil {
				v.add(h.pos.at("agent", line), path+".agent", "%v", err)
			}
		}
		if h.SSH != nil {
			key := strings.TrimPrefix(string(FieldHostSSH), "hosts[].")
			v.unread(FieldHostSSH, h.pos.at(key, line), path+"."+key)
		}
		if v.rules.Host != nil {
			v.rules.Host(Node{v: v, path: path, pos: &h.pos, line: line}, h)
		}
		v.hostTLS(h, path, line)
	}
	v.hostsCalls()
}

// hostTLS checks a host's tls: one of a well-formed fingerprint and a
// CA file (read when a driver is built: validation does no I/O).
func (v *validator) hostTLS(h *Host, path string, line int) {
	t := h.TLS
	if t == nil {
		return
	}
	at := func(rel string) int { return h.pos.at(rel, line) }
	switch {
	case t.Fingerprint == "" && t.CAFile == "":
		v.add(at("tls"), path+".tls", "give fingerprint: \"sha256:…\" (the agent prints it at start and writes it to its DIR/tls/fingerprint) or ca_file: PATH (the CA that signed the agent's certificate)")
	case t.Fingerprint != "" && t.CAFile != "":
		v.add(at("tls"), path+".tls", "give fingerprint or ca_file, not both: a pinned certificate needs no CA")
	case t.Fingerprint != "":
		if _, err := tlspin.Parse(t.Fingerprint); err != nil {
			v.add(at("tls.fingerprint"), path+".tls.fingerprint", "%v", err)
		}
	}
}

func (v *validator) components() {
	c := v.c
	if len(c.Components) == 0 {
		v.add(c.pos.at("components"), "components", "at least one component is needed")
		return
	}
	names := map[string]int{}
	orders := map[int]int{}
	members := map[string]string{} // member name -> path of its first use
	for i := range c.Components {
		comp := &c.Components[i]
		path := index("components", i)
		line := comp.pos.at("", c.pos.at(path))
		at := func(rel string) int { return comp.pos.at(rel, line) }
		switch {
		case comp.Name == "":
			v.add(at("name"), path+".name", "must be set")
		case !componentNameRE.MatchString(comp.Name):
			v.add(at("name"), path+".name", "%q is not a component name: a lower-case letter, then up to 30 lower-case letters, digits or '-'", comp.Name)
		default:
			if first, dup := names[comp.Name]; dup {
				v.add(at("name"), path+".name", "duplicate component %q (also components[%d])", comp.Name, first)
			} else {
				names[comp.Name] = i
			}
		}
		if first, dup := orders[comp.Order]; dup {
			v.add(at("order"), path+".order", "order %d is also the order of components[%d] (%s): components take turns, never two components at once",
				comp.Order, first, c.Components[first].Name)
		} else {
			orders[comp.Order] = i
		}

		if len(comp.Members) == 0 && !v.rules.FindsMembers {
			v.add(at("members"), path+".members", "at least one member is needed")
		}
		if comp.Workload != nil {
			v.unread(FieldWorkload, at("workload"), path+".workload")
		}
		if comp.Commands != nil {
			v.unread(FieldCommands, at("commands"), path+".commands")
		}
		if v.rules.Component != nil {
			v.rules.Component(Node{v: v, path: path, pos: &comp.pos, line: line}, comp)
		}
		for j := range comp.Members {
			v.member(comp, j, path, line, members)
		}
		v.strategy(comp, path, line)
		v.component(comp, path, line)
	}
}

func (v *validator) member(comp *Component, j int, cpath string, cline int, seen map[string]string) {
	c := v.c
	m := &comp.Members[j]
	path := index(cpath+".members", j)
	line := m.pos.at("", comp.pos.at(index("members", j), cline))
	at := func(rel string) int { return m.pos.at(rel, line) }
	switch {
	case m.Name == "":
		v.add(at("name"), path+".name", "must be set")
	case !memberNameRE.MatchString(m.Name):
		v.add(at("name"), path+".name", "%q is not a member name: a lower-case letter or digit, then up to 62 lower-case letters, digits, '.', '_' or '-'", m.Name)
	default:
		if first, dup := seen[m.Name]; dup {
			v.add(at("name"), path+".name", "duplicate member %q (also %s): member names are unique across the cluster", m.Name, first)
		} else {
			seen[m.Name] = path
		}
	}
	found := v.rules.FindsMembers
	switch {
	case m.Host == "" && found:
	case m.Host == "":
		v.add(at("host"), path+".host", "must be set: the name of one of the hosts")
	case v.hostIndex[m.Host] == nil && !found && !v.badHostName:
		// (A host whose name is refused may be the one meant: its
		// problem is said once, at the host.)
		v.add(at("host"), path+".host", "no host %q in hosts%s", m.Host, knownList(hostNames(c)))
	}
	if m.Address == "" && !found {
		v.add(at("address"), path+".address", "must be set: the member's host:port")
	} else if m.Address == "" {
	} else if err := checkHostPort(m.Address); err != nil {
		v.add(at("address"), path+".address", "%v", err)
	}
}

// strategy checks a component's strategy settings through its
// registered strategy (package strategy), which knows its own rules.
func (v *validator) strategy(comp *Component, cpath string, cline int) {
	s := &comp.Strategy
	path := cpath + ".strategy"
	line := s.pos.at("", comp.pos.at("strategy", cline))
	for _, p := range strategy.Validate(s.Settings(), comp.strategyMembers()) {
		if p.Field == "" { // the settings as a whole
			v.add(s.pos.at("type", line), path, "%s", p.Reason)
			continue
		}
		v.add(s.pos.at(p.Field, line), path+"."+p.Field, "%s", writtenZero(s, p, len(comp.Members)))
	}
	v.addedSteps(comp, path, s.pos.at("type", line))
	if s.MaxUnavailablePerDomain > 0 && len(comp.Members) > 0 {
		for _, m := range comp.Members {
			if m.Domain != "" {
				return
			}
		}
		v.add(s.pos.at("max_unavailable_per_domain", line), path+".max_unavailable_per_domain",
			"no member of %s has a domain: set domain: on its members or their hosts (a zone, a rack)", comp.Name)
	}
}

// writtenZero rewords what the strategy says of a budget written as 0
// (the default applies only to a key left out): why 0 cannot work,
// the range, and the default.
func writtenZero(s *Strategy, p strategy.Problem, members int) string {
	upTo := func(n int, of string) string {
		if n < 1 {
			return "at least 1"
		}
		return fmt.Sprintf("1 to %d (%s)", n, of)
	}
	switch {
	case p.Field == "max_unavailable" && s.MaxUnavailable == 0:
		return fmt.Sprintf("0 is written, but with 0 down at once no member could ever be upgraded: write %s, or leave it out for the default %d",
			upTo(members, plural(members, "member")), DefaultMaxUnavailable)
	case p.Field == "max_batch" && s.MaxBatch == 0 && defaultBatch(s) > 1:
		def := "max_unavailable"
		if d := defaultBatch(s); d != s.MaxUnavailable {
			def = fmt.Sprint(d)
		}
		return fmt.Sprintf("0 is written, but a batch of 0 members never moves: write %s, or leave it out for the default (%s)",
			upTo(s.MaxUnavailable, "max_unavailable"), def)
	case p.Field == "max_batch" && s.MaxBatch == 0:
		return fmt.Sprintf("0 is written, but a batch of 0 members never moves, and %s moves one at a time: leave it out", s.Type)
	}
	return p.Reason
}

// defaultBatch is the max_batch s's strategy would give it if it were
// left out (0 for an unknown strategy).
func defaultBatch(s *Strategy) int {
	st, ok := strategy.Lookup(string(s.Type))
	if !ok {
		return 0
	}
	settings := s.Settings()
	settings.MaxBatch = 0
	return st.Defaults(settings).MaxBatch
}

// strategyMembers are the component's members as its strategy's
// validation sees them (name, host, domain); none when they are found
// at run time.
func (comp *Component) strategyMembers() []strategy.Member {
	out := make([]strategy.Member, len(comp.Members))
	for i, m := range comp.Members {
		out[i] = strategy.Member{Name: m.Name, Component: comp.Name, Host: m.Host, Domain: m.Domain}
	}
	return out
}

// component checks the run, health checks, hooks and durations, and
// renders every template with the data of the members.
func (v *validator) component(comp *Component, cpath string, cline int) {
	at := func(rel string) int { return comp.pos.at(rel, cline) }
	samples := v.samples(comp)

	r := &comp.Run
	rline := r.pos.at("", at("run"))
	for i, a := range r.Args {
		v.render(r.pos.at(index("args", i), rline), index(cpath+".run.args", i), a, samples)
	}
	for _, k := range sortedKeys(r.Env) {
		p := join(cpath+".run.env", k)
		if !envNameRE.MatchString(k) {
			v.add(r.pos.at(join("env", k), rline), p, "%q is not an environment variable name", k)
		}
		v.render(r.pos.at(join("env", k), rline), p, r.Env[k], samples)
	}
	v.within(r.pos.at("stop_timeout", rline), cpath+".run.stop_timeout", r.StopTimeout, stopTimeoutRange)
	if r.Restart != "" && r.Restart != "no" && r.Restart != "on-failure" {
		v.add(r.pos.at("restart", rline), cpath+".run.restart", "unknown restart policy %q; known: no, on-failure", r.Restart)
	}
	if r.StopSignal != "" && !contains(StopSignals, r.StopSignal) {
		v.add(r.pos.at("stop_signal", rline), cpath+".run.stop_signal", "%q is not a stop signal; known: %s", r.StopSignal, strings.Join(StopSignals, ", "))
	}
	v.runFiles(r, cpath, rline, samples)

	h := &comp.Health
	hline := h.pos.at("", at("health"))
	if h.Member != nil {
		v.check(h.Member, cpath+".health.member", h.pos.at("member", hline), samples, false)
	}
	if h.Cluster != nil {
		v.check(h.Cluster, cpath+".health.cluster", h.pos.at("cluster", hline), v.clusterSample(comp), true)
	}

	for _, hooks := range comp.Hooks.lists() {
		// Phase hooks are made once for the component: like a cluster
		// check, through any member that answers.
		hs, cluster := samples, false
		if hooks.key == "pre_phase" || hooks.key == "post_phase" || hooks.key == "switchover" || strings.HasPrefix(hooks.key, StepHooks) {
			hs, cluster = v.clusterSample(comp), true
		}
		v.undoOK = hooks.undo
		for i := range hooks.calls {
			rel := index("hooks."+hooks.key, i)
			v.call(&hooks.calls[i], cpath+"."+rel, at(rel), hs, cluster)
		}
		v.undoOK = false
	}
	if r := comp.Role; r != nil {
		rline := at("role")
		switch {
		case strings.TrimSpace(r.Name) == "":
			v.add(rline, cpath+".role.name", "must be set: the role's name, like leader")
		case r.Check == nil:
			v.add(rline, cpath+".role.check", "must be set: the check that passes on a member holding the role")
		default:
			v.check(r.Check, cpath+".role.check", rline, samples, false)
		}
	}
	v.adoption(comp, cpath, at)
	v.backup(comp, cpath, at)
	if c := comp.OKToStop; c != nil {
		// About one member, like a member check: its name and address
		// are the candidate's. An undo is refused (undoOK is off here).
		v.defTimeout = DefaultCheckTimeout
		v.call(c, cpath+".ok_to_stop", at("ok_to_stop"), samples, false)
		v.defTimeout = 0
	}
	v.count(at("crash_loop.exits"), cpath+".crash_loop.exits", comp.CrashLoop.Exits, crashExitsRange)
	v.within(at("crash_loop.window"), cpath+".crash_loop.window", comp.CrashLoop.Window, crashWindowRange)

	switch {
	case comp.Soak < 0:
		v.add(at("soak"), cpath+".soak", "must not be negative")
	case !v.within(at("deadline"), cpath+".deadline", comp.Deadline, deadlineRange):
	case comp.Soak >= comp.Deadline:
		v.add(at("soak"), cpath+".soak", "soak %s is not shorter than deadline %s: no member could finish its step in time; shorten the soak, or lengthen the deadline (up to %s)",
			fmtDur(comp.Soak.D()), fmtDur(comp.Deadline.D()), fmtDur(deadlineRange.max))
	}
	v.within(at("gate_deadline"), cpath+".gate_deadline", comp.GateDeadline, gateDeadlineRange)
}

// adoption checks a component's adopt (and its members'), and its
// version call, which an adopted member needs.
func (v *validator) adoption(comp *Component, cpath string, at func(string) int) {
	adopts := comp.Adopt != nil
	if comp.Adopt != nil {
		v.adopt(comp.Adopt, cpath+".adopt", func(rel string) int { return at(join("adopt", rel)) }, v.samples(comp))
	}
	refs := memberRefs(comp)
	for j := range comp.Members {
		m := &comp.Members[j]
		if m.Adopt == nil {
			continue
		}
		adopts = true
		d := dataFor(comp, m, refs)
		if len(v.c.Releases) > 0 {
			d.Version = v.c.Releases[0].Version
		}
		mline := m.pos.at("adopt", at(index("members", j)))
		v.adopt(m.Adopt, index(cpath+".members", j)+".adopt", func(rel string) int { return m.pos.at(join("adopt", rel), mline) }, []TemplateData{d})
	}
	if c := comp.Version; c != nil {
		v.versionCall(c, cpath+".version", at("version"), v.samples(comp))
	} else if adopts {
		v.add(at("adopt"), cpath+".version", "must be set when members may be adopted: the call that reads what an adopted member runs (ferry did not start it), like {http: \"http://{{.Address}}/version\", json: {path: version}}")
	}
}

// adopt checks one adopt: exactly one of pid_file and listen.
func (v *validator) adopt(a *Adopt, path string, at func(string) int, samples []TemplateData) {
	if v.unread(FieldAdopt, at(""), path) {
		return
	}
	switch {
	case a.PIDFile == "" && !a.Listen:
		v.add(at(""), path, "needs pid_file (a file holding the process id) or listen: true (the process listening on the member's address)")
	case a.PIDFile != "" && a.Listen:
		v.add(at("listen"), path, "has both pid_file and listen: give one way to find the process")
	case a.PIDFile != "":
		for _, r := range v.render(at("pid_file"), path+".pid_file", a.PIDFile, samples) {
			if strings.TrimSpace(r) == "" {
				v.add(at("pid_file"), path+".pid_file", "renders to an empty path")
				break
			}
		}
	}
}

// versionCall checks a component's version call: an http call with a
// json path (and no value to compare it with) or a pattern, or an exec
// with a pattern; a pattern has exactly one group, the version.
func (v *validator) versionCall(c *Call, path string, line int, samples []TemplateData) {
	v.call(c, path, line, samples, false)
	at := func(rel string) int { return c.pos.at(rel, c.pos.at("", line)) }
	switch {
	case c.TCP != "":
		v.add(at("tcp"), path+".tcp", "a version call reads an answer: use http (json.path or pattern) or exec (pattern)")
	case c.HTTP != "" && c.JSON == nil && c.Pattern == "":
		v.add(at("http"), path, "needs json: {path: FIELD} (the field holding the version) or pattern: a regexp whose one group is the version")
	case c.HTTP != "" && c.JSON != nil && c.Pattern != "":
		v.add(at("pattern"), path, "has both json and pattern: the version comes from one of them")
	case len(c.Exec) > 0 && c.Pattern == "":
		v.add(at("exec"), path+".pattern", "must be set for an exec version call: a regexp whose one group is the version in the command's output")
	}
	if j := c.JSON; j != nil {
		if _, written := c.pos.sub["json.equals"]; written || j.Equals != nil {
			v.add(at("json.equals"), path+".json.equals", "a version call reads the field, it compares nothing")
		}
		if j.EqualsPath != "" {
			v.add(at("json.equals_path"), path+".json.equals_path", "a version call reads the field, it compares nothing")
		}
	}
	if c.Pattern != "" {
		if re, err := regexp.Compile(c.Pattern); err == nil && re.NumSubexp() != 1 {
			v.add(at("pattern"), path+".pattern", "has %d groups: a version pattern has exactly one, the version (write other groups as (?:...))", re.NumSubexp())
		}
	}
}

// maxSamples bounds the members a template is rendered for.
const maxSamples = 32

// samples is the template data a per-member string is checked with:
// one member of each distinct set of vars, so that {{.Vars.x}} is
// checked against every member without rendering for all of them.
func (v *validator) samples(comp *Component) []TemplateData {
	refs := memberRefs(comp)
	version := "0.0.0"
	if len(v.c.Releases) > 0 && v.c.Releases[0].Version != "" {
		version = v.c.Releases[0].Version
	}
	var out []TemplateData
	seen := map[string]bool{}
	for j := range comp.Members {
		m := &comp.Members[j]
		if v.suspect(comp, j) {
			continue
		}
		sig := strings.Join(sortedKeys(m.Vars), "\x00")
		if seen[sig] {
			continue
		}
		seen[sig] = true
		d := dataFor(comp, m, refs)
		d.Version, d.Pin = version, version
		out = append(out, d)
		if len(out) == maxSamples {
			break
		}
	}
	return out
}

// suspect reports whether member j of comp has a misspelt key (Parse
// found adress for address): its fields may be empty for that reason
// alone, so templates are not checked with its data.
func (v *validator) suspect(comp *Component, j int) bool {
	if len(v.c.suspect) == 0 {
		return false
	}
	for i := range v.c.Components {
		if &v.c.Components[i] == comp {
			return v.c.suspect[index(index("components", i)+".members", j)]
		}
	}
	return false
}

// clusterSample is the data a cluster check is checked with.
func (v *validator) clusterSample(comp *Component) []TemplateData {
	first := -1
	for j := range comp.Members {
		if !v.suspect(comp, j) {
			first = j
			break
		}
	}
	if first < 0 {
		return nil
	}
	d := dataFor(comp, nil, memberRefs(comp))
	d.Any = comp.Members[first].Address
	if len(v.c.Releases) > 0 {
		d.Version = v.c.Releases[0].Version
		d.Pin = d.Version
	}
	return []TemplateData{d}
}

// render checks that s renders for every sample and returns what it
// renders to for each; nil after a problem.
func (v *validator) render(line int, path, s string, samples []TemplateData) []string {
	if !IsTemplate(s) {
		return []string{s}
	}
	if len(samples) == 0 {
		if _, err := parseTemplate(s); err != nil {
			v.add(line, path, "%v", err)
		}
		return nil
	}
	out := make([]string, 0, len(samples))
	for _, d := range samples {
		r, err := Render(s, d)
		if err != nil {
			reason := err.Error()
			_, bound := errBound(err)
			if d.Name != "" && (len(samples) > 1 || bound) {
				reason += " (for member " + d.Name + ")"
			}
			v.add(line, path, "%s", reason)
			return nil
		}
		out = append(out, r)
		if !IsTemplate(s) {
			break
		}
	}
	return out
}

// runFiles checks a component's files: paths, modes, count, and that
// each content renders, within the size a file may have, for the
// members.
func (v *validator) runFiles(r *Run, cpath string, rline int, samples []TemplateData) {
	if len(r.Files) == 0 {
		return
	}
	at := func(rel string) int { return r.pos.at(rel, rline) }
	if v.unread(FieldRunFiles, at("files"), cpath+".run.files") {
		return
	}
	if len(r.Files) > memberfile.MaxFiles {
		v.add(at("files"), cpath+".run.files", "%d files, more than %d", len(r.Files), memberfile.MaxFiles)
	}
	seen := map[string]bool{}
	for i, f := range r.Files {
		rel, p := index("files", i), index(cpath+".run.files", i)
		if err := memberfile.CheckPath(f.Path); err != nil {
			v.add(at(rel+".path"), p+".path", "%v", err)
		} else if seen[f.Path] {
			v.add(at(rel+".path"), p+".path", "%s is given twice", f.Path)
		}
		seen[f.Path] = true
		if err := memberfile.CheckMode(fs.FileMode(f.Mode)); err != nil {
			v.add(at(rel+".mode"), p+".mode", "%v", err)
		}
		for _, out := range v.render(at(rel+".content"), p+".content", f.Content, samples) {
			if len(out) > memberfile.MaxBytes {
				v.add(at(rel+".content"), p+".content", "%d bytes, more than %d", len(out), memberfile.MaxBytes)
				break
			}
		}
	}
	for i, f := range r.Files {
		for dir := path.Dir(f.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if seen[dir] {
				v.add(at(index("files", i)+".path"), index(cpath+".run.files", i)+".path",
					"%s is a file (another run.files entry), it cannot also be the directory of %s", dir, f.Path)
				break
			}
		}
	}
}

func (v *validator) check(ch *Check, path string, line int, samples []TemplateData, cluster bool) {
	v.defTimeout = DefaultCheckTimeout
	v.call(&ch.Call, path, line, samples, cluster)
	v.defTimeout = 0
	at := func(rel string) int { return ch.pos.at(rel, line) }
	v.within(at("interval"), path+".interval", ch.Interval, checkIntervalRange)
	v.count(at("success_threshold"), path+".success_threshold", ch.SuccessThreshold, successRange)
	v.count(at("failure_threshold"), path+".failure_threshold", ch.FailureThreshold, failureRange)
}

// call checks one http request, tcp dial or command.
func (v *validator) call(c *Call, path string, line int, samples []TemplateData, cluster bool) {
	line = c.pos.at("", line)
	at := func(rel string) int { return c.pos.at(rel, line) }
	var kinds []string
	if c.HTTP != "" {
		kinds = append(kinds, "http")
	}
	if c.TCP != "" {
		kinds = append(kinds, "tcp")
	}
	if len(c.Exec) > 0 {
		kinds = append(kinds, "exec")
	}
	switch len(kinds) {
	case 0:
		if _, written := c.pos.keys["exec"]; written {
			v.add(at("exec"), path+".exec", "must not be empty: the program, then its arguments")
		} else {
			v.add(line, path, "needs one of http, tcp or exec")
		}
	case 1:
	default:
		v.add(at(kinds[1]), path, "has both %s and %s: a call is exactly one of http, tcp or exec", kinds[0], kinds[1])
	}
	hint := ""
	if cluster && memberFieldRE.MatchString(c.HTTP+c.TCP) {
		hint = " (a cluster check has no member of its own: .Any is the address of one that answers)"
	}

	if c.HTTP != "" {
		for _, u := range v.render(at("http"), path+".http", c.HTTP, samples) {
			if err := checkURL(u); err != nil {
				v.add(at("http"), path+".http", "%v%s", err, hint)
				break
			}
		}
		if !httpMethods[c.Method] {
			v.add(at("method"), path+".method", "unknown method %q; known: %s", c.Method, strings.Join(sortedKeys(httpMethods), ", "))
		}
		for _, k := range sortedKeys(c.Headers) {
			p := join(path+".headers", k)
			if !headerNameRE.MatchString(k) {
				v.add(at(join("headers", k)), p, "%q is not a header name", k)
			}
			for _, r := range v.render(at(join("headers", k)), p, c.Headers[k], samples) {
				if strings.ContainsAny(r, "\r\n") {
					v.add(at(join("headers", k)), p, "a header value cannot hold a line break")
					break
				}
			}
		}
		v.render(at("body"), path+".body", c.Body, samples)
		if c.ExpectStatus != 0 && (c.ExpectStatus < 100 || c.ExpectStatus > 599) {
			v.add(at("expect_status"), path+".expect_status", "%d is not an HTTP status (100 to 599)", c.ExpectStatus)
		}
		if c.JSON != nil && c.JSON.Path == "" {
			v.add(at("json.path"), path+".json.path", "must be set: the dotted path of the field to compare")
		}
		if j := c.JSON; j != nil {
			if _, written := c.pos.sub["json.equals"]; j.EqualsPath != "" && (written || j.Equals != nil) {
				v.add(at("json.equals_path"), path+".json", "has both equals and equals_path: compare the field with a value or with another field")
			}
			if s, ok := j.Equals.(string); ok {
				v.render(at("json.equals"), path+".json.equals", s, samples)
			}
		}
	} else {
		for _, k := range []struct {
			key string
			set bool
		}{{"method", c.Method != ""}, {"body", c.Body != ""}, {"headers", len(c.Headers) > 0},
			{"expect_status", c.ExpectStatus != 0}, {"json", c.JSON != nil}} {
			if k.set {
				v.add(at(k.key), path+"."+k.key, "applies to http calls only")
			}
		}
	}
	if c.Pattern != "" {
		if _, err := regexp.Compile(c.Pattern); err != nil {
			v.add(at("pattern"), path+".pattern", "not a regular expression (RE2): %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		} else if c.TCP != "" {
			v.add(at("pattern"), path+".pattern", "applies to http and exec calls only (a tcp call has no answer to match)")
		}
	}

	if c.TCP != "" {
		for _, r := range v.render(at("tcp"), path+".tcp", c.TCP, samples) {
			if err := checkHostPort(r); err != nil {
				v.add(at("tcp"), path+".tcp", "%v%s", err, hint)
				break
			}
		}
	}

	for i, a := range c.Exec {
		rs := v.render(at(index("exec", i)), index(path+".exec", i), a, samples)
		if i == 0 {
			for _, r := range rs {
				if strings.TrimSpace(r) == "" {
					v.add(at(index("exec", i)), index(path+".exec", i), "must name the program to run")
					break
				}
			}
		}
	}

	r := callTimeoutRange
	r.def = DefaultHookTimeout.D()
	if v.defTimeout > 0 {
		r.def = v.defTimeout.D()
	}
	v.within(at("timeout"), path+".timeout", c.Timeout, r)
	if u := c.Undo; u != nil {
		switch {
		case !v.undoOK:
			v.add(at("undo"), path+".undo", "undo applies only to the hooks that change something for a while: pre_upgrade, pre_phase, pre_stop")
		case u.Undo != nil:
			v.add(u.pos.at("undo", at("undo")), path+".undo.undo", "an undo has no undo of its own")
		default:
			v.undoOK = false
			v.call(u, path+".undo", at("undo"), samples, cluster)
			v.undoOK = true
		}
	}
}

func (v *validator) releases() {
	c := v.c
	if len(c.Releases) == 0 {
		v.add(c.pos.at("releases"), "releases", "at least one release is needed")
		return
	}
	seen := map[string]int{}
	for i := range c.Releases {
		r := &c.Releases[i]
		path := index("releases", i)
		line := r.pos.at("", c.pos.at(path))
		at := func(rel string) int { return r.pos.at(rel, line) }
		switch {
		case r.Version == "":
			v.add(at("version"), path+".version", "must be set")
		case !IsVersion(r.Version):
			v.add(at("version"), path+".version", "%q is not a version: MAJOR.MINOR.PATCH with an optional -suffix, like 1.2.3 or 2.0.0-rc1", r.Version)
		default:
			if first, dup := seen[r.Version]; dup {
				v.add(at("version"), path+".version", "duplicate release %q (also releases[%d])", r.Version, first)
			} else {
				seen[r.Version] = i
			}
		}
		if r.RequiresFerry != "" && !IsVersion(r.RequiresFerry) {
			v.add(at("requires_ferry"), path+".requires_ferry", "%q is not a version: the oldest ferry release (MAJOR.MINOR.PATCH) that understands release %s", truncate(r.RequiresFerry, 70), r.Version)
		}
		self := IsVersion(r.Version)
		for j, p := range r.UpgradeFrom {
			switch {
			case !IsVersionPattern(p):
				v.add(at(index("upgrade_from", j)), index(path+".upgrade_from", j),
					"%q is not a version (1.2.3) or an x-range (1.2.x, 1.x, *)", p)
			case self && p == r.Version:
				v.add(at(index("upgrade_from", j)), index(path+".upgrade_from", j),
					"%q is this release itself: a release cannot upgrade from itself (a self-referencing catalog); list the versions before it", p)
			case self && IsVersion(p) && CompareVersions(p, r.Version) > 0:
				v.add(at(index("upgrade_from", j)), index(path+".upgrade_from", j),
					"%q is newer than %s: going from it to %s is a downgrade, which %s's downgrade_to says; list older versions here", p, r.Version, r.Version, p)
			}
		}
		for j, p := range r.DowngradeTo {
			switch {
			case !IsVersionPattern(p):
				v.add(at(index("downgrade_to", j)), index(path+".downgrade_to", j),
					"%q is not a version (1.2.3) or an x-range (1.2.x, 1.x, *)", p)
			case self && p == r.Version:
				v.add(at(index("downgrade_to", j)), index(path+".downgrade_to", j),
					"%q is this release itself: a release cannot go back to itself (a self-referencing catalog); list the earlier patches it may go back to", p)
			case IsVersion(p) && c.Release(p) == nil:
				v.add(at(index("downgrade_to", j)), index(path+".downgrade_to", j),
					"no release %q in releases: there would be nothing to downgrade to", p)
			case self && IsVersion(p) && CompareVersions(p, r.Version) > 0:
				v.add(at(index("downgrade_to", j)), index(path+".downgrade_to", j),
					"%q is newer than %s: going to it is an upgrade, which %s's upgrade_from says; list earlier patches here", p, r.Version, p)
			case IsVersion(r.Version) && !samePatchLine(p, r.Version):
				v.add(at(index("downgrade_to", j)), index(path+".downgrade_to", j),
					"%q is not a patch release of %s's line %s: a downgrade may only go back to an earlier patch of the same MAJOR.MINOR (data written by a newer minor may not be readable by an older one)",
					p, r.Version, patchLine(r.Version))
			}
		}
		v.artifacts(r, path, at)
		v.ferry(r, path, at)
		v.migrations(r, path, at)
		v.flow(r, path, at)
		v.shownStates(r, path, at)
	}
}

// migrations checks a release's migration calls against the component
// they are made to.
func (v *validator) migrations(r *Release, path string, at func(string) int) {
	m := &r.Migrations
	if m.Empty() {
		return
	}
	mpath := path + ".migrations"
	mat := func(rel string) int { return at("migrations." + rel) }
	comp := v.c.Component(m.Component)
	if m.Component == "" || comp == nil {
		v.add(mat("component"), mpath+".component", "must name the component whose members the migration calls are made to%s", knownList(componentNames(v.c)))
		return
	}
	samples := v.clusterSample(comp)
	for _, stage := range []struct {
		key   string
		calls []Call
	}{{"expand", m.Expand}, {"migrate", m.Migrate}, {"finalize", m.Finalize}, {"contract", m.Contract}} {
		for i := range stage.calls {
			rel := index(stage.key, i)
			v.call(&stage.calls[i], mpath+"."+rel, mat(rel), samples, true)
		}
	}
	v.within(mat("deadline"), mpath+".deadline", m.Deadline, migrateDeadlineRange)
	v.within(mat("interval"), mpath+".interval", m.Interval, migrateIntervalRange)
}

// patchLine is a version's MAJOR.MINOR.
func patchLine(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}

// samePatchLine reports whether pattern p only names versions of
// version's MAJOR.MINOR line (1.2.3 or 1.2.x for 1.2.5).
func samePatchLine(p, version string) bool {
	line := patchLine(version)
	if IsVersion(p) {
		return patchLine(p) == line
	}
	return p == line+".x"
}

func (v *validator) artifacts(r *Release, path string, at func(string) int) {
	c := v.c
	for _, name := range sortedKeys(r.Artifacts) {
		a := r.Artifacts[name]
		p := join(path+".artifacts", name)
		rel := join("artifacts", name)
		if name != AnyComponent && c.Component(name) == nil {
			v.add(at(rel), p, "no component %q%s, and not \"*\" (any component)", name, knownList(componentNames(c)))
		}
		switch {
		case a.Path == "" && a.Image == "":
			v.add(at(rel), p, "needs a path (a binary) or an image")
		case a.Path != "" && a.Image != "":
			v.add(at(rel+".image"), p, "has both a path and an image: an artifact is one of them (a binary for the process substrate, an image for kubernetes), and its sha256 is that one's")
		case a.Path == "" && v.rules.Runs == ArtifactBinary:
			v.add(at(rel), p+".path", "must be set: the %s substrate runs binaries", c.Substrate)
		case a.Image == "" && v.rules.Runs == ArtifactImage:
			v.add(at(rel), p+".image", "must be set: the %s substrate runs images", c.Substrate)
		}
		v.artifactSums(r, a, p, rel, at)
	}
	var missing []string
	for i := range c.Components {
		if w := c.Components[i].Workload; w != nil && w.Kind == KindNodePool {
			continue // a node's version is its kubelet's: no artifact
		}
		if n := c.Components[i].Name; n != "" {
			if _, ok := r.ArtifactFor(n); !ok {
				missing = append(missing, strconv.Quote(n))
			}
		}
	}
	if len(missing) > 0 {
		noun := "component"
		if len(missing) > 1 {
			noun = "components"
		}
		v.add(at("artifacts"), path+".artifacts", "no artifact for %s %s: add one, or a \"*\" entry for any component",
			noun, strings.Join(missing, ", "))
	}
}

// artifactSums checks what every artifact of release r has, a
// member's or ferry's own (rel and p name it): its sha256, its
// signature when the release is signed, an image not pinned twice.
func (v *validator) artifactSums(r *Release, a Artifact, p, rel string, at func(string) int) {
	switch {
	case a.SHA256 == "":
		v.add(at(rel+".sha256"), p+".sha256", "must be set: the artifact's SHA-256, 64 hex digits, checked before it is used")
	case !sha256RE.MatchString(a.SHA256):
		v.add(at(rel+".sha256"), p+".sha256", "must be 64 hex digits (a SHA-256), not %d characters %q", len(a.SHA256), truncate(a.SHA256, 70))
	}
	switch key := v.c.SigningKeyOf(r); {
	case a.Signature != "" && a.Image != "":
		v.add(at(rel+".signature"), p+".signature", "is for a file: an image is checked by its digest (sha256), which ferry pins it to")
	case a.Signature != "" && key == "":
		v.add(at(rel+".signature"), p+".signature", "names a signature but no signing_key says which public key checks it: set signing_key on the release or the description")
	case a.Signature == "" && a.Path != "" && key != "":
		v.add(at(rel), p+".signature", "must be set: the loads of release %s are signed (signing_key %s), and an artifact without a signature would go unchecked", r.Version, key)
	}
	if name, digest, pinned := strings.Cut(a.Image, "@"); pinned {
		// ferry pins the image to sha256 itself (name@sha256:…): a
		// digest written here too is either the same, said twice, or
		// another, and the pull would fail at run time.
		v.add(at(rel+".image"), p+".image", "%q is pinned by digest already (%s): write the image without it (%s) and its digest in sha256, which ferry pins it to",
			truncate(a.Image, 100), truncate(digest, 80), truncate(name, 80))
	}
}

// ferry checks the ferry build a release puts in place first
// (Release.Ferry): a binary for the agents of a substrate that runs
// binaries, an image for the controller of one that runs images; an
// image says no release of its own, so requires_ferry must.
func (v *validator) ferry(r *Release, path string, at func(string) int) {
	a := r.Ferry
	if a == (Artifact{}) {
		return
	}
	p := path + ".ferry"
	switch {
	case a.Path == "" && a.Image == "":
		v.add(at("ferry"), p, "needs a path (the ferry binary the agents re-execute on) or an image (the ferry image the Kubernetes controller's Deployment runs)")
	case a.Path != "" && a.Image != "":
		v.add(at("ferry.image"), p, "has both a path and an image: ferry is a binary for the agents (process substrate) or an image for the controller (kubernetes), and its sha256 is that one's")
	case a.Path != "" && v.rules.Runs == ArtifactImage:
		v.add(at("ferry.path"), p+".path", "the %s substrate runs ferry as its controller's image: name ferry.image (its sha256 the image's digest)", v.c.Substrate)
	case a.Image != "" && v.rules.Runs == ArtifactBinary:
		v.add(at("ferry.image"), p+".image", "the %s substrate runs ferry as a binary: name ferry.path, the binary its agents re-execute on", v.c.Substrate)
	case a.Image != "" && r.RequiresFerry == "":
		v.add(at("ferry.image"), p+".image", "needs requires_ferry on release %s: an image does not say which ferry it is, and the controller moves its own Deployment to it only when it is older than requires_ferry", r.Version)
	}
	v.artifactSums(r, a, p, "ferry", at)
}

// traffic checks the traffic spec.
func (v *validator) traffic() {
	t := v.c.Traffic
	if t == nil {
		return
	}
	line := v.c.pos.at("traffic")
	at := func(rel string) int { return v.c.pos.at("traffic."+rel, line) }
	if len(t.Targets) == 0 && t.Prometheus == nil {
		v.add(line, "traffic", "needs targets (ferry drives requests to them) or prometheus (ferry watches the service's own traffic)")
	}
	for i, u := range t.Targets {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.add(at(index("targets", i)), index("traffic.targets", i), "%q is not an http(s) URL", truncate(u, 70))
		} else if err := checkURLPort(truncate(u, 70), p); err != nil {
			v.add(at(index("targets", i)), index("traffic.targets", i), "%v", err)
		}
	}
	if len(t.Targets) > 0 && len(t.Requests) == 0 {
		v.add(at("requests"), "traffic.requests", "at least one request is needed to drive traffic to the targets")
	}
	for i := range t.Requests {
		r := &t.Requests[i]
		path := index("traffic.requests", i)
		rat := func(rel string) int { return at(index("requests", i) + "." + rel) }
		if r.Path == "" || !strings.HasPrefix(r.Path, "/") {
			v.add(rat("path"), path+".path", "must be set and start with '/': the request's path (a template)")
		}
		for _, f := range []struct{ key, tmpl string }{{"path", r.Path}, {"body", r.Body}} {
			if err := checkTrafficTemplate(f.tmpl); err != nil {
				v.add(rat(f.key), path+"."+f.key, "%v", err)
			}
		}
		if !headerNameRE.MatchString(r.Method) {
			v.add(rat("method"), path+".method", "%q is not an HTTP method", r.Method)
		}
		if r.Share <= 0 || r.Share > maxShare {
			v.add(rat("share"), path+".share", "%g is not above 0 and at most %d: the request's share of the mix (its share over the sum of the shares); write one in that range, or leave it out for the default 1", r.Share, maxShare)
		}
		if r.ExpectStatus != 0 && (r.ExpectStatus < 100 || r.ExpectStatus > 599) {
			v.add(rat("expect_status"), path+".expect_status", "%d is not an HTTP status", r.ExpectStatus)
		}
		if r.Writes && r.Verify {
			v.add(rat("verify"), path, "a request either writes (.Key = .Value) or verifies a read (.WrittenValue), not both")
		}
	}
	if t.Rate <= 0 || t.Rate > maxRate {
		v.add(at("rate"), "traffic.rate", "%g is not above 0 and at most %d: the requests per second of all clients together; write one in that range, or leave it out for the default %g", t.Rate, maxRate, DefaultTrafficRate)
	}
	v.count(at("concurrency"), "traffic.concurrency", t.Concurrency, concurrencyRange)
	v.within(at("timeout"), "traffic.timeout", t.Timeout, trafficTimeoutRange)
	v.within(at("baseline"), "traffic.baseline", t.Baseline, baselineRange)
	v.within(at("after"), "traffic.after", t.After, afterRange)
	vd := &t.Verdict
	if vd.Alpha <= 0 || vd.Alpha >= 0.5 {
		v.add(at("verdict.alpha"), "traffic.verdict.alpha", "%g is not between 0 and 0.5: the significance level of the latency test; write one in that range (e.g. 0.01), or leave it out for the default %g", vd.Alpha, DefaultAlpha)
	}
	if vd.P99Ratio < 1 || vd.P99Ratio > maxP99Ratio {
		v.add(at("verdict.p99_ratio"), "traffic.verdict.p99_ratio", "%g is not from 1 to %d: how many times the baseline's p99 a window's may be; write one in that range (e.g. 1.5), or leave it out for the default %g", vd.P99Ratio, maxP99Ratio, DefaultP99Ratio)
	}
	v.count(at("verdict.min_requests"), "traffic.verdict.min_requests", vd.MinRequests, minRequestsRange)
	if pr := t.Prometheus; pr != nil {
		if p, err := url.Parse(pr.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.add(at("prometheus.url"), "traffic.prometheus.url", "%q is not an http(s) URL", truncate(pr.URL, 70))
		} else if err := checkURLPort(truncate(pr.URL, 70), p); err != nil {
			v.add(at("prometheus.url"), "traffic.prometheus.url", "%v", err)
		}
		if strings.TrimSpace(pr.Latency) == "" && strings.TrimSpace(pr.Errors) == "" {
			v.add(at("prometheus"), "traffic.prometheus", "needs a latency query, an errors query, or both")
		}
		v.within(at("prometheus.step"), "traffic.prometheus.step", pr.Step, promStepRange)
	}
	if c := t.Control; c != nil {
		if p, err := url.Parse(c.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.add(at("control.url"), "traffic.control.url", "%q is not an http(s) URL: the control's request, on a path the upgrade does not touch", truncate(c.URL, 70))
		} else if err := checkURLPort(truncate(c.URL, 70), p); err != nil {
			v.add(at("control.url"), "traffic.control.url", "%v", err)
		}
		if c.Rate <= 0 || c.Rate > maxControlRate {
			v.add(at("control.rate"), "traffic.control.rate", "%g is not above 0 and at most %d: the control's requests per second; write one in that range, or leave it out for the default %g", c.Rate, maxControlRate, DefaultControlRate)
		}
	}
}

func (v *validator) policy() {
	c := v.c
	v.within(c.pos.at("policy.undo_deadline"), "policy.undo_deadline", c.Policy.UndoDeadline, undoDeadlineRange)
	if !contains(onImpacts, c.Policy.OnImpact) {
		v.add(c.pos.at("policy.on_impact"), "policy.on_impact", "unknown policy %q; known: %s", c.Policy.OnImpact, strings.Join(onImpacts, ", "))
	}
	if !contains(onFailures, c.Policy.OnFailure) {
		v.add(c.pos.at("policy.on_failure"), "policy.on_failure", "unknown policy %q; known: %s", c.Policy.OnFailure, strings.Join(onFailures, ", "))
	}
	if !contains(finalizes, c.Policy.Finalize) {
		v.add(c.pos.at("policy.finalize"), "policy.finalize", "unknown policy %q; known: %s", c.Policy.Finalize, strings.Join(finalizes, ", "))
	}
	v.within(c.pos.at("policy.tick"), "policy.tick", c.Policy.Tick, tickRange)
	v.windows()
}

// maxWindows bounds a policy's windows: a week has room for fewer.
const maxWindows = 64

// windows reads the policy's maintenance windows, each problem at its
// line with the field's path (policy.windows[1].zone).
func (v *validator) windows() {
	c := v.c
	c.Policy.windows = nil
	if len(c.Policy.Windows) > maxWindows {
		v.add(c.pos.at("policy.windows"), "policy.windows", "%d windows: at most %d", len(c.Policy.Windows), maxWindows)
		return
	}
	set := make(window.Set, 0, len(c.Policy.Windows))
	ok := true
	for i, w := range c.Policy.Windows {
		path := fmt.Sprintf("policy.windows[%d]", i)
		parsed, errs := window.Parse(w.Days, w.Start, w.End, w.Zone)
		ok = ok && len(errs) == 0
		for _, e := range errs {
			v.add(c.pos.at(path+"."+e.Field), path+"."+e.Field, "%s", e.Reason)
		}
		set = append(set, parsed)
	}
	if len(set) > 0 && ok {
		c.Policy.windows = set
	}
}

// checkHostPort checks a host:port with a host and a numeric port.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port", s)
	}
	if host == "" {
		return fmt.Errorf("%q has no host: write host:port", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
	}
	return nil
}

// checkURL checks a rendered http URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https"):
	case err != nil && strings.Contains(s, "://"):
		return fmt.Errorf("%q is not a URL", s)
	default:
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	return checkURLPort(s, u)
}

// checkURLPort refuses a URL whose port is not from 1 to 65535 (Go's
// URL parser takes any digits; the dial fails only at run time).
func checkURLPort(s string, u *url.URL) error {
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: the port must be a number from 1 to 65535, not %s", s, truncate(p, 20))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hostNames(c *Cluster) []string {
	var out []string
	for _, h := range c.Hosts {
		out = append(out, h.Name)
	}
	return out
}

func componentNames(c *Cluster) []string {
	var out []string
	for _, comp := range c.Components {
		out = append(out, comp.Name)
	}
	return out
}

// knownList formats " (known: a, b)", or "" for an empty list; long
// lists are cut.
func knownList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var out []string
	for _, n := range names {
		if n != "" {
			out = append(out, truncate(n, 40))
		}
	}
	if len(out) == 0 {
		return ""
	}
	sort.Strings(out)
	out = slices.Compact(out)
	if len(out) > 10 {
		out = append(out[:10], "...")
	}
	return " (known: " + strings.Join(out, ", ") + ")"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// within checks a duration against its range; false when it is out.
func (v *validator) within(line int, path string, d Duration, r durRange) bool {
	if d.D() >= r.min && d.D() <= r.max {
		return true
	}
	hint := ""
	if r.def > 0 {
		hint = ", or leave it out for the default " + fmtDur(r.def)
	}
	v.add(line, path, "%s is not from %s to %s: %s; write one in that range%s", fmtDur(d.D()), fmtDur(r.min), fmtDur(r.max), r.what, hint)
	return false
}

// count checks a count against its range.
func (v *validator) count(line int, path string, n int, r countRange) {
	if n >= r.min && n <= r.max {
		return
	}
	v.add(line, path, "%d is not from %d to %d: %s; write one in that range, or leave it out for the default %d", n, r.min, r.max, r.what, r.def)
}

// maxNameLen bounds the names that have no pattern of their own (the
// cluster's, the hosts'): a DNS name's length.
const maxNameLen = 253

// printable reports whether s has no control characters: names end up
// in messages, logs and file names.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return false
		}
	}
	return utf8.ValidString(s)
}
