package kubetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Pods' output. kwok's pods run no containers, so there is no output to
// read; kwok's kubelet-like server answers the API server's pods/log
// requests (kubectl logs, and --previous) from files that Logs objects
// (one pod) and ClusterLogs objects (every pod) name. The script gives
// every pod two stand-in lines of current and of previous output
// (DefaultLogLine); SetPodLogs gives one pod its own.

// DefaultLogLine is the first line of the stand-in output kwok serves for
// every pod that SetPodLogs gave none, current and previous.
const DefaultLogLine = "kwok stand-in output (scripts/kube-testenv.sh): kwok's pods run no containers"

// SetPodLogs makes kwok serve current as the output of every container of
// pod namespace/name, and previous as the output of their previous
// instance (kubectl logs --previous; none when nil). Calling it again
// replaces the lines. When the pod exists it returns once the API server
// serves them.
func (e *Env) SetPodLogs(namespace, name string, current, previous []string) error {
	dir := filepath.Join(e.Dir, "kwok-logs", namespace)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cur := filepath.Join(dir, name+".current.log")
	if err := writeCRILog(cur, current); err != nil {
		return err
	}
	log := map[string]any{"logsFile": cur}
	if previous != nil {
		prev := filepath.Join(dir, name+".previous.log")
		if err := writeCRILog(prev, previous); err != nil {
			return err
		}
		log["previousLogsFile"] = prev
	}
	obj, err := json.Marshal(map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"logs": []any{log}},
	})
	if err != nil {
		return err
	}
	if err := e.Apply(string(obj)); err != nil {
		return fmt.Errorf("logs of pod %s/%s: %w", namespace, name, err)
	}
	if len(current) == 0 {
		return nil
	}
	// kwok takes a new Logs object in through its watch: until then it
	// serves the default.
	want := current[len(current)-1]
	return e.WaitUntil(30*time.Second, fmt.Sprintf("kwok to serve the output set for pod %s/%s", namespace, name), func() (bool, string, error) {
		out, err := e.Kubectl("logs", "-n", namespace, name, "--all-containers", "--tail=1")
		if err != nil {
			if strings.Contains(err.Error(), "NotFound") || strings.Contains(err.Error(), "not found") {
				return true, "", nil // no such pod (yet): nothing to wait for
			}
			return false, err.Error(), nil
		}
		// One line a container, each this pod's own.
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != want {
				return false, strings.TrimSpace(out), nil
			}
		}
		return true, "", nil
	})
}

// writeCRILog writes lines in the container runtime's log format (what
// the kubelet and kwok read), replacing the file whole: kwok reads it on
// each request.
func writeCRILog(path string, lines []string) error {
	var b strings.Builder
	ts := time.Now().UTC()
	for i, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), l)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// MarkRestarted makes container of pod namespace/name look restarted
// once more, as the kubelet shows a container that exited and was
// started again: its restartCount one higher and its last state
// terminated (exit 1). kwok restarts nothing itself; the pod stays Ready.
func (e *Env) MarkRestarted(namespace, name, container string) error {
	out, err := e.Kubectl("get", "pod", "-n", namespace, name, "-o", "json")
	if err != nil {
		return err
	}
	var pod struct {
		Status struct {
			ContainerStatuses []struct {
				Name         string `json:"name"`
				RestartCount int    `json:"restartCount"`
			} `json:"containerStatuses"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		return err
	}
	for i, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		now := time.Now().UTC().Format(time.RFC3339)
		base := fmt.Sprintf("/status/containerStatuses/%d", i)
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": base + "/name", "value": container},
			{"op": "replace", "path": base + "/restartCount", "value": cs.RestartCount + 1},
			{"op": "add", "path": base + "/lastState", "value": map[string]any{"terminated": map[string]any{
				"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}}},
		})
		if err != nil {
			return err
		}
		_, err = e.Kubectl("patch", "pod", "-n", namespace, name, "--subresource=status", "--type=json", "-p", string(patch))
		return err
	}
	return fmt.Errorf("pod %s/%s has no status of container %q", namespace, name, container)
}
