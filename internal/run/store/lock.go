package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// ErrLocked is returned when another ferry process drives upgrades
// from the same data directory.
var ErrLocked = errors.New("store: another ferry process holds the engine lock")

// LockEngine takes the data directory's engine lock, so that one
// process at a time acts on the cluster. The lock is an flock: the
// kernel drops it when the process dies, so a kill -9 never leaves a
// stale lock behind. Call the returned function to release it.
func (s *Store) LockEngine() (func(), error) {
	path := filepath.Join(filepath.Dir(s.path), "engine.lock")
	if s.readOnly {
		return nil, ErrReadOnly
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fmt.Errorf("engine lock: %w", s.writeError(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := safefile.Read(path, 64, safefile.DefaultTimeout)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if holder == "" {
			holder = "unknown"
		}
		return nil, fmt.Errorf("%w (pid %s, %s)", ErrLocked, holder, path)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// EngineLockHolders names the other processes holding the data
// directory's engine lock now, from /proc/locks (looking takes nothing,
// so a start at the same moment is not refused for it); nil when none
// does, or when that cannot be known.
func (s *Store) EngineLockHolders() []string {
	var out []string
	for _, h := range lockHolders(filepath.Join(filepath.Dir(s.path), "engine.lock")) {
		if !strings.HasSuffix(h, thisProcess) {
			out = append(out, h)
		}
	}
	return out
}

// thisProcess marks the holder that is the process asking.
const thisProcess = " (this process)"

// ErrBusy is matched (errors.Is) when the store's file stayed locked by
// another process for longer than the timeout.
var ErrBusy = errors.New("store: the store file stayed locked by another process")

// lockedError explains a store file locked past the timeout: by whom,
// when the kernel says (Linux's /proc/locks), and what to do.
func (s *Store) lockedError() error {
	who := lockHolders(s.path)
	if len(who) == 0 {
		return &kindError{kind: ErrBusy, err: berrors.ErrTimeout, msg: fmt.Sprintf("store: %s stayed locked by another process for more than %s; "+
			"ferry holds it for milliseconds per operation, so the holder is stuck or keeps it open: find it with 'fuser -v %s' "+
			"(or 'lsof %s'), stop it, and try again", s.path, s.timeout, s.path, s.path)}
	}
	return &kindError{kind: ErrBusy, err: berrors.ErrTimeout, msg: fmt.Sprintf("store: %s stayed locked for more than %s by %s; "+
		"ferry holds it for milliseconds per operation, so that process is stuck or keeps it open: stop it (or wait for it to end) "+
		"and try again", s.path, s.timeout, strings.Join(who, ", "))}
}

// lockHolders names the processes holding a lock on the file at path,
// as "pid N (command line)", from /proc/locks; nil when that cannot be
// known (not Linux, the holder in another pid namespace).
func lockHolders(path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	return holders(string(locks), uint64(st.Dev), uint64(st.Ino), os.Getpid(), procCommand)
}

// holders parses /proc/locks (lines like "1: FLOCK  ADVISORY  WRITE
// 1234 fd:01:5678 0 EOF"; "->" marks a waiter, not a holder) for the
// locks on the file with device dev and inode ino, and names each
// holder with command.
func holders(locks string, dev, ino uint64, self int, command func(pid int) string) []string {
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	var out []string
	seen := map[int]bool{}
	for _, line := range strings.Split(locks, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] == "->" || f[5] != want {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 || seen[pid] {
			continue
		}
		seen[pid] = true
		name := fmt.Sprintf("pid %d", pid)
		if pid == self {
			name += thisProcess
		} else if c := command(pid); c != "" {
			name += " (" + c + ")"
		}
		out = append(out, name)
	}
	return out
}

// procCommand is pid's command line, shortened, or "".
func procCommand(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if len(c) > 120 {
		c = c[:117] + "..."
	}
	return c
}

// LockEngineDir takes the engine lock of the data directory dir without
// opening its store, which may be damaged (recovery holds it).
func LockEngineDir(dir string) (func(), error) {
	return (&Store{dir: dir, path: filepath.Join(dir, "ferry.db")}).LockEngine()
}
