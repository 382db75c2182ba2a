package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
)

// TestClusterUpIncapable: POST /v1/cluster/up and /down on a substrate
// that cannot bring a cluster up (Kubernetes: its workloads run
// themselves) answer 422 substrate_incapable, by the capability's
// name, before the driver is asked anything: the kubeconfig points at
// a port where nothing listens.
func TestClusterUpIncapable(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: x}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	c, err := config.Load(filepath.FromSlash("../../../examples/kubernetes/cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := substrate.New(c, substrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := LoadOrCreateToken(filepath.Join(dir, "data", TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Cluster: c, Driver: d, Store: st, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	cl := serve(t, s)
	r := cl.do("POST", "/v1/cluster/up", map[string]string{"version": c.Releases[0].Version}).expect(t, "up on kubernetes", 422, CodeIncapable)
	if want := "capability cluster-up"; !strings.Contains(string(r.body), want) {
		t.Errorf("up: %s; want it to name %q", r.body, want)
	}
	cl.do("POST", "/v1/cluster/down", nil).expect(t, "down on kubernetes", 422, CodeIncapable)
}
