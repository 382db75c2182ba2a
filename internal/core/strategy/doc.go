// Package strategy decides which members of a component may go down
// next: the batching strategies (registered by name) and the named
// admission predicates. It is pure (no I/O, no clock, no goroutine)
// and imports nothing of ferry, so that the description's validation,
// the planner and the upgrade state machine can all ask it.
//
// A Strategy is a registered piece: it validates its own settings,
// fills its own defaults, says what batches a plan should expect, and
// chooses the members of the next batch from the candidates as
// admission sees them and from how the batches before went (adaptive
// canaries: Rook's "slowly increase its batch size"; one failure
// domain at a time: cephadm's CRUSH buckets). It asks the state
// machine's admission (a pure function) as it chooses; the machine
// keeps the refusals and checks every chosen member again. Nothing
// outside this package switches on a strategy's name.
//
// Whether one member may go down now is a list of small named
// predicates (Elastic's operator decides its restarts this way):
// quorum, each unavailability budget (per component, per host, per
// failure domain, all counting members already down), role order, the
// cluster gate, the substrate answering. A refusal carries its
// predicate's name, so that an operator reads why in status and events,
// and may switch off that one predicate (never all at once) for the
// current upgrade.
//
// A strategy may also add steps before a batch's moves (Choice.Before:
// active-standby's switchover before the active goes), package step's
// extra steps by name, listed in its Adds (StepAdder) so that a
// description is checked for what they need.
//
// To add a strategy: write a type with the Strategy methods in a file
// of this package and Register it in that file's init; its settings
// are the fields of Settings (add a field there, with its YAML key, if
// it needs a new one). Nothing else changes: config validates and
// applies defaults through Lookup, the planner shows Expected, the
// state machine calls Next, and a test fails if a strategy's name is
// spelled outside this package.
package strategy
