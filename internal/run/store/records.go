package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// How a record is kept, so that a save writes what changed and not the
// whole record (which, at a thousand members, cost 60 ms a save:
// decoding the stored record, encoding it twice and writing it whole):
//
//	records/ID             the head: the record without its members and
//	                       its times (upgrade.Encode of the rest)
//	members/ID\x00NAME     each member's record (JSON of upgrade.Member)
//	meta/times/ID          Alive and Updated, which every save moves
//	meta/intent/ID         the operator's latest request (Request)
//	meta/overrides/ID      the operator's overrides (Override)
//	meta/parts/ID          a token drawn anew by each write of the head or
//	                       of a member: what a handle that wrote it last
//	                       compares to know the store still holds that
//	                       (lastWrite)
//	upgrades/ID            a record of the layout before this one, whole;
//	                       for a record kept as above, a stub that an
//	                       older ferry refuses (stub)
//
// A read puts the parts together into one record of JSON and decodes it
// with upgrade.Decode, so that the record's migrations see the members
// as before, then merges the operator's keys in (the later request, the
// longer list of overrides), as the etcd store does. A save compares
// the head's encoding with the stored one, and each member with what
// this handle last wrote (lastWrite, by value, and by encoding when the
// values differ), and writes the parts that differ: an engine's save of
// one member's step writes that member, the head, the times and the
// revision. The operator's commands write their keys alone: a save
// never decodes the stored record to keep them, and the engine reads
// them each tick (ReadRequests) without the record.
var (
	bucketRecords = []byte("records")
	bucketMembers = []byte("members")
)

// buckets are the store's buckets, all created with the store.
var buckets = [][]byte{bucketUpgrades, bucketRecords, bucketMembers, bucketEvents, bucketMeta}

func timesKey(id string) []byte     { return []byte("times/" + id) }
func intentKey(id string) []byte    { return []byte("intent/" + id) }
func overridesKey(id string) []byte { return []byte("overrides/" + id) }
func partsKey(id string) []byte     { return []byte("parts/" + id) }

// memberKey is member name's key in the members bucket; memberPrefix
// the prefix of upgrade id's members there.
func memberKey(id, name string) []byte { return append(memberPrefix(id), name...) }
func memberPrefix(id string) []byte    { return []byte(id + "\x00") }

// stubSchema is the schema a stub claims: no ferry that keeps records
// whole knows it, so an older ferry refuses the store's records of this
// layout ("written by a newer ferry") where it would have read one
// without members. No build reads a stub as a record: the head under
// records comes first.
const stubSchema = 1000

func stub(id string) []byte {
	b, _ := json.Marshal(struct {
		Schema int    `json:"schema"`
		ID     string `json:"id"`
		Note   string `json:"note"`
	}{stubSchema, id, "this record is kept in the records and members buckets, by a newer ferry"})
	return b
}

// times is what meta/times/ID holds.
type times struct {
	Alive   time.Time `json:"alive,omitzero"`
	Updated time.Time `json:"updated"`
}

// encodeHead encodes u without its members and its times.
func encodeHead(u upgrade.Upgrade) ([]byte, error) {
	u.Members, u.Alive, u.Updated = nil, time.Time{}, time.Time{}
	return upgrade.Encode(u)
}

// memberWrite is one member as a handle last wrote it: its value, to
// compare the next save's with, and its encoding, to compare when the
// values differ in representation only (a time's monotonic reading).
type memberWrite struct {
	m      upgrade.Member
	b      []byte
	valued bool // m is set (stored: from the store, its encoding alone)
}

// lastWrite is what a handle last wrote of a record: the parts token it
// drew, and the members it holds. While the store's token is that one,
// the store holds those members, and a save compares with them instead
// of reading and encoding every member.
type lastWrite struct {
	id      string
	token   uint64
	members map[string]memberWrite
}

// rtx is a write transaction whose writes of what a recovery needs (the
// records, the members, the meta keys) are noted, so that the backup
// gets the same writes (syncBackup).
type rtx struct {
	*bolt.Tx
	ops []op
}

// op is one write noted: a put, or a delete when del.
type op struct {
	bucket, key, val []byte
	del              bool
}

func (t *rtx) put(bucket, key, val []byte) error {
	t.ops = append(t.ops, op{bucket: bucket, key: key, val: val})
	return t.Bucket(bucket).Put(key, val)
}

func (t *rtx) delete(bucket, key []byte) error {
	k := bytes.Clone(key) // a cursor's key lives as long as the transaction
	t.ops = append(t.ops, op{bucket: bucket, key: k, del: true})
	return t.Bucket(bucket).Delete(k)
}

// exists reports whether upgrade id has a record, of either layout.
func exists(tx *bolt.Tx, id string) bool {
	return value(tx, bucketRecords, []byte(id)) != nil || value(tx, bucketUpgrades, []byte(id)) != nil
}

// value is key's value in tx's bucket name, nil when the bucket is not
// there (a read-only store of an older layout, or no store).
func value(tx *bolt.Tx, name, key []byte) []byte {
	if b := bucket(tx, name); b != nil {
		return b.Get(key)
	}
	return nil
}

// get reads upgrade id's record, migrated to the current schema, with
// the operator's request and overrides.
func get(tx *bolt.Tx, id string) (upgrade.Upgrade, error) {
	b := value(tx, bucketUpgrades, []byte(id)) // a record of the layout before: whole
	if head := value(tx, bucketRecords, []byte(id)); head != nil {
		b = assemble(tx, id, head)
	}
	if b == nil {
		return upgrade.Upgrade{}, fmt.Errorf("%w: upgrade %s", ErrNotFound, id)
	}
	u, err := upgrade.Decode(b)
	if err != nil {
		return u, fmt.Errorf("store: %w", err)
	}
	return u, mergeRequests(tx, &u)
}

// assemble puts a record of this layout together as one record of
// JSON: the head, then its members and its times, whose keys come
// after the head's own ("members": null, "updated" zero): in
// encoding/json, a later duplicate replaces the earlier value.
func assemble(tx *bolt.Tx, id string, head []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(head) * 4)
	b.Write(head[:len(head)-1])
	b.WriteString(`,"members":{`)
	prefix := memberPrefix(id)
	first := true
	if mb := bucket(tx, bucketMembers); mb != nil {
		c := mb.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !first {
				b.WriteByte(',')
			}
			first = false
			name, _ := json.Marshal(string(k[len(prefix):]))
			b.Write(name)
			b.WriteByte(':')
			b.Write(v)
		}
	}
	b.WriteByte('}')
	if t := value(tx, bucketMeta, timesKey(id)); len(t) > 2 {
		b.WriteByte(',')
		b.Write(t[1 : len(t)-1])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// mergeRequests gives u the operator's request and overrides kept
// beside it, when later than the record's own.
func mergeRequests(tx *bolt.Tx, u *upgrade.Upgrade) error {
	r, err := requests(tx, u.ID)
	if err != nil {
		return err
	}
	if r.Intent.Seq > u.Intent.Seq {
		u.Intent = r.Intent
	}
	if len(r.Overrides) > len(u.Overrides) {
		u.Overrides = r.Overrides
	}
	return nil
}

// requests reads the operator's keys of upgrade id (none: the zero
// Requests) and the record's revision.
func requests(tx *bolt.Tx, id string) (Requests, error) {
	r := Requests{Revision: revision(tx, id)}
	meta := bucket(tx, bucketMeta)
	if meta == nil {
		return r, nil
	}
	if b := meta.Get(intentKey(id)); b != nil {
		if err := json.Unmarshal(b, &r.Intent); err != nil {
			return r, fmt.Errorf("store: the operator's request for upgrade %s: %w", id, err)
		}
	}
	if b := meta.Get(overridesKey(id)); b != nil {
		if err := json.Unmarshal(b, &r.Overrides); err != nil {
			return r, fmt.Errorf("store: the operator's overrides of upgrade %s: %w", id, err)
		}
	}
	return r, nil
}

// Requests is what the operator asked of an upgrade, kept beside its
// record: the latest request and the overrides, with the record's
// revision. The engine reads it each tick, which costs no decoding of
// the record.
type Requests struct {
	Intent    upgrade.Intent
	Overrides []upgrade.Override
	Revision  Revision
}

// ReadRequests returns the operator's request and overrides of upgrade
// id and its record's revision. For a record of the layout before
// this one (whose requests it holds), it reads the record.
func (s *Store) ReadRequests(id string) (r Requests, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if value(tx, bucketRecords, []byte(id)) == nil {
			u, err := get(tx, id)
			r = Requests{Intent: u.Intent, Overrides: u.Overrides, Revision: revision(tx, id)}
			return err
		}
		r, err = requests(tx, id)
		return err
	})
	return r, err
}

// setRequests writes the operator's keys of upgrade id from u.
func setRequests(t *rtx, u upgrade.Upgrade) error {
	in, err := json.Marshal(u.Intent)
	if err != nil {
		return err
	}
	if err := t.put(bucketMeta, intentKey(u.ID), in); err != nil {
		return err
	}
	ov, err := json.Marshal(u.Overrides)
	if err != nil {
		return err
	}
	return t.put(bucketMeta, overridesKey(u.ID), ov)
}

// put writes record u in parts, keeping the operator's request and
// overrides (their keys, which it does not write). last is what this
// handle last wrote, if anything, which put takes over (it changes it
// into what it writes): when the store still holds it (its parts
// token), the members are compared with it; else with the stored ones,
// by their encoding. It returns what it wrote, for the handle to keep
// once the transaction commits, and whether the record changed for a
// recovery: anything but its times (Alive and Updated, the engine's
// heartbeat), which do not rewrite the backup.
func put(t *rtx, u upgrade.Upgrade, last *lastWrite) (changed bool, w *lastWrite, err error) {
	id := []byte(u.ID)
	head, err := encodeHead(u)
	if err != nil {
		return false, nil, fmt.Errorf("store: encode upgrade %s: %w", u.ID, err)
	}
	meta := t.Bucket(bucketMeta)
	if legacy := t.Bucket(bucketUpgrades).Get(id); legacy != nil && t.Bucket(bucketRecords).Get(id) == nil {
		// A record of the layout before: whole, with the operator's
		// requests inside, which move to their keys (unless there
		// already). Its stub takes its place.
		if meta.Get(intentKey(u.ID)) == nil {
			if old, err := upgrade.Decode(legacy); err == nil {
				if err := setRequests(t, old); err != nil {
					return false, nil, err
				}
			}
		}
		if err := t.put(bucketUpgrades, id, stub(u.ID)); err != nil {
			return false, nil, err
		}
		changed = true
	} else if meta.Get(intentKey(u.ID)) == nil {
		// A new record: the requests it was created with are the
		// operator's keys' first values.
		if err := setRequests(t, u); err != nil {
			return false, nil, err
		}
	}
	if !bytes.Equal(head, t.Bucket(bucketRecords).Get(id)) {
		if err := t.put(bucketRecords, id, head); err != nil {
			return false, nil, err
		}
		changed = true
	}
	tb, err := json.Marshal(times{Alive: u.Alive, Updated: u.Updated})
	if err != nil {
		return false, nil, err
	}
	if err := t.put(bucketMeta, timesKey(u.ID), tb); err != nil {
		return false, nil, err
	}
	if last == nil || last.id != u.ID || last.token != token(meta.Get(partsKey(u.ID))) {
		last = stored(t.Tx, u.ID)
	}
	w = last
	for name, m := range u.Members {
		if m == nil {
			return false, nil, fmt.Errorf("store: upgrade %s: member %s has no record", u.ID, name)
		}
		was, ok := w.members[name]
		if ok && was.valued && was.m == *m {
			continue
		}
		b, err := json.Marshal(m)
		if err != nil {
			return false, nil, fmt.Errorf("store: encode member %s of upgrade %s: %w", name, u.ID, err)
		}
		w.members[name] = memberWrite{m: *m, b: b, valued: true}
		if ok && bytes.Equal(b, was.b) {
			continue
		}
		if err := t.put(bucketMembers, memberKey(u.ID, name), b); err != nil {
			return false, nil, err
		}
		changed = true
	}
	if len(w.members) > len(u.Members) {
		for name := range w.members {
			if _, ok := u.Members[name]; !ok {
				if err := t.delete(bucketMembers, memberKey(u.ID, name)); err != nil {
					return false, nil, err
				}
				delete(w.members, name)
				changed = true
			}
		}
	}
	w.token = token(meta.Get(partsKey(u.ID)))
	if changed {
		w.token = rand.Uint64() | 1 // never 0, the token of none
		var tok [8]byte
		binary.BigEndian.PutUint64(tok[:], w.token)
		if err := t.put(bucketMeta, partsKey(u.ID), tok[:]); err != nil {
			return false, nil, err
		}
	}
	return changed, w, nil
}

func token(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// stored is what the store holds of upgrade id's members, as a
// lastWrite of their encodings alone (no value: each is compared by its
// encoding, and replaced by what put writes or finds the same). The
// encodings are bbolt's, valid while tx is open: put replaces each one
// it keeps, and deletes the others.
func stored(tx *bolt.Tx, id string) *lastWrite {
	w := &lastWrite{id: id, members: map[string]memberWrite{}}
	prefix := memberPrefix(id)
	c := tx.Bucket(bucketMembers).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		w.members[string(k[len(prefix):])] = memberWrite{b: v}
	}
	return w
}

// takeLast takes what this handle last wrote, for a write to change
// into what it writes; the write gives it back (kept) once committed.
// A write that fails keeps nothing: the next compares with the store.
func (s *Store) takeLast() *lastWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.last
	s.last = nil
	return w
}

func (s *Store) kept(w *lastWrite) {
	s.mu.Lock()
	s.last = w
	s.mu.Unlock()
}
