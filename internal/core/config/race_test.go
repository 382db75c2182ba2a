//go:build race

package config

// raceSlowdown scales the time bounds tests assert: the race detector
// makes renders ten times slower.
const raceSlowdown = 10
