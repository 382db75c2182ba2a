package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: engine lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
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
