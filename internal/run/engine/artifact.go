package engine

import (
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// artifact returns what component comp runs at version, with its path
// resolved against the description's directory.
func (e *Engine) artifact(comp, version string) (driver.Artifact, error) {
	r := e.c.Release(version)
	if r == nil {
		return driver.Artifact{}, fmt.Errorf("release %s is not in the catalog", version)
	}
	if c := e.c.Component(comp); c != nil && !c.NeedsArtifact() {
		return driver.Artifact{Version: version}, nil
	}
	a, ok := r.ArtifactFor(comp)
	if !ok {
		return driver.Artifact{}, fmt.Errorf("release %s has no artifact for component %s", version, comp)
	}
	out := driver.Artifact{Version: version, Image: a.Image, SHA256: a.SHA256}
	if a.Path != "" {
		out.Path = e.c.ResolvePath(a.Path)
	}
	return out, nil
}

// Artifact is artifact for callers outside the engine (the demo's
// first start of a cluster).
func (e *Engine) Artifact(comp, version string) (driver.Artifact, error) {
	return e.artifact(comp, version)
}
