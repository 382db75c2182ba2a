package config

import (
	"slices"
	"strings"
)

// ShownStateKeys are the keys of a release's states: the upgrade's own
// states that no flow stage names (the machine's words), and
// StatePausedOnFailure.
var ShownStateKeys = []string{"upgrade-started", "preflight", "completed", "failed", "paused", StatePausedOnFailure, "rolling-back", "rolled-back"}

// StatePausedOnFailure is the key of a release's states that names the
// state paused when a failure paused it (policy on_failure: pause, or
// past the point of no return), not the operator: StarlingX's
// upgrade-failed.
const StatePausedOnFailure = "paused-on-failure"

// shownStates checks release r's states: known keys, each a state's
// name.
func (v *validator) shownStates(r *Release, path string, at func(string) int) {
	for _, k := range sortedKeys(r.States) {
		kpath := path + ".states." + k
		switch {
		case !slices.Contains(ShownStateKeys, k):
			v.add(at("states"), kpath, "%q is no state of an upgrade outside its flow's stages (those are named by each stage's state:); known: %s", k, strings.Join(ShownStateKeys, ", "))
		case !isIdent(r.States[k]):
			v.add(at("states."+k), kpath, "%q is not a state's name: letters, digits, _ and -, starting with a letter", r.States[k])
		}
	}
}
