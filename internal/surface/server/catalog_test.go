package server

import (
	"context"
	"testing"
	"time"
)

// TestCatalogLock: a reader is not held back by an import waiting for
// the readers in flight (sync.RWMutex would queue it behind); the
// import gets the lock once they leave, or gives up with its context;
// readers wait while it holds the lock, and go on once it is released.
func TestCatalogLock(t *testing.T) {
	var l catalogLock
	l.RLock() // a long request in flight (a preflight)
	locked := make(chan error, 1)
	go func() { locked <- l.Lock(context.Background()) }()
	// While the import waits, new readers come and go at once.
	for range 100 {
		read := make(chan struct{})
		go func() { l.RLock(); l.RUnlock(); close(read) }()
		select {
		case <-read:
		case err := <-locked:
			t.Fatalf("the import got the lock with a reader in flight: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("a reader waited on an import waiting for the lock")
		}
	}
	l.RUnlock()
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the import did not get the lock once the readers left")
	}
	read := make(chan struct{})
	go func() { l.RLock(); close(read) }()
	select {
	case <-read:
		t.Fatal("a reader got the lock while the import held it")
	case <-time.After(50 * time.Millisecond): // (it must not happen: a short look suffices)
	}
	l.Unlock()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader did not get the lock once the import released it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Lock(ctx); err == nil {
		t.Fatal("an import got the lock with a reader holding it")
	}
	l.RUnlock()
	if err := l.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
}
