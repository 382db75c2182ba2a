// Package buildinfo says which ferry this is: the module's version and
// the VCS revision the binary was built from, as the Go toolchain
// recorded them (runtime/debug.ReadBuildInfo). A troubleshooting bundle
// carries it for ferry and for each agent, so that a report names the
// exact builds involved rather than "dev".
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what the binary says of its build.
type Info struct {
	// Module is the main module's path; Version its version: a tag
	// (v1.2.0), a pseudo-version, or "(devel)" for a build from a
	// working tree.
	Module  string `json:"module,omitempty"`
	Version string `json:"version"`
	// Go is the toolchain that built it.
	Go string `json:"go,omitempty"`
	// Revision, Time and Modified are the VCS revision, its commit
	// time, and whether the tree had changes not committed; absent when
	// the build did not stamp them (go test, -buildvcs=false).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// Read returns the running binary's build information; Version is
// "unknown" when the binary carries none.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	i := Info{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// String says it in one line: "v1.2.0 (rev 6a05249c1d2e, modified; go1.26.8)".
func (i Info) String() string {
	var extra []string
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		r := "rev " + rev
		if i.Modified {
			r += ", modified"
		}
		extra = append(extra, r)
	}
	if i.Go != "" {
		extra = append(extra, i.Go)
	}
	if len(extra) == 0 {
		return i.Version
	}
	return i.Version + " (" + strings.Join(extra, "; ") + ")"
}

// Version is Read().String(): what an agent reports in its health.
func Version() string { return Read().String() }

// release is the ferry release this source tree is: what a catalog's
// requires_ferry is compared with. A release build may set it at link
// time (-ldflags "-X .../buildinfo.release=1.2.3").
var release = "0.9.0"

// Release is the ferry release this binary is (MAJOR.MINOR.PATCH): a
// release of a cluster may require a ferry at least this new
// (releases[].requires_ferry), and ferry refuses to move a cluster past
// what it understands.
func Release() string { return release }
