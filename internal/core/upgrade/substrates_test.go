package upgrade_test

// The machine's tests read descriptions of processes: their substrate
// registers its rules from its own package, linked here into the test
// binary (an external test file, so that this pure package itself
// never imports a driver).
import _ "github.com/ferry-upgrade/ferry/internal/substrate/all"
