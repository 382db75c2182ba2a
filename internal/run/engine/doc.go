// Package engine runs upgrades: it observes the cluster through a
// driver and health checks, asks the pure state machine (package
// upgrade) what to do next, writes the decision to the store, and only
// then acts. It is level-triggered: after any restart it observes and
// reconciles from the record and what is running, it does not replay a
// log.
//
// The engine owns every side effect of an upgrade (driver calls, hook
// calls, probes, writes); plan and upgrade own every decision.
package engine
