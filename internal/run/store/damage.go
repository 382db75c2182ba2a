package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// ErrDamaged is matched (errors.Is) when the store's file exists but is
// not a store ferry can read: empty, truncated, or not a bbolt file.
// Such a file is never taken for a new store and never written over:
// it holds (or held) the record of an upgrade and the journal of what
// ferry changed outside the members.
var ErrDamaged = errors.New("store: the store file is damaged")

// DamagedError says which file is damaged, how, and how to recover.
type DamagedError struct {
	Path    string
	Dir     string
	Problem string
	// Backup is the backup RestoreBackup would restore, "" when there is
	// no usable one; BackupTime when it was written.
	Backup     string
	BackupTime time.Time
}

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

func (e *DamagedError) Error() string {
	msg := fmt.Sprintf("store: %s is damaged (%s); ferry leaves it as it is and writes nothing over it. To recover: "+
		"'ferry upgrade recover -f DESCRIPTION --data-dir %s' ", e.Path, e.Problem, e.Dir)
	if e.Backup != "" {
		return msg + fmt.Sprintf("restores the backup %s written %s (the record as of ferry's last write), "+
			"after which 'ferry upgrade resume' or 'ferry upgrade abort' goes on from there", e.Backup, e.BackupTime.Local().Format(time.DateTime))
	}
	return msg + "(there is no usable backup) moves the damaged file aside and undoes what an upgrade may have left: " +
		"it runs the undo of every hook of the description (members back in the load balancer, flags unset)"
}

// BackupPath is where the store keeps what a recovery needs of itself
// (its records, not its events), written with every write of an
// upgrade's record that changes it (syncBackup).
func (s *Store) BackupPath() string { return s.path + ".bak" }

// damaged returns a *DamagedError for the store's file, with the
// backup that can replace it if there is a usable one.
func (s *Store) damaged(problem string) error {
	e := &DamagedError{Path: s.path, Dir: s.dir, Problem: problem}
	if fi, err := os.Stat(s.BackupPath()); err == nil && fi.Mode().IsRegular() {
		if _, err := inspect(s.BackupPath()); err == nil {
			e.Backup, e.BackupTime = s.BackupPath(), fi.ModTime()
		}
	}
	return e
}

// check refuses a store file that exists but cannot be a store: it is
// run before bbolt opens the file, because bbolt takes an empty file
// for a new store (and writes one over it) and maps a truncated one,
// faulting on the first page beyond its end. A missing file is no
// damage (nothing was ever written), unless a backup says a store
// existed.
func (s *Store) check() error {
	problem, err := inspect(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, berr := os.Stat(s.BackupPath()); berr == nil {
			return s.damaged("missing, although its backup " + filepath.Base(s.BackupPath()) + " says a store was written here")
		}
		return nil
	case errors.Is(err, errDamagedFile):
		return s.damaged(problem)
	case errors.Is(err, fs.ErrPermission):
		if s.readOnly {
			return s.readError(err)
		}
		return s.writeError(err)
	case err != nil:
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

var errDamagedFile = errors.New("damaged")

// The layout of a bbolt file (format version 2): two meta pages first,
// each a 16-byte page header and then the meta, whose checksum is the
// FNV-64a of its first 56 bytes. bbolt writes them in the machine's
// byte order.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSumOffset  = 56
	metaSize       = metaSumOffset + 8
	minPageSize    = 1024
	maxPageSize    = 1 << 20
)

type boltMeta struct {
	pageSize       uint32
	freelist, pgid uint64
	txid           uint64
}

// parseMeta reads a meta page at the start of b; ok is false unless
// its magic, version, checksum and page size are those of bbolt.
func parseMeta(b []byte) (m boltMeta, ok bool) {
	if len(b) < pageHeaderSize+metaSize {
		return m, false
	}
	b = b[pageHeaderSize:]
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != boltMagic || ne.Uint32(b[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(b[:metaSumOffset])
	if h.Sum64() != ne.Uint64(b[metaSumOffset:]) {
		return m, false
	}
	m = boltMeta{pageSize: ne.Uint32(b[8:]), freelist: ne.Uint64(b[32:]), pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}
	return m, m.pageSize >= minPageSize && m.pageSize <= maxPageSize && m.pageSize&(m.pageSize-1) == 0
}

// inspect says what is wrong with the bbolt file at path, if anything
// (err matches errDamagedFile then): empty, not a bbolt file (neither
// meta page valid), or shorter than the pages its meta says it holds.
// It reads the two meta pages only.
func inspect(path string) (problem string, err error) {
	f, fi, err := safefile.Open(path)
	if err != nil {
		var sfe *safefile.Error
		if errors.As(err, &sfe) && errors.Is(err, safefile.ErrNotRegular) {
			return sfe.Problem, errDamagedFile
		}
		return "", err
	}
	defer f.Close()
	size := fi.Size()
	if size == 0 {
		return "it is empty: 0 bytes", errDamagedFile
	}
	head := make([]byte, pageHeaderSize+metaSize)
	var metas []boltMeta
	if n, _ := f.ReadAt(head, 0); n == len(head) {
		if m, ok := parseMeta(head); ok {
			metas = append(metas, m)
		}
	}
	// The second meta page is one page in: at the page size the first
	// says, or, if it is not valid, at any size bbolt may have used.
	offsets := []int64{int64(os.Getpagesize())}
	if len(metas) == 1 {
		offsets = []int64{int64(metas[0].pageSize)}
	} else {
		for ps := int64(minPageSize); ps <= maxPageSize; ps *= 2 {
			offsets = append(offsets, ps)
		}
	}
	for _, off := range offsets {
		if n, _ := f.ReadAt(head, off); n == len(head) {
			if m, ok := parseMeta(head); ok {
				metas = append(metas, m)
				break
			}
		}
	}
	if len(metas) == 0 {
		return fmt.Sprintf("not a ferry store: %d bytes, and neither of a bbolt file's two meta pages is valid (overwritten, or another file)", size), errDamagedFile
	}
	m := metas[0] // bbolt uses the valid meta of the later transaction
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	if want := int64(m.pgid) * int64(m.pageSize); size < want || m.freelist > m.pgid && m.freelist != ^uint64(0) {
		return fmt.Sprintf("truncated: %d bytes, but its pages reach byte %d", size, want), errDamagedFile
	}
	return "", nil
}

// The backup: what a recovery needs of the store (RestoreBackup), in a
// bbolt file of its own at BackupPath: the meta bucket (which upgrade
// is current, the revisions, the operator's requests) and every
// upgrade's record (its head and its members: the journal of effects,
// the state; LastFinalized reads the past ones), not the events, which
// are the bulk of a long-lived store and which no recovery reads (the
// events bucket is there, empty, its sequence carried on).
//
// A write of a record that changes it for a recovery (put) gives the
// backup the same writes (the ones rtx noted), in a transaction of the
// backup's own, committed (synced) before the store's commits, hence
// before the write returns and before the engine acts on it: the backup
// holds every effect the engine goes on to make (if the store's commit
// then fails, the backup is ahead of the store, which restores nothing
// while it is readable). So a save costs the backup what it changed,
// not the store's every record. The backup's generation (keyBackupGen,
// in both) says the backup had every such write: when the two differ
// (a write whose backup failed, or whose store's commit did), or when
// the backup is missing or not usable, it is written anew from the
// transaction (writeBackup): built beside it, synced and renamed into
// place, so that the backup is always one complete store. A backup
// that cannot be written is removed rather than left behind its store
// (restoring it would forget effects); the store's own write still
// stands.
var keyBackupGen = []byte("backup-generation")

// syncBackup gives the backup t's writes, or writes it anew.
func (s *Store) syncBackup(t *rtx) {
	gen := token(t.Bucket(bucketMeta).Get(keyBackupGen)) + 1
	if err := s.mirror(t, gen); err != nil {
		if err := s.writeBackup(t.Tx, gen); err != nil {
			os.Remove(s.BackupPath())
			return
		}
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], gen)
	_ = t.Bucket(bucketMeta).Put(keyBackupGen, b[:]) // not noted: the backup has its own
}

// errBackupBehind: the backup missed writes of the store.
var errBackupBehind = errors.New("the backup is not at the store's generation")

// mirror writes t's writes to the backup, which must be at generation
// gen-1, and moves it to gen.
func (s *Store) mirror(t *rtx, gen uint64) (err error) {
	if !s.backupUsable() {
		return errBackupBehind
	}
	db, err := bolt.Open(s.BackupPath(), 0o600, &bolt.Options{Timeout: s.timeout})
	if err != nil {
		return err
	}
	defer func() {
		if v := recover(); v != nil { // pages bbolt cannot read: written anew
			db.Close()
			err = fmt.Errorf("backup: %v", v)
		}
	}()
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || token(meta.Get(keyBackupGen)) != gen-1 {
			return errBackupBehind
		}
		for _, o := range t.ops {
			b, err := tx.CreateBucketIfNotExists(o.bucket)
			if err != nil {
				return err
			}
			if o.del {
				err = b.Delete(o.key)
			} else {
				err = b.Put(o.key, o.val)
			}
			if err != nil {
				return err
			}
		}
		// The events' sequence carried on, so that a restored store
		// numbers its events after the ones it lost.
		ev, err := tx.CreateBucketIfNotExists(bucketEvents)
		if err != nil {
			return err
		}
		if err := ev.SetSequence(t.Bucket(bucketEvents).Sequence()); err != nil {
			return err
		}
		var g [8]byte
		binary.BigEndian.PutUint64(g[:], gen)
		return meta.Put(keyBackupGen, g[:])
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeBackup writes the backup anew from src, at generation gen.
func (s *Store) writeBackup(src *bolt.Tx, gen uint64) error {
	f, err := os.CreateTemp(s.dir, "."+filepath.Base(s.BackupPath())+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // once renamed, a no-op
	// bbolt initializes the empty file (synced); its commits are not
	// synced: the file is, once, when whole.
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: s.timeout, NoSync: true})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range buckets {
			dst, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			from := src.Bucket(name)
			if from == nil {
				continue
			}
			if err := dst.SetSequence(from.Sequence()); err != nil {
				return err
			}
			if bytes.Equal(name, bucketEvents) {
				continue
			}
			dst.FillPercent = 1 // keys come in order
			if err := from.ForEach(func(k, v []byte) error { return dst.Put(k, v) }); err != nil {
				return err
			}
		}
		var g [8]byte
		binary.BigEndian.PutUint64(g[:], gen)
		return tx.Bucket(bucketMeta).Put(keyBackupGen, g[:])
	})
	if err == nil {
		err = db.Sync()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.BackupPath())
	}
	if err != nil {
		return err
	}
	safefile.SyncDir(s.dir)
	return nil
}

// backupUsable reports whether BackupPath is a bbolt file a restore
// would take (inspect: its two meta pages, not its content).
func (s *Store) backupUsable() bool {
	_, err := inspect(s.BackupPath())
	return err == nil
}

// Diagnose returns the *DamagedError of the store in dir, or nil when
// its file is readable or absent (and no backup says it should exist).
// It opens nothing for writing.
func Diagnose(dir string) error {
	s := &Store{dir: dir, path: filepath.Join(dir, "ferry.db"), timeout: DefaultTimeout, readOnly: true}
	if err := s.check(); errors.Is(err, ErrDamaged) {
		return err
	}
	return nil
}

// Backup returns the current (or last) upgrade the store's backup in
// dir holds; ok is false when it holds none.
func Backup(dir string) (u upgrade.Upgrade, ok bool, err error) {
	b := &Store{dir: dir, path: filepath.Join(dir, "ferry.db.bak"), timeout: DefaultTimeout, readOnly: true}
	if _, err := os.Stat(b.path); err != nil {
		return u, false, fmt.Errorf("store: backup: %w", err)
	}
	return b.Last()
}

// RestoreBackup replaces the damaged store file in dir by its backup.
// The damaged file is kept beside it (aside, ferry.db.damaged-TIME) for
// whoever wants to look at it; the backup stays. It refuses a store
// that is not damaged and a backup that is not usable. The caller holds
// the engine lock.
func RestoreBackup(dir string, now time.Time) (aside string, err error) {
	s := &Store{dir: dir, path: filepath.Join(dir, "ferry.db"), timeout: DefaultTimeout}
	var de *DamagedError
	if err := s.check(); !errors.As(err, &de) {
		return "", fmt.Errorf("store: %s is not damaged: nothing to restore", s.path)
	}
	if de.Backup == "" {
		return "", fmt.Errorf("store: %s has no usable backup (%s)", s.path, s.BackupPath())
	}
	aside, err = s.moveAside(now)
	if err != nil {
		return "", err
	}
	b, err := safefile.Read(s.BackupPath(), 1<<40, time.Minute)
	if err != nil {
		return aside, fmt.Errorf("store: backup: %w", err)
	}
	if err := safefile.WriteFileAtomic(s.path, 0o600, b); err != nil {
		return aside, s.writeError(err)
	}
	return aside, nil
}

// MoveAside moves the damaged store file of dir (and its backup, which
// is not usable) aside, so that the next write creates a new store. It
// refuses a store that is not damaged, and one with a usable backup
// (RestoreBackup restores it).
func MoveAside(dir string, now time.Time) (aside string, err error) {
	s := &Store{dir: dir, path: filepath.Join(dir, "ferry.db"), timeout: DefaultTimeout}
	var de *DamagedError
	if err := s.check(); !errors.As(err, &de) {
		return "", fmt.Errorf("store: %s is not damaged: nothing to move aside", s.path)
	}
	if de.Backup != "" {
		return "", fmt.Errorf("store: %s has a usable backup: restore it instead", s.path)
	}
	if aside, err = s.moveAside(now); err != nil {
		return "", err
	}
	if _, err := os.Stat(s.BackupPath()); err == nil {
		if err := os.Rename(s.BackupPath(), aside+".bak"); err != nil {
			return aside, s.writeError(err)
		}
	}
	safefile.SyncDir(s.dir)
	return aside, nil
}

// moveAside renames the store file to ferry.db.damaged-TIME; "" when
// it is missing.
func (s *Store) moveAside(now time.Time) (string, error) {
	aside := s.path + ".damaged-" + now.UTC().Format("20060102T150405.000Z")
	if err := os.Rename(s.path, aside); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", s.writeError(err)
	}
	safefile.SyncDir(s.dir)
	return aside, nil
}
