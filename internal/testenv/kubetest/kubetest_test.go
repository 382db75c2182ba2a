package kubetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: sample
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: sample}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1, maxSurge: 1}
  template:
    metadata:
      labels: {app: sample}
    spec:
      containers:
      - name: sample
        image: %s
`

type podList struct {
	Items []struct {
		Metadata struct {
			Name              string  `json:"name"`
			DeletionTimestamp *string `json:"deletionTimestamp"`
		} `json:"metadata"`
		Spec struct {
			NodeName   string `json:"nodeName"`
			Containers []struct {
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
		Status struct {
			Phase      string `json:"phase"`
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// readyPods waits until exactly want pods of app=sample exist, all Ready,
// none being deleted, all running image.
func readyPods(t *testing.T, e *Env, want int, image string) {
	t.Helper()
	began := time.Now()
	err := e.WaitUntil(2*time.Minute, fmt.Sprintf("%d Ready pods of %s", want, image), func() (bool, string, error) {
		out, err := e.Kubectl("get", "pods", "-n", "default", "-l", "app=sample", "-o", "json")
		if err != nil {
			return false, "", err
		}
		var pods podList
		if err := json.Unmarshal([]byte(out), &pods); err != nil {
			return false, "", err
		}
		ready := 0
		var states []string
		for _, p := range pods.Items {
			r := "False"
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" {
					r = c.Status
				}
			}
			img := ""
			if len(p.Spec.Containers) > 0 {
				img = p.Spec.Containers[0].Image
			}
			states = append(states, fmt.Sprintf("%s %s on %q ready=%s deleting=%t", p.Metadata.Name, p.Status.Phase,
				p.Spec.NodeName, r, p.Metadata.DeletionTimestamp != nil))
			if r == "True" && img == image && p.Metadata.DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == want && len(pods.Items) == want, strings.Join(states, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pods of %s Ready in %s", want, image, time.Since(began).Round(time.Millisecond))
}

func TestDeploymentRollsOnKwokNodes(t *testing.T) {
	began := time.Now()
	e := Start(t, Options{Nodes: 3})

	out, err := e.Kubectl("get", "nodes", "-l", "type=kwok", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(out)); n != 3 {
		t.Fatalf("want 3 kwok nodes, got %d: %s", n, out)
	}

	if err := e.Apply(fmt.Sprintf(deployment, "registry.example/sample:1.0.0")); err != nil {
		t.Fatal(err)
	}
	readyPods(t, e, 3, "registry.example/sample:1.0.0")

	rolled := time.Now()
	if _, err := e.Kubectl("set", "image", "-n", "default", "deployment/sample",
		"sample=registry.example/sample:2.0.0"); err != nil {
		t.Fatal(err)
	}
	// rollout status watches the Deployment until every replica is updated
	// and available, or fails at its own deadline.
	if out, err := e.Kubectl("rollout", "status", "-n", "default", "deployment/sample", "--timeout=2m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	readyPods(t, e, 3, "registry.example/sample:2.0.0")
	t.Logf("image update rolled in %s; whole test %s", time.Since(rolled).Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond))
}
