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
