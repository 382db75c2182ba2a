//go:build !race

package config

// raceSlowdown scales the time bounds tests assert (see race_test.go).
const raceSlowdown = 1
