// Package plan computes the order of one upgrade: which component moves
// when, and which of its members move together. It is a pure function
// of the description, what was observed of the running cluster and the
// target version; it does no I/O, reads no clock and starts no
// goroutine, so the same inputs always give the same plan.
//
// # Contract
//
// Compute returns one Phase per component, in the order of
// config.Cluster.ComponentsInOrder. Nothing of another component moves
// while a phase runs. Inside a phase:
//
//   - Every member of the component appears exactly once: in one Batch,
//     or in Skipped when it already runs the target (a phase whose
//     members all run the target has no batches, and is listed so that
//     the operator sees it).
//   - Members that are down and need the upgrade come first: replacing a
//     member that is already down costs no availability (and, for a
//     quorum component, gives a voter back sooner). The others follow in
//     description order.
//   - one-at-a-time: each member is a batch of its own. The phase records
//     the quorum (Strategy.QuorumOf the component's size); the upgrade
//     state machine checks, at run time, that stopping a member leaves
//     that many healthy (Ceph's ok-to-stop).
//   - canary: batches of 1, 2, 4, … each capped at
//     min(max_batch, max_unavailable − members down at the target), the
//     latter being members that are down but not in the plan, which use
//     the budget for the whole phase. When that leaves less than 1, the
//     batches are of 1 and Note says why: the engine waits for the budget
//     at run time. Members down and in the plan are not subtracted: they
//     come first and cost nothing while they are replaced.
//
// The plan refuses (with an error wrapping one of the Err sentinels, that
// names the release, component or member at fault) a target that is not
// in the catalog, a component without an artifact in the target release,
// and a member whose version is neither the target nor matched by the
// release's upgrade_from. A member with no version (never started) may
// be installed only if it is down: a running member that reports no
// version is a member ferry cannot reason about.
//
// The planner counts no time and checks no health: the batches say what
// may move together, and the state machine (package upgrade) admits each
// member against max_unavailable and quorum as it finds the cluster.
package plan
