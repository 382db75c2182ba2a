package driver

import "sync"

// OnceEach does a job once per key until it succeeds, the callers of
// one key one after the other: the copy of an artifact to a host is
// made once, however many members of a batch start there at once, and
// asked for again only after Forget (the host lost it). The zero value
// is ready to use.
type OnceEach struct {
	mu      sync.Mutex
	done    map[string]bool
	running map[string]*sync.Mutex
}

// Do runs job for key unless a job for key succeeded before; a caller
// whose key is being done waits for it, then does it again only if it
// failed.
func (o *OnceEach) Do(key string, job func() error) error {
	o.mu.Lock()
	if o.done[key] {
		o.mu.Unlock()
		return nil
	}
	if o.running == nil {
		o.running, o.done = map[string]*sync.Mutex{}, map[string]bool{}
	}
	mu := o.running[key]
	if mu == nil {
		mu = &sync.Mutex{}
		o.running[key] = mu
	}
	o.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	o.mu.Lock()
	done := o.done[key]
	o.mu.Unlock()
	if done {
		return nil // another caller did it meanwhile
	}
	if err := job(); err != nil {
		return err
	}
	o.mu.Lock()
	o.done[key] = true
	o.mu.Unlock()
	return nil
}

// Forget makes the next Do of key run its job again.
func (o *OnceEach) Forget(key string) {
	o.mu.Lock()
	delete(o.done, key)
	o.mu.Unlock()
}
