package agent

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Limits on a member's files.
const (
	maxFiles     = 64
	maxFileBytes = 1 << 20
	// DefaultFileMode is the mode of a file whose spec gives none:
	// files often hold secrets.
	DefaultFileMode fs.FileMode = 0o600
)

// ParseFileMode reads a mode written in octal ("0640", "640"); ""
// is DefaultFileMode. Only permission bits are accepted, and neither
// setuid, setgid, sticky nor world-writable: a file the agent writes
// must not become a way to gain privileges or be changed by anyone.
func ParseFileMode(s string) (fs.FileMode, error) {
	if s == "" {
		return DefaultFileMode, nil
	}
	digits := strings.TrimPrefix(s, "0o")
	if len(digits) < 3 || len(digits) > 4 {
		return 0, fmt.Errorf("mode %q: want 3 or 4 octal digits, like 0640", truncate(s, 20))
	}
	v, err := strconv.ParseUint(digits, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q: want octal digits, like 0640", truncate(s, 20))
	}
	m := fs.FileMode(v)
	if v&0o7000 != 0 {
		return 0, fmt.Errorf("mode %s: setuid, setgid and sticky bits are refused", s)
	}
	if m&0o002 != 0 {
		return 0, fmt.Errorf("mode %s: world-writable files are refused", s)
	}
	return m, nil
}

// CheckFilePath reports why p cannot name a member's file: it must be
// relative to the member's directory, clean (as filepath.Clean leaves
// it), and stay inside (no ".." element), so that no spec can write
// outside the member's directory.
func CheckFilePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path is empty")
	case len(p) > maxPathLen:
		return fmt.Errorf("path longer than %d bytes", maxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q has a NUL byte", truncate(p, 80))
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute; want a path relative to the member's directory", truncate(p, 80))
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf("path %q has a '..' element", truncate(p, 80))
	case p == ".":
		return fmt.Errorf("path %q names the member's directory, not a file", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (want %q)", truncate(p, 80), filepath.Clean(p))
	case !filepath.IsLocal(p):
		return fmt.Errorf("path %q is not a local path", truncate(p, 80))
	}
	return nil
}

// validateFiles checks a spec's files: count, paths, modes, sizes,
// and that no path is given twice or is a directory of another.
func validateFiles(files []FileSpec) error {
	if len(files) > maxFiles {
		return badRequest("more than %d files", maxFiles)
	}
	seen := make(map[string]bool, len(files))
	for i, f := range files {
		if err := CheckFilePath(f.Path); err != nil {
			return badRequest("files[%d]: %v", i, err)
		}
		if _, err := ParseFileMode(f.Mode); err != nil {
			return badRequest("files[%d] (%s): %v", i, f.Path, err)
		}
		if len(f.Content) > maxFileBytes {
			return badRequest("files[%d] (%s): content of %d bytes, more than %d", i, f.Path, len(f.Content), maxFileBytes)
		}
		if seen[f.Path] {
			return badRequest("files[%d]: path %s given twice", i, f.Path)
		}
		seen[f.Path] = true
	}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return badRequest("files: %s is a file, and also the directory of %s", dir, f.Path)
			}
		}
	}
	return nil
}

// filesDigest is the sha256 of the files' paths, modes and contents,
// in path order, or "" when there are none (so that a spec without
// files matches the record of an agent that knew no files). It is
// what PUT compares to tell a change of configuration.
func filesDigest(files []FileSpec) string {
	if len(files) == 0 {
		return ""
	}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b FileSpec) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	var n [8]byte
	for _, f := range sorted {
		mode, _ := ParseFileMode(f.Mode) // validated
		for _, part := range []string{f.Path, strconv.FormatUint(uint64(mode), 8), f.Content} {
			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write([]byte(part))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeFiles writes the files into dir atomically, each through a
// temporary file in its own directory that is synced, given its mode
// and renamed over the old one; directories are created 0755. It works
// through an os.Root on dir, so that a symbolic link the member left
// in its directory cannot send a write outside it.
func writeFiles(dir string, files []FileSpec) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, f := range files {
		mode, _ := ParseFileMode(f.Mode) // validated
		if err := writeFileAtomic(root, f.Path, []byte(f.Content), mode); err != nil {
			return fmt.Errorf("files[%d] (%s): %w", i, f.Path, err)
		}
	}
	return nil
}

func writeFileAtomic(root *os.Root, name string, content []byte, mode fs.FileMode) error {
	dir := path.Dir(name)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, "."+path.Base(name)+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Chmod(mode) // explicitly: the umask does not apply
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return err
	}
	if d, err := root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
