package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Campaign joins the store's election with value (what the others
// reach this writer by: a server's URL) and returns once this writer
// leads, or ctx ends. lost closes when the writer's lease ends (it
// expired: etcd was out of reach for a TTL, or it was revoked): its
// fence is then refused, and it must campaign again to act.
func (s *Store) Campaign(ctx context.Context, value string) (lost <-chan struct{}, err error) {
	s.mu.Lock()
	sess := s.session
	s.mu.Unlock()
	if sess != nil {
		select {
		case <-sess.Done():
			sess = nil // a lease that ended: a new one
		default:
		}
	}
	if sess == nil {
		if sess, err = concurrency.NewSession(s.cli, concurrency.WithTTL(s.ttl)); err != nil {
			return nil, s.etcdError("take a lease", err)
		}
		s.mu.Lock()
		s.session, s.elected = sess, nil
		s.mu.Unlock()
	}
	e := concurrency.NewElection(sess, s.electionPrefix())
	if err := e.Campaign(ctx, value); err != nil {
		return nil, s.etcdError("campaign", err)
	}
	s.mu.Lock()
	if s.session == sess {
		s.elected = e
	}
	s.mu.Unlock()
	return sess.Done(), nil
}

// Leads says whether this writer leads the election now, as far as it
// knows (its lease has not ended).
func (s *Store) Leads() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.elected == nil || s.session == nil {
		return false
	}
	select {
	case <-s.session.Done():
		return false
	default:
		return true
	}
}

// Leader is the value (a server's URL) of the election's leader; ""
// when there is none.
func (s *Store) Leader(ctx context.Context) (string, error) {
	resp, err := s.cli.Get(ctx, s.electionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", s.etcdError("read the election's leader", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Revoke ends this writer's lease now, as its expiry would: its
// election key and its fence go with it.
func (s *Store) Revoke() error {
	s.mu.Lock()
	sess := s.session
	s.session, s.elected = nil, nil
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	return sess.Close()
}

// Fence claims the store for this writer, which must lead the
// election: its term is the election key's create revision (a later
// leader's key is created later), its holder this writer's name and
// lease. The fence key is bound to the lease, so that it ends with it.
func (s *Store) Fence() (store.Fence, error) {
	s.mu.Lock()
	e, sess := s.elected, s.session
	s.mu.Unlock()
	if e == nil || sess == nil {
		cur, _ := s.currentFence()
		return store.Fence{}, &store.FencedError{Yours: store.Fence{Holder: s.name}, Current: cur,
			Why: "this writer does not lead the etcd election (a standby): only the leader writes"}
	}
	f := store.Fence{Holder: fmt.Sprintf("%s (lease %x)", s.name, int64(sess.Lease())), Term: uint64(e.Rev())}
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())).
		Then(clientv3.OpPut(s.fenceKey(), fenceValue(f), clientv3.WithLease(sess.Lease()))).
		Else(clientv3.OpGet(s.fenceKey())).Commit()
	if err != nil {
		return store.Fence{}, s.etcdError("take the fence", err)
	}
	if !resp.Succeeded {
		if ferr := s.fenced("", f, resp.Responses[0]); ferr != nil {
			return store.Fence{}, ferr
		}
		return store.Fence{}, &store.FencedError{Yours: f, Current: f, Why: "this writer's election key is gone: its etcd lease expired"}
	}
	return f, nil
}

// currentFence is the store's fence now (the zero fence when none).
func (s *Store) currentFence() (store.Fence, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.cli.Get(ctx, s.fenceKey())
	if err != nil || len(resp.Kvs) == 0 {
		return store.Fence{}, err
	}
	var f store.Fence
	err = json.Unmarshal(resp.Kvs[0].Value, &f)
	return f, err
}

// LockEngine is the server's engine lock on etcd: held by the leader
// of the election alone; another server gets store.ErrLocked naming
// the leader. Releasing it keeps the leadership (the server resigns
// when it closes).
func (s *Store) LockEngine() (func(), error) {
	if s.Leads() {
		return func() {}, nil
	}
	ctx, cancel := s.ctx()
	defer cancel()
	leader, err := s.Leader(ctx)
	if err != nil {
		return nil, err
	}
	if leader == "" {
		return nil, fmt.Errorf("%w: no ferry server leads the etcd election yet", store.ErrLocked)
	}
	return nil, fmt.Errorf("%w: the ferry server at %s leads the etcd election", store.ErrLocked, leader)
}
