// Package ferrybuild builds ferry binaries for tests: one linked as
// another release (-ldflags -X .../buildinfo.release=V) is what
// ferry self-upgrade's tests upgrade the agents to.
package ferrybuild

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// releaseVar is the variable a release build sets (package buildinfo).
const releaseVar = "github.com/ferry-upgrade/ferry/internal/run/buildinfo.release"

// Binary is a ferry binary built for a test.
type Binary struct {
	Path, SHA256, Release string
}

// Build builds cmd/ferry into dir/ferry-RELEASE, linked as release.
func Build(dir, release string) (Binary, error) {
	b := Binary{Path: filepath.Join(dir, "ferry-"+release), Release: release}
	cmd := exec.Command("go", "build", "-ldflags", "-X "+releaseVar+"="+release, "-o", b.Path, "github.com/ferry-upgrade/ferry/cmd/ferry")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("ferrybuild: go build ferry %s: %w\n%s", release, err, out)
	}
	sum, err := checksum.File(b.Path)
	if err != nil {
		return Binary{}, err
	}
	b.SHA256 = sum
	return b, nil
}
