// Package memberfile is a file ferry writes into a member's directory
// before starting it (a configuration, a certificate): its type and
// the rules on its path and mode, shared by the description (config),
// the drivers and the agent, so that all three refuse the same files
// for the same reasons.
package memberfile

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// File is one file of a member, rendered.
type File struct {
	// Path is relative to the member's directory (CheckPath).
	Path string
	// Mode is the file's permission bits (CheckMode).
	Mode fs.FileMode
	// Content is the file's content.
	Content string
}

// Limits on a member's files.
const (
	// MaxFiles is the most files one member may have.
	MaxFiles = 64
	// MaxBytes bounds the content of one file.
	MaxBytes = 1 << 20
	// MaxPathLen bounds a path.
	MaxPathLen = 4096
	// MaxElemLen bounds each element of a path: a file system's 255
	// bytes (NAME_MAX), less the 18 the agent adds to a file's name for
	// the temporary file it writes first (".NAME.<12 hex>.tmp").
	MaxElemLen = 255 - 18
	// DefaultMode is the mode of a file that gives none: files often
	// hold secrets.
	DefaultMode fs.FileMode = 0o600
)

// CheckPath reports why p cannot name a member's file: it must be
// relative to the member's directory, clean (as filepath.Clean leaves
// it), and stay inside (no ".." element), so that nothing can write
// outside the member's directory.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path is empty")
	case len(p) > MaxPathLen:
		return fmt.Errorf("path longer than %d bytes", MaxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q has a NUL byte", trunc(p))
	case longElem(p) != "":
		return fmt.Errorf("path %q has an element of %d bytes, more than %d (a file name is at most 255 bytes, and the agent writes each file first under its name and 18 more)", trunc(p), len(longElem(p)), MaxElemLen)
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute; want a path relative to the member's directory", trunc(p))
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf("path %q has a '..' element", trunc(p))
	case p == ".":
		return fmt.Errorf("path %q names the member's directory, not a file", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (want %q)", trunc(p), filepath.Clean(p))
	case !filepath.IsLocal(p):
		return fmt.Errorf("path %q is not a local path", trunc(p))
	}
	return nil
}

// CheckMode reports why m cannot be a member file's mode: only
// permission bits, and neither setuid, setgid, sticky nor
// world-writable, so that a file ferry writes can neither grant
// privileges nor be changed by anyone on the host.
func CheckMode(m fs.FileMode) error {
	switch {
	case m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || m&^fs.ModePerm != 0:
		return fmt.Errorf("mode %s: setuid, setgid and sticky bits (and anything but permissions) are refused", FormatMode(m))
	case m&0o002 != 0:
		return fmt.Errorf("mode %s: world-writable files are refused", FormatMode(m))
	}
	return nil
}

// ParseMode reads a mode written in octal ("0640", "640", "0o640");
// "" is DefaultMode. The mode must pass CheckMode.
func ParseMode(s string) (fs.FileMode, error) {
	if s == "" {
		return DefaultMode, nil
	}
	digits := strings.TrimPrefix(s, "0o")
	if len(digits) < 3 || len(digits) > 4 {
		return 0, fmt.Errorf("mode %q: want 3 or 4 octal digits, like 0640", trunc(s))
	}
	v, err := strconv.ParseUint(digits, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q: want octal digits, like 0640", trunc(s))
	}
	if v&0o7000 != 0 {
		return 0, fmt.Errorf("mode %s: setuid, setgid and sticky bits are refused", s)
	}
	m := fs.FileMode(v)
	if err := CheckMode(m); err != nil {
		return 0, err
	}
	return m, nil
}

// FormatMode writes a mode the way ParseMode reads it: "0640".
func FormatMode(m fs.FileMode) string {
	if m&^fs.ModePerm != 0 {
		return m.String()
	}
	return fmt.Sprintf("%04o", uint32(m))
}

func trunc(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}

// longElem returns the first element of p longer than MaxElemLen, or "".
func longElem(p string) string {
	for _, e := range strings.Split(p, "/") {
		if len(e) > MaxElemLen {
			return e
		}
	}
	return ""
}
