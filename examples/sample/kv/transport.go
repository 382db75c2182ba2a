package kv

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerDownWait is how long the leader keeps redialing a member that
// refuses connections before an AppendEntries counts as failed.
const peerDownWait = time.Second

// dialError marks a failure to connect, as opposed to a failure on an
// established connection.
type dialError struct{ err error }

func (e *dialError) Error() string { return fmt.Sprintf("dial: %v", e.err) }
func (e *dialError) Unwrap() error { return e.err }

// streamLayer is raft's network on a listener we own; raft's own TCP
// transport insists on listening itself.
type streamLayer struct{ net.Listener }

func (l streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", string(addr))
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

// transport is raft's NetworkTransport with three additions that a
// cluster whose members restart one after another needs:
//
//   - The leader waits for a member that refuses connections (it is
//     restarting) instead of failing at once. Raft backs off
//     exponentially per failed AppendEntries, up to ~10s between tries,
//     so a member that was down for a few seconds would otherwise sit
//     behind for seconds after it is back, and a second restart in
//     that window would stall writes.
//   - A follower records the highest commit index any leader has told
//     it. Raft caps a follower's own commit index at the end of its
//     log, so a member that has just restarted and not yet received
//     the missing entries looks caught up; /ready compares against
//     this instead.
//   - The leader records when each peer last answered, so leadership
//     is never handed to a member that is down.
type transport struct {
	*raft.NetworkTransport

	consumer     chan raft.RPC
	leaderCommit atomic.Uint64

	mu       sync.Mutex
	lastOK   map[raft.ServerAddress]time.Time
	done     chan struct{}
	doneOnce sync.Once
}

func newTransport(nt *raft.NetworkTransport) *transport {
	t := &transport{
		NetworkTransport: nt,
		consumer:         make(chan raft.RPC),
		lastOK:           map[raft.ServerAddress]time.Time{},
		done:             make(chan struct{}),
	}
	go t.forward()
	return t
}

// forward hands incoming RPCs to raft, noting the leader's commit index
// on the way. Heartbeats take raft's fast path and never pass here;
// they carry no commit index anyway.
func (t *transport) forward() {
	in := t.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				for {
					cur := t.leaderCommit.Load()
					if req.LeaderCommitIndex <= cur || t.leaderCommit.CompareAndSwap(cur, req.LeaderCommitIndex) {
						break
					}
				}
			}
			select {
			case t.consumer <- rpc:
			case <-t.done:
				return
			}
		case <-t.done:
			return
		}
	}
}

// Consumer implements raft.Transport.
func (t *transport) Consumer() <-chan raft.RPC { return t.consumer }

// AppendEntries implements raft.Transport, redialing a peer that
// refuses connections for up to peerDownWait.
func (t *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	deadline := time.Now().Add(peerDownWait)
	for {
		err := t.NetworkTransport.AppendEntries(id, target, args, resp)
		if err == nil {
			t.mu.Lock()
			t.lastOK[target] = time.Now()
			t.mu.Unlock()
			return nil
		}
		var de *dialError
		if !errors.As(err, &de) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-t.done:
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answeredWithin reports whether target answered an AppendEntries (a
// heartbeat at least, every 50ms on a leader) within d.
func (t *transport) answeredWithin(target raft.ServerAddress, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.lastOK[target]
	return ok && time.Since(last) < d
}

// Close implements raft.WithClose.
func (t *transport) Close() error {
	t.doneOnce.Do(func() { close(t.done) })
	return t.NetworkTransport.Close()
}
