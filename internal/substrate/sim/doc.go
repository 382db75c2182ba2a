// Package sim is a substrate that exists only in memory: members with
// seeded step durations (stop, start, time to healthy), failures (a
// release that never becomes healthy, crash loops) and outages (the
// substrate not answering for a while), on a virtual clock. It runs the
// real engine (internal/run/engine) and state machine against them, with an
// in-memory store, and checks the upgrade's invariants at every instant
// from what it sees: budgets per component, host and domain, quorum, one
// phase at a time, one switchover at a time, and where every member
// ends. `ferry simulate` prints what it finds.
//
// # Time
//
// The engine reads and waits on Clock, a virtual clock. Time advances
// only when nothing is ready to run: the clock waits until the Go
// scheduler has no goroutine running or runnable but its own (the
// runtime's goroutine metrics, read twice with no clock operation in
// between), then fires the earliest timers. So a probe, an action or a
// deadline happens at the virtual time it is due, whatever the machine's
// load. A run is deterministic for a seed because every change of the
// simulated world, and every answer the engine gets from it, happens at
// a timer of the sim's own, labelled by what it is (a member, a call),
// fired one at a time in the order of (time, label) with the engine
// settled in between; the engine's own timers (its ticks, its probes'
// intervals) only make it look or ask, and fire together.
package sim
