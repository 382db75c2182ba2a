// Package safefile opens and reads the files a user names (a cluster
// description, a traffic spec, token files, imported releases, artifacts)
// so that no such file can hang ferry or exhaust its memory: a path that
// names a FIFO, a device such as /dev/zero, a directory or a socket is
// refused at once, before any read, and a regular file is read up to a
// size limit and within a deadline.
//
// Why: os.Open blocks forever on a FIFO with no writer, and io.ReadAll
// of /dev/zero never ends; either left 'ferry validate' unkillable by
// SIGTERM (issue #14, defect 3) and the server hashing forever (defect 1).
//
// It also replaces files whole (WriteAtomic): a crash leaves the old
// file or the new one, never a part.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// DefaultTimeout is how long reading a small file (a description, a
// token) may take: far more than a local disk needs, short enough that
// a hung network filesystem is reported instead of waited on forever.
const DefaultTimeout = 10 * time.Second

// Error says which file was refused and why.
type Error struct {
	Path string
	// Problem completes "PATH is ...", e.g. "a named pipe (FIFO), not a
	// regular file".
	Problem string
	Err     error // the underlying error, if any
}

func (e *Error) Error() string { return e.Path + ": " + e.Problem }
func (e *Error) Unwrap() error { return e.Err }

// ErrNotRegular is matched (errors.Is) by every refusal of a file that
// is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is matched by every refusal of a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ErrTimeout is matched when reading took longer than allowed.
var ErrTimeout = errors.New("read timed out")

// Open opens path for reading if it is a regular file. The open itself
// never blocks (O_NONBLOCK: a FIFO without a writer opens at once) and
// the opened file is checked with fstat, so that what is checked is what
// is read. The caller closes the file.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		// A socket cannot even be opened (ENXIO): say what it is.
		if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
			return nil, nil, &Error{Path: path, Problem: Kind(fi.Mode()) + ", not a regular file: give the path of a regular file", Err: ErrNotRegular}
		}
		return nil, nil, err
	}
	fi, err := Check(f, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// OpenIn is Open of name inside root: a name (or a symbolic link on
// its way) that leads out of root is refused by os.Root.
func OpenIn(root *os.Root, name, shown string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := Check(f, shown)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Check returns f's information if it is a regular file, or an *Error
// naming path and what it is instead.
func Check(f *os.File, path string) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{Path: path, Problem: "cannot be examined: " + err.Error(), Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Path: path, Problem: Kind(fi.Mode()) + ", not a regular file: give the path of a regular file", Err: ErrNotRegular}
	}
	return fi, nil
}

// Kind names what a file of mode m is, for messages.
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeCharDevice != 0:
		return "a character device (like /dev/zero)"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a special file"
	}
}

// Read returns the contents of the regular file at path, refusing it
// at once if it is something else or larger than limit bytes, and
// giving up after timeout. Its errors (*Error, or the open's
// *fs.PathError) name path.
func Read(path string, limit int64, timeout time.Duration) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		f.Close()
		return nil, tooLarge(path, fi.Size(), limit, false)
	}
	return ReadOpened(f, path, limit, timeout)
}

// ReadOpened reads f, opened by Open or OpenIn, to its end: at most
// limit bytes (a file that grows past it is refused), within timeout.
// It closes f.
//
// A read of a regular file cannot be interrupted, so on a timeout the
// read goes on in the background (it ends when the filesystem answers,
// and closes f) and the caller gets the error at once.
func ReadOpened(f *os.File, path string, limit int64, timeout time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, limit+1))
		done <- result{b, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, &Error{Path: path, Problem: "cannot be read: " + r.err.Error(), Err: r.err}
		}
		if int64(len(r.b)) > limit {
			return nil, tooLarge(path, int64(len(r.b)), limit, true)
		}
		return r.b, nil
	case <-t.C:
		return nil, &Error{Path: path, Problem: fmt.Sprintf("could not be read within %s (a hung filesystem?)", timeout), Err: ErrTimeout}
	}
}

// tooLarge refuses a file of size bytes (from fstat) or, when grew, one
// that held more than limit bytes when read although fstat said less.
func tooLarge(path string, size, limit int64, grew bool) error {
	if grew {
		return &Error{Path: path, Problem: fmt.Sprintf("grew past the %s allowed while it was read", Size(limit)), Err: ErrTooLarge}
	}
	return &Error{Path: path, Problem: fmt.Sprintf("is %d bytes, more than the %s allowed", size, Size(limit)), Err: ErrTooLarge}
}

// Size formats a byte count for messages: 1 GiB, 8 MiB, 4096 bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
