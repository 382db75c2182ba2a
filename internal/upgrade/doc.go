// Package upgrade is the upgrade state machine: a pure function from
// (description, upgrade record, observed cluster, now) to the next
// record and the actions to take. It does no I/O, reads no clock and
// starts no goroutine, so that every decision can be table-tested and
// replayed; the engine persists what Step returns before it acts, then
// reports each action's outcome back through Finished.
//
// The machine is level-triggered: each call looks at what is running
// now (versions, health) and the record of what ferry has committed to,
// and decides from those alone. After a crash the engine simply calls
// Step again with a fresh observation; a member that was stopped
// mid-swap is seen down on the old version and started on the new one.
package upgrade
