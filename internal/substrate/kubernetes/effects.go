package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// The changes this driver makes outside a member's own pod, each
// recorded in the upgrade's journal (driver.Journal) before it is made,
// with what undoes it:
//
//   - a StatefulSet's or DaemonSet's update strategy set to OnDelete,
//     or a Deployment's to RollingUpdate 1/0 (the workload's, undone at
//     the end of the component's phase: the strategy as it was);
//   - a Deployment's rollout paused between batches (the workload's,
//     undone by resuming it);
//   - a node cordoned (the member's, undone by uncordoning it; its own
//     Start uncordons it once upgraded, and says so);
//   - a Deployment that is one member (per: workload) scaled to 0 by
//     its Stop (the member's, undone by scaling it back; its own Start
//     scales it back with the new template, and says so).
const (
	undoStrategy = "strategy"
	undoPause    = "pause"
	undoCordon   = "cordon"
	undoReplicas = "replicas"
)

// undo is what the journal keeps of a change, for Undo.
type undo struct {
	Op        string `json:"op"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Strategy is the update strategy as it was, as JSON.
	Strategy json.RawMessage `json:"strategy,omitempty"`
	// Set is what ferry set (a strategy type): the undo leaves the
	// workload alone if someone has changed it since.
	Set string `json:"set,omitempty"`
	// Replicas is a stopped Deployment's replicas as they were.
	Replicas int `json:"replicas,omitempty"`
}

func strategyKey(kind, ns, name string) string {
	return fmt.Sprintf("kubernetes/%s/%s/%s/update-strategy", kind, ns, name)
}

func pauseKey(ns, name string) string {
	return fmt.Sprintf("kubernetes/Deployment/%s/%s/paused", ns, name)
}

func cordonKey(node string) string { return "kubernetes/node/" + node + "/cordon" }

func replicasKey(ns, name string) string {
	return fmt.Sprintf("kubernetes/Deployment/%s/%s/replicas", ns, name)
}

// recordStrategy journals the change of a workload's update strategy
// from was (as it is now) to set, and why (said in the event; "" for
// nothing more).
func recordStrategy(ctx context.Context, kind, ns, name string, was any, wasType, set, why string) error {
	b, err := json.Marshal(was)
	if err != nil {
		return err
	}
	u := mustJSON(undo{Op: undoStrategy, Kind: kind, Namespace: ns, Name: name, Strategy: b, Set: set})
	what := fmt.Sprintf("%s %s/%s: update strategy %s → %s", kind, ns, name, orNone(wasType), set)
	if why != "" {
		what += ": " + why
	}
	return driver.JournalFrom(ctx).Record(ctx, driver.Effect{Key: strategyKey(kind, ns, name), Workload: true, Undo: u, What: what})
}

func recordPause(ctx context.Context, ns, name string) error {
	u := mustJSON(undo{Op: undoPause, Kind: kindDeployment, Namespace: ns, Name: name})
	return driver.JournalFrom(ctx).Record(ctx, driver.Effect{Key: pauseKey(ns, name), Workload: true, Undo: u,
		What: fmt.Sprintf("Deployment %s/%s: rollout paused between batches", ns, name)})
}

// recordReplicas journals a one-member Deployment's stop: scaled from
// n replicas to 0.
func recordReplicas(ctx context.Context, ns, name string, n int) error {
	u := mustJSON(undo{Op: undoReplicas, Kind: kindDeployment, Namespace: ns, Name: name, Replicas: n})
	return driver.JournalFrom(ctx).Record(ctx, driver.Effect{Key: replicasKey(ns, name), Undo: u,
		What: fmt.Sprintf("Deployment %s/%s scaled from %d to 0 replicas: the member stopped for its move (its start scales it back)", ns, name, n)})
}

func recordCordon(ctx context.Context, node string) error {
	u := mustJSON(undo{Op: undoCordon, Name: node})
	return driver.JournalFrom(ctx).Record(ctx, driver.Effect{Key: cordonKey(node), Undo: u,
		What: fmt.Sprintf("node %s cordoned", node)})
}

var _ driver.Undoer = (*Driver)(nil)

// Undo undoes a change this driver journaled; it is idempotent: a
// change already undone, or overtaken by someone else's, is left alone.
func (d *Driver) Undo(ctx context.Context, key string, data []byte) error {
	var u undo
	if err := json.Unmarshal(data, &u); err != nil {
		return fmt.Errorf("kubernetes driver: effect %s: %w", key, err)
	}
	switch u.Op {
	case undoCordon:
		n, err := d.client.CoreV1().Nodes().Get(ctx, u.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return apiError(ctx, err, "getting node %s", u.Name)
		}
		if !n.Spec.Unschedulable {
			return nil
		}
		d.log.Info("uncordoning node (the undo of its cordon)", "node", u.Name)
		return d.cordon(ctx, n, false)
	case undoPause:
		_, err := d.client.AppsV1().Deployments(u.Namespace).Patch(ctx, u.Name, types.MergePatchType,
			[]byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{FieldManager: "ferry"})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return apiError(ctx, err, "resuming the rollout of Deployment %s/%s", u.Namespace, u.Name)
		}
		d.log.Info("resumed the rollout (the undo of its pause)", "deployment", u.Namespace+"/"+u.Name)
		return nil
	case undoStrategy:
		return d.restoreStrategy(ctx, u)
	case undoReplicas:
		return d.restoreReplicas(ctx, u)
	}
	return fmt.Errorf("kubernetes driver: effect %s: unknown undo %q", key, u.Op)
}

// restoreStrategy puts a workload's update strategy back as it was,
// unless it is no longer the one ferry set.
func (d *Driver) restoreStrategy(ctx context.Context, u undo) error {
	field := "updateStrategy"
	var current string
	var err error
	switch u.Kind {
	case kindStatefulSet:
		var s *appsv1.StatefulSet
		s, err = d.client.AppsV1().StatefulSets(u.Namespace).Get(ctx, u.Name, metav1.GetOptions{})
		if err == nil {
			current = string(s.Spec.UpdateStrategy.Type)
			if u.Set == setPartition && (current == setOnDelete || current == string(appsv1.RollingUpdateStatefulSetStrategyType)) {
				// ferry's partition, or the OnDelete it fell back to.
				current = setPartition
			}
		}
	case kindDaemonSet:
		var s *appsv1.DaemonSet
		s, err = d.client.AppsV1().DaemonSets(u.Namespace).Get(ctx, u.Name, metav1.GetOptions{})
		if err == nil {
			current = string(s.Spec.UpdateStrategy.Type)
		}
	case kindDeployment:
		field = "strategy"
		var s *appsv1.Deployment
		s, err = d.client.AppsV1().Deployments(u.Namespace).Get(ctx, u.Name, metav1.GetOptions{})
		if err == nil {
			current = string(s.Spec.Strategy.Type)
			if current == string(appsv1.RollingUpdateDeploymentStrategyType) && !isRollingOneByOne(s.Spec.Strategy) {
				current = "changed since"
			}
		}
	default:
		return fmt.Errorf("kubernetes driver: cannot restore the strategy of a %s", u.Kind)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiError(ctx, err, "getting %s %s/%s", u.Kind, u.Namespace, u.Name)
	}
	if current != u.Set {
		d.log.Info("not restoring the update strategy: changed since ferry set it", "kind", u.Kind,
			"name", u.Namespace+"/"+u.Name, "now", current)
		return nil
	}
	// A strategic merge patch replaces the strategy with the one saved
	// (the fields ferry set go: "$retainKeys").
	var was map[string]any
	if err := json.Unmarshal(u.Strategy, &was); err != nil {
		return fmt.Errorf("kubernetes driver: the saved strategy of %s/%s: %w", u.Namespace, u.Name, err)
	}
	if _, ok := was["rollingUpdate"]; !ok {
		was["rollingUpdate"] = nil
	}
	patch := mustJSON(map[string]any{"spec": map[string]any{field: was}})
	switch u.Kind {
	case kindStatefulSet:
		_, err = d.client.AppsV1().StatefulSets(u.Namespace).Patch(ctx, u.Name, strategic, patch, metav1.PatchOptions{FieldManager: "ferry"})
	case kindDaemonSet:
		_, err = d.client.AppsV1().DaemonSets(u.Namespace).Patch(ctx, u.Name, strategic, patch, metav1.PatchOptions{FieldManager: "ferry"})
	case kindDeployment:
		_, err = d.client.AppsV1().Deployments(u.Namespace).Patch(ctx, u.Name, strategic, patch, metav1.PatchOptions{FieldManager: "ferry"})
	}
	if err != nil {
		return apiError(ctx, err, "restoring the update strategy of %s %s/%s", u.Kind, u.Namespace, u.Name)
	}
	d.log.Info("restored the update strategy (the undo of ferry's)", "kind", u.Kind, "name", u.Namespace+"/"+u.Name)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
