// Package plan computes the order of one upgrade: which component moves
// when, and which of its members move together. It is a pure function
// of the description, what was observed of the running cluster and the
// target version; it does no I/O, reads no clock and starts no
// goroutine, so the same inputs always give the same plan.
//
// # Contract
//
// Compute returns one Phase per component, in the order of
// config.Cluster.ComponentsInOrder, or in the order the target
// release's flow names them when it declares one (Plan.Flow lists its
// stages); a flow's rollout adds a Phase (Rollout) per component it
// restarts, of every member, none skipped. Nothing of another component
// moves while a phase runs. Inside a phase that is not a rollout:
//
//   - Every member of the component appears exactly once: in one Batch,
//     or in Skipped when it already runs the target (a phase whose
//     members all run the target has no batches, and is listed so that
//     the operator sees it).
//   - The batches are the component's strategy's (package strategy, by
//     name: Expected over the members to move, in description order,
//     with whether each is down and its failure domain), their sizes
//     capped at min(max_batch, max_unavailable − members down at the
//     target), the latter being members that are down but not in the
//     plan, which use the budget for the whole phase. When that leaves
//     less than 1, the batches are of 1 and Note says why: the engine
//     waits for the budget at run time. Members down and in the plan are
//     not subtracted: they cost nothing while they are replaced.
//   - one-at-a-time and canary put the members that are down first:
//     replacing a member that is already down costs no availability
//     (and, for a quorum component, gives a voter back sooner); the
//     others follow in description order. one-at-a-time makes each
//     member a batch of its own and the phase records the quorum; the
//     upgrade state machine checks, at run time, that stopping a member
//     leaves that many healthy (Ceph's ok-to-stop). canary's batches
//     are 1, 2, 4, … by-domain's are one failure domain after another,
//     each 1, 2, 4, …, and its note names the domains in order.
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
