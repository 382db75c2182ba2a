package engine_test

// The tests read descriptions of processes: their substrate registers
// its rules from its own package, linked here into the test binary.
import _ "github.com/ferry-upgrade/ferry/internal/substrate/all"
