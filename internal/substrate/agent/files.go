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
	"slices"
	"strconv"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
)

// Limits on a member's files (see package memberfile).
const (
	maxFiles     = memberfile.MaxFiles
	maxFileBytes = memberfile.MaxBytes
)

// validateFiles checks a spec's files: count, paths, modes, sizes,
// and that no path is given twice or is a directory of another.
func validateFiles(files []wire.FileSpec) error {
	if len(files) > maxFiles {
		return badRequest("more than %d files", maxFiles)
	}
	seen := make(map[string]bool, len(files))
	for i, f := range files {
		if err := memberfile.CheckPath(f.Path); err != nil {
			return badRequest("files[%d]: %v", i, err)
		}
		if _, err := memberfile.ParseMode(f.Mode); err != nil {
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
func filesDigest(files []wire.FileSpec) string {
	if len(files) == 0 {
		return ""
	}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b wire.FileSpec) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	var n [8]byte
	for _, f := range sorted {
		mode, _ := memberfile.ParseMode(f.Mode) // validated
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
func writeFiles(dir string, files []wire.FileSpec) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, f := range files {
		mode, _ := memberfile.ParseMode(f.Mode) // validated
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
