package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
)

// Output of the members. The process writes its stdout and stderr
// straight into DIR/logs/NAME/current.log (O_APPEND), not through the
// agent: a pipe would break (SIGPIPE) when the agent dies, and members
// must outlive it. So the bound is kept from outside: every second the
// agent moves the head of a current.log that grew past half the limit
// into current.old.log (which keeps at most half the limit) and removes
// it from current.log with Linux's FALLOC_FL_COLLAPSE_RANGE, one step
// the member's appends cannot interleave with, so no byte is lost.
// Where the file system cannot collapse (tmpfs, other systems) it falls
// back to logrotate's copytruncate: the last half limit is copied and
// current.log truncated, and what the member writes between the copy
// and the truncation is lost. An instance's output is current.old.log
// followed by current.log, at most about the limit. When a new
// instance starts, current* become previous* (the instance before is
// dropped), like kubectl logs --previous.
const (
	// DefaultLogLimit bounds the output kept of one instance.
	DefaultLogLimit = 4 << 20
	logKeepEvery    = time.Second

	defaultLogLines = 100
)

func (s *Server) logDir(name string) string { return filepath.Join(s.dir, "logs", name) }

// logFiles returns the older and the live file of the current or the
// previous instance of a member.
func (s *Server) logFiles(name string, previous bool) (old, live string) {
	base := "current"
	if previous {
		base = "previous"
	}
	d := s.logDir(name)
	return filepath.Join(d, base+".old.log"), filepath.Join(d, base+".log")
}

// newInstanceLog makes the current instance's output the previous one's
// and opens an empty current.log for the instance about to start; the
// caller gives it to the process and closes its own descriptor.
// m.logMu must be held.
func (s *Server) newInstanceLog(name string) (*os.File, error) {
	d := s.logDir(name)
	if err := os.MkdirAll(d, 0o750); err != nil {
		return nil, err
	}
	curOld, cur := s.logFiles(name, false)
	prevOld, prev := s.logFiles(name, true)
	if _, err := os.Stat(cur); err == nil {
		s.trimLog(curOld, cur) // an instance that wrote a lot just before it ended
		for _, mv := range [][2]string{{curOld, prevOld}, {cur, prev}} {
			if err := os.Rename(mv[0], mv[1]); errors.Is(err, fs.ErrNotExist) {
				os.Remove(mv[1]) // no older part: the previous one's must not stay
			} else if err != nil {
				return nil, err
			}
		}
	}
	return os.OpenFile(cur, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o640)
}

// trimLog bounds one instance's output: if live is larger than half
// the limit, its head goes into old and live keeps at most half the
// limit. m.logMu must be held.
func (s *Server) trimLog(old, live string) {
	half := int64(s.logLimit / 2)
	f, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= half {
		return
	}
	err = collapseInto(f, old, fi.Size(), half)
	if err == nil {
		return
	}
	if !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, syscall.EOPNOTSUPP) {
		s.log.Warn("cannot move member output aside losslessly; copying and truncating", "file", live, "err", err)
	}
	if err := copyTruncate(f, old, half); err != nil {
		s.log.Warn("cannot bound member output", "file", live, "err", err)
	}
}

// collapseInto moves the head of f (size bytes, more than half) into
// old without losing what the member appends meanwhile: the head's
// bytes, which appends never touch, are copied first (after what old
// kept, old keeping at most half), then removed from f by collapseHead,
// and only then does the copy replace old. Removal goes by whole
// blocks, so f keeps at most half.
func collapseInto(f *os.File, old string, size, half int64) error {
	bs := blockSize(f)
	if bs <= 0 || bs > half {
		return errors.ErrUnsupported
	}
	n := (size - half + bs - 1) / bs * bs // < size, as bs <= half
	tmp, err := os.CreateTemp(filepath.Dir(old), ".trim.*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if n < half {
		if err := copyTail(tmp, old, half-n); err != nil {
			return err
		}
	}
	start := max(n-half, 0)
	if _, err := io.Copy(tmp, io.NewSectionReader(f, start, n-start)); err != nil {
		return err
	}
	if err := tmp.Chmod(0o640); err != nil {
		return err
	}
	if err := collapseHead(f, n); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), old)
}

// copyTail appends the last n bytes of the file at path (if any) to w.
func copyTail(w io.Writer, path string, n int64) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	start := max(fi.Size()-n, 0)
	_, err = io.Copy(w, io.NewSectionReader(f, start, fi.Size()-start))
	return err
}

// copyTruncate copies the last n bytes of f into a new file renamed
// over old, then truncates f. The process's writes that land between
// the last read and the truncation are lost, so the copy is taken
// again (up to three times) while f grew during it.
func copyTruncate(f *os.File, old string, n int64) error {
	tmp, err := os.CreateTemp(filepath.Dir(old), ".trim.*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	for attempt := 1; ; attempt++ {
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		start := max(size-n, 0)
		if err := tmp.Truncate(0); err != nil {
			return err
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(tmp, io.NewSectionReader(f, start, size-start)); err != nil {
			return err
		}
		if fi, err := f.Stat(); err != nil {
			return err
		} else if fi.Size() != size && attempt < 3 {
			continue
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
		if err := tmp.Chmod(0o640); err != nil {
			return err
		}
		return os.Rename(tmp.Name(), old)
	}
}

// keepLogs bounds the output of running members until the agent closes.
func (s *Server) keepLogs() {
	defer s.wg.Done()
	t := time.NewTicker(s.logEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		ms := make([]*member, 0, len(s.members))
		for _, m := range s.members {
			ms = append(ms, m)
		}
		s.mu.Unlock()
		for _, m := range ms {
			m.mu.Lock()
			running := m.proc != nil
			m.mu.Unlock()
			if !running {
				continue
			}
			old, live := s.logFiles(m.name, false)
			m.logMu.Lock()
			s.trimLog(old, live)
			m.logMu.Unlock()
		}
	}
}

// errNoLog is returned by Logs when there is no output of that
// instance.
var errNoLog = errors.New("no such log")

// Logs returns the last lines (1..MaxLogLines) of the output of the
// member's current (or last) instance, or of the one before it.
func (s *Server) Logs(name string, previous bool, lines int) ([]byte, error) {
	if lines < 1 || lines > wire.MaxLogLines {
		return nil, badRequest("lines must be between 1 and %d, got %d", wire.MaxLogLines, lines)
	}
	s.mu.Lock()
	m := s.members[name]
	s.mu.Unlock()
	if m == nil {
		return nil, &apiError{404, wire.CodeNotFound, fmt.Sprintf("member %s is not known to this agent", name)}
	}
	if _, ok := m.status(); !ok {
		return nil, &apiError{404, wire.CodeNotFound, fmt.Sprintf("member %s is not known to this agent", name)}
	}
	old, live := s.logFiles(name, previous)
	m.logMu.Lock()
	b, err := readTail(old, live, int64(s.logLimit))
	m.logMu.Unlock()
	if errors.Is(err, errNoLog) && !previous {
		// A member started by an agent that kept one file per member
		// (DIR/logs/NAME.log) and re-adopted since.
		b, err = readTail("", filepath.Join(s.dir, "logs", name+".log"), int64(s.logLimit))
	}
	if errors.Is(err, errNoLog) {
		what := "output"
		if previous {
			what = "previous instance"
		}
		return nil, &apiError{404, wire.CodeNotFound, fmt.Sprintf("member %s has no %s", name, what)}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the output of %s: %w", name, err)
	}
	return lastLines(b, lines), nil
}

// readTail returns up to limit bytes from the end of old followed by
// live; errNoLog if live does not exist.
func readTail(old, live string, limit int64) ([]byte, error) {
	tail, err := readLast(live, limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoLog
	}
	if err != nil {
		return nil, err
	}
	if rest := limit - int64(len(tail)); rest > 0 && old != "" {
		head, err := readLast(old, rest)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		tail = append(head, tail...)
	}
	return tail, nil
}

func readLast(name string, n int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start := max(fi.Size()-n, 0)
	return io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
}

// lastLines returns the last n (at least 1) lines of b; a last line
// without a newline counts as a line.
func lastLines(b []byte, n int) []byte {
	i := len(b)
	if i > 0 && b[i-1] == '\n' {
		i--
	}
	for {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			return b
		}
		if n--; n == 0 {
			return b[j+1:]
		}
		i = j
	}
}
