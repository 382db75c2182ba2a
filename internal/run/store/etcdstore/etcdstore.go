// Package etcdstore keeps ferry's records, events and catalog in etcd,
// for a ferry server that outlives its machine: several servers share
// one etcd cluster, one of them (the leader of an etcd election) drives
// the upgrade, and a standby takes it up from the record when the
// leader's lease ends.
//
// It keeps store.Records' contract like the bbolt store, tested by the
// same suite (storetest) on real etcd members. A record's Revision is
// its key's Version (etcd counts each put of a key since its creation),
// so a save at the revision read is one compare; the fence is a key
// bound to the leader's lease and holding its term (the election key's
// create revision), so every save is one Txn comparing both: a save by
// a deposed leader, or by one whose lease expired, is refused
// atomically, and nothing of it is written.
//
// Keys, under the prefix (default /ferry/<cluster>/):
//
//	upgrades/ID   the record (upgrade.Encode), without the operator's intent and overrides
//	intent/ID     the operator's latest request (pause, resume, abort)
//	overrides/ID  the operator's overrides
//	writer/ID     the fence of the save that wrote the record: who wrote which revision
//	current       the current upgrade's ID
//	fence         the leader's fence, bound to its lease
//	leader/       the election (concurrency.Election): each key a candidate, its value its address
//	seq           the last event sequence number
//	events/SEQ    the events of one write, SEQ its last sequence number (20 digits)
//	catalog/NAME  what the server keeps beside the records (the imported releases)
package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Config says which etcd and where in it.
type Config struct {
	// Endpoints are the etcd members' client addresses (host:port or URLs).
	Endpoints []string
	// Prefix is where the keys live; every server of one cluster uses
	// the same one.
	Prefix string
	// Name says who this writer is in its fence's holder (a server's
	// address, a test's writer name).
	Name string
	// TTL is the leader's lease, in seconds (default 10): how long a
	// dead leader keeps the others waiting.
	TTL int
	// Timeout bounds each request to etcd (default 5s).
	Timeout time.Duration
}

// Store is ferry's store in etcd, for one writer (one server).
type Store struct {
	cli     *clientv3.Client
	prefix  string
	name    string
	ttl     int
	timeout time.Duration

	mu      sync.Mutex
	session *concurrency.Session
	elected *concurrency.Election // this writer's election, once won
}

// Open connects to etcd. Close ends the connection (and the writer's
// lease, if it holds one).
func Open(cfg Config) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcdstore: no etcd endpoint given")
	}
	if cfg.Prefix == "" || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("etcdstore: prefix %q: want a non-empty key prefix ending in /", cfg.Prefix)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: cfg.Timeout,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	s := &Store{cli: cli, prefix: cfg.Prefix, name: cfg.Name, ttl: cfg.TTL, timeout: cfg.Timeout}
	ctx, cancel := s.ctx()
	defer cancel()
	if _, err := cli.Get(ctx, s.key("current")); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcdstore: etcd at %s does not answer: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return s, nil
}

// Close resigns what this writer holds and closes the connection.
func (s *Store) Close() error {
	s.mu.Lock()
	sess := s.session
	s.session, s.elected = nil, nil
	s.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	return s.cli.Close()
}

// Client is the etcd client, for tests that read etcd's history.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix is the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

func (s *Store) key(parts ...string) string { return s.prefix + strings.Join(parts, "") }

func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

var _ store.Records = (*Store)(nil)

type etcdResponseOp = pb.ResponseOp

// Records keys.
func (s *Store) recordKey(id string) string    { return s.key("upgrades/", id) }
func (s *Store) intentKey(id string) string    { return s.key("intent/", id) }
func (s *Store) overridesKey(id string) string { return s.key("overrides/", id) }
func (s *Store) fenceKey() string              { return s.key("fence") }
func (s *Store) electionPrefix() string        { return s.key("leader") }
func (s *Store) seqKey() string                { return s.key("seq") }
func (s *Store) eventKey(seq uint64) string    { return s.key("events/", fmt.Sprintf("%020d", seq)) }

// WriterKey is the key whose history says which fence saved each
// revision of upgrade id's record (a Written each), for tests that
// read etcd's history.
func (s *Store) WriterKey(id string) string { return s.key("writer/", id) }

func fenceValue(f store.Fence) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// Written is what the writer key of a record holds: which fence saved
// which revision.
type Written struct {
	Fence    store.Fence    `json:"fence"`
	Revision store.Revision `json:"revision"`
}

// Read returns upgrade id's record ("": the current one), with the
// operator's intent and overrides, and its revision.
func (s *Store) Read(id string) (upgrade.Upgrade, store.Revision, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	if id == "" {
		resp, err := s.cli.Get(ctx, s.key("current"))
		if err != nil {
			return upgrade.Upgrade{}, 0, s.etcdError("read the current upgrade", err)
		}
		if len(resp.Kvs) == 0 {
			return upgrade.Upgrade{}, 0, errNoCurrent
		}
		id = string(resp.Kvs[0].Value)
	}
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.recordKey(id)), clientv3.OpGet(s.intentKey(id)), clientv3.OpGet(s.overridesKey(id))).Commit()
	if err != nil {
		return upgrade.Upgrade{}, 0, s.etcdError("read upgrade "+id, err)
	}
	u, rev, _, _, err := decodeRecord(id, resp.Responses)
	return u, rev, err
}

// ReadRequests returns the operator's request and overrides of upgrade
// id, from their keys, and its record's revision (the key's version,
// read without its value): what the engine reads each tick, without
// decoding the record.
func (s *Store) ReadRequests(id string) (store.Requests, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.recordKey(id), clientv3.WithKeysOnly()), clientv3.OpGet(s.intentKey(id)),
		clientv3.OpGet(s.overridesKey(id))).Commit()
	if err != nil {
		return store.Requests{}, s.etcdError("read the requests of upgrade "+id, err)
	}
	rec := resp.Responses[0].GetResponseRange().Kvs
	if len(rec) == 0 {
		return store.Requests{}, fmt.Errorf("%w: upgrade %s", store.ErrNotFound, id)
	}
	r := store.Requests{Revision: store.Revision(rec[0].Version)}
	if kv := resp.Responses[1].GetResponseRange().Kvs; len(kv) > 0 {
		if err := json.Unmarshal(kv[0].Value, &r.Intent); err != nil {
			return r, fmt.Errorf("etcdstore: the intent of upgrade %s: %w", id, err)
		}
	}
	if kv := resp.Responses[2].GetResponseRange().Kvs; len(kv) > 0 {
		if err := json.Unmarshal(kv[0].Value, &r.Overrides); err != nil {
			return r, fmt.Errorf("etcdstore: the overrides of upgrade %s: %w", id, err)
		}
	}
	return r, nil
}

// errNoCurrent is Read's store.ErrNotFound when no upgrade is current
// (no current key), as opposed to a current key naming no record.
var errNoCurrent = fmt.Errorf("%w: no current upgrade", store.ErrNotFound)

// decodeRecord reads a record, its intent and its overrides from the
// three gets of a Txn, with their mod revisions (for compares).
func decodeRecord(id string, rs []*etcdResponseOp) (u upgrade.Upgrade, rev store.Revision, intentRev, overridesRev int64, err error) {
	rec := rs[0].GetResponseRange().Kvs
	if len(rec) == 0 {
		return u, 0, 0, 0, fmt.Errorf("%w: upgrade %s", store.ErrNotFound, id)
	}
	if u, err = upgrade.Decode(rec[0].Value); err != nil {
		return u, 0, 0, 0, fmt.Errorf("etcdstore: %w", err)
	}
	rev = store.Revision(rec[0].Version)
	if kv := rs[1].GetResponseRange().Kvs; len(kv) > 0 {
		intentRev = kv[0].ModRevision
		var in upgrade.Intent
		if err := json.Unmarshal(kv[0].Value, &in); err != nil {
			return u, 0, 0, 0, fmt.Errorf("etcdstore: the intent of upgrade %s: %w", id, err)
		}
		if in.Seq > u.Intent.Seq {
			u.Intent = in
		}
	}
	if kv := rs[2].GetResponseRange().Kvs; len(kv) > 0 {
		overridesRev = kv[0].ModRevision
		var os []upgrade.Override
		if err := json.Unmarshal(kv[0].Value, &os); err != nil {
			return u, 0, 0, 0, fmt.Errorf("etcdstore: the overrides of upgrade %s: %w", id, err)
		}
		if len(os) > len(u.Overrides) {
			u.Overrides = os
		}
	}
	return u, rev, intentRev, overridesRev, nil
}

// Get returns upgrade id's record.
func (s *Store) Get(id string) (upgrade.Upgrade, error) {
	u, _, err := s.Read(id)
	return u, err
}

// Current returns the current upgrade; ok is false when there is none.
func (s *Store) Current() (upgrade.Upgrade, bool, error) {
	u, _, err := s.Read("")
	if errors.Is(err, errNoCurrent) {
		// No current key is no upgrade; a current key naming no record is damage.
		return u, false, nil
	}
	return u, err == nil, err
}

// CreateAt records u as the current upgrade, under fence f, at
// revision 1; ErrActive while the current one has not ended.
func (s *Store) CreateAt(u upgrade.Upgrade, f store.Fence) (store.Revision, error) {
	b, err := upgrade.Encode(u)
	if err != nil {
		return 0, fmt.Errorf("etcdstore: encode upgrade %s: %w", u.ID, err)
	}
	for {
		ctx, cancel := s.ctx()
		read, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.key("current")), clientv3.OpGet(s.fenceKey())).Commit()
		cancel()
		if err != nil {
			return 0, s.etcdError("read the current upgrade", err)
		}
		// The fence first, as bbolt checks it: a deposed writer learns
		// that, not what the store holds.
		if err := s.fenced(u.ID, f, read.Responses[1]); err != nil {
			return 0, err
		}
		cur := read.Responses[0].GetResponseRange()
		var curRev int64
		if len(cur.Kvs) > 0 {
			curRev = cur.Kvs[0].ModRevision
			prev, _, err := s.Read(string(cur.Kvs[0].Value))
			if err != nil {
				return 0, err
			}
			if !prev.State.Terminal() {
				return 0, fmt.Errorf("%w: %s (%s, %s → %s)", store.ErrActive, prev.ID, prev.State, prev.From, prev.To)
			}
		}
		w, _ := json.Marshal(Written{Fence: f, Revision: 1})
		ctx, cancel = s.ctx()
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.Value(s.fenceKey()), "=", fenceValue(f)),
			clientv3.Compare(clientv3.ModRevision(s.key("current")), "=", curRev),
			clientv3.Compare(clientv3.Version(s.recordKey(u.ID)), "=", 0),
		).Then(
			clientv3.OpPut(s.recordKey(u.ID), string(b)),
			clientv3.OpPut(s.WriterKey(u.ID), string(w)),
			clientv3.OpPut(s.key("current"), u.ID),
		).Else(
			clientv3.OpGet(s.fenceKey()),
			clientv3.OpGet(s.key("current")),
			clientv3.OpGet(s.recordKey(u.ID), clientv3.WithKeysOnly()),
		).Commit()
		cancel()
		if err != nil {
			return 0, s.etcdError("create upgrade "+u.ID, err)
		}
		if resp.Succeeded {
			return 1, nil
		}
		if err := s.fenced(u.ID, f, resp.Responses[0]); err != nil {
			return 0, err
		}
		if len(resp.Responses[2].GetResponseRange().Kvs) > 0 {
			return 0, fmt.Errorf("etcdstore: upgrade %s exists already", u.ID)
		}
		// The current upgrade moved meanwhile: look again.
	}
}

// fenced says why f is not the store's fence, from a get of the fence
// key in a failed Txn; nil when it is.
func (s *Store) fenced(id string, f store.Fence, get *etcdResponseOp) error {
	kvs := get.GetResponseRange().Kvs
	if len(kvs) == 0 {
		return &store.FencedError{Upgrade: id, Yours: f, Why: "no server holds the store: the leader's etcd lease expired or was revoked"}
	}
	if string(kvs[0].Value) == fenceValue(f) {
		return nil
	}
	var cur store.Fence
	_ = json.Unmarshal(kvs[0].Value, &cur)
	why := ""
	if cur.Term > f.Term {
		why = "a later leader was elected: this writer's etcd lease expired or it resigned"
	}
	return &store.FencedError{Upgrade: id, Yours: f, Current: cur, Why: why}
}

// SaveAt writes the record read at revision at, its writer and its
// events, in one Txn, under f.
func (s *Store) SaveAt(u upgrade.Upgrade, at store.Revision, f store.Fence, evs []store.Event) (store.Revision, []store.Event, error) {
	// The operator's intent and overrides have keys of their own: the
	// record as the engine saves it keeps what it read of them, and a
	// read merges the newer.
	b, err := upgrade.Encode(u)
	if err != nil {
		return 0, nil, fmt.Errorf("etcdstore: encode upgrade %s: %w", u.ID, err)
	}
	next := at + 1
	w, _ := json.Marshal(Written{Fence: f, Revision: next})
	for {
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.Version(s.recordKey(u.ID)), "=", int64(at)),
			clientv3.Compare(clientv3.Value(s.fenceKey()), "=", fenceValue(f)),
		}
		ops := []clientv3.Op{clientv3.OpPut(s.recordKey(u.ID), string(b)), clientv3.OpPut(s.WriterKey(u.ID), string(w))}
		batch, seqCmp, seqOps, err := s.events(evs)
		if err != nil {
			return 0, nil, err
		}
		ctx, cancel := s.ctx()
		resp, err := s.cli.Txn(ctx).If(append(cmps, seqCmp...)...).Then(append(ops, seqOps...)...).
			Else(clientv3.OpGet(s.recordKey(u.ID), clientv3.WithKeysOnly()), clientv3.OpGet(s.fenceKey())).Commit()
		cancel()
		if err != nil {
			return 0, nil, s.etcdError("save upgrade "+u.ID, err)
		}
		if resp.Succeeded {
			return next, batch, nil
		}
		rec := resp.Responses[0].GetResponseRange().Kvs
		if len(rec) == 0 {
			return 0, nil, fmt.Errorf("%w: upgrade %s", store.ErrNotFound, u.ID)
		}
		if err := s.fenced(u.ID, f, resp.Responses[1]); err != nil {
			return 0, nil, err
		}
		if stored := store.Revision(rec[0].Version); stored != at {
			return 0, nil, &store.ConflictError{Upgrade: u.ID, Read: at, Stored: stored}
		}
		// Only the event sequence moved (another write's events): again.
	}
}

// events numbers evs after the store's last sequence number: the
// events with their Seq, the compare that the sequence did not move
// since, and the puts of the events (one key for them all) and of the
// sequence. None for no events.
func (s *Store) events(evs []store.Event) ([]store.Event, []clientv3.Cmp, []clientv3.Op, error) {
	if len(evs) == 0 {
		return nil, nil, nil, nil
	}
	ctx, cancel := s.ctx()
	resp, err := s.cli.Get(ctx, s.seqKey())
	cancel()
	if err != nil {
		return nil, nil, nil, s.etcdError("read the event sequence", err)
	}
	var last uint64
	var rev int64
	if len(resp.Kvs) > 0 {
		rev = resp.Kvs[0].ModRevision
		if last, err = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64); err != nil {
			return nil, nil, nil, fmt.Errorf("etcdstore: the event sequence %q: %w", resp.Kvs[0].Value, err)
		}
	}
	out := make([]store.Event, len(evs))
	copy(out, evs)
	for i := range out {
		last++
		out[i].Seq = last
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("etcdstore: encode events: %w", err)
	}
	return out, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.seqKey()), "=", rev)},
		[]clientv3.Op{clientv3.OpPut(s.eventKey(last), string(b)), clientv3.OpPut(s.seqKey(), strconv.FormatUint(last, 10))}, nil
}

// Append adds events to the log under fence f, with their Seq set: one
// Txn comparing the fence key, as a save does, so that a deposed
// leader, or one whose lease expired, appends nothing.
func (s *Store) Append(f store.Fence, evs ...store.Event) ([]store.Event, error) {
	id := ""
	for _, e := range evs {
		if e.Upgrade != "" {
			id = e.Upgrade
			break
		}
	}
	for {
		batch, cmps, ops, err := s.events(evs)
		if err != nil {
			return nil, err
		}
		ctx, cancel := s.ctx()
		cmps = append(cmps, clientv3.Compare(clientv3.Value(s.fenceKey()), "=", fenceValue(f)))
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(s.fenceKey())).Commit()
		cancel()
		if err != nil {
			return nil, s.etcdError("append events", err)
		}
		if resp.Succeeded {
			return batch, nil
		}
		if err := s.fenced(id, f, resp.Responses[0]); err != nil {
			return nil, err
		}
		// Only the event sequence moved (another write's events): again.
	}
}

// Events returns events with Seq > after, of upgradeID (all when ""),
// at most limit (0: no limit).
func (s *Store) Events(upgradeID string, after uint64, limit int) ([]store.Event, error) {
	var out []store.Event
	from := s.eventKey(after + 1)
	end := clientv3.GetPrefixRangeEnd(s.key("events/"))
	for {
		ctx, cancel := s.ctx()
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(256))
		cancel()
		if err != nil {
			return nil, s.etcdError("read events", err)
		}
		for _, kv := range resp.Kvs {
			var batch []store.Event
			if err := json.Unmarshal(kv.Value, &batch); err != nil {
				return nil, fmt.Errorf("etcdstore: events %s: %w", kv.Key, err)
			}
			for _, e := range batch {
				if e.Seq <= after || (upgradeID != "" && e.Upgrade != upgradeID) {
					continue
				}
				out = append(out, e)
				if limit > 0 && len(out) >= limit {
					return out, nil
				}
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Request records the operator's intent for upgrade id with the next
// sequence number, and an event saying so; check refuses it from the
// record as stored.
func (s *Store) Request(id string, kind upgrade.IntentKind, now time.Time, check func(u upgrade.Upgrade) error) (upgrade.Upgrade, error) {
	return s.operate(id, check, func(u *upgrade.Upgrade) (string, string, store.Event, error) {
		u.Intent = upgrade.Intent{Kind: kind, Seq: u.Intent.Seq + 1, Time: now}
		b, err := json.Marshal(u.Intent)
		return s.intentKey(id), string(b), store.Event{Time: now, Kind: "intent", Message: fmt.Sprintf("%s requested by the operator", kind)}, err
	})
}

// Override records the operator's override o of upgrade id, with an
// event naming who and when.
func (s *Store) Override(id string, o upgrade.Override, check func(u upgrade.Upgrade) error) (upgrade.Upgrade, error) {
	return s.operate(id, check, func(u *upgrade.Upgrade) (string, string, store.Event, error) {
		u.Overrides = append(u.Overrides, o)
		b, err := json.Marshal(u.Overrides)
		msg := o.Act()
		return s.overridesKey(id), string(b), store.Event{Time: o.At, Kind: "override", Member: o.Member, Message: msg}, err
	})
}

// operate writes an operator's change of upgrade id (its key and
// value from change) with its event, in one Txn that compares the
// intent and overrides as read: two requests at once are each applied
// once, in turn. The record's revision does not move.
func (s *Store) operate(id string, check func(u upgrade.Upgrade) error, change func(u *upgrade.Upgrade) (key, val string, ev store.Event, err error)) (upgrade.Upgrade, error) {
	for {
		ctx, cancel := s.ctx()
		resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.recordKey(id)), clientv3.OpGet(s.intentKey(id)), clientv3.OpGet(s.overridesKey(id))).Commit()
		cancel()
		if err != nil {
			return upgrade.Upgrade{}, s.etcdError("read upgrade "+id, err)
		}
		u, _, intentRev, overridesRev, err := decodeRecord(id, resp.Responses)
		if err != nil {
			return u, err
		}
		if check != nil {
			if err := check(u); err != nil {
				return u, err
			}
		}
		key, val, ev, err := change(&u)
		if err != nil {
			return u, fmt.Errorf("etcdstore: %w", err)
		}
		ev.Upgrade = id
		_, seqCmp, seqOps, err := s.events([]store.Event{ev})
		if err != nil {
			return u, err
		}
		ctx, cancel = s.ctx()
		tr, err := s.cli.Txn(ctx).If(append([]clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(s.intentKey(id)), "=", intentRev),
			clientv3.Compare(clientv3.ModRevision(s.overridesKey(id)), "=", overridesRev),
		}, seqCmp...)...).Then(append([]clientv3.Op{clientv3.OpPut(key, val)}, seqOps...)...).Commit()
		cancel()
		if err != nil {
			return u, s.etcdError("write the operator's request for upgrade "+id, err)
		}
		if tr.Succeeded {
			return u, nil
		}
	}
}

// ClearCurrent forgets the current upgrade once it has ended.
func (s *Store) ClearCurrent() (upgrade.Upgrade, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	cur, err := s.cli.Get(ctx, s.key("current"))
	if err != nil {
		return upgrade.Upgrade{}, s.etcdError("read the current upgrade", err)
	}
	if len(cur.Kvs) == 0 {
		return upgrade.Upgrade{}, errNoCurrent
	}
	u, _, err := s.Read(string(cur.Kvs[0].Value))
	if err != nil {
		return u, err
	}
	if !u.State.Terminal() {
		return u, fmt.Errorf("%w: %s (%s, %s → %s) has not ended", store.ErrActive, u.ID, u.State, u.From, u.To)
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.key("current")), "=", cur.Kvs[0].ModRevision)).
		Then(clientv3.OpDelete(s.key("current"))).Commit()
	if err != nil {
		return u, s.etcdError("clear the current upgrade", err)
	}
	if !resp.Succeeded {
		return u, fmt.Errorf("%w: the current upgrade changed while it was cleared", store.ErrActive)
	}
	return u, nil
}

// Last returns the current upgrade or, when none is current, the one
// created last.
func (s *Store) Last() (upgrade.Upgrade, bool, error) {
	if u, ok, err := s.Current(); err != nil || ok {
		return u, ok, err
	}
	return s.latest(func(u upgrade.Upgrade) time.Time { return u.Created })
}

// LastFinalized returns the upgrade whose finalize was attempted last.
func (s *Store) LastFinalized() (upgrade.Upgrade, bool, error) {
	return s.latest(func(u upgrade.Upgrade) time.Time { return u.Finalized })
}

func (s *Store) latest(at func(upgrade.Upgrade) time.Time) (u upgrade.Upgrade, ok bool, err error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key("upgrades/"), clientv3.WithPrefix())
	if err != nil {
		return u, false, s.etcdError("read the upgrades", err)
	}
	for _, kv := range resp.Kvs {
		c, err := upgrade.Decode(kv.Value)
		if err != nil {
			return u, false, fmt.Errorf("etcdstore: %w", err)
		}
		if t := at(c); !t.IsZero() && (!ok || t.After(at(u))) {
			u, ok = c, true
		}
	}
	return u, ok, nil
}

// ReadCatalog returns what the server keeps under name (nil when
// nothing was kept).
func (s *Store) ReadCatalog(name string) ([]byte, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key("catalog/", name))
	if err != nil {
		return nil, s.etcdError("read the catalog's "+name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// WriteCatalog keeps b under name.
func (s *Store) WriteCatalog(name string, b []byte) error {
	ctx, cancel := s.ctx()
	defer cancel()
	if _, err := s.cli.Put(ctx, s.key("catalog/", name), string(b)); err != nil {
		return s.etcdError("write the catalog's "+name, err)
	}
	return nil
}

// etcdError names the etcd operation that failed.
func (s *Store) etcdError(what string, err error) error {
	return fmt.Errorf("etcdstore: %s in etcd (endpoints %s): %w", what, strings.Join(s.cli.Endpoints(), ","), err)
}
