package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// Revision counts the saves of one upgrade's record by the engines
// that drive it: a save names the revision it read, and the store
// refuses it (ConflictError) when the record was saved since. The
// operator's requests and overrides live beside the record (the saves
// keep them) and move no revision. Each store keeps it its own way:
// bbolt a counter beside the record, the Kubernetes status store a
// counter in the status (written under the object's resourceVersion),
// etcd the record key's mod revision.
type Revision uint64

// Fence is a writer's claim on a store's records: every save carries
// it, and the store refuses a save (FencedError) whose fence is no
// longer the one it holds. Term orders the claims; Holder names who
// made one. bbolt hands out the next term with the engine lock; the
// Kubernetes status store takes its leader election's Lease (holder
// identity, lease transitions); etcd would take its lease ID.
type Fence struct {
	Holder string `json:"holder"`
	Term   uint64 `json:"term"`
}

func (f Fence) String() string {
	if f.Term == 0 {
		return "no fence"
	}
	return fmt.Sprintf("term %d (%s)", f.Term, f.Holder)
}

// Records is the contract every store of upgrade records keeps (this
// package's bbolt store, the controller's status store, the
// simulation's memory), tested by one suite (storetest): records are
// saved at the revision they were read, under a fence checked on every
// save, and both refusals are typed.
type Records interface {
	// Fence claims the store for this writer, for its saves from now
	// on; a writer that cannot (another holds the lease) gets an error
	// matching ErrFenced.
	Fence() (Fence, error)
	// Read returns the record of upgrade id ("": the current one) and
	// the revision it was saved at; ErrNotFound when there is none.
	Read(id string) (upgrade.Upgrade, Revision, error)
	// CreateAt records a new upgrade as the current one, under f, at
	// revision 1; ErrActive while another has not ended.
	CreateAt(u upgrade.Upgrade, f Fence) (Revision, error)
	// SaveAt writes the record read at revision at, and its events,
	// together, under f: the record's new revision and the events with
	// their sequence numbers. A record saved since it was read is
	// refused with a *ConflictError, a fence no longer current with a
	// *FencedError; neither writes anything.
	SaveAt(u upgrade.Upgrade, at Revision, f Fence, evs []Event) (Revision, []Event, error)
	// Append records events alone (those of no save), under f: the
	// events with their sequence numbers. A fence no longer current is
	// refused with a *FencedError, and nothing is written: a writer
	// deposed appends no event either.
	Append(f Fence, evs ...Event) ([]Event, error)
}

var _ Records = (*Store)(nil)

// ErrConflict is matched (errors.Is) by a save of a record that was
// saved since it was read (*ConflictError).
var ErrConflict = errors.New("store: the record was saved by another writer since it was read")

// ErrFenced is matched (errors.Is) by a save, or a claim, whose fence
// is not the store's current one (*FencedError).
var ErrFenced = errors.New("store: this writer's fence is no longer current")

// ConflictError is a save refused because the record moved on: the
// writer read revision Read, the store holds Stored.
type ConflictError struct {
	Upgrade      string
	Read, Stored Revision
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: upgrade %s: read at revision %d, but the store holds revision %d: another writer saved the record since; "+
		"this writer must stop acting on what it read", e.Upgrade, e.Read, e.Stored)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// FencedError is a save (or a claim) refused because the writer's fence
// is not the one the store holds: another writer claimed it since, or
// the writer's lease ended.
type FencedError struct {
	Upgrade        string
	Yours, Current Fence
	// Why says more when the fences alone do not (a lease that ended).
	Why string
}

func (e *FencedError) Error() string {
	what := "store"
	if e.Upgrade != "" {
		what += ": upgrade " + e.Upgrade
	}
	msg := fmt.Sprintf("%s: this writer's fence is %s, the store's is %s", what, e.Yours, e.Current)
	if e.Yours == e.Current {
		msg = fmt.Sprintf("%s: this writer's fence, %s, is no longer current", what, e.Yours)
	}
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg + ": this writer may write no more, and must stop acting"
}

func (e *FencedError) Is(target error) bool { return target == ErrFenced }

var keyFence = []byte("fence")

// revisionKey is the meta key of upgrade id's revision: in the meta
// bucket, so that the backup carries it.
func revisionKey(id string) []byte { return []byte("revision/" + id) }

func revision(tx *bolt.Tx, id string) Revision {
	meta := bucket(tx, bucketMeta)
	if meta == nil {
		return 0
	}
	b := meta.Get(revisionKey(id))
	if len(b) != 8 {
		return 0 // a record written before revisions: 0
	}
	return Revision(binary.BigEndian.Uint64(b))
}

func setRevision(t *rtx, id string, r Revision) error {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(r))
	return t.put(bucketMeta, revisionKey(id), b)
}

func storedFence(tx *bolt.Tx) Fence {
	var f Fence
	if meta := bucket(tx, bucketMeta); meta != nil {
		_ = json.Unmarshal(meta.Get(keyFence), &f) // none: the zero fence
	}
	return f
}

// checkFence refuses f unless it is the store's current fence.
func checkFence(tx *bolt.Tx, id string, f Fence) error {
	if cur := storedFence(tx); f.Term == 0 || f != cur {
		return &FencedError{Upgrade: id, Yours: f, Current: cur}
	}
	return nil
}

// Fence takes the next term of the store's fence for this process, so
// that a writer that took one before it is refused from now on. Take
// it holding the engine lock: the lock keeps other processes out, the
// fence refuses whoever held it before.
func (s *Store) Fence() (Fence, error) {
	host, _ := os.Hostname()
	var f Fence
	err := s.update(func(tx *bolt.Tx) error {
		f = Fence{Holder: fmt.Sprintf("pid %d on %s", os.Getpid(), host), Term: storedFence(tx).Term + 1}
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyFence, b)
	})
	return f, err
}

// Read returns upgrade id's record ("": the current one) and its
// revision.
func (s *Store) Read(id string) (u upgrade.Upgrade, rev Revision, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if id == "" {
			var ok bool
			if u, ok, err = current(tx); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: no current upgrade", ErrNotFound)
			}
		} else if u, err = get(tx, id); err != nil {
			return err
		}
		rev = revision(tx, u.ID)
		return nil
	})
	return u, rev, err
}

// CreateAt is Create under fence f: the new record is at revision 1.
func (s *Store) CreateAt(u upgrade.Upgrade, f Fence) (Revision, error) {
	last := s.takeLast()
	err := s.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
		if err := checkFence(t.Tx, u.ID, f); err != nil {
			return false, nil, err
		}
		w, err := create(t, u, last)
		return true, w, err
	})
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// SaveAt writes the record read at revision at, with its events, in
// one transaction, under fence f. It writes the parts of the record
// that changed (put): the fence and the revision are in the meta
// bucket, so that nothing of the stored record is decoded.
func (s *Store) SaveAt(u upgrade.Upgrade, at Revision, f Fence, evs []Event) (Revision, []Event, error) {
	var next Revision
	last := s.takeLast()
	err := s.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
		if !exists(t.Tx, u.ID) {
			return false, nil, fmt.Errorf("%w: upgrade %s", ErrNotFound, u.ID)
		}
		if err := checkFence(t.Tx, u.ID, f); err != nil {
			return false, nil, err
		}
		if cur := revision(t.Tx, u.ID); cur != at {
			return false, nil, &ConflictError{Upgrade: u.ID, Read: at, Stored: cur}
		}
		changed, w, err := put(t, u, last)
		if err != nil {
			return false, nil, err
		}
		next = at + 1
		if err := setRevision(t, u.ID, next); err != nil {
			return false, nil, err
		}
		evs, err = appendEvents(t.Tx, evs)
		return changed, w, err
	})
	return next, evs, err
}

// Append adds events to the log under fence f, and returns them with
// their Seq set; a fence no longer current is refused (*FencedError)
// and nothing is written.
func (s *Store) Append(f Fence, evs ...Event) ([]Event, error) {
	err := s.update(func(tx *bolt.Tx) error {
		if err := checkFence(tx, eventsUpgrade(evs), f); err != nil {
			return err
		}
		var err error
		evs, err = appendEvents(tx, evs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// eventsUpgrade is the upgrade events are about, for a refusal to name
// ("" when they name none).
func eventsUpgrade(evs []Event) string {
	for _, e := range evs {
		if e.Upgrade != "" {
			return e.Upgrade
		}
	}
	return ""
}
