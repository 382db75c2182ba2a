package safefile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteAtomic replaces path with what write writes: a new file beside
// it, given mode (explicitly: the umask does not apply), synced, then
// renamed over path and the directory synced, so that a crash leaves
// the old file or the new one, never a part. On error nothing is left
// but the old file.
func WriteAtomic(path string, mode fs.FileMode, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		err = write(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	SyncDir(filepath.Dir(path))
	return nil
}

// SyncDir syncs directory dir, so that a file created, renamed or
// removed in it stays so after a crash; best effort.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// WriteFileAtomic is WriteAtomic of b.
func WriteFileAtomic(path string, mode fs.FileMode, b []byte) error {
	return WriteAtomic(path, mode, func(w io.Writer) error { _, err := w.Write(b); return err })
}
