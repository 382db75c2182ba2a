package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// TestKubernetesExampleRuns runs examples/kubernetes as its README
// says, on the repository's test control plane (FERRY_KUBE=1): the
// nodes and workloads applied, then ferry validate, plan and upgrade
// start through $KUBECONFIG, and every pod of both workloads on its
// 2.0.0 image, pinned by digest, at the end.
func TestKubernetesExampleRuns(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	src := filepath.FromSlash("../../../examples/kubernetes")
	for _, f := range []string{"nodes.yaml", "workloads.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Apply(string(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.WaitUntil(2*time.Minute, "7 pods Ready", func() (bool, string, error) {
		out, err := env.Kubectl("-n", "shop", "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`)
		return strings.Count(out, "=True") == 7, out, err
	}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	desc := filepath.Join(dir, "cluster.yaml")
	writeFile(t, desc, readFile(t, filepath.Join(src, "cluster.yaml")))
	ferry := func(args ...string) result {
		cmd := ferryCmd("", append([]string{"-f", desc, "--data-dir", filepath.Join(dir, ".ferry")}, args...)...)
		cmd.Env = append(cmd.Env, "KUBECONFIG="+env.Kubeconfig)
		r := run(t, 5*time.Minute, cmd)
		t.Logf("ferry %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		return r
	}
	if r := ferry("validate"); r.code != 0 {
		t.Fatal("validate failed")
	}
	if r := ferry("plan", "--to", "2.0.0"); r.code != 0 {
		t.Fatal("plan failed")
	}
	if r := ferry("upgrade", "start", "--to", "2.0.0", "-q"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Fatal("the upgrade did not complete")
	}
	out, err := env.Kubectl("-n", "shop", "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(out) {
		if !strings.Contains(p, ":2.0.0@sha256:") {
			t.Errorf("pod %s is not on 2.0.0 pinned by digest", p)
		}
	}
	if n := len(strings.Fields(out)); n != 7 {
		t.Errorf("%d pods at the end, want 7: %s", n, out)
	}
}
