// Package kubernetes is ferry's driver for workloads and nodes of a
// Kubernetes cluster, through the API server (client-go). Like every
// driver it knows members and artifacts, not plans: the engine picks
// which members move in which batch, and this package makes one member
// move.
//
// # Members
//
// A component names one workload (driver.Workload), or many
// Deployments by a selector (per: workload); its members are:
//
//   - StatefulSet: the pods name-(replicas-1) .. name-0, highest
//     ordinal first: the order of Kubernetes' own rolling update. While
//     ferry takes them in that order (every higher ordinal runs the
//     target or is being started), a RollingUpdate StatefulSet is moved
//     by its partition: the first Start writes the new image into the
//     pod template with the partition at its member's ordinal, each
//     next one lowers it, and the controller replaces the pods from the
//     partition up. A pod below the partition that is recreated (deleted
//     by hand, evicted) while the upgrade is paused comes back on the
//     old template. A Start out of that order, or an OnDelete
//     StatefulSet, sets OnDelete instead (saying so in the journaled
//     change): ferry can then take the pods in any order, Start deleting
//     the one pod, which the controller recreates from the new template
//     (and so does it for any pod recreated meanwhile).
//   - DaemonSet: one member per node that runs a pod of it, named
//     "<daemonset>.<node>" (member names are unique across components).
//     OnDelete, as for a StatefulSet out of order: a DaemonSet has no
//     partition. With update: in-place (inplace.go) Start patches the
//     pod's image where it runs instead of deleting it, when the pod's
//     template revision (its ControllerRevision) differs from the new
//     one in the containers' images alone; the pod is labelled with the
//     new revision, so the DaemonSet controller counts it updated, and
//     it reports its old version until its container's status shows the
//     kubelet restarted it.
//   - Deployment: replica slots "<deployment>.1" .. "<deployment>.<n>".
//     Kubernetes cannot replace one chosen pod of a Deployment, so Start
//     of slot i gates the Deployment's own rollout: it lets the rollout
//     run (spec.paused false) until i pods of the new template exist,
//     then pauses it. The strategy is set to RollingUpdate with
//     maxSurge 1 and maxUnavailable 0, so that the rollout never takes a
//     Ready pod away before its replacement is Ready. Slot i is on the
//     new version when at least i Ready pods run it (new Ready pods fill
//     the low slots). The driver pauses the rollout when it sees the
//     i-th new pod created (a watch of the pods, within Start: nothing
//     of the gate outlives the call). The controller creates the (i+1)-th
//     only once the i-th is available (Ready for minReadySeconds), so
//     the gate has a pod's start-up time plus minReadySeconds to pause;
//     a driver slower than that lets the rollout overshoot by maxSurge
//     (one pod), and by more only if it is slower than several pods'
//     start-ups: give pods that are Ready within milliseconds a
//     minReadySeconds. An overshoot never costs availability
//     (maxUnavailable 0). While paused between batches the Deployment
//     runs one pod above its replicas (the surge). The last slot leaves
//     the Deployment unpaused. A ferry that dies while a gate is open
//     leaves the rollout running until its next Start (or the undo of
//     the pause, at the phase's end) takes it in hand again.
//   - Deployments, per: workload: each Deployment the selector matches
//     is one member, named after it (Rook runs one Deployment per mon,
//     per manager and per OSD, each one pod pinned to its node). Its
//     host is its pod's node (with no pod, the node its template pins
//     by kubernetes.io/hostname), its domain that node's zone. Start
//     writes the image into its template and lets its own controller
//     replace the pod under its own strategy, which ferry leaves as it
//     is (Recreate, for an OSD), so that the pod is replaced once; a
//     move leaves its stop to that Start (driver.Replacer). Stop, asked
//     for itself, scales it to 0 (its pod stopped gracefully, none made
//     again) and a later Start scales it back with the new image. It is
//     Running once its replicas
//     are Ready on its template's version; while its controller rolls
//     a new template out it is down, saying what it waits for (a
//     paused Deployment is refused by Start, naming spec.paused). Its
//     pods are those of its own ReplicaSets, whatever other
//     Deployments' selectors match. A Deployment deleted after it was
//     found is a member down (as a DaemonSet's member whose node went);
//     one created is a member from the next Discover (the next start,
//     or a controller's next take-up of the upgrade).
//   - NodePool: the nodes matching a node label selector, by name.
//     Start cordons the node, drains it with kubectl's drain package
//     (evictions through the Eviction API, so PodDisruptionBudgets are
//     honoured and a refused eviction is retried until DrainTimeout),
//     runs the workload's Upgrade argv (no shell; FERRY_NODE and
//     FERRY_VERSION in its environment), waits for the node to report
//     the new kubelet version and be Ready, and uncordons it.
//
// # Observing
//
// Observe and Discover read shared informers' caches, not the API
// server: one informer per kind, namespace and selector that the
// description's workloads name (the workload, by its name or selector;
// its pods, by the workload's pod selector; a node pool's nodes, by
// its node selector), started at first use and stopped by Close. A
// tick of the engine asks the API server nothing; the watches bring
// the changes. The first read of a cache waits for it to sync (up to
// WithCacheSyncTimeout); a cache not synced is driver.ErrUnreachable.
// A DaemonSet's Start reads its pod from the cache too, so that a
// thousand nodes cost a thousand deletes and little else. Writes
// (patches, deletes, evictions) go to the API server, as do the reads
// of a Deployment's gate and of a drain, which must not act on a cache
// behind their own writes. Driver.Requests counts every request.
//
// # Effects
//
// What the driver changes outside a member's own pod is recorded in the
// upgrade's journal (driver.Journal, in the call's context) before it
// is changed, with the undo (Undo): a workload's update strategy (the
// strategy as it was, restored when the component's phase ends, unless
// someone changed it since), a Deployment's pause between batches
// (resumed), a node's cordon (uncordoned; Start uncordons it itself
// once the node is upgraded, and says so). An abort, a failure or a
// crash of ferry in the middle of a phase therefore leaves no strategy
// changed, no rollout paused and no node cordoned once the upgrade
// ends. A Deployment that is one member is scaled to 0 by its Stop:
// journaled with its replicas (scaled back; its Start does so itself
// with the new template, and says so), kept also in its annotation
// ferry.dev/stopped-replicas for that Start. Nothing else of such a
// Deployment is changed: its template is the member's own move, as a
// pod's image is.
//
// # Versions and digests
//
// An artifact is an image and its sha256 digest. The driver writes the
// image as <image>@sha256:<digest>, so that the kubelet pulls by digest
// and the checksum is verified before the image is used. Since an image
// reference does not say which release it is, the pod template also
// gets the annotations ferry.dev/version (the artifact's version) and
// ferry.dev/image (the reference written): a pod's version is its
// ferry.dev/version annotation while its container runs the image that
// annotation went with, and otherwise (a pod ferry never touched, or
// one whose image was changed by hand) the image's tag without a
// leading "v". A node's version is its kubelet version without the "v".
//
// # Output
//
// A member's output is its pod's container's (the workload's
// container), read from the API server's pods/log as kubectl logs
// reads it (driver.Logger): its last lines, or with previous those of
// the container's run before its last, which the kubelet keeps only
// once it has restarted the container (a member whose container never
// restarted, or that has no pod now, has none: fs.ErrNotExist). Both go
// with the pod. So whenever the driver replaces a pod (a Start or a
// Stop that deletes it, a partition it lowers, a Deployment's rollout
// it lets run), it first reads the pod's last DefaultKeepLines lines
// (at most DefaultKeepBytes), and its previous run's when it has one,
// within DefaultKeepTimeout, and hands them to the upgrade's journal
// (driver.KeepOutput: an event of the upgrade, kept-output, which `ferry
// bundle` writes out). A read that fails or times out is kept as what
// it said; the pod is replaced all the same. Which old pods a
// Deployment's rollout removes is the ReplicaSet controller's choice:
// the driver keeps the output of those the controller's ranking picks
// when the Start lets the rollout run (all the old pods left, for the
// last slot), so a pod the controller picks otherwise later (the
// nodes of the new pods change its ranking) goes without its output
// kept. A node (NodePool) has no output the driver reads.
//
// # Permissions
//
// RBAC (rbac.yaml, also the RBAC constant) is the least the driver
// needs: it is checked by the tests, which run the driver as a
// ServiceAccount bound to exactly that ClusterRole.
package kubernetes
