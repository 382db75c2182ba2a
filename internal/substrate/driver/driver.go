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

	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
)

// Member names one member for a driver: who it is, where it runs, and
// how it is started. Args and Env are already rendered for the member.
type Member struct {
	Name      string
	Component string
	Host      string
	// Domain is the member's failure domain as the substrate knows it
	// (a Kubernetes node's topology.kubernetes.io/zone label), set by
	// Discover; a described member's domain comes from its description.
	Domain string
	// Labels are the labels of the member's host as the substrate
	// knows them (a Kubernetes node's), set by Discover: what a flow's
	// phase selects members by (host_labels).
	Labels  map[string]string
	Address string
	Args    []string
	Env     map[string]string
	// StopTimeout bounds a graceful stop before the member is killed.
	StopTimeout time.Duration
	// Workload is the Kubernetes object the member belongs to (nil on
	// other substrates).
	Workload *Workload
	// Files are written into the member's directory before it starts,
	// rendered for the member; a change of them is a change the member
	// is restarted for, like a new version (process substrate).
	Files []File
	// Restart is the substrate's own restart policy for the member:
	// "no" (or "") or "on-failure" (process substrate: the agent's
	// supervision, see internal/substrate/agent).
	Restart string
	// StopSignal is the signal of a graceful stop ("" is SIGTERM;
	// process substrate).
	StopSignal string
	// Adopt, if set, says how to find the member's process when the
	// substrate did not start it (process substrate); Observe then
	// reports such a process as the member, Adopted.
	Adopt *Adopt
}

// Adopt is how a member's process is found when ferry did not start
// it: by a pid file (an absolute path on the member's host) or by the
// address it listens on. Exactly one is set.
type Adopt struct {
	PIDFile string
	Listen  string
}

// File is a file of a member: a path relative to the member's
// directory, its mode and content (rules in package memberfile).
type File = memberfile.File

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
	// Per is "workload" when each workload the selector matches is one
	// member (config.PerWorkload); "" for the kind's own members.
	Per string
	// Update is "in-place" when a DaemonSet's pod takes its new image
	// where it runs (config.UpdateInPlace); "" when it is recreated.
	Update string
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
	// PID is the member's process id while it runs, where the
	// substrate has one (process, ssh); 0 otherwise.
	PID int
	// Detail says why a member is down (exit status, pod phase).
	Detail string
	// Restarts counts the times the substrate itself restarted the
	// member since it was last started (an agent's supervision, a
	// container's restarts): a crash loop shows here even when every
	// observation finds the member running.
	Restarts int
	// Adopted is true when the member's process was found running, not
	// started by the substrate (Member.Adopt): the substrate knows its
	// pid, not its version (Version is empty; the engine asks the
	// member through the description's version call). The first Start
	// replaces it with a process of the substrate's own.
	Adopted bool
	// Unknown is true when the substrate could not be asked about this
	// member just now (its agent or the API server did not answer):
	// the other fields are not an observation, and the member's fate is
	// not to be judged from them. Detail says what did not answer.
	Unknown bool
}

// Driver acts on members. Every method is idempotent: calling it again
// after a crash, with the same arguments, leads to the same state.
type Driver interface {
	// Observe reports the status of each member, in order. A member
	// that is down is a status, not an error; a member whose host or
	// API server did not answer is Unknown. An error means the request
	// itself was wrong (an unknown host), not that the substrate was
	// away.
	Observe(ctx context.Context, members []Member) ([]Status, error)
	// Start starts the member on the artifact if it is not already
	// running that version; a member running another version is
	// stopped gracefully first (the swap).
	Start(ctx context.Context, m Member, a Artifact) error
	// Stop stops the member gracefully (SIGTERM, then SIGKILL after
	// StopTimeout); stopping a stopped member is not an error.
	Stop(ctx context.Context, m Member) error
}

// Replacer is a driver whose Start replaces a member's instance itself,
// where a Stop would only have the instance's controller start it again
// on the release it runs (a pod of a Deployment, a StatefulSet or a
// DaemonSet): a move leaves its stop to its start, so the member goes
// down once, not twice.
type Replacer interface {
	// StartReplaces reports whether Start replaces m's instance.
	StartReplaces(m Member) bool
}

// Watcher is a driver whose view of the cluster is pushed to it (the
// Kubernetes driver's watches): Changed receives after any change to
// that view, so that the engine observes at once instead of at its next
// tick. A receive says only that something changed, several changes
// may make one, and the engine reads what through Observe: the wake is
// an edge, the reading stays level-triggered.
type Watcher interface {
	Changed() <-chan struct{}
}

// ErrUnreachable wraps errors that mean the substrate (agent, API
// server) did not answer: worth retrying, not a verdict on a member.
var ErrUnreachable = errors.New("driver: substrate unreachable")

// Logger is a driver that keeps its members' output.
type Logger interface {
	// Logs returns the last lines of member m's output: of its current
	// (or last) instance, or of the instance before it (previous), like
	// kubectl logs --previous. Output that does not exist (no
	// previous instance) is an error that errors.Is fs.ErrNotExist.
	Logs(ctx context.Context, m Member, previous bool, lines int) (string, error)
}

// KeptOutput is the output of a member's instance that a driver is
// about to replace (a pod it deletes, or whose controller it lets
// replace it), read before the instance goes and its output with it:
// on Kubernetes the kubelet's logs of a pod end with the pod.
type KeptOutput struct {
	// Instance names it for a person: "pod db/mon-0 (uid 5f2c…),
	// container mon, version 1.0.0, on node n-1".
	Instance string
	// Previous is true for the output of the instance's own previous
	// run (a container the kubelet restarted), false for its last.
	Previous bool
	// Why it goes: "replaced with version 2.0.0".
	Why string
	// Output is its last lines, bounded by the driver; Lines counts
	// them, and Cut says that the first of them were left out to keep
	// within the driver's bound of bytes.
	Output string
	Lines  int
	Cut    bool
	// Err says why the output could not be read (Output is empty): the
	// replacement goes on all the same.
	Err error
}

// OutputKeeper is a Journal that also keeps the output a driver reads
// of the instances it replaces, in the upgrade's record of events,
// where a troubleshooting bundle finds it after the instance is gone.
// KeepOutput returns once it is kept; an error is the driver's to say,
// never a reason to stop the replacement.
type OutputKeeper interface {
	KeepOutput(ctx context.Context, o KeptOutput) error
}

// KeepsOutput reports whether ctx's journal keeps output: a driver
// reads none for a call that no upgrade would keep it for.
func KeepsOutput(ctx context.Context) bool {
	_, ok := JournalFrom(ctx).(OutputKeeper)
	return ok
}

// KeepOutput hands o to the journal ctx carries, when it keeps output
// (KeepsOutput); otherwise it does nothing.
func KeepOutput(ctx context.Context, o KeptOutput) error {
	if k, ok := JournalFrom(ctx).(OutputKeeper); ok {
		return k.KeepOutput(ctx, o)
	}
	return nil
}

// HostCommand is a command of the description about one host (its
// lock, unlock, reinstall or data migration), rendered: an argv run
// where On says (the host itself, or another: StarlingX runs
// `system host-lock controller-1` on the active controller), never a
// line pasted into a shell.
type HostCommand struct {
	// Host is the host the command is about; On the host it runs on
	// (Host when empty).
	Host, On string
	Argv     []string
	// Sudo runs it through sudo -n.
	Sudo bool
	// Timeout bounds the command (0: the driver's own bound).
	Timeout time.Duration
	// Key names this run of a long command (a reinstall: the upgrade
	// and the release): a second call with the same key, after a
	// crash of ferry, joins the run under way or reports the one that
	// ended well instead of running it again.
	Key string
}

// HostLocker is a driver that can lock a host itself (move its work
// away: StarlingX's host-lock over SSH, a Kubernetes node's cordon and
// drain) and unlock it, for hosts whose description gives no lock
// calls (capability lock-host): the command is the description's, when
// it gives one (a substrate that knows how may do without). Both are
// idempotent: locking a locked host, or unlocking one that is not
// locked, succeeds (the description's commands must be so too).
type HostLocker interface {
	LockHost(ctx context.Context, c HostCommand) error
	UnlockHost(ctx context.Context, c HostCommand) error
}

// HostReinstaller is a driver that can reinstall a host's software and
// migrate its data (capability reinstall-host: StarlingX's load
// install and data migration, in a host's move while it is locked).
type HostReinstaller interface {
	// ReinstallHost runs c, which may take the host down (its sshd
	// restarts, it reboots): its connection may break and the command
	// not answer. The host must answer again within unreachable of
	// the command's start or its connection's loss, presenting the key
	// it had (a changed key is ErrNotTrusted, never accepted), and
	// must have run c to its end with exit status 0.
	ReinstallHost(ctx context.Context, c HostCommand, unreachable time.Duration) error
	// MigrateHost runs the host's data migration c (exit status 0).
	MigrateHost(ctx context.Context, c HostCommand) error
}

// HostBackups is a driver that keeps a member's backup on the member's
// own host and runs the backup's commands there (capability
// backup-on-host: over SSH a member's data is on its host, not on
// ferry's machine; StarlingX's simplex backs up and restores on the
// controller itself). dir and path are absolute on host.
type HostBackups interface {
	// BackupRun runs argv on host within timeout and returns its
	// output; an exit status other than 0 is an error with its output.
	BackupRun(ctx context.Context, host string, argv []string, timeout time.Duration) (string, error)
	// BackupEmpty makes dir an empty directory (its parents made).
	BackupEmpty(ctx context.Context, host, dir string) error
	// BackupSums are sha256sum's lines ("SUM  PATH") of every regular
	// file under dir, paths relative to it, in path order, skip left
	// out; anything but files and directories is refused.
	BackupSums(ctx context.Context, host, dir string, skip []string) (string, error)
	// BackupRead reads the regular file at path (a backup's sums file),
	// up to limit bytes.
	BackupRead(ctx context.Context, host, path string, limit int64) ([]byte, error)
	// BackupPrune keeps the newest keep directories in dir (by
	// modification time), removes the others and returns them; a dir
	// that does not exist has none.
	BackupPrune(ctx context.Context, host, dir string, keep int) ([]string, error)
}

// ErrNotTrusted wraps errors that mean the substrate presented an
// identity ferry does not trust (an SSH host key that is unknown or
// changed): a refusal, never retried as an outage; the upgrade stops
// on it, naming what was presented and what was expected.
var ErrNotTrusted = errors.New("driver: substrate not trusted")

// Effect is a change a driver makes outside a member's own process (a
// node cordoned, a workload's update strategy changed, a rollout
// paused), recorded with what undoes it before it is made.
type Effect struct {
	// Key names the change, stable across calls and processes, so
	// that recording it again is a no-op: "node/worker-1/cordon".
	Key string
	// What says it in words for the operator: "node worker-1 cordoned".
	What string
	// Workload is true when the change belongs to the member's whole
	// workload (its update strategy, its rollout) rather than to the
	// member alone: it is undone when the component's phase ends.
	Workload bool
	// Undo is the driver's own description of how to undo it, handed
	// back to Undoer.Undo.
	Undo []byte
}

// Journal records effects before a driver makes them. Record returns
// once the effect is durably recorded (in the upgrade's record, with
// the step that makes it); a driver must not make the change if it
// fails. Done says the driver undid the change itself, as part of the
// member's move (a node uncordoned once upgraded).
type Journal interface {
	Record(ctx context.Context, e Effect) error
	Done(ctx context.Context, key string) error
}

// Undoer is a driver that can undo the effects it recorded. Undo must
// be idempotent: undoing an effect whose change was never made, or is
// already undone, succeeds.
type Undoer interface {
	Undo(ctx context.Context, key string, undo []byte) error
}

type journalKey struct{}

// WithJournal returns ctx carrying the journal of the upgrade a driver
// call is made for. It travels in the context because drivers are made
// once per cluster and serve many upgrades; a call without one (a
// view, the demo's first start) makes no effect worth undoing.
func WithJournal(ctx context.Context, j Journal) context.Context {
	return context.WithValue(ctx, journalKey{}, j)
}

// JournalFrom returns the journal ctx carries, or one that records
// nothing.
func JournalFrom(ctx context.Context) Journal {
	if j, ok := ctx.Value(journalKey{}).(Journal); ok && j != nil {
		return j
	}
	return noJournal{}
}

type noJournal struct{}

func (noJournal) Record(context.Context, Effect) error { return nil }
func (noJournal) Done(context.Context, string) error   { return nil }
