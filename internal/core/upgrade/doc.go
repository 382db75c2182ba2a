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
//
// A record once made is never changed: Step, Finished, Record and
// Impacted return a new one that shares with the one they were given
// what they did not change (the members' records, the journal, each
// batch's members, the plans). A member's record is changed only
// through a copy (stepper.edit, which copies the members map too the
// first time), the journal likewise (Upgrade.journal), so that a pass
// over ten thousand members copies the few it moves; Same and Touched
// compare two records by what they share first. The tests' world
// checks at every step that the record given is unchanged.
package upgrade
