package ssh

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
)

const badDescription = `cluster: t
substrate: ssh
hosts:
  - {name: h1, ssh: {address: "10.0.0.1:22", known_hosts: known_hosts, identity_files: [id]}}
  - {name: h2, ssh: {address: "10.0.0.2", identity_files: [""], max_sessions: 99, user: "-oProxyCommand=x", connect_timeout: 10m}}
  - {name: h3, agent: "10.0.0.3:7101"}
components:
  - name: kv
    order: 1
    members:
      - {name: kv-1, host: h1, address: "10.0.0.1:8101"}
      - {name: kv-2, host: h2, address: "10.0.0.2:8101", adopt: {listen: true}}
      - {name: kv-3, host: h3, address: "10.0.0.3:8101"}
    run:
      restart: on-failure
      files: [{path: kv.conf, content: x}]
    version: {http: "http://{{.Address}}/version", json: {path: version}}
    commands:
      start: [systemctl, start, "kv@{{.Nme}}"]
      stop: []
      sudo: [start, reboot, start]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/kv, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`

// TestDescriptionRules: the ssh substrate's own fields are checked with
// file, line and key, every problem at once: an address without a port,
// no known_hosts (no mode accepts any key), an empty identity file, a
// user that would be an option, max_sessions and connect_timeout out of
// range, an agent's keys on an ssh host, adoption by listening address,
// a restart policy no agent carries out, run.files, a template that does
// not render, an empty command, an unknown or repeated sudo operation.
func TestDescriptionRules(t *testing.T) {
	_, err := config.Parse([]byte(badDescription), "t.yaml")
	var es *config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse = %v, want *config.Errors", err)
	}
	var got []string
	for _, p := range es.Problems {
		got = append(got, p.String())
	}
	want := []string{
		`t.yaml:5: hosts[1].ssh.address: "10.0.0.2" is not host:port`,
		"t.yaml:5: hosts[1].ssh.known_hosts: must be set: the known_hosts file that holds host h2's key (ferry never accepts a key it cannot check; ssh-keyscan writes the line, to be checked out of band)",
		"t.yaml:5: hosts[1].ssh.identity_files[0]: must not be empty: a private key file (mode 0600)",
		`t.yaml:5: hosts[1].ssh.user: "-oProxyCommand=x" is not a user name`,
		"t.yaml:5: hosts[1].ssh.max_sessions: 99 is out of range: 1 to 64 (sshd's own MaxSessions is 10 by default), or 0 for 4",
		"t.yaml:5: hosts[1].ssh.connect_timeout: 10m is not from 500ms to 5m",
		"t.yaml:6: hosts[2].agent: applies to the process substrate's agents: ferry reaches an ssh host through its sshd (ssh.address)",
		"t.yaml:6: hosts[2].ssh: must be set for the ssh substrate: {address: HOST:22, known_hosts: FILE} (and identity_files, or an SSH agent)",
		"t.yaml:14: components[0].run.restart: applies to the process substrate's agents",
		"components[0].members[1].adopt.listen: applies to the process substrate's agents, which read the host's /proc: on ssh, give pid_file",
		"t.yaml:19: components[0].commands.start[2]: template: no field Nme",
		"t.yaml:20: components[0].commands.stop: must name a program",
		`t.yaml:21: components[0].commands.sudo[1]: unknown operation "reboot"; known: start, stop, status, version, logs, install`,
		"t.yaml:21: components[0].commands.sudo[2]: start is named twice",
		"components[0].run.files: applies to the process substrate (its agent writes them)",
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("missing: %s", w)
		}
	}
	if t.Failed() {
		t.Logf("problems:\n%s", all)
	}
}

// TestDescriptionAccepted: a description of two ssh hosts with a
// component's own commands is valid, and its driver is built from it
// with each member's commands rendered.
func TestDescriptionAccepted(t *testing.T) {
	desc := `cluster: t
substrate: ssh
hosts:
  - {name: h1, ssh: {address: "10.0.0.1:22", known_hosts: /dev/null, user: ferry}}
components:
  - name: kv
    order: 1
    strategy: {type: canary}
    members: [{name: kv-1, host: h1, address: "10.0.0.1:8101"}]
    commands: {start: [systemctl, start, "kv@{{.Name}}"], status: [systemctl, is-active, --quiet, "kv@{{.Name}}"], sudo: [start]}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/kv, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`
	c, err := config.Parse([]byte(desc), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := newFromDescription(c, substrateOptions())
	if err != nil {
		t.Fatal(err)
	}
	dd := d.(*Driver)
	defer dd.Close()
	cm := dd.cmds["kv-1"]
	if strings.Join(cm.Start, " ") != "systemctl start kv@kv-1" || !cm.Sudo[OpStart] || cm.Sudo[OpStatus] || cm.Stop != nil {
		t.Errorf("kv-1's commands: %+v", cm)
	}
	if h := dd.hosts["h1"].h; h.User != "ferry" || h.Dir != DefaultDir || h.MaxSessions != DefaultMaxSessions || h.ConnectTimeout != DefaultConnectTimeout {
		t.Errorf("h1: %+v", h)
	}
}

func substrateOptions() substrate.Options { return substrate.Options{} }

// TestRunOnForms: a host command's run_on is a host's name, or the
// host of a component's role holder ({active: coord}, found as the
// command runs: RenderHostCommand leaves it to the caller); a host
// unknown, a component without a role check, or both at once are
// refused at their line.
func TestRunOnForms(t *testing.T) {
	desc := func(lock, unlock string) string {
		return `cluster: t
substrate: ssh
hosts:
  - {name: c0, ssh: {address: "10.0.0.1:22", known_hosts: /dev/null}}
  - {name: c1, ssh: {address: "10.0.0.2:22", known_hosts: /dev/null}}
host_defaults:
  commands:
    lock: {argv: [system, host-lock, "{{.Host}}"], run_on: ` + lock + `}
    unlock: {argv: [system, host-unlock, "{{.Host}}"], run_on: ` + unlock + `}
components:
  - name: coord
    order: 1
    strategy: {type: active-standby}
    members: [{name: coord-0, host: c0, address: "10.0.0.1:8301"}, {name: coord-1, host: c1, address: "10.0.0.2:8301"}]
    role: {name: active, check: {http: "http://{{.Address}}/role"}}
    hooks: {switchover: [{http: "http://{{.Any}}/handover?to={{.To}}", method: POST}]}
  - name: kv
    order: 2
    strategy: {type: canary}
    members: [{name: kv-0, host: c0, address: "10.0.0.1:8101"}]
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/kv, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`
	}
	c, err := config.Parse([]byte(desc("{active: coord}", "c0")), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lock, unlock := c.HostCommandOf("c1", config.HostLock), c.HostCommandOf("c1", config.HostUnlock)
	if _, on, err := c.RenderHostCommand("c1", lock, "2.0.0"); err != nil || on != "" || lock.RunOn.Active != "coord" {
		t.Errorf("run_on: {active: coord} renders on %q (%v), %+v; want \"\" (found as it runs)", on, err, lock.RunOn)
	}
	if _, on, err := c.RenderHostCommand("c1", unlock, "2.0.0"); err != nil || on != "c0" {
		t.Errorf("run_on: c0 renders on %q (%v), want c0", on, err)
	}
	for _, tc := range []struct{ lock, unlock, want string }{
		{"{active: kv}", "c9", `t.yaml:8: host_defaults.commands.lock.run_on.active: component kv has no role check: nothing would say which of its members' hosts to run on
t.yaml:9: host_defaults.commands.unlock.run_on: "c9" is not a host of the description (known: c0, c1)`},
		{"{active: nope}", "{host: c0, active: coord}", `t.yaml:8: host_defaults.commands.lock.run_on.active: no component "nope" (known: coord, kv)
t.yaml:9: host_defaults.commands.unlock.run_on: names a host (c0) and a role's holder (active: coord): one of the two`},
	} {
		_, err := config.Parse([]byte(desc(tc.lock, tc.unlock)), "t.yaml")
		if err == nil || err.Error() != tc.want {
			t.Errorf("run_on %s / %s: %v\nwant:\n%s", tc.lock, tc.unlock, err, tc.want)
		}
	}
}
