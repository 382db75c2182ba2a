package server

import (
	"context"
	"sync"
)

// catalogLock guards the catalog: handlers read it under RLock, an
// import replaces it under Lock. Unlike sync.RWMutex, a waiting Lock
// does not hold back new readers: an import waits for the requests in
// flight (a preflight may take seconds) instead of making every read
// that comes after wait with it. Readers wait only while the import
// swaps the catalog, which takes microseconds.
type catalogLock struct {
	mu      sync.Mutex
	readers int
	writing bool
	changed chan struct{} // closed, and replaced, whenever the lock is released
}

func (l *catalogLock) wake() {
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
}

// waitChan is what to wait on for the next release (l.mu held).
func (l *catalogLock) waitChan() chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

func (l *catalogLock) RLock() {
	for {
		l.mu.Lock()
		if !l.writing {
			l.readers++
			l.mu.Unlock()
			return
		}
		ch := l.waitChan()
		l.mu.Unlock()
		<-ch
	}
}

func (l *catalogLock) RUnlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers--; l.readers == 0 {
		l.wake()
	}
}

// Lock waits until no reader holds the lock, or ctx ends.
func (l *catalogLock) Lock(ctx context.Context) error {
	for {
		l.mu.Lock()
		if !l.writing && l.readers == 0 {
			l.writing = true
			l.mu.Unlock()
			return nil
		}
		ch := l.waitChan()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *catalogLock) Unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writing = false
	l.wake()
}
