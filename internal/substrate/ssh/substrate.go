package ssh

import (
	"cmp"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Name is the substrate's name in a description.
const Name = "ssh"

// Capabilities is what the ssh substrate can do: start and stop
// members from nothing (so a cluster can be brought up and down),
// adopt a process found by its pid file, collect members' output, and
// run a host's own commands (hosts[].commands): its lock and unlock,
// its reinstall and data migration. It does not find members at run
// time or journal changes of its own.
var Capabilities = substrate.Can(substrate.StartStop, substrate.ClusterUp, substrate.Adopt, substrate.Output, substrate.LockHost, substrate.ReinstallHost, substrate.BackupOnHost)

func init() {
	substrate.Register(substrate.Substrate{
		Name: Name,
		Can:  Capabilities,
		Rules: config.SubstrateRules{
			Runs:  config.ArtifactBinary,
			Reads: []config.Field{config.FieldHostSSH, config.FieldCommands, config.FieldHostCommands},
			Unread: map[config.Field]string{
				config.FieldRunFiles: "applies to the process substrate (its agent writes them); on ssh, a start command may put a member's files in place (FERRY_DIR is its directory)",
			},
			Host:      checkHost,
			Component: checkComponent,
		},
		New: newFromDescription,
	})
}

// Bounds of a host's ssh settings.
const (
	maxSessionsLimit  = 64
	minConnectTimeout = 500 * time.Millisecond
	maxConnectTimeout = 5 * time.Minute
)

// checkHost checks a host's ssh: its sshd's address and the
// known_hosts file are required (there is no mode that accepts any
// key); an agent's keys do not apply.
func checkHost(n config.Node, h *config.Host) {
	for _, k := range []struct {
		set bool
		key string
	}{{h.Agent != "", "agent"}, {h.TokenFile != "", "token_file"}, {h.TLS != nil, "tls"}} {
		if k.set {
			n.Add(k.key, "applies to the process substrate's agents: ferry reaches an ssh host through its sshd (ssh.address)")
		}
	}
	s := h.SSH
	if s == nil {
		n.Add("ssh", "must be set for the ssh substrate: {address: HOST:22, known_hosts: FILE} (and identity_files, or an SSH agent)")
		return
	}
	switch {
	case s.Address == "":
		n.Add("ssh.address", "must be set: the host:port of the host's sshd")
	default:
		if err := config.CheckHostPort(s.Address); err != nil {
			n.Add("ssh.address", "%v", err)
		}
	}
	if s.KnownHosts == "" {
		n.Add("ssh.known_hosts", "must be set: the known_hosts file that holds host %s's key (ferry never accepts a key it cannot check; ssh-keyscan writes the line, to be checked out of band)", h.Name)
	} else {
		checkPath(n, "ssh.known_hosts", s.KnownHosts)
	}
	for i, f := range s.IdentityFiles {
		key := fmt.Sprintf("ssh.identity_files[%d]", i)
		if f == "" {
			n.Add(key, "must not be empty: a private key file (mode 0600)")
			continue
		}
		checkPath(n, key, f)
	}
	if s.User != "" && (strings.HasPrefix(s.User, "-") || strings.ContainsAny(s.User, " \t\r\n:@/\x00") || len(s.User) > 64) {
		n.Add("ssh.user", "%q is not a user name", s.User)
	}
	if s.Dir != "" {
		checkPath(n, "ssh.dir", s.Dir)
	}
	if s.MaxSessions < 0 || s.MaxSessions > maxSessionsLimit {
		n.Add("ssh.max_sessions", "%d is out of range: 1 to %d (sshd's own MaxSessions is 10 by default), or 0 for %d", s.MaxSessions, maxSessionsLimit, DefaultMaxSessions)
	}
	if s.ConnectTimeout != 0 { // left out: the default
		n.Within("ssh.connect_timeout", s.ConnectTimeout, minConnectTimeout, maxConnectTimeout, DefaultConnectTimeout, "how long a connection's dial and handshake may take")
	}
}

// checkPath refuses a path no file can have.
func checkPath(n config.Node, key, p string) {
	if strings.ContainsAny(p, "\x00\n\r") {
		n.Add(key, "%q is not a path: no NUL or line break", p)
	}
}

// checkComponent checks a component's commands (each an argv of
// templates, sudo naming operations) and what the substrate cannot do
// for it: adoption by listening address, and a restart policy (no agent
// supervises a member on an ssh host).
func checkComponent(n config.Node, comp *config.Component) {
	if comp.Run.Restart != "" && comp.Run.Restart != "no" {
		n.Add("run.restart", "applies to the process substrate's agents: no agent supervises a member on an ssh host (give a start command under the host's own supervisor, systemd's Restart=, instead)")
	}
	if comp.Adopt != nil && comp.Adopt.Listen {
		n.Add("adopt.listen", "applies to the process substrate's agents, which read the host's /proc: on ssh, give pid_file")
	}
	for j := range comp.Members {
		if a := comp.Members[j].Adopt; a != nil && a.Listen {
			n.Add(fmt.Sprintf("members[%d].adopt.listen", j), "applies to the process substrate's agents, which read the host's /proc: on ssh, give pid_file")
		}
	}
	cm := comp.Commands
	if cm == nil {
		return
	}
	samples := n.Samples(comp)
	for _, c := range []struct {
		key  string
		argv []string
	}{{"start", cm.Start}, {"stop", cm.Stop}, {"status", cm.Status}, {"version", cm.Version}, {"logs", cm.Logs}} {
		if c.argv == nil {
			continue
		}
		if len(c.argv) == 0 || c.argv[0] == "" {
			n.Add("commands."+c.key, "must name a program: an argv such as [systemctl, start, \"kv@{{.Name}}\"] (or leave it out: ferry's helper does it)")
			continue
		}
		for i, a := range c.argv {
			key := fmt.Sprintf("commands.%s[%d]", c.key, i)
			for _, r := range n.Render(key, a, samples) {
				if strings.IndexByte(r, 0) >= 0 {
					n.Add(key, "renders to an argument with a NUL byte")
					break
				}
			}
		}
	}
	seen := map[string]bool{}
	for i, s := range cm.Sudo {
		key := fmt.Sprintf("commands.sudo[%d]", i)
		switch {
		case !slices.Contains(Ops, Op(s)):
			n.Add(key, "unknown operation %q; known: %s", s, opNames())
		case seen[s]:
			n.Add(key, "%s is named twice", s)
		}
		seen[s] = true
	}
}

func opNames() string {
	var s []string
	for _, o := range Ops {
		s = append(s, string(o))
	}
	return strings.Join(s, ", ")
}

// newFromDescription builds the driver for a description's hosts (their
// known_hosts and identity files read now) and its components'
// commands, rendered for each member.
func newFromDescription(c *config.Cluster, _ substrate.Options) (driver.Driver, error) {
	defUser := "root"
	if u, err := user.Current(); err == nil && u.Username != "" {
		defUser = u.Username
	}
	var hosts []Host
	for _, h := range c.Hosts {
		s := h.SSH
		if s == nil {
			return nil, fmt.Errorf("host %s: no ssh: settings", h.Name)
		}
		sh := Host{Name: h.Name, Addr: s.Address, User: cmp.Or(s.User, defUser), KnownHosts: c.ResolvePath(s.KnownHosts),
			Dir: s.Dir, MaxSessions: s.MaxSessions, ConnectTimeout: s.ConnectTimeout.D()}
		for _, f := range s.IdentityFiles {
			sh.IdentityFiles = append(sh.IdentityFiles, c.ResolvePath(f))
		}
		hosts = append(hosts, sh)
	}
	cmds := map[string]Commands{}
	for i := range c.Components {
		comp := &c.Components[i]
		if comp.Commands == nil {
			continue
		}
		for j, d := range c.MembersData(comp) {
			mc, err := renderCommands(comp.Commands, d)
			if err != nil {
				return nil, fmt.Errorf("member %s: %s.commands: %w", comp.Members[j].Name, comp.Name, err)
			}
			cmds[comp.Members[j].Name] = mc
		}
	}
	return New(hosts, cmds)
}

// renderCommands renders a component's commands for one member.
func renderCommands(cm *config.Commands, d config.TemplateData) (Commands, error) {
	out := Commands{Sudo: map[Op]bool{}}
	for _, s := range cm.Sudo {
		out.Sudo[Op(s)] = true
	}
	for _, c := range []struct {
		argv []string
		dst  *[]string
	}{{cm.Start, &out.Start}, {cm.Stop, &out.Stop}, {cm.Status, &out.Status}, {cm.Version, &out.Version}, {cm.Logs, &out.Logs}} {
		if c.argv == nil {
			continue
		}
		r := make([]string, len(c.argv))
		for i, a := range c.argv {
			s, err := config.Render(a, d)
			if err != nil {
				return Commands{}, err
			}
			r[i] = s
		}
		*c.dst = r
	}
	return out, nil
}
