package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/bundle"
	"github.com/ferry-upgrade/ferry/internal/run/bundle/bundletest"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// TestKubernetesBundle: `ferry bundle` of an upgrade on Kubernetes (the
// example's StatefulSet and Deployment, on the test control plane) holds
// each pod's output now and, once its container restarted, its previous
// instance's (members/NAME/current.log, previous.log, through the API
// server's pods/log), and the last output of every pod the upgrade
// replaced, kept before it went (members/NAME/replaced-1.log; with its
// own previous instance's when the kubelet had restarted it:
// replaced-1.previous.log), which no `kubectl logs` can read any more.
// kwok's pods run no containers: kwok serves each pod's output from the
// lines the test gives it (kubetest's SetPodLogs, MarkRestarted).
func TestKubernetesBundle(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	src := filepath.FromSlash("../../../examples/kubernetes")
	for _, f := range []string{"nodes.yaml", "workloads.yaml"} {
		if err := env.Apply(readFile(t, filepath.Join(src, f))); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.WaitUntil(2*time.Minute, "7 pods Ready", func() (bool, string, error) {
		out, err := env.Kubectl("-n", "shop", "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`)
		return strings.Count(out, "=True") == 7, out, err
	}); err != nil {
		t.Fatal(err)
	}

	// Release 1.0.0's output: each pod its own lines; kv-1 restarted once
	// (its run before, a panic).
	kvLines := func(pod, version string) []string {
		var ls []string
		for i := 1; i <= 5; i++ {
			ls = append(ls, fmt.Sprintf("%s %s: applied index %d", pod, version, 100*i))
		}
		return ls
	}
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("kv-%d", i)
		var prev []string
		if i == 1 {
			prev = []string{"kv-1 1.0.0 (its run before the restart): panic: raft: lost leader"}
		}
		if err := env.SetPodLogs("shop", pod, kvLines(pod, "1.0.0"), prev); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.MarkRestarted("shop", "kv-1", "kv"); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl("-n", "shop", "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	webOld := map[string]string{} // its output → the pod
	for _, pod := range strings.Fields(out) {
		line := "web " + pod + " 1.0.0: GET / 200"
		webOld[line+"\n"] = pod
		if err := env.SetPodLogs("shop", pod, []string{line}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(webOld) != 4 {
		t.Fatalf("web pods: %q", out)
	}

	dir := t.TempDir()
	desc := filepath.Join(dir, "cluster.yaml")
	writeFile(t, desc, readFile(t, filepath.Join(src, "cluster.yaml")))
	ferry := func(args ...string) result {
		cmd := ferryCmd("", append([]string{"-f", desc, "--data-dir", filepath.Join(dir, ".ferry")}, args...)...)
		cmd.Env = append(cmd.Env, "KUBECONFIG="+env.Kubeconfig)
		r := run(t, 5*time.Minute, cmd)
		t.Logf("ferry %s: exit %d (%s)\n%s%s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
		return r
	}
	if r := ferry("upgrade", "start", "--to", "2.0.0", "-q"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Fatal("the upgrade did not complete")
	}

	// Release 2.0.0's output, and a restart of kv-2's new container.
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("kv-%d", i)
		var prev []string
		if i == 2 {
			prev = []string{"kv-2 2.0.0 (its run before the restart): fsync took 12s"}
		}
		if err := env.SetPodLogs("shop", pod, kvLines(pod, "2.0.0"), prev); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.MarkRestarted("shop", "kv-2", "kv"); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(dir, "bundle.tar.gz")
	if r := ferry("bundle", "-o", file); r.code != 0 {
		t.Fatal("ferry bundle failed")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, files := bundletest.Files(t, b)
	var man bundle.Manifest
	if err := json.Unmarshal([]byte(files["manifest.json"]), &man); err != nil {
		t.Fatal(err)
	}
	what := map[string]string{}
	for _, f := range man.Files {
		what[f.Name] = f.What
	}
	for _, m := range man.NotCollected {
		if strings.Contains(m.What, "kv-") {
			t.Errorf("not collected: %s: %s", m.What, m.Why)
		}
	}

	joined := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("kv-%d", i)
		dir := "members/" + pod + "/"
		// Its output now, through pods/log.
		if got, want := files[dir+"current.log"], joined(kvLines(pod, "2.0.0")); got != want {
			t.Errorf("%scurrent.log = %q, want %q", dir, got, want)
		}
		// The 1.0.0 pod the upgrade replaced (its move's start: the stop
		// is left to it, driver.Replacer, so each pod goes once): its
		// last output, kept.
		if got, want := files[dir+"replaced-1.log"], joined(kvLines(pod, "1.0.0")); got != want {
			t.Errorf("%sreplaced-1.log = %q, want the replaced pod's %q", dir, got, want)
		}
		if w := what[dir+"replaced-1.log"]; !strings.Contains(w, "pod shop/"+pod+" (uid ") || !strings.Contains(w, "version 1.0.0") {
			t.Errorf("the manifest says of %sreplaced-1.log: %q", dir, w)
		}
		if w, ok := what[dir+"replaced-2.log"]; ok {
			t.Errorf("%sreplaced-2.log (%s): the move replaced %s twice", dir, w, pod)
		}
		_, hasPrevious := files[dir+"previous.log"]
		_, hasReplacedPrevious := files[dir+"replaced-1.previous.log"]
		if hasPrevious != (i == 2) || hasReplacedPrevious != (i == 1) {
			t.Errorf("%s: previous.log %t, replaced-1.previous.log %t", pod, hasPrevious, hasReplacedPrevious)
		}
	}
	// kv-1's replaced pod had restarted: the run before its last, kept too.
	if got := files["members/kv-1/replaced-1.previous.log"]; got != "kv-1 1.0.0 (its run before the restart): panic: raft: lost leader\n" {
		t.Errorf("members/kv-1/replaced-1.previous.log = %q", got)
	}
	// kv-2's pod now has restarted: kubectl logs --previous's output.
	if got := files["members/kv-2/previous.log"]; got != "kv-2 2.0.0 (its run before the restart): fsync took 12s\n" {
		t.Errorf("members/kv-2/previous.log = %q", got)
	}

	// The Deployment's replaced pods: its 4 pods of 1.0.0, each kept
	// once (a pod its ReplicaSet made has kwok's stand-in output: no
	// SetPodLogs gave it its own). The
	// ReplicaSet controller picks which old pod its rollout removes, when
	// a new one is available; the driver keeps those it would pick when
	// the Start lets the rollout run (the node a new pod lands on can
	// change the pick), and all the old pods left at the last slot: here
	// 3 or 4 of the 4 in 8 runs.
	seen, uids := map[string]bool{}, map[string]bool{}
	replaced := 0
	for name, data := range files {
		if !strings.HasPrefix(name, "members/") || !strings.Contains(name, "/replaced-") {
			continue
		}
		replaced++
		uid := what[name][strings.Index(what[name], "(uid ")+5:]
		uid = uid[:strings.IndexByte(uid, ')')]
		if strings.HasSuffix(name, ".previous.log") {
			continue // its pod's own replaced-N.log says it
		}
		if uids[uid] {
			t.Errorf("%s: pod %s kept twice", name, uid)
		}
		uids[uid] = true
		if !strings.HasPrefix(name, "members/web.") {
			continue
		}
		pod, original := webOld[data]
		switch {
		case original:
			seen[pod] = true
		case !strings.HasPrefix(data, kubetest.DefaultLogLine+"\n"):
			t.Errorf("%s = %q: neither a 1.0.0 web pod's output nor kwok's stand-in", name, data)
		}
	}
	t.Logf("the output of %d of the 4 web pods of 1.0.0 kept", len(seen))
	if len(seen) < 2 {
		t.Errorf("the output of %d of the 4 web pods of 1.0.0 kept, want at least 2", len(seen))
	}
	for s := 1; s <= 4; s++ {
		if got := files[fmt.Sprintf("members/web.%d/current.log", s)]; !strings.HasPrefix(got, kubetest.DefaultLogLine+"\n") {
			t.Errorf("members/web.%d/current.log = %q, want kwok's stand-in output of its new pod", s, got)
		}
	}
	// The events keep them too, each a line that says whose, the lines apart.
	kept := 0
	for _, l := range strings.Split(strings.TrimSpace(files["upgrade/events.jsonl"]), "\n") {
		var ev struct{ Kind, Member, Message, Output string }
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == "kept-output" {
			kept++
			t.Logf("event: %s", ev.Message)
			if strings.Contains(ev.Message, "\n") || ev.Output == "" {
				t.Errorf("kept-output event %+v: want one line, and the output apart", ev)
			}
		}
	}
	if kept != replaced {
		t.Errorf("%d kept-output events, %d replaced-*.log files", kept, replaced)
	}
}
