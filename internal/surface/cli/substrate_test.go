package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClusterUpRefusedByCapability: cluster up and down on a
// Kubernetes description are refused by the capability's name, at
// once, before any driver is built (the kubeconfig names an API server
// that does not answer: a driver would wait on it) and before the data
// directory is made.
func TestClusterUpRefusedByCapability(t *testing.T) {
	dir := t.TempDir()
	desc := filepath.Join(dir, "cluster.yaml")
	writeFile(t, desc, readFile(t, filepath.FromSlash("../../../examples/kubernetes/cluster.yaml")))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: x}}]
current-context: c
`)
	data := filepath.Join(dir, ".ferry")
	for _, args := range [][]string{{"cluster", "up", "--version", "1.0.0"}, {"cluster", "down"}} {
		cmd := ferryCmd("", append([]string{"-f", desc, "--data-dir", data}, args...)...)
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
		r := run(t, 30*time.Second, cmd)
		want := "substrate kubernetes cannot bring a cluster up and down (capability cluster-up)"
		if r.code != 1 || !strings.Contains(r.stderr, want) || r.took > 5*time.Second {
			t.Errorf("ferry %s: exit %d after %s, stderr %q; want exit 1 at once saying %q", strings.Join(args, " "), r.code, r.took, r.stderr, want)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the data directory: %v; want it never made (nothing touched)", err)
	}
}

// TestUnknownSubstrateRefusedAtValidate: a substrate this build does
// not have is a bad description, in validate and in every command that
// reads one, with the file:line and the substrates the build has.
func TestUnknownSubstrateRefusedAtValidate(t *testing.T) {
	dir := t.TempDir()
	desc := filepath.Join(dir, "cluster.yaml")
	src := readFile(t, offlineDescription(t, dir))
	if !strings.HasPrefix(src, "cluster:") {
		t.Fatalf("the description does not begin with cluster: %q", src)
	}
	first, rest, _ := strings.Cut(src, "\n")
	writeFile(t, desc, first+"\nsubstrate: vm\n"+rest)
	want := desc + `:2: substrate: unknown substrate "vm"; this build has: kubernetes, process, ssh`
	for _, args := range [][]string{{"validate"}, {"plan", "--to", "2.0.0"}} {
		r := run(t, 30*time.Second, ferryCmd("", append([]string{"-f", desc, "--data-dir", filepath.Join(dir, ".ferry")}, args...)...))
		if r.code != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "not supported") {
			t.Errorf("ferry %s: exit %d, stderr %q; want exit 2 saying %q", args[0], r.code, r.stderr, want)
		}
	}
}
