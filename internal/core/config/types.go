package config

import (
	"github.com/ferry-upgrade/ferry/internal/core/window"

	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
)

// Cluster is one cluster description: everything one upgrade covers.
// It is read from YAML by Parse and checked by Validate; nothing else
// in ferry reads the file.
type Cluster struct {
	// Name names the cluster in messages, the dashboard and the metrics.
	Name string `yaml:"cluster"`
	// Substrate is what members run on: a substrate of this build
	// (process, the default, kubernetes or ssh); `ferry validate` lists
	// them.
	Substrate string `yaml:"substrate"`
	// Hosts are the machines members run on, each with its agent
	// (process substrate) or its sshd (ssh substrate).
	Hosts []Host `yaml:"hosts"`
	// HostDefaults are the lock, unlock and capacity calls of every
	// host that gives none of its own (they are templates over the
	// host: {{.Host}}, {{.Address}}), so that a hundred hosts are
	// described once.
	HostDefaults HostCalls `yaml:"host_defaults"`
	// Components are upgraded one at a time, in order.
	Components []Component `yaml:"components"`
	// Releases are the catalog: the versions ferry may start members on,
	// with their artifacts.
	Releases []Release `yaml:"releases"`
	// Policy is what ferry does on a failure, an impact, and around the
	// steps.
	Policy Policy `yaml:"policy"`
	// Kubernetes says how to reach the API server (substrate kubernetes).
	Kubernetes Kubernetes `yaml:"kubernetes"`
	// Traffic, if set, is the traffic ferry drives (or the signal it
	// watches) during an upgrade to judge its impact on clients.
	Traffic *Traffic `yaml:"traffic"`
	// Hooks are calls made at the start and the end of every upgrade
	// (a cluster-wide flag set for its duration, and unset).
	Hooks UpgradeHooks `yaml:"hooks"`
	// SigningKey is the public key every release's artifacts (its
	// loads) must be signed with, unless a release names its own: a
	// file holding an Ed25519 key (32 bytes raw, base64, hex, or PEM)
	// or a minisign public key. With a key, an artifact with a path
	// needs a signature; a load that does not verify is refused at
	// import, preflight and `ferry cluster up` before anything moves
	// (StarlingX's load-import checks its .sig the same way). Relative
	// to the description file. An import through the server is checked
	// against this key: a request cannot name its own.
	SigningKey string `yaml:"signing_key"`
	// Alarms are named checks of the whole cluster that the health
	// query (`ferry health --to`, and the preflight of every upgrade)
	// makes besides its own: StarlingX's "no management affecting
	// alarms", a monitoring system's firing alerts. Each must pass for
	// an upgrade to start; {{.Version}} is the target.
	Alarms []Alarm `yaml:"alarms"`
	// Applications are what runs on the cluster that an upgrade must
	// not leave behind (StarlingX's container applications on
	// Kubernetes): each says which releases it supports, or is asked.
	// The health query checks each against the target (and every
	// release of a chain to it), and the start is refused naming the
	// application that does not support one.
	Applications []Application `yaml:"applications"`

	// File is the path the description was read from, for messages.
	File string `yaml:"-"`
	// Digest is the SHA-256 of the description's bytes: an upgrade
	// records it, and while it runs no other description may act.
	Digest string `yaml:"-"`
	pos    positions
	dir    string // absolute directory of File, set by Load
	// suspect are the paths of members with a misspelt key
	// (components[0].members[1]), set by Parse: Validate renders the
	// component's templates for the other members only.
	suspect map[string]bool
}

// Host is where members run; the unit an agent, an sshd (or a
// Kubernetes node) answers for.
type Host struct {
	// Name is what members name in their host.
	Name string `yaml:"name"`
	// Agent is the host:port of the host's ferry agent (process substrate).
	Agent string `yaml:"agent"`
	// TokenFile holds the agent's bearer token (mode 0600); relative
	// paths are relative to the description file.
	TokenFile string `yaml:"token_file"`
	// Domain is the host's failure domain (a zone, a rack): its members
	// are in it unless they name their own.
	Domain string `yaml:"domain" text:"name"`
	// TLS says how ferry trusts the agent's certificate; ferry then
	// speaks HTTPS to it. Required for an agent beyond loopback: its
	// token, which runs programs on the host, must not travel in clear.
	TLS *HostTLS `yaml:"tls"`
	// SSH is how ferry reaches the host through its sshd (ssh
	// substrate): no agent runs there.
	SSH *HostSSH `yaml:"ssh"`
	// Labels are what a hosts stage's host_labels select the host by
	// (StarlingX's personality: controller, storage, worker).
	Labels map[string]string `yaml:"labels"`
	// Address is the host's own address, {{.Address}} in its lock,
	// unlock and capacity calls (default: the host part of its agent,
	// or of its ssh.address).
	Address string `yaml:"address"`
	// HostCalls lock the host and unlock it when a hosts stage of a
	// release's flow upgrades it (default: host_defaults).
	HostCalls `yaml:",inline"`
	pos       positions
}

// HostCalls are how ferry locks a host (moves its work away: StarlingX's
// host-lock, a balancer's maintenance mode, a Kubernetes cordon and
// drain) before it upgrades the members on it, unlocks it after, and
// asks whether one more host may be locked now. Each string is a
// template over the host: .Name and .Host are its name, .Address its
// address, .Members the members on it (of every component).
type HostCalls struct {
	// Lock are made, in order, before the first member on the host
	// moves. ferry journals the lock, with the unlock as its undo,
	// before its first call: an abort, a rollback, a failure or a crash
	// of ferry finds the host locked in the journal and unlocks it.
	Lock []Call `yaml:"lock"`
	// Unlock are made, in order, once every member on the host is done
	// (or its turn ends any other way); they must succeed on a host
	// that is not locked, or half locked (they are retried).
	Unlock []Call `yaml:"unlock"`
	// Capacity is asked about each host before it is locked: passing
	// means the other hosts can take its load now. A failure is a
	// refusal by predicate host_capacity, in the call's words, asked
	// again until it passes (within gate_deadline).
	Capacity *Call `yaml:"capacity"`
	// Commands are the host's own commands, run on hosts by the
	// substrate's driver (ssh): its lock and unlock instead of lock and
	// unlock calls, and the reinstall and data migration of a host's
	// move in a hosts stage.
	Commands *HostCommands `yaml:"commands"`
}

// HostCommands are commands about a host that the substrate's driver
// runs on a host (ssh: through its sshd, an argv with each argument
// quoted, never a line pasted into a shell), each a list of templates
// over the host (.Host and .Name its name, .Address its address,
// .Version the release the host moves to: the target, or the release
// before in a rollback). In a hosts stage a host's move is: its lock,
// its reinstall, its data migration, its members' moves, its unlock.
type HostCommands struct {
	// Lock locks the host (StarlingX: [system, host-lock, "{{.Host}}"],
	// run on the active controller); it needs its unlock, which ferry
	// journals as the lock's undo before it runs the lock. Not with
	// lock calls.
	Lock *HostCommand `yaml:"lock"`
	// Unlock unlocks the host; it must succeed on a host that is not
	// locked (it is retried).
	Unlock *HostCommand `yaml:"unlock"`
	// Reinstall installs the release's software on the locked host
	// (StarlingX's load install): the host may stop answering while it
	// runs (its sshd restarts, it reboots), for at most its
	// unreachable bound. A rollback runs it again with the release
	// before. Not retried: a failure ends the host's move as
	// on_failure says.
	Reinstall *HostCommand `yaml:"reinstall"`
	// Migrate migrates the host's data to the release once it is
	// reinstalled, before its members start on it (StarlingX's
	// data-migration); retried within its timeout. Not run by a
	// rollback (the data of the release before is kept).
	Migrate *HostCommand `yaml:"migrate"`
}

// HostCommand is one command about a host.
type HostCommand struct {
	// Argv is the command: a program and its arguments, each a
	// template over the host.
	Argv []string `yaml:"argv"`
	// RunOn is where it runs: a host's sshd by name (run_on:
	// controller-0), or the host of the member holding a component's
	// role when it runs (run_on: {active: coord}: StarlingX runs
	// host-lock on the active controller, which a swact moves); default
	// the host itself.
	RunOn RunOn `yaml:"run_on"`
	// Sudo runs it through sudo -n (never asking for a password).
	Sudo bool `yaml:"sudo"`
	// Timeout bounds the command (default 2m; a reinstall's 10m).
	Timeout Duration `yaml:"timeout"`
	// Unreachable (reinstall only) bounds how long the host may not
	// answer while it reinstalls: its connection must come back, with
	// the host key it had, within it (default 2m).
	Unreachable Duration `yaml:"unreachable"`
	// OnFailure (reinstall only) is what a failed reinstall does:
	// rollback (the host's members and software go back to the
	// release before, the reinstall run again with it) or pause (the
	// upgrade stops, the host named and left locked, for an operator);
	// default the policy's on_failure.
	OnFailure string `yaml:"on_failure"`
}

// RunOn is where a host's command runs: written as a host's name, or
// as a mapping.
type RunOn struct {
	// Host is the host whose sshd runs the command.
	Host string `yaml:"host" text:"name"`
	// Active names a component with a role: the command runs on the
	// host of the member holding it, asked (its role check) just before
	// the command runs.
	Active string `yaml:"active" text:"name"`
}

// fromScalar reads run_on: NAME, a host's name.
func (r *RunOn) fromScalar(s string) error {
	*r = RunOn{Host: s}
	return nil
}

// IsZero reports whether run_on is left out (the host itself).
func (r RunOn) IsZero() bool { return r == RunOn{} }

func (r RunOn) String() string {
	if r.Active != "" {
		return "the host of " + r.Active + "'s role holder"
	}
	return r.Host
}

// HostTLS is how ferry trusts one agent's certificate: pinned by its
// fingerprint, or verified against a CA. One of the two.
type HostTLS struct {
	// Fingerprint is "sha256:" and the 64 hex digits of the SHA-256 of
	// the agent's certificate (DER), as the agent prints it at start
	// and writes it to its DIR/tls/fingerprint: that certificate only,
	// whatever its names and dates, is accepted.
	Fingerprint string `yaml:"fingerprint"`
	// CAFile holds the PEM certificates of the CA the agent's
	// certificate must verify against, for the host name or IP address
	// of agent:; relative paths are relative to the description file.
	CAFile string `yaml:"ca_file"`
}

// HostSSH is how ferry reaches a host over SSH (ssh substrate): one
// connection to its sshd, its key checked against a known_hosts file,
// ferry's commands run there with each argument quoted.
type HostSSH struct {
	// Address is the host's sshd, host:port.
	Address string `yaml:"address"`
	// User is the user ferry logs in as.
	User string `yaml:"user"`
	// KnownHosts is the known_hosts file that must hold the host's key
	// (relative to the description): a host whose key is not there, or
	// is another, is refused before any member is touched, with both
	// fingerprints. There is no mode that accepts any key.
	KnownHosts string `yaml:"known_hosts"`
	// IdentityFiles are private keys ferry offers (mode 0600 at most,
	// not encrypted: an encrypted key belongs in an SSH agent), with
	// the keys of the SSH agent at $SSH_AUTH_SOCK, if one runs. No
	// password or key is ever written in the description.
	IdentityFiles []string `yaml:"identity_files"`
	// Dir is ferry's directory on the host: the artifacts it copied
	// there, each member's state and output. Relative to the user's
	// home.
	Dir string `yaml:"dir"`
	// MaxSessions bounds the SSH channels ferry has open at once on
	// the host's one connection (sshd's own MaxSessions is 10 by
	// default): a batch of many members on one host queues rather than
	// storming the host.
	MaxSessions int `yaml:"max_sessions"`
	// ConnectTimeout bounds a connection's dial and handshake; a host
	// that does not answer within it has its members observed as not
	// known (the upgrade holds, naming it).
	ConnectTimeout Duration `yaml:"connect_timeout"`
}

// Commands are a component's own commands on its members' hosts (ssh
// substrate), each an argv of templates over the member (like
// run.args), run through the host's sshd with each argument quoted,
// never pasted into a shell line. Their environment has FERRY_MEMBER,
// FERRY_DIR (the member's directory), FERRY_VERSION, FERRY_ARTIFACT
// (the artifact copied to the host, its sha256 checked), FERRY_SHA256
// and, for logs, FERRY_LINES and FERRY_PREVIOUS. An operation without a
// command is done by ferry's own helper (a fixed script): the member
// started in a session of its own from the copied artifact with
// run.args and run.env, its pid, version and output kept in its
// directory.
type Commands struct {
	// Start starts the member on FERRY_ARTIFACT, once the artifact is
	// copied and checked (systemctl start ...); it returns once the
	// member is started, and succeeds on a member already running it.
	Start []string `yaml:"start"`
	// Stop stops the member gracefully; it succeeds on a stopped one.
	Stop []string `yaml:"stop"`
	// Status says whether the member runs: exit status 0 when it does,
	// 3 when it does not (systemctl is-active and LSB's status); any
	// other status is a failure of the command, shown with its output.
	Status []string `yaml:"status"`
	// Version prints the version the member runs (its first line,
	// trimmed); without it the version ferry started it on.
	Version []string `yaml:"version"`
	// Logs prints the member's last FERRY_LINES lines of output (of
	// the instance before the current one when FERRY_PREVIOUS is
	// true), for ferry logs and ferry bundle.
	Logs []string `yaml:"logs"`
	// Sudo names the operations run through sudo -n (never asking for a
	// password): start, stop, status, version, logs, install (the
	// artifact's copy). The others run as the SSH user.
	Sudo []string `yaml:"sudo"`
}

// Component is a kind of member with one upgrade strategy.
type Component struct {
	// Name is a lower-case letter, then up to 30 lower-case letters,
	// digits or '-'.
	Name string `yaml:"name"`
	// Order places the component in the upgrade (lowest first; never two
	// components at once): the control plane before its clients.
	Order int `yaml:"order"`
	// Strategy batches the component's members.
	Strategy Strategy `yaml:"strategy"`
	// Members are the component's instances (found at run time on
	// Kubernetes when none are listed).
	Members []Member `yaml:"members"`
	// Health holds the checks that gate each step.
	Health Health `yaml:"health"`
	// Run says how a member process is started (process substrate).
	Run Run `yaml:"run"`
	// Soak is min_healthy_time: how long a member must stay healthy
	// after its restart before its step is done.
	Soak Duration `yaml:"soak"`
	// Deadline is healthy_deadline: how long a member has, from the
	// start of its replacement, to become healthy and finish its soak.
	Deadline Duration `yaml:"deadline"`
	// GateDeadline bounds how long the cluster gate after a batch may
	// stay red before the step fails.
	GateDeadline Duration `yaml:"gate_deadline"`
	// Hooks are calls made around each member's restart and around the
	// component's phase.
	Hooks Hooks `yaml:"hooks"`
	// Workload is what the component is on Kubernetes; its members
	// (pods, nodes) are then found at run time when none are listed.
	Workload *Workload `yaml:"workload"`
	// Role, if set, is a role some members hold (the leader, the active
	// controller), observed at run time: members holding it go last in
	// their phase, so that it moves once.
	Role *Role `yaml:"role"`
	// CrashLoop says when a member that keeps exiting after its start
	// on the new release fails its step at once, rather than at its
	// deadline.
	CrashLoop CrashLoop `yaml:"crash_loop"`
	// Adopt says how to find each member already running when ferry did
	// not start it (by systemd, a script, a tool before ferry), so that
	// ferry can take the cluster over where it runs instead of seeing
	// its members down; a member's own adopt replaces it (process
	// substrate). Needs Version: ferry did not start such a member, so
	// only the member itself can say what it runs.
	Adopt *Adopt `yaml:"adopt"`
	// Version is the call that reads the version a member runs when
	// ferry did not start it (an adopted member): an http call whose
	// json.path names the field holding the version, or an http or exec
	// call whose pattern's one group captures it. It is made by ferry
	// (where checks are made), not by the agent, which knows only pids.
	Version *Call `yaml:"version"`
	// OKToStop is the system's own answer to whether a member may stop
	// now (Ceph's ok-to-stop): a call about the member, made per
	// candidate when a batch is formed and again after its drain, just
	// before its stop; passing means yes, and a failure's detail is the
	// system's reason, shown with the refusal by predicate ok_to_stop.
	OKToStop *Call `yaml:"ok_to_stop"`
	// Commands are the component's own start, stop, status, version
	// and logs commands on its members' hosts (ssh substrate); ferry's
	// helper does what they leave out.
	Commands *Commands `yaml:"commands"`
	// Backup backs each member's data up before the member goes down
	// for an upgrade that cannot avoid downtime (strategy offline), and
	// restores it if the upgrade fails after that: StarlingX's simplex
	// upgrade. ferry verifies each backup before anything is installed.
	Backup *Backup `yaml:"backup"`
	pos    positions
}

// Backup is how a member's data is backed up, verified and restored,
// with exec calls ferry makes on its own machine (each argument a
// template over the member, .Backup the backup's directory). The backup
// is taken with the member stopped (no acknowledged write can land
// after it), verified (ferry's checksum over its files, then the
// restore check) before the release is installed, and restored, with
// its checksum checked again, when the upgrade goes back.
type Backup struct {
	// Dir is the absolute directory the backups go in, outside every
	// member's data; each backup is a directory of its own in it,
	// MEMBER/UPGRADE-ID (.Backup), made empty by ferry before the
	// command runs.
	Dir string `yaml:"dir"`
	// Data is the member's data directory (a template over the member):
	// Dir may be neither inside it nor around it.
	Data string `yaml:"data"`
	// Command writes the backup into .Backup (exec).
	Command *Call `yaml:"command"`
	// Sums, if set, is a file the command writes in .Backup, each line
	// "SHA256  FILE" (sha256sum's format): ferry's checksum of every
	// file must match it, and every file must be listed.
	Sums string `yaml:"sums"`
	// Check is the restore check: passing means the backup in .Backup
	// can be restored (exec; it must not change the backup).
	Check *Call `yaml:"check"`
	// Restore puts the data of .Backup back in place of the member's,
	// the member stopped (exec; idempotent: it may be made again after
	// ferry's own crash).
	Restore *Call `yaml:"restore"`
	// Keep is how many backups of each member are kept once an upgrade
	// completes, the newest (every one is kept until then, and after an
	// upgrade that went back).
	Keep int `yaml:"keep"`
}

// Adopt says how the agent finds a member's process when ferry did not
// start it. Exactly one of PIDFile and Listen is set.
type Adopt struct {
	// PIDFile is a file holding the process id (a template over the
	// member, like run.args; relative paths are relative to the
	// description's directory and, like artifacts, read on the agent's
	// host).
	PIDFile string `yaml:"pid_file"`
	// Listen finds the process listening on the member's address
	// (through /proc/net/tcp and tcp6 and each process's descriptors,
	// on the agent's host; the agent needs to see the process's
	// descriptors, so runs as its user or as root).
	Listen bool `yaml:"listen"`
}

// Role is a role a member may hold, and the check that says whether it
// does (passing: it holds the role).
type Role struct {
	// Name names the role in messages: leader, primary, active.
	Name string `yaml:"name" text:"name"`
	// Check passes on a member that holds the role.
	Check *Check `yaml:"check"`
}

// CrashLoop is how many exits of a member within a window after its
// start on the target release make a crash loop.
type CrashLoop struct {
	// Exits is how many exits make a crash loop.
	Exits int `yaml:"exits"`
	// Window counts from the member's first start on the target.
	Window Duration `yaml:"window"`
}

// Kubernetes is how ferry reaches a cluster's API server.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file (relative to the description);
	// empty means $KUBECONFIG, then the in-cluster service account.
	Kubeconfig string `yaml:"kubeconfig"`
	// Context picks a context of the kubeconfig (default: its current).
	Context string `yaml:"context"`
}

// Workload kinds a component can be on Kubernetes.
const (
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
	KindDeployment  = "Deployment"
	KindNodePool    = "NodePool"
)

// Workload names a Kubernetes workload (by namespace and name, or by a
// label selector that matches exactly one) or a pool of nodes (by a
// node label selector). Its members are the StatefulSet's pods, the
// nodes of the DaemonSet's pods, the Deployment's replicas, or the
// pool's nodes; with per: workload, the Deployments a selector
// matches, one member each.
type Workload struct {
	// Kind is StatefulSet, DaemonSet, Deployment or NodePool.
	Kind      string `yaml:"kind"`
	Namespace string `yaml:"namespace"` // default "default"; not for NodePool
	// Name names the workload (or Selector finds it; a NodePool has a node
	// selector only).
	Name string `yaml:"name"`
	// Selector is a label selector matching exactly one workload (any
	// number with per: workload), or a NodePool's nodes.
	Selector string `yaml:"selector"`
	// Container is the container whose image is the version (default:
	// the pod template's first container).
	Container string `yaml:"container"`
	// Upgrade (NodePool) is the command run once a node is drained, to
	// upgrade it: an argv, no shell, with FERRY_NODE and FERRY_VERSION
	// in its environment. ferry then waits for the node to report the
	// new kubelet version and be Ready.
	Upgrade []string `yaml:"upgrade"`
	// DrainTimeout bounds a node's drain (default 5m); evictions that a
	// PodDisruptionBudget refuses are retried until then.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// Per says what one member is: left out, the kind's own (a
	// StatefulSet's pod, a DaemonSet's node, a Deployment's replica
	// slot, a pool's node); "workload" (Deployments, found by selector)
	// makes each Deployment the selector matches one member, named
	// after it, as Rook runs one Deployment per mon and per OSD. Its
	// host is its pod's node, its new image rolled out by its own
	// controller under its own strategy.
	Per string `yaml:"per"`
	// Update says how a DaemonSet member's pod takes the new image: left
	// out, it is deleted and its controller creates it again; "in-place"
	// patches the running pod's image, so that the kubelet restarts its
	// container where it is (same pod, node and IP; no scheduling and no
	// request of the controller manager), as OpenKruise's
	// InPlaceIfPossible does. A pod whose template differs from the new
	// one in more than the container images is still recreated. Init
	// containers do not run again.
	Update string `yaml:"update"`
}

// Workload.Per values.
const (
	// PerWorkload: each workload the selector matches is one member.
	PerWorkload = "workload"
)

// Workload.Update values.
const (
	// UpdateInPlace: a pod's image is changed where it runs.
	UpdateInPlace = "in-place"
)

// Traffic is the client load ferry drives through the service while it
// upgrades it, and how the impact verdict judges what clients saw.
type Traffic struct {
	// Targets are base URLs; requests go to them in turn.
	Targets []string `yaml:"targets"`
	// Requests is the mix; each entry's share of the requests is its
	// Share over the sum of the shares.
	Requests []TrafficRequest `yaml:"requests"`
	// Rate is the requests per second of all clients together;
	// Concurrency the number of clients; Timeout one request's bound.
	Rate        float64  `yaml:"rate"`
	Concurrency int      `yaml:"concurrency"`
	Timeout     Duration `yaml:"timeout"`
	// Baseline is how long traffic runs before the first member is
	// touched (the normal operations the upgrade is compared with);
	// After how long it goes on once the upgrade has ended.
	Baseline Duration `yaml:"baseline"`
	After    Duration `yaml:"after"`
	// Seed makes the mix reproducible (0: a random seed, printed).
	Seed uint64 `yaml:"seed"`
	// Verdict holds the thresholds of zero impact.
	Verdict Verdict `yaml:"verdict"`
	// Prometheus, if set, makes a Prometheus server's view of the
	// service's own traffic a signal too (or the only one, with no
	// targets): for services whose real clients should be the judge.
	Prometheus *Prometheus `yaml:"prometheus"`
	// Control, if set, is a request on the same machine that the
	// upgrade does not touch (a load balancer's admin API, say), driven
	// beside the traffic: when the whole machine slows, the control
	// slows too, and the zero-impact verdict raises its thresholds by
	// as much (docs/report.md), so that a loaded machine is not taken
	// for an upgrade that hurt the clients.
	Control *TrafficControl `yaml:"control"`
}

// TrafficControl is the control of a traffic spec: one GET, repeated.
type TrafficControl struct {
	// URL is the request's whole address (http or https).
	URL string `yaml:"url"`
	// Rate is its requests per second, from one client (default 20).
	Rate float64 `yaml:"rate"`
}

// Prometheus is a Prometheus server and the queries that measure what
// the service's clients see.
type Prometheus struct {
	// URL is the Prometheus server's base URL.
	URL string `yaml:"url"`
	// Latency is a PromQL expression of a latency in seconds (e.g. a
	// p99 over a short rate window); each step's value is one sample.
	Latency string `yaml:"latency"`
	// Errors is a PromQL expression of failed requests per second; any
	// step above zero during the upgrade breaks zero downtime.
	Errors string `yaml:"errors"`
	// Step is the resolution of the range queries (default 1s).
	Step Duration `yaml:"step"`
	// TokenFile holds a bearer token for the server (mode 0600).
	TokenFile string `yaml:"token_file"`
}

// TrafficRequest is one kind of request of the mix. Path and Body are
// Go templates over .Key and .Value (a fresh key and value), .Written
// (a key an earlier request wrote and its value, .WrittenValue; a
// request that uses them waits until one exists), .Seq and .Client.
type TrafficRequest struct {
	// Name names the request in the report.
	Name   string `yaml:"name" text:"name"`
	Method string `yaml:"method"` // default GET, POST with a body
	// Path is appended to a target, a template over the traffic data.
	Path string `yaml:"path"`
	// Body is a template over the traffic data.
	Body  string  `yaml:"body"`
	Share float64 `yaml:"share"` // default 1
	// Writes marks a request whose success acknowledges .Key = .Value:
	// ferry reads every acknowledged write back at the end.
	Writes bool `yaml:"writes"`
	// Verify marks a read whose body must equal .WrittenValue.
	Verify bool `yaml:"verify"`
	// ExpectStatus is the status of success (default any 2xx).
	ExpectStatus int `yaml:"expect_status"`
}

// Verdict holds the thresholds of the zero-impact verdict: a window is
// impacted when its latencies are worse than the baseline's at level
// Alpha (one-sided Mann-Whitney U) and its p99 is above P99Ratio times
// the baseline's (or its median above 2 times), raised to 1.25 times
// what the baseline's own 1 s chunks showed when that is higher, or
// when its request rate fell below half the baseline's (or below what
// the chunks showed); a window with fewer than MinRequests, shorter
// than a chunk, or judged against a baseline with fewer than 4 chunks
// of MinRequests is insufficient (docs/report.md).
type Verdict struct {
	Alpha       float64 `yaml:"alpha"`        // default 0.01
	P99Ratio    float64 `yaml:"p99_ratio"`    // default 1.5
	MinRequests int     `yaml:"min_requests"` // default 20
}

// Strategy names how members of a component are batched.
type Strategy struct {
	// Type is one-at-a-time (quorum members: one at a time, a quorum of
	// the others healthy), canary (batches of 1, 2, 4 … up to
	// max_batch), by-domain (one failure domain at a time, each in
	// batches of 1, 2, 4 … up to max_batch; members without a domain
	// after every domain) or active-standby (the standbys first,
	// max_batch at a time, then the member holding the role, alone,
	// after hooks.switchover handed the role to an upgraded member).
	Type StrategyType `yaml:"type"`
	// Quorum is the number of healthy members that must remain while
	// one is stopped (one-at-a-time); 0 means a majority of the members.
	Quorum int `yaml:"quorum"`
	// MaxBatch caps canary growth (1, 2, 4, ... MaxBatch), within each
	// domain for by-domain.
	MaxBatch int `yaml:"max_batch"`
	// MaxUnavailable bounds members of the component down at once,
	// counting those already down for any reason. 0 means 1.
	MaxUnavailable int `yaml:"max_unavailable"`
	// MaxUnavailablePerHost and MaxUnavailablePerDomain bound them per
	// host and per failure domain (0: no bound).
	MaxUnavailablePerHost   int `yaml:"max_unavailable_per_host"`
	MaxUnavailablePerDomain int `yaml:"max_unavailable_per_domain"`
	pos                     positions
}

// StrategyType names a strategy registered in package strategy; config
// knows none by name (strategy.Names lists them).
type StrategyType string

// Settings is the strategy's view of its settings.
func (s Strategy) Settings() strategy.Settings {
	return strategy.Settings{Type: string(s.Type), Quorum: s.Quorum, MaxBatch: s.MaxBatch,
		MaxUnavailable: s.MaxUnavailable, MaxUnavailablePerHost: s.MaxUnavailablePerHost,
		MaxUnavailablePerDomain: s.MaxUnavailablePerDomain}
}

// Member is one running instance of a component on one host.
type Member struct {
	// Name is unique across the cluster: a lower-case letter or digit,
	// then up to 62 lower-case letters, digits, '.', '_' or '-' (a file
	// name on its host).
	Name string `yaml:"name"`
	// Host names the host it runs on (one of hosts).
	Host string `yaml:"host"`
	// Address is the member's host:port, what its checks and hooks reach
	// it at ({{.Address}}).
	Address string `yaml:"address"`
	// Vars are the member's own values for templates ({{.Vars.peer}}).
	Vars map[string]string `yaml:"vars"`
	// Domain is the member's failure domain (default: its host's; a member
	// found on Kubernetes takes its node's topology.kubernetes.io/zone).
	Domain string `yaml:"domain" text:"name"`
	// Labels are the labels the substrate found on the member's host
	// when the description does not list it (a Kubernetes node's):
	// what a phase's host_labels select the member by. Never read from
	// a description, whose hosts carry their own.
	Labels map[string]string `yaml:"-"`
	// Adopt, if set, replaces its component's adopt for this member.
	Adopt *Adopt `yaml:"adopt"`
	pos   positions
}

// Run is how the agent starts a member: argv and environment, each a
// Go template over the member (.Name, .Address, .Host, .Component,
// .Vars, .Members, .PID). There is no shell: every arg is passed as is.
type Run struct {
	// Args is the argv after the artifact (the artifact itself is
	// argv[0]), each a template.
	Args []string `yaml:"args"`
	// Env is added to the agent's own environment (and wins over it); each
	// value a template.
	Env map[string]string `yaml:"env"`
	// StopTimeout is how long a graceful stop may take before SIGKILL.
	StopTimeout Duration `yaml:"stop_timeout"`
	// StopSignal is the signal of a graceful stop: SIGTERM (default),
	// or SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2 for servers whose
	// graceful stop is another signal (NATS's lame-duck mode is
	// SIGUSR2: it moves its leaderships away and lets its clients
	// reconnect elsewhere before it exits).
	StopSignal string `yaml:"stop_signal"`
	// Files are written into each member's directory before it starts
	// (process substrate): a change of them restarts the member like a
	// new version, so configuration rolls out like a release.
	Files []RunFile `yaml:"files"`
	// Restart is the agent's own restart policy for a member that exits
	// when ferry did not stop it: "no" (default) or "on-failure" (with
	// backoff). ferry's crash-loop detection counts those restarts.
	Restart string `yaml:"restart"`
	pos     positions
}

// RunFile is one file of Run.Files. Path is relative to the member's
// directory, clean, without ".."; Content is a Go template over the
// member, like run.args, rendered by Cluster.MemberFiles.
type RunFile struct {
	// Path is relative to the member's directory (agent
	// DIR/members/NAME/), clean, without "..", each element at most 237
	// bytes (a file name's 255, less the agent's temporary suffix).
	Path string `yaml:"path"`
	// Mode is written in octal, "0640" (default 0600); neither setuid,
	// setgid, sticky nor world-writable.
	Mode FileMode `yaml:"mode"`
	// Content is a template over the member, at most 1 MiB rendered.
	Content string `yaml:"content"`
}

// FileMode is a file's permission bits, written in octal in YAML
// ("0640", quoted or not: the digits are read as octal either way).
type FileMode fs.FileMode

// MarshalText writes the mode as "0640".
func (m FileMode) MarshalText() ([]byte, error) {
	return []byte(memberfile.FormatMode(fs.FileMode(m))), nil
}

// UnmarshalText reads "0640", "640" or "0o640".
func (m *FileMode) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("empty mode: want octal digits, like 0640")
	}
	v, err := memberfile.ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = FileMode(v)
	return nil
}

// Health holds the checks that gate a component.
type Health struct {
	// Member is probed on each member: it must pass after a restart.
	Member *Check `yaml:"member"`
	// Cluster is probed once for the whole component (on any member
	// that answers) before each batch and between components.
	Cluster *Check `yaml:"cluster"`
	pos     positions
}

// Check is a probe with its cadence and thresholds.
type Check struct {
	Call `yaml:",inline"`
	// Interval between probes; Timeout of one probe.
	Interval Duration `yaml:"interval"`
	// SuccessThreshold consecutive passes make it healthy;
	// FailureThreshold consecutive failures make it unhealthy.
	SuccessThreshold int `yaml:"success_threshold"`
	FailureThreshold int `yaml:"failure_threshold"`
}

// Call is one HTTP request, TCP dial or command. Exactly one of HTTP,
// TCP and Exec is set. Strings are Go templates over the member.
type Call struct {
	HTTP   string `yaml:"http"`   // URL
	Method string `yaml:"method"` // default GET
	// Body is the request body, a template (a body makes the default
	// method POST).
	Body string `yaml:"body"`
	// Headers are request headers, each value a template (a Host header
	// sets the request's host).
	Headers      map[string]string `yaml:"headers"`
	ExpectStatus int               `yaml:"expect_status"` // default: any 2xx
	// JSON, if set, requires a field of the JSON response to equal a value
	// or another field (a version call: names the field holding the
	// version).
	JSON *JSONMatch `yaml:"json"`
	// Pattern is a regular expression (RE2) the response's body (http)
	// or the command's output (exec) must match; in a version call its
	// one group is the version.
	Pattern string   `yaml:"pattern"`
	TCP     string   `yaml:"tcp"`  // host:port
	Exec    []string `yaml:"exec"` // argv, no shell
	Timeout Duration `yaml:"timeout"`
	// Undo, on a hook that changes something for a while (pre_stop,
	// pre_phase, pre_upgrade), is the call that undoes it. ferry
	// records it before the hook runs and makes it when the change is
	// over, or when the move, phase or upgrade ends any other way
	// (abort, rollback, failure, pause, ferry's own crash).
	Undo *Call `yaml:"undo"`
	pos  positions
}

// JSONMatch requires a field of the JSON response (dotted path) to
// equal a value, or another field of the same response. In a version
// call it has a path only: the field holding the version.
type JSONMatch struct {
	// Path is dotted: a.b, items.0.name.
	Path string `yaml:"path"`
	// Equals is held as encoding/json would decode it: nil, bool,
	// float64, string, []any or map[string]any, so that it compares
	// with a decoded response by reflect.DeepEqual. A string is a
	// template over the member ("{{.Name}}").
	Equals any `yaml:"equals"`
	// EqualsPath, instead of Equals, names another field of the same
	// response the field must equal: etcd's status answers with its
	// leader's id and its own, and a member leads when they are equal.
	EqualsPath string `yaml:"equals_path"`
}

// Hooks are calls made around a member's restart and around the
// component's phase.
type Hooks struct {
	// PreStop runs before the member is stopped: out of rotation,
	// leadership moved away. A call's undo (back into rotation) runs
	// when the member rejoins, or when its move ends any other way.
	PreStop []Call `yaml:"pre_stop"`
	// PostStart runs after the member has soaked (and its pre_stop
	// undos have run).
	PostStart []Call `yaml:"post_start"`
	// PrePhase runs before the component's first member moves (set
	// Ceph's noout before the first OSD); its undos run when the phase
	// ends, however it ends.
	PrePhase []Call `yaml:"pre_phase"`
	// PostPhase runs once the phase's last member is done and the
	// phase's undos have run.
	PostPhase []Call `yaml:"post_phase"`
	// Switchover hands the component's role to the member .To (an
	// upgraded one) before the member holding it goes: the strategies
	// that switch over (active-standby) run it, made once for the
	// component like a phase hook (.Any), StarlingX's swact, cephadm's
	// "mgr fail". Its undo is the same list made again with .To the
	// member that held the role before (an abort hands it back).
	Switchover []Call `yaml:"switchover"`
	// Steps are the hook lists of the other steps a strategy may add
	// before a batch (package step's extra steps, each registered by
	// name in a file of its own), by the name the step gives its list
	// (its list is then steps.NAME): made once for the component like
	// switchover, with .To the member the step hands over to; an undo
	// makes the same list with .To the member that held it before.
	Steps map[string][]Call `yaml:"steps"`
}

// UpgradeHooks are calls made at the start and the end of an upgrade.
type UpgradeHooks struct {
	// PreUpgrade runs once the preflight passed, before anything else;
	// its undos run when the upgrade ends, however it ends.
	PreUpgrade []Call `yaml:"pre_upgrade"`
	// PostUpgrade runs at the end, once those undos have run.
	PostUpgrade []Call `yaml:"post_upgrade"`
}

// Alarm is one named check of the health query: a call (http, tcp or
// exec, with its expected status, JSON field or pattern) that passes
// when nothing alarms.
type Alarm struct {
	// Name is how the health query lists it ("alarm NAME").
	Name string `yaml:"name"`
	Call `yaml:",inline"`
}

// Application is one application of Cluster.Applications: the
// cluster's releases it supports (a list, a call, or both: each must
// say yes).
type Application struct {
	// Name is how the health query lists it ("application NAME
	// supports V").
	Name string `yaml:"name"`
	// Supports lists the releases it runs on: versions or x-ranges
	// (1.38.x).
	Supports []string `yaml:"supports"`
	// Check is asked whether it supports release {{.Version}} (an
	// application's own plugin, StarlingX's): passing means yes, and
	// its detail is said with a refusal.
	Check *Call `yaml:"check"`
}

// Release is one version in the catalog, with its artifacts.
type Release struct {
	// Version is MAJOR.MINOR.PATCH with an optional -suffix, as the
	// members report it.
	Version string `yaml:"version"`
	// UpgradeFrom lists versions (or x-ranges like "1.0.x") that may
	// upgrade to this release.
	UpgradeFrom []string `yaml:"upgrade_from"`
	// DowngradeTo lists versions this release may go back to.
	DowngradeTo []string `yaml:"downgrade_to"`
	// Artifacts maps a component name to its artifact; "*" serves any
	// component without its own.
	Artifacts map[string]Artifact `yaml:"artifacts"`
	// Migrations are the release's data steps around the rolling
	// restart (Glance's expand, migrate, contract; Ironic's unpin).
	Migrations Migrations `yaml:"migrations"`
	// Flow is the upgrade to this release, stage by stage, when its
	// order is not the default (expand, each component's phase by
	// order, migrate, finalize, contract): Ironic's expand, conductors,
	// APIs, unpin rollout, migrate; StarlingX's networking upgraded
	// between its two controller phases.
	Flow []FlowStage `yaml:"flow"`
	// States name the upgrade's own states, those of no flow stage, as
	// the operator sees them in ferry upgrade status and the events
	// (StarlingX's {completed: upgrade-complete, paused-on-failure:
	// upgrade-failed}): keys are upgrade-started, preflight, completed,
	// failed, paused, rolling-back, rolled-back, and paused-on-failure
	// (paused by a failure, not by the operator; paused when left out).
	// The record keeps the machine's own word.
	States map[string]string `yaml:"states"`
	// SigningKey is the public key this release's artifacts are signed
	// with, when not the description's signing_key (a key rotated at
	// this release).
	SigningKey string `yaml:"signing_key"`
	// RequiresFerry is the oldest ferry release that understands this
	// release (its flow, its steps): an older ferry refuses to start
	// the upgrade, as Rook's operator never lets a cluster run newer
	// than itself. Upgrade ferry first.
	RequiresFerry string `yaml:"requires_ferry"`
	// Ferry is the ferry build this release's upgrade puts in place
	// first, before any member moves: a binary (path, sha256) that each
	// host's agent re-executes on, one host at a time, its members
	// running on; or an image (image, sha256: its digest) that the
	// Kubernetes controller's own Deployment is moved to when the
	// controller is older than requires_ferry, the new controller taking
	// the upgrade up. Without it, agents older than requires_ferry are
	// re-executed on the ferry binary that runs the upgrade.
	Ferry Artifact `yaml:"ferry"`
	pos   positions
}

// The kinds of stage of a flow (FlowStage.Stage).
const (
	StageExpand   = "expand"
	StagePhase    = "phase"
	StageRollout  = "rollout"
	StageMigrate  = "migrate"
	StageFinalize = "finalize"
	StageContract = "contract"
	// StageHosts upgrades components host by host: each host locked,
	// every member of the stage's components on it upgraded, unlocked.
	StageHosts = "hosts"
)

// FlowStage is one stage of a release's flow. Expand, migrate,
// finalize and contract make the release's migration calls of that
// name; a phase upgrades one component's members; an action is one
// gated call for the whole cluster; a rollout restarts the members of
// components, in order, on the release they already run, with the pin
// moved to the release (Ironic's unpin: their arguments, environment or
// files render .Pin); a hosts stage upgrades components host by host
// (StarlingX's workers: each host locked, every member on it upgraded
// in the components' order, the host unlocked).
type FlowStage struct {
	// Stage is expand, phase, rollout, migrate, finalize, contract,
	// hosts, or a kind registered by name: action (ferry validate lists
	// the kinds of its build).
	Stage string `yaml:"stage"`
	// Component is a phase's component; for an action, the component
	// whose running member (.Any) its calls are made against.
	Component string `yaml:"component"`
	// Components are a rollout's components, restarted one after the
	// other in this order, each with its own strategy; a hosts stage's,
	// upgraded on each host in this order (each component's members
	// still within its strategy's budgets and quorum). A hosts stage
	// that selects its hosts may leave them out: every component with a
	// member on them, in the components' order.
	Components []string `yaml:"components"`
	// Hosts are the hosts a hosts stage moves, by name (StarlingX's
	// controller-1 alone); HostLabels selects them by label
	// (personality: storage). With neither, the stage moves every host
	// with a member of its components. A component may span several
	// hosts stages: each of its members is moved by the stage that
	// moves its host.
	//
	// A phase may take a part of its component's members the same way
	// (its hosts by name or label: a member's labels are its host's,
	// or, found on Kubernetes, its node's), or by Take: then it is
	// named (Name), and the component may have several phases, each
	// moving its part (StarlingX's first control plane, the networking,
	// the second control plane).
	Hosts      []string          `yaml:"hosts"`
	HostLabels map[string]string `yaml:"host_labels"`
	// Take (phase) is how many of its component's members the phase
	// moves: the first in the plan's order of those still to move, not
	// taken by a phase that selects them by host. A part that selects
	// none moves the rest.
	Take int `yaml:"take"`
	// Name names an action (its state is action-NAME), a hosts stage
	// (its state is upgrading-NAME: upgrading-hosts by default,
	// StarlingX's; no component may have its name), or a phase that
	// moves a part of its component (upgrading-NAME, then
	// upgraded-NAME: StarlingX's upgrading-first-master).
	Name string `yaml:"name"`
	// MaxUnavailable bounds the hosts a hosts stage has locked at once,
	// counting those with a member down for any reason: a number, or a
	// share of the stage's hosts (50%: StarlingX's storage hosts at most
	// half at once; rounded down, at least 1). In a phase, it bounds
	// the part's members down at once instead of the component's
	// strategy (StarlingX's kubelets: the controllers one at a time,
	// the workers two), and caps its batches.
	MaxUnavailable HostBudget `yaml:"max_unavailable"`
	// MaxUnavailablePerDomain bounds the hosts a hosts stage has locked
	// at once in one failure domain.
	MaxUnavailablePerDomain int `yaml:"max_unavailable_per_domain"`
	// Strategy orders a hosts stage's hosts: a strategy that chooses
	// hosts (by-domain: one failure domain's hosts at a time, the
	// domain begun until it is done). Without one, a host with a member
	// down goes first, one holding a role last, the description's order
	// otherwise.
	Strategy string `yaml:"strategy"`
	// Calls are an action's calls, made until they pass, at the
	// migrations' interval, within Deadline.
	Calls []Call `yaml:"calls"`
	// Gate is an action's check after its calls pass, made until it
	// passes within the same Deadline.
	Gate *Call `yaml:"gate"`
	// Deadline bounds an action, its calls and its gate; in a hosts
	// stage, a host's lock (and each unlock is retried until
	// policy.undo_deadline).
	Deadline Duration `yaml:"deadline"`
	// State is the state the operator sees while the stage runs, in
	// ferry upgrade status and the events, as written (StarlingX's
	// upgrading-controllers, activating); several stages may show one.
	// Default: the stage's own (upgrading-NAME, action-NAME), which the
	// record keeps in any case.
	State string `yaml:"state"`
	// PointOfNoReturn marks the stage after whose beginning abort and
	// rollback are refused (a failure then pauses): at most one stage,
	// not after finalize, which is the point of no return when no stage
	// is marked.
	PointOfNoReturn bool `yaml:"point_of_no_return"`
}

// StageCalls are the calls an upgrade to release r makes in its stage
// of kind stage: expand, migrate, finalize, contract (the release's
// migration calls); a registered kind's (an action's) stage named name,
// its calls or, with gate, its gate. Component is the component whose
// running member (.Any) they are made against.
func (r *Release) StageCalls(stage, name string, gate bool) (component string, calls []Call) {
	m := &r.Migrations
	switch stage {
	case StageExpand:
		return m.Component, m.Expand
	case StageMigrate:
		return m.Component, m.Migrate
	case StageFinalize:
		return m.Component, m.Finalize
	case StageContract:
		return m.Component, m.Contract
	}
	k, ok := LookupStageKind(stage)
	st := r.FlowStage(stage, name)
	if !ok || st == nil {
		return "", nil
	}
	return k.Calls(st, gate)
}

// Migrations are calls made at fixed points of an upgrade to this
// release, each against a running member of Component (.Any):
// Expand before any member runs the release, Migrate once every member
// does (repeated until it passes: it may run long and reports its
// progress), Finalize to move the cluster's compatibility version (the
// pin) to the release: the point of no return; Contract after it.
type Migrations struct {
	// Component is the component whose running member (.Any) the calls are
	// made against.
	Component string `yaml:"component"`
	// Expand runs before any member runs the release (pin the old format).
	Expand []Call `yaml:"expand"`
	// Migrate runs once the members of Component run the release (in a
	// flow, it may come before other components' phases, as Glance's
	// data migration comes before its API nodes' restart), repeated
	// until it passes.
	Migrate []Call `yaml:"migrate"`
	// Finalize moves the pin to the release: the point of no return.
	Finalize []Call `yaml:"finalize"`
	// Contract runs after finalize (drop what only the old release
	// needed).
	Contract []Call `yaml:"contract"`
	// Deadline bounds each stage (default 10m); Interval is the pause
	// between two calls of a stage not done yet (default 1s).
	Deadline Duration `yaml:"deadline"`
	Interval Duration `yaml:"interval"`
}

// Empty reports whether the release has no migration calls at all.
func (m *Migrations) Empty() bool {
	return len(m.Expand)+len(m.Migrate)+len(m.Finalize)+len(m.Contract) == 0
}

// Artifact is a binary (process substrate) or image (Kubernetes) and
// the checksum it must have before it is used.
type Artifact struct {
	// Path is a binary on the agents' hosts (process substrate); relative
	// to the description's directory.
	Path string `yaml:"path"`
	// Image is a container image (Kubernetes), written without a digest
	// (no @sha256:…): ferry pins it to SHA256. An artifact has a path or
	// an image, not both.
	Image string `yaml:"image"`
	// SHA256 is the artifact's checksum, 64 hex digits, checked before it
	// is used.
	SHA256 string `yaml:"sha256"`
	// Signature is the artifact's detached signature (an Ed25519
	// signature: 64 bytes raw, base64 or hex; or a minisign .minisig),
	// checked after the checksum against the release's signing key;
	// required when the release has a key. Relative to the description
	// file.
	Signature string `yaml:"signature"`
}

// Policy is what the engine does around the steps.
type Policy struct {
	// OnFailure: rollback (default) or pause.
	OnFailure string `yaml:"on_failure"`
	// OnImpact is what a batch judged to have hurt the clients (the
	// impact verdict, when ferry drives traffic) leads to: continue
	// (default: it is reported), pause or rollback.
	OnImpact string `yaml:"on_impact"`
	// Tick is the engine's observation interval (default 100ms).
	Tick Duration `yaml:"tick"`
	// Finalize: auto (default) finalizes once the migration is done;
	// manual waits for 'ferry upgrade finalize', so that a release can
	// run pinned for a while before the operator commits to it.
	Finalize string `yaml:"finalize"`
	// UndoDeadline is how long an effect's undo is retried before the
	// upgrade pauses on it, for the operator (default 2m).
	UndoDeadline Duration `yaml:"undo_deadline"`
	// Windows are the maintenance windows in which members may be taken
	// down (none: at any time). Outside them the batch in flight
	// finishes, then the upgrade holds, saying which window opens next
	// and when, and goes on by itself when it opens. A rollback is not
	// held: it repairs.
	Windows []Window `yaml:"windows"`

	// windows are Windows as read (Validate): what the machine asks.
	windows window.Set
}

// Window is one weekly maintenance window: on each of Days, from Start
// to End in Zone; an End not after Start is the next day's (22:00 to
// 04:00 crosses midnight).
type Window struct {
	// Days are the days it opens on: mon, tue, wed, thu, fri, sat, sun
	// (or monday...), or daily.
	Days []string `yaml:"days"`
	// Start is when it opens, HH:MM in Zone.
	Start string `yaml:"start"`
	// End is when it closes, HH:MM in Zone (24:00: midnight at the
	// day's end).
	End string `yaml:"end"`
	// Zone is an IANA time zone name (Europe/Berlin); UTC if left out.
	// Wall times: a window across a daylight saving change is an hour
	// shorter or longer.
	Zone string `yaml:"zone"`
}

// WithoutWindows is the policy with no maintenance windows: what an
// estimate simulates, to set the time it needs against the windows.
func (p Policy) WithoutWindows() Policy {
	p.Windows, p.windows = nil, nil
	return p
}

// MaintenanceWindows are the policy's windows as read; none means
// members may be taken down at any time.
func (p Policy) MaintenanceWindows() window.Set { return p.windows }

// HostBudget is a number of hosts (2) or a share of a stage's hosts
// (50%): a budget that follows the hosts a stage selects.
type HostBudget struct {
	Count   int
	Percent int // 0: Count holds
}

// Hosts is at most n hosts, the budget's count (0 means 1), or its
// share of n rounded down, at least 1.
func (b HostBudget) Hosts(n int) int {
	if b.Percent > 0 {
		return max(1, n*b.Percent/100)
	}
	return max(1, b.Count)
}

// IsZero reports whether the budget is left out (1 host).
func (b HostBudget) IsZero() bool { return b == HostBudget{} }

func (b HostBudget) String() string {
	if b.Percent > 0 {
		return strconv.Itoa(b.Percent) + "%"
	}
	return strconv.Itoa(b.Count)
}

// MarshalText writes the budget as "2" or "50%".
func (b HostBudget) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText reads "2" or "50%" (a percentage from 1 to 100).
func (b *HostBudget) UnmarshalText(t []byte) error {
	s := string(t)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return fmt.Errorf("not a share of the stage's hosts (from 1%% to 100%%): %q", s)
		}
		*b = HostBudget{Percent: n}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a number of hosts (like 2) or a share of them (like 50%%): %q", s)
	}
	*b = HostBudget{Count: n}
	return nil
}

// Duration is a time.Duration written as "2s" or "150ms" in YAML.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as "2s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads "2s", "150ms".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not a duration (like 2s or 150ms): %q", string(b))
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", string(b))
	}
	*d = Duration(v)
	return nil
}

// positions maps a field's YAML key to the line it was written on, so
// that Validate can point at the line of a bad value.
type positions struct {
	line int            // the line of the node itself
	keys map[string]int // key -> line
	// sub holds the lines of nodes below this one that have no
	// positions of their own (list items, map entries, fields of
	// Policy, Hooks, Artifact, JSONMatch), by their path relative to
	// this node: "args[2]", "vars.raft", `artifacts["*"].sha256`.
	sub map[string]int
	// null holds the keys and paths written with no value (timeout:
	// or timeout: null): they count as left out, and take the default.
	null map[string]bool
}

// written reports whether rel (a key of this node, or a path below it
// such as "policy.tick") was written in the description: a value
// written as zero is then kept, for Validate to judge, rather than
// replaced by the default of a value left out.
func (p positions) written(rel string) bool {
	if p.null[rel] {
		return false
	}
	if _, ok := p.keys[rel]; ok {
		return true
	}
	_, ok := p.sub[rel]
	return ok
}

// Line returns the line of key in this node, or of the node itself.
func (p positions) Line(key string) int {
	if l, ok := p.keys[key]; ok {
		return l
	}
	return p.line
}
