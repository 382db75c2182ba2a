package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Store keeps one simulation's upgrade records and events in memory
// (engine.Store). Records are kept as the engine hands them over: the
// machine returns a new record at every step (it never changes one in
// place), so a value kept is not changed behind the store's back.
type Store struct {
	mu      sync.Mutex
	current string
	records map[string]upgrade.Upgrade
	// revisions and fence keep store.Records' contract, as the real
	// stores do.
	revisions map[string]store.Revision
	fence     store.Fence
	events    []store.Event
	// dropEvents: events are numbered, not kept (Config.NoEvents).
	dropEvents bool
	seq        uint64
}

var _ engine.Store = (*Store)(nil)

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{records: map[string]upgrade.Upgrade{}, revisions: map[string]store.Revision{}}
}

func (s *Store) Current() (upgrade.Upgrade, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.records[s.current]
	return u, ok, nil
}

// Fence takes the next term.
func (s *Store) Fence() (store.Fence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence = store.Fence{Holder: "the simulation", Term: s.fence.Term + 1}
	return s.fence, nil
}

// takeOver claims the store as another engine would, and says where
// the record and the events stood.
func (s *Store) takeOver() Claim {
	_, _ = s.Fence()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Claim{Revision: s.revisions[s.current], Seq: s.seq}
}

func (s *Store) checkFence(id string, f store.Fence) error {
	if f.Term == 0 || f != s.fence {
		return &store.FencedError{Upgrade: id, Yours: f, Current: s.fence}
	}
	return nil
}

func (s *Store) Read(id string) (upgrade.Upgrade, store.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		id = s.current
	}
	u, ok := s.records[id]
	if !ok {
		return u, 0, fmt.Errorf("%w: upgrade %q", store.ErrNotFound, id)
	}
	return u, s.revisions[id], nil
}

func (s *Store) CreateAt(u upgrade.Upgrade, f store.Fence) (store.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFence(u.ID, f); err != nil {
		return 0, err
	}
	if cur, ok := s.records[s.current]; ok && !cur.State.Terminal() {
		return 0, fmt.Errorf("%w: %s", store.ErrActive, cur.ID)
	}
	s.records[u.ID] = u
	s.revisions[u.ID] = 1
	s.current = u.ID
	return 1, nil
}

func (s *Store) SaveAt(u upgrade.Upgrade, at store.Revision, f store.Fence, evs []store.Event) (store.Revision, []store.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[u.ID]
	if !ok {
		return 0, nil, fmt.Errorf("%w: %s", store.ErrNotFound, u.ID)
	}
	if err := s.checkFence(u.ID, f); err != nil {
		return 0, nil, err
	}
	if cur := s.revisions[u.ID]; cur != at {
		return 0, nil, &store.ConflictError{Upgrade: u.ID, Read: at, Stored: cur}
	}
	// The operator's requests are the store's: a save keeps the later
	// ones, as store.Store's does.
	if old.Intent.Seq > u.Intent.Seq {
		u.Intent = old.Intent
	}
	if len(old.Overrides) > len(u.Overrides) {
		u.Overrides = old.Overrides
	}
	s.records[u.ID] = u
	s.revisions[u.ID] = at + 1
	return at + 1, s.appendLocked(evs), nil
}

// Append records events under fence f, as the real stores do.
func (s *Store) Append(f store.Fence, evs ...store.Event) ([]store.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFence(s.current, f); err != nil {
		return nil, err
	}
	return s.appendLocked(evs), nil
}

func (s *Store) appendLocked(evs []store.Event) []store.Event {
	out := make([]store.Event, len(evs))
	for i, ev := range evs {
		s.seq++
		ev.Seq = s.seq
		if !s.dropEvents {
			s.events = append(s.events, ev)
		}
		out[i] = ev
	}
	return out
}

// Request records an operator's request (pause, resume, abort) on the
// current upgrade, as store.Request does.
func (s *Store) Request(kind upgrade.IntentKind, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.records[s.current]
	if !ok {
		return store.ErrNotFound
	}
	u.Intent = upgrade.Intent{Kind: kind, Seq: u.Intent.Seq + 1, Time: now}
	s.records[u.ID] = u
	return nil
}

// Events returns every event stored.
func (s *Store) Events() []store.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Event(nil), s.events...)
}
