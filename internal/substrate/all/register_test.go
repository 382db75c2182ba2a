package all_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// hostsOverSSH is a substrate registered by this file alone, as a new
// substrate's package would register itself: hosts reached over SSH
// (the host's agent: key is its sshd), binaries, hosts it can lock, no
// cluster up, no adoption. Nothing outside this file knows it.
const hostsOverSSH = "ssh-hosts"

func init() {
	substrate.Register(substrate.Substrate{
		Name: hostsOverSSH,
		Can:  substrate.Can(substrate.StartStop, substrate.LockHost),
		Rules: config.SubstrateRules{
			Runs: config.ArtifactBinary,
			Host: func(n config.Node, h *config.Host) {
				if h.Agent == "" {
					n.Add("agent", "must be set for the %s substrate: the host:port of the host's sshd", n.Substrate())
				}
			},
		},
		New: func(*config.Cluster, substrate.Options) (driver.Driver, error) {
			return nil, errors.New("the test's substrate builds no driver")
		},
	})
}

const sshDescription = `cluster: t
substrate: ssh-hosts
hosts:
  - {name: h1, agent: 10.0.0.1:22}
  - {name: h2}
components:
  - name: kv
    order: 1
    members:
      - {name: kv-1, host: h1, address: 10.0.0.1:8101}
      - {name: kv-2, host: h1, address: 10.0.0.1:8102}
      - {name: kv-3, host: h1, address: 10.0.0.1:8103}
    workload: {kind: StatefulSet, name: kv}
    adopt: {listen: true}
    version: {http: "http://{{.Address}}/version", json: {path: version}}
    run:
      files: [{path: conf/kv.conf, content: x}]
releases:
  - version: 1.0.0
    artifacts: {"*": {image: registry.local/kv:1.0.0, sha256: "3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e"}}
`

// TestANewSubstrateIsOneRegistration: a substrate registered from one
// file is validated by its own rules (its host rule, with file:line),
// by what it runs (binaries), refuses the keys of the others by their
// readers' names, and is refused by capability what it cannot do; it
// joins the list an unknown substrate is answered with.
func TestANewSubstrateIsOneRegistration(t *testing.T) {
	_, err := config.Parse([]byte(sshDescription), "t.yaml")
	var got []string
	var es *config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse = %v, want *config.Errors", err)
	}
	for _, p := range es.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"t.yaml:5: hosts[1].agent: must be set for the ssh-hosts substrate: the host:port of the host's sshd",
		"t.yaml:13: components[0].workload: applies to the kubernetes substrate only (this description's is ssh-hosts)",
		"t.yaml:14: components[0].adopt: applies to the process and ssh substrates only (this description's is ssh-hosts)",
		"t.yaml:17: components[0].run.files: applies to the process substrate only (this description's is ssh-hosts)",
		`t.yaml:20: releases[0].artifacts["*"].path: must be set: the ssh-hosts substrate runs binaries`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	c := &config.Cluster{Substrate: hostsOverSSH}
	if err := substrate.Require(c, substrate.LockHost); err != nil {
		t.Errorf("Require(lock-host) = %v, want nil", err)
	}
	if err := substrate.Require(c, substrate.ClusterUp); err == nil || err.Error() != "substrate ssh-hosts cannot bring a cluster up and down (capability cluster-up)" {
		t.Errorf("Require(cluster-up) = %v", err)
	}
	if _, err := substrate.Lookup("vm"); err == nil || !strings.Contains(err.Error(), "this build has: kubernetes, process, ssh, ssh-hosts") {
		t.Errorf("Lookup(vm) = %v, want the list with ssh-hosts", err)
	}
}
