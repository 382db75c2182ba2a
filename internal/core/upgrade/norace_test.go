//go:build !race

package upgrade

// raceDetector: see race_test.go.
const raceDetector = false
