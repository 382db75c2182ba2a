//go:build race

package upgrade

// raceDetector: the tests run under the race detector, where the
// simulated world's checks of every step (world.unchecked) would make
// them six times slower; the machine starts no goroutine, so they are
// made without it.
const raceDetector = true
