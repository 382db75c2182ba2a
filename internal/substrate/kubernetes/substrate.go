package kubernetes

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Name is the substrate's name in a description.
const Name = "kubernetes"

// Capabilities is what the Kubernetes substrate can do: replace pods
// and upgrade nodes of workloads that exist, find them at run time,
// undo the changes it journals (update strategies, pauses, cordons),
// and read members' output (their pods' logs, as kubectl logs does;
// the output of the pods it replaces kept in the upgrade's events). It
// cannot bring a cluster up from nothing (the workloads are applied by
// whoever owns them), adopt (every pod is its controller's), or lock a
// host.
var Capabilities = substrate.Can(substrate.StartStop, substrate.Output, substrate.Discover, substrate.Undo)

func init() {
	substrate.Register(substrate.Substrate{
		Name: Name,
		Can:  Capabilities,
		Rules: config.SubstrateRules{
			Runs:  config.ArtifactImage,
			Reads: []config.Field{config.FieldWorkload},
			Unread: map[config.Field]string{
				config.FieldAdopt:    "applies to the process substrate (a pod is found through its workload)",
				config.FieldRunFiles: "applies to the process substrate (a pod's files come from its image and volumes)",
			},
			Component: checkWorkload,
		},
		New: newFromDescription,
	})
}

// MaxKubeconfig bounds a kubeconfig file ferry reads (certificates
// inline included): the description's, the controller's --kubeconfig.
const MaxKubeconfig = 16 << 20

// newFromDescription builds the driver for the description's API
// server.
func newFromDescription(c *config.Cluster, o substrate.Options) (driver.Driver, error) {
	kc := Config{Kubeconfig: c.Kubernetes.Kubeconfig, Context: c.Kubernetes.Context, Logger: o.Logger}
	if kc.Kubeconfig != "" {
		kc.Kubeconfig = c.ResolvePath(kc.Kubeconfig)
		// client-go reads it with os.ReadFile: a FIFO or a device
		// there would hang ferry. Refused first, with its reason.
		if _, err := safefile.Read(kc.Kubeconfig, MaxKubeconfig, safefile.DefaultTimeout); err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig: %w", err)
		}
	}
	return New(kc)
}

var workloadKinds = []string{config.KindStatefulSet, config.KindDaemonSet, config.KindDeployment, config.KindNodePool}

// selectorRE is an equality-based label selector: key, key=value,
// key==value, key!=value, or !key, separated by commas.
var selectorRE = regexp.MustCompile(`^\s*!?[A-Za-z0-9][A-Za-z0-9./_-]*(\s*(=|==|!=)\s*[A-Za-z0-9._-]*)?(\s*,\s*!?[A-Za-z0-9][A-Za-z0-9./_-]*(\s*(=|==|!=)\s*[A-Za-z0-9._-]*)?)*\s*$`)

// dnsLabelRE is a Kubernetes object name (RFC 1123 subdomain, short).
var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)

// The range of workload.drain_timeout (its default is config's).
const (
	minDrainTimeout = time.Second
	maxDrainTimeout = 24 * time.Hour
)

// checkWorkload checks a component's workload: every component of a
// Kubernetes description is one.
func checkWorkload(n config.Node, comp *config.Component) {
	w := comp.Workload
	if w == nil {
		n.Add("workload", "must be set for the kubernetes substrate: kind (%s) and name or selector", strings.Join(workloadKinds, ", "))
		return
	}
	if !slices.Contains(workloadKinds, w.Kind) {
		n.Add("workload.kind", "unknown kind %q; known: %s", w.Kind, strings.Join(workloadKinds, ", "))
		return
	}
	if w.Selector != "" && !selectorRE.MatchString(w.Selector) {
		n.Add("workload.selector", "%q is not a label selector (key=value, key!=value, key, !key, separated by commas)", truncate(w.Selector, 70))
	}
	if w.Kind == config.KindNodePool {
		if w.Selector == "" {
			n.Add("workload.selector", "must be set: the label selector of the pool's nodes")
		}
		if w.Name != "" || w.Namespace != "" || w.Container != "" {
			n.AddAt("workload.kind", "workload", "a NodePool is found by its selector: name, namespace and container do not apply")
		}
		for i, a := range w.Upgrade {
			if a == "" {
				n.Add(fmt.Sprintf("workload.upgrade[%d]", i), "must not be empty")
			}
		}
		if w.Per != "" {
			n.Add("workload.per", "a NodePool's members are its nodes: per does not apply")
		}
	} else {
		switch {
		case w.Per != "" && w.Per != config.PerWorkload:
			n.Add("workload.per", "unknown value %q; known: %s (each %s the selector matches is one member)", truncate(w.Per, 70), config.PerWorkload, w.Kind)
		case w.Per != "" && w.Kind != config.KindDeployment:
			n.Add("workload.per", "per: %s applies to Deployments (one Deployment per daemon, as Rook runs its mons and OSDs); a %s's members are its %s",
				config.PerWorkload, w.Kind, map[string]string{config.KindStatefulSet: "pods", config.KindDaemonSet: "nodes"}[w.Kind])
		case w.Per != "" && w.Selector == "":
			n.Add("workload.selector", "must be set with per: %s: the label selector of the Deployments, each one member", config.PerWorkload)
		case w.Per != "" && w.Name != "":
			n.Add("workload.name", "per: %s selects Deployments by selector: name one with a selector that matches it alone, or leave per out", config.PerWorkload)
		}
		switch {
		case w.Name == "" && w.Selector == "":
			n.Add("workload.name", "must be set, or a selector that matches exactly one %s", w.Kind)
		case w.Name != "" && w.Selector != "":
			n.Add("workload.selector", "name and selector are exclusive: name the %s, or select it", w.Kind)
		case w.Name != "" && !dnsLabelRE.MatchString(w.Name):
			n.Add("workload.name", "%q is not a Kubernetes object name", truncate(w.Name, 70))
		}
		if w.Namespace != "" && !dnsLabelRE.MatchString(w.Namespace) {
			n.Add("workload.namespace", "%q is not a namespace name", truncate(w.Namespace, 70))
		}
		if len(w.Upgrade) > 0 {
			n.Add("workload.upgrade", "applies to a NodePool only: a %s's members are upgraded by their image", w.Kind)
		}
	}
	switch {
	case w.Update != "" && w.Update != config.UpdateInPlace:
		n.Add("workload.update", "unknown value %q; known: %s (a DaemonSet's pod takes its image where it runs), or leave it out (recreated)", truncate(w.Update, 70), config.UpdateInPlace)
	case w.Update != "" && w.Kind != config.KindDaemonSet:
		n.Add("workload.update", "update: %s applies to a DaemonSet: a %s's pods are recreated", config.UpdateInPlace, w.Kind)
	}
	n.Within("workload.drain_timeout", w.DrainTimeout, minDrainTimeout, maxDrainTimeout, config.DefaultDrainTimeout.D(), "how long a node's drain may take")
}

// truncate cuts what a message quotes of a long value.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
