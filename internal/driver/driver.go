// Package driver is the boundary between ferry's engine and the
// substrate members run on (local processes through an agent,
// Kubernetes, SSH hosts). A driver knows members and artifacts; it
// knows nothing of plans, batches or upgrades, so that every substrate
// gets the same ordering and safety from the engine.
package driver

import (
	"context"
	"errors"
	"time"
)

// Member names one member for a driver: who it is, where it runs, and
// how it is started. Args and Env are already rendered for the member.
type Member struct {
	Name      string
	Component string
	Host      string
	Address   string
	Args      []string
	Env       map[string]string
	// StopTimeout bounds a graceful stop before the member is killed.
	StopTimeout time.Duration
	// Workload is the Kubernetes object the member belongs to (nil on
	// other substrates).
	Workload *Workload
}

// Workload is a Kubernetes workload or node pool, as the description
// names it (config.Workload, defaults applied).
type Workload struct {
	Kind      string // StatefulSet, DaemonSet, Deployment, NodePool
	Namespace string
	Name      string
	Selector  string
	Container string
	// Upgrade is the argv a NodePool member's upgrade runs once the
	// node is drained (FERRY_NODE, FERRY_VERSION in its environment).
	Upgrade      []string
	DrainTimeout time.Duration
}

// Discoverer is a driver whose members are found at run time rather
// than listed in the description: the pods of a StatefulSet, the nodes
// of a DaemonSet's pods or of a node pool, a Deployment's replicas.
type Discoverer interface {
	// Discover lists the members of component's workload in a stable
	// order (a StatefulSet's pods by ordinal, nodes by name), with
	// Name, Component, Host and Address set.
	Discover(ctx context.Context, component string, w Workload) ([]Member, error)
}

// Artifact is what a member runs: a binary (process, ssh) or an image
// (kubernetes), with the checksum it must have, for one version.
type Artifact struct {
	Version string
	Path    string
	Image   string
	SHA256  string
}

// Status is what a driver observes of one member.
type Status struct {
	Name string
	// Running is true when the member's process (pod, service) is up.
	Running bool
	// Version is the version of the artifact the member runs, or last
	// ran when it is down; empty when the member was never started.
	Version string
	// Since is when the member was last started.
	Since time.Time
	// Detail says why a member is down (exit status, pod phase).
	Detail string
}

// Driver acts on members. Every method is idempotent: calling it again
// after a crash, with the same arguments, leads to the same state.
type Driver interface {
	// Observe reports the status of each member, in order. A member
	// that is down is a status, not an error; an error means the
	// substrate could not be asked at all.
	Observe(ctx context.Context, members []Member) ([]Status, error)
	// Start starts the member on the artifact if it is not already
	// running that version; a member running another version is
	// stopped gracefully first (the swap).
	Start(ctx context.Context, m Member, a Artifact) error
	// Stop stops the member gracefully (SIGTERM, then SIGKILL after
	// StopTimeout); stopping a stopped member is not an error.
	Stop(ctx context.Context, m Member) error
}

// ErrUnreachable wraps errors that mean the substrate (agent, API
// server) did not answer: worth retrying, not a verdict on a member.
var ErrUnreachable = errors.New("driver: substrate unreachable")
