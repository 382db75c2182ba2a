// Package buildinfo says which ferry this is: the module's version and
// the VCS revision the binary was built from, as the Go toolchain
// recorded them (runtime/debug.ReadBuildInfo). A troubleshooting bundle
// carries it for ferry and for each agent, so that a report names the
// exact builds involved rather than "dev".
package buildinfo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
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

// Self is what `ferry version -o json` prints: the release a binary is
// and its build. ferry asks a new binary for it before it puts the
// binary anywhere (ferry self-upgrade), and an agent asks again before
// it re-executes itself on one.
type Self struct {
	Release string `json:"release"`
	Build   Info   `json:"build"`
}

// Running is the Self of this binary.
func Running() Self { return Self{Release: Release(), Build: Read()} }

// AskTimeout bounds Of: a binary that does not answer its version
// within it is not a ferry to run.
const AskTimeout = 10 * time.Second

// Of runs `PATH version -o json` (argv, no shell; AskTimeout at most)
// and returns what it says: the release of a ferry binary that is not
// running yet. A program that does not answer so is refused, naming
// the path and what it printed.
func Of(ctx context.Context, path string) (Self, error) {
	ctx, cancel := context.WithTimeout(ctx, AskTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version", "-o", "json")
	var out, errb bytes.Buffer
	cmd.Stdout = &limited{w: &out, n: 64 << 10}
	cmd.Stderr = &limited{w: &errb, n: 4 << 10}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", AskTimeout)
		}
		return Self{}, fmt.Errorf("asking %s its release (%s version -o json): %w: %s", path, filepath.Base(path), err, strings.TrimSpace(errb.String()))
	}
	var s Self
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || !releaseRE.MatchString(s.Release) {
		return Self{}, fmt.Errorf("asking %s its release: it answered %q, not a ferry's version (want {\"release\": \"MAJOR.MINOR.PATCH\", ...})", path, truncate(out.String(), 120))
	}
	return s, nil
}

var releaseRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// limited keeps at most n bytes of what is written to it and drops
// the rest: a program asked its version cannot fill ferry's memory.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	if k > 0 {
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Reexec replaces this process's program with the ferry binary at
// path, run with args and the same environment: the pid stays, and so
// do its children (an agent's members). It returns only if the exec
// failed. The caller has stopped everything that writes: every file
// Go opens is close-on-exec, so listeners and locks go with the old
// program.
func Reexec(path string, args []string) error {
	argv := append([]string{path}, args...)
	err := syscall.Exec(path, argv, os.Environ())
	return fmt.Errorf("re-exec %s: %w", path, err)
}
