package config_test

// config names no substrate: each registers its rules from its own
// package (package substrate). config's tests validate process and
// Kubernetes descriptions all the same, so this external test file
// links every substrate of the build into config's test binary. An
// internal test file could not import them (they import config: a
// cycle); an external one can, and its imports' inits run before any
// test of the binary, internal ones included.

import (
	"slices"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
	"github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

func init() {
	config.SubstrateProcess, config.SubstrateKubernetes = process.Name, kubernetes.Name
}

// TestSubstratesLinked fails when the substrates the tests describe are
// not registered: every other test would then fail on its first line.
func TestSubstratesLinked(t *testing.T) {
	names := config.SubstrateNames()
	for _, want := range []string{kubernetes.Name, process.Name} {
		if !slices.Contains(names, want) {
			t.Errorf("substrate %s is not registered; registered: %v", want, names)
		}
	}
	if d := config.DefaultSubstrate(); d != process.Name {
		t.Errorf("the default substrate is %q, want %s", d, process.Name)
	}
}
