// Package store keeps ferry's progress on disk in a bbolt file: the
// upgrade records, the lock that allows one upgrade at a time, and the
// event log. The engine writes a record here before every action, so
// that a new ferry process can pick the upgrade up after a crash.
//
// The file is opened for each operation and closed after it, so that
// read-only commands (status, events) in other processes can read it
// while an upgrade runs: bbolt allows one process at a time, and each
// operation holds the file for milliseconds.
//
// Two ways to open it: Open, read-write, for what writes (the engine,
// operator requests, the server), which creates the directory and the
// file; and OpenReadOnly, for the views (status, events, members,
// versions, releases, plan, health), which never writes, never creates
// anything and works on a data directory or file that cannot be written
// (a full or read-only filesystem, a directory whose owner or mode
// changed mid-upgrade): an operator can still see where an upgrade is
// when nothing can be written.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

var (
	bucketUpgrades = []byte("upgrades")
	bucketEvents   = []byte("events")
	bucketMeta     = []byte("meta")
	keyCurrent     = []byte("current")
)

// ErrNotFound is returned when there is no such upgrade.
var ErrNotFound = errors.New("store: not found")

// ErrActive is returned when an upgrade is already in progress.
var ErrActive = errors.New("store: an upgrade is already in progress")

// ErrReadOnly is returned by every write to a store opened with
// OpenReadOnly.
var ErrReadOnly = errors.New("store: opened read-only (for a view): nothing can be written through it")

// ErrNotWritable is matched (errors.Is) when the data directory or its
// store file cannot be written.
var ErrNotWritable = errors.New("store: the data directory cannot be written")

// DefaultTimeout is how long an operation waits for the store's file
// lock, which another process holds for milliseconds per operation.
const DefaultTimeout = 10 * time.Second

// Store is the embedded store under one data directory.
type Store struct {
	dir      string
	path     string
	timeout  time.Duration
	readOnly bool

	// last is what this handle last wrote of a record (put), which its
	// next save compares with.
	mu   sync.Mutex
	last *lastWrite
}

// Open prepares the store in dir (created 0700 if missing) for reading
// and writing, and checks that its file can be opened so. A data
// directory that cannot be written is an error that says so, and that
// the views still work (OpenReadOnly).
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, path: filepath.Join(dir, "ferry.db"), timeout: DefaultTimeout}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, s.writeError(err)
	}
	err := s.update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenReadOnly opens the store in dir for reading only: it creates
// nothing (a missing directory or file reads as a store with no upgrade
// and no event), writes nothing, and needs only read access to dir and
// its file. Writes through it return ErrReadOnly.
func OpenReadOnly(dir string) (*Store, error) {
	s := &Store{dir: dir, path: filepath.Join(dir, "ferry.db"), timeout: DefaultTimeout, readOnly: true}
	if _, err := os.Stat(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, s.readError(err)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// open opens the store's file for one operation, after check: a
// damaged file is refused before bbolt sees it. A missing file is
// created whole (create) when opened for writing.
func (s *Store) open(readOnly bool) (*bolt.DB, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !readOnly {
		if err := s.create(); err != nil {
			return nil, err
		}
	}
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: s.timeout, ReadOnly: readOnly})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, s.lockedError()
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, s.damaged("bbolt: " + err.Error())
	case readOnly:
		return nil, s.readError(err)
	}
	return nil, s.writeError(err)
}

// create makes the store's file, with its buckets, if it does not
// exist: built beside it and linked into place whole, so that no crash
// ever leaves an empty or partial file there (an empty store file is
// always damage, never a store being created).
func (s *Store) create() error {
	if _, err := os.Lstat(s.path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	tmp, err := os.CreateTemp(s.dir, ".ferry.db.new-*")
	if err != nil {
		return s.writeError(err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	os.Remove(tmp.Name()) // bbolt initializes a file it creates
	db, err := bolt.Open(tmp.Name(), 0o600, &bolt.Options{Timeout: s.timeout})
	if err != nil {
		return s.writeError(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Link, not rename: a store another process created meanwhile
		// is kept (EEXIST). A filesystem without hard links gets a
		// rename (two first writes at once could then race).
		switch err = os.Link(tmp.Name(), s.path); {
		case errors.Is(err, fs.ErrExist):
			err = nil
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EXDEV):
			err = os.Rename(tmp.Name(), s.path)
		}
	}
	if err != nil {
		return s.writeError(err)
	}
	safefile.SyncDir(s.dir)
	return nil
}

// writeError explains a failure to write the data directory: which
// directory, as which user, what to fix, and that the views still work.
func (s *Store) writeError(err error) error {
	const views = "ferry upgrade status, events, members and versions still work, read-only"
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return &kindError{kind: ErrNotWritable, err: err, msg: fmt.Sprintf("store: the filesystem of the data directory %s is full: %v; "+
			"free space on it for upgrades to go on; %s", s.dir, err, views)}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return &kindError{kind: ErrNotWritable, err: err, msg: fmt.Sprintf("store: the data directory %s is not writable by uid %d: %v; "+
			"make it (and %s) writable by that user (or remount its filesystem read-write), or use another --data-dir; %s",
			s.dir, os.Getuid(), err, filepath.Base(s.path), views)}
	case errors.As(err, new(*fs.PathError)):
		return fmt.Errorf("store: %w", err)
	}
	return fmt.Errorf("store: %s: %w", s.path, err)
}

// kindError is an error with its own message that matches both its
// kind (ErrNotWritable, ErrBusy) and its cause.
type kindError struct {
	kind, err error
	msg       string
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// readError explains a failure to read the store for a view.
func (s *Store) readError(err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("store: read %s: %w", s.path, err)
	}
	return fmt.Errorf("store: the data directory %s cannot be read by uid %d: %w; the views need read access to it and to %s "+
		"(run as the user that runs the upgrade, or give this one read access)", s.dir, os.Getuid(), err, filepath.Base(s.path))
}

func (s *Store) update(fn func(tx *bolt.Tx) error) error { return s.write(fn) }

// updateRecord is update for a transaction that writes an upgrade's
// record, through t (rtx), which notes what it writes: fn says whether
// it changed what a recovery needs (changed, see put), and if so, or if
// the backup is missing or not usable, the backup gets the same writes
// (or is written anew from the transaction), before it commits
// (syncBackup). A save that only moves the record's times (the engine's
// heartbeat) writes nothing there. What fn wrote (the parts of a record
// it returns) is kept once the transaction commits.
func (s *Store) updateRecord(fn func(t *rtx) (changed bool, w *lastWrite, err error)) error {
	var w *lastWrite
	err := s.write(func(tx *bolt.Tx) error {
		t := &rtx{Tx: tx}
		changed, written, err := fn(t)
		if err != nil {
			return err
		}
		if changed || !s.backupUsable() {
			s.syncBackup(t)
		}
		w = written
		return nil
	})
	if err == nil && w != nil {
		s.kept(w)
	}
	return err
}

func (s *Store) write(fn func(tx *bolt.Tx) error) (err error) {
	if s.readOnly {
		return ErrReadOnly
	}
	db, err := s.open(false)
	if err != nil {
		return err
	}
	defer func() {
		if v := recover(); v != nil {
			db.Close()
			err = s.panicked(v)
		}
	}()
	err = db.Update(fn)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil && (errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC)) {
		return s.writeError(err)
	}
	return err
}

// panicked turns a panic of bbolt on pages it cannot make sense of (a
// file damaged inside, its meta pages intact) into a damage error.
func (s *Store) panicked(v any) error {
	return s.damaged(fmt.Sprintf("bbolt could not read it: %v", v))
}

// view runs fn in a read transaction. A read-only store whose file
// does not exist (nothing was ever written) runs fn with a nil
// transaction, which the readers take for an empty store.
func (s *Store) view(fn func(tx *bolt.Tx) error) (err error) {
	if s.readOnly {
		if _, err := os.Stat(s.path); errors.Is(err, fs.ErrNotExist) {
			if err := s.check(); err != nil {
				return err // missing, while its backup says it was written
			}
			return fn(nil)
		}
	}
	db, err := s.open(true)
	if err != nil {
		return err
	}
	defer db.Close()
	defer func() {
		if v := recover(); v != nil {
			err = s.panicked(v)
		}
	}()
	return db.View(fn)
}

// bucket is tx's bucket name, nil when tx is nil (an empty read-only
// store) or the bucket was never created.
func bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	if tx == nil {
		return nil
	}
	return tx.Bucket(name)
}

// Create saves a new upgrade and makes it the current one, at
// revision 1; it refuses with ErrActive while the current upgrade has
// not ended. It takes no fence: it is for tests and tools that write a
// record by hand; the engine creates with CreateAt.
func (s *Store) Create(u upgrade.Upgrade) error {
	last := s.takeLast()
	return s.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
		w, err := create(t, u, last)
		return true, w, err
	})
}

func create(t *rtx, u upgrade.Upgrade, last *lastWrite) (*lastWrite, error) {
	if cur, ok, err := current(t.Tx); err != nil {
		return nil, err
	} else if ok && !cur.State.Terminal() {
		return nil, fmt.Errorf("%w: %s (%s, %s → %s)", ErrActive, cur.ID, cur.State, cur.From, cur.To)
	}
	_, w, err := put(t, u, last)
	if err != nil {
		return nil, err
	}
	if err := t.put(bucketUpgrades, []byte(u.ID), stub(u.ID)); err != nil {
		return nil, err
	}
	if err := setRevision(t, u.ID, 1); err != nil {
		return nil, err
	}
	return w, t.put(bucketMeta, keyCurrent, []byte(u.ID))
}

// Save writes the upgrade record (which must exist) and moves its
// revision, so that an engine that read it before is refused. It
// checks no revision and takes no fence: it is for tests and tools
// that write a record by hand; the engine saves with SaveAt.
func (s *Store) Save(u upgrade.Upgrade) error {
	last := s.takeLast()
	return s.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
		if !exists(t.Tx, u.ID) {
			return false, nil, fmt.Errorf("%w: upgrade %s", ErrNotFound, u.ID)
		}
		changed, w, err := put(t, u, last)
		if err != nil {
			return false, nil, err
		}
		return changed, w, setRevision(t, u.ID, revision(t.Tx, u.ID)+1)
	})
}

// Request records the operator's intent for upgrade id (pause, resume,
// abort) with the next sequence number, and an event saying so; check
// says, from the record as stored, why the request is refused (or nil).
// The engine acts on it at its next step, whichever process runs it.
func (s *Store) Request(id string, kind upgrade.IntentKind, now time.Time, check func(u upgrade.Upgrade) error) (upgrade.Upgrade, error) {
	return s.operate(id, check, func(u *upgrade.Upgrade) Event {
		u.Intent = upgrade.Intent{Kind: kind, Seq: u.Intent.Seq + 1, Time: now}
		return Event{Time: now, Kind: "intent", Message: fmt.Sprintf("%s requested by the operator", kind)}
	})
}

// Override records the operator's override o of upgrade id (one
// admission predicate switched off, or one effect's undo given up),
// with an event naming who and when; check says, from the record as
// stored, why it is refused (or nil). The engine driving the upgrade
// reads it at its next step.
func (s *Store) Override(id string, o upgrade.Override, check func(u upgrade.Upgrade) error) (upgrade.Upgrade, error) {
	return s.operate(id, check, func(u *upgrade.Upgrade) Event {
		u.Overrides = append(u.Overrides, o)
		msg := o.Act()
		return Event{Time: o.At, Kind: "override", Member: o.Member, Message: msg}
	})
}

// operate applies an operator's change to upgrade id in one
// transaction, with the event change returns; check refuses it, from
// the record as stored. It writes the operator's keys beside the
// record, never the record: its revision does not move.
func (s *Store) operate(id string, check func(u upgrade.Upgrade) error, change func(u *upgrade.Upgrade) Event) (upgrade.Upgrade, error) {
	var u upgrade.Upgrade
	err := s.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
		var err error
		if u, err = get(t.Tx, id); err != nil {
			return false, nil, err
		}
		if check != nil {
			if err := check(u); err != nil {
				return false, nil, err
			}
		}
		ev := change(&u)
		ev.Upgrade = id
		if err := setRequests(t, u); err != nil {
			return false, nil, err
		}
		_, err = appendEvents(t.Tx, []Event{ev})
		return true, nil, err
	})
	return u, err
}

// Current returns the current (latest) upgrade; ok is false if there
// has never been one.
func (s *Store) Current() (u upgrade.Upgrade, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		u, ok, err = current(tx)
		return err
	})
	return u, ok, err
}

// Get returns the upgrade with the given id.
func (s *Store) Get(id string) (u upgrade.Upgrade, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		u, err = get(tx, id)
		return err
	})
	return u, err
}

func current(tx *bolt.Tx) (upgrade.Upgrade, bool, error) {
	var u upgrade.Upgrade
	meta := bucket(tx, bucketMeta)
	if meta == nil {
		return u, false, nil
	}
	id := meta.Get(keyCurrent)
	if id == nil {
		return u, false, nil
	}
	if !exists(tx, string(id)) {
		return u, false, fmt.Errorf("%w: current upgrade %s", ErrNotFound, id)
	}
	u, err := get(tx, string(id))
	return u, err == nil, err
}

// Event is one thing that happened: a state change, an action and its
// outcome, a health result. Seq orders events across upgrades.
type Event struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Upgrade   string    `json:"upgrade,omitempty"`
	Kind      string    `json:"kind"` // state, step, action, health, wait, error
	Component string    `json:"component,omitempty"`
	Member    string    `json:"member,omitempty"`
	Message   string    `json:"message"`
	// Duration of an action, for the overhead and step figures.
	DurationMS float64 `json:"duration_ms,omitempty"`
	// Output is a member's output the event carries apart from its
	// one-line message (kept-output: the last lines of an instance the
	// driver replaced), for `ferry bundle`; bounded by the driver.
	Output string `json:"output,omitempty"`
}

func appendEvents(tx *bolt.Tx, evs []Event) ([]Event, error) {
	b := tx.Bucket(bucketEvents)
	for i := range evs {
		seq, err := b.NextSequence()
		if err != nil {
			return nil, err
		}
		evs[i].Seq = seq
		v, err := json.Marshal(evs[i])
		if err != nil {
			return nil, err
		}
		if err := b.Put(seqKey(seq), v); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// Events returns events with Seq > after, of the given upgrade (all
// upgrades when upgradeID is ""), at most limit (0: no limit).
func (s *Store) Events(upgradeID string, after uint64, limit int) ([]Event, error) {
	var out []Event
	err := s.view(func(tx *bolt.Tx) error {
		eb := bucket(tx, bucketEvents)
		if eb == nil {
			return nil
		}
		c := eb.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("store: event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if upgradeID != "" && e.Upgrade != upgradeID {
				continue
			}
			out = append(out, e)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return nil
	})
	return out, err
}

func seqKey(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// ClearCurrent forgets which upgrade is current once it has ended, so
// that the cluster shows no upgrade; the record and its events stay
// (Get, Events). It returns the upgrade it cleared; ErrNotFound when
// there is none, ErrActive while it has not ended.
func (s *Store) ClearCurrent() (upgrade.Upgrade, error) {
	var u upgrade.Upgrade
	err := s.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
		cur, ok, err := current(t.Tx)
		if err != nil {
			return false, nil, err
		}
		if !ok {
			return false, nil, fmt.Errorf("%w: no current upgrade", ErrNotFound)
		}
		if !cur.State.Terminal() {
			return false, nil, fmt.Errorf("%w: %s (%s, %s → %s) has not ended", ErrActive, cur.ID, cur.State, cur.From, cur.To)
		}
		u = cur
		return true, nil, t.delete(bucketMeta, keyCurrent)
	})
	return u, err
}
