package kubetest

import (
	"strings"
	"testing"
	"time"
)

// TestKwokServesLogs: kubectl logs, and --previous, of a kwok pod return
// lines through the API server's pods/log (proxied to kwok's server): the
// script's stand-in lines for any pod, a pod's own once SetPodLogs gave
// them; and MarkRestarted shows a restart in the pod's status.
func TestKwokServesLogs(t *testing.T) {
	e := Start(t, Options{Nodes: 1})
	if err := e.Apply(`apiVersion: v1
kind: Pod
metadata: {name: talker, namespace: default}
spec:
  nodeName: kwok-node-0
  containers: [{name: talk, image: registry.example/talker:1.0.0}]
`); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitUntil(time.Minute, "pod talker Running", func() (bool, string, error) {
		out, err := e.Kubectl("get", "pod", "talker", "-o", "jsonpath={.status.phase}")
		return out == "Running", out, err
	}); err != nil {
		t.Fatal(err)
	}
	logs := func(args ...string) string {
		t.Helper()
		out, err := e.Kubectl(append([]string{"logs", "talker"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, previous := range []bool{false, true} {
		var args []string
		which := "current"
		if previous {
			args, which = []string{"--previous"}, "previous"
		}
		out := logs(args...)
		if !strings.HasPrefix(out, DefaultLogLine+"\n") || !strings.Contains(out, which+" instance") {
			t.Errorf("kubectl logs %v: want the stand-in lines of the %s instance, got %q", args, which, out)
		}
	}

	if err := e.SetPodLogs("default", "talker", []string{"talker 1.0.0: one", "talker 1.0.0: two", "talker 1.0.0: three"},
		[]string{"talker 1.0.0: crashed"}); err != nil {
		t.Fatal(err)
	}
	if out := logs("--tail=2"); out != "talker 1.0.0: two\ntalker 1.0.0: three\n" {
		t.Errorf("kubectl logs --tail=2: got %q", out)
	}
	if out := logs("--previous"); out != "talker 1.0.0: crashed\n" {
		t.Errorf("kubectl logs --previous: got %q", out)
	}
	// Set again: the file is read on each request.
	if err := e.SetPodLogs("default", "talker", []string{"talker 2.0.0: up"}, nil); err != nil {
		t.Fatal(err)
	}
	if out := logs(); out != "talker 2.0.0: up\n" {
		t.Errorf("kubectl logs after SetPodLogs again: got %q", out)
	}

	for want := 1; want <= 2; want++ {
		if err := e.MarkRestarted("default", "talker", "talk"); err != nil {
			t.Fatal(err)
		}
		out, err := e.Kubectl("get", "pod", "talker", "-o",
			`jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].lastState.terminated.exitCode} {.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(out); len(got) != 3 || got[0] != string(rune('0'+want)) || got[1] != "1" || got[2] != "True" {
			t.Errorf("after %d MarkRestarted: restartCount, last exit code, Ready = %q; want %d 1 True", want, out, want)
		}
	}
}
