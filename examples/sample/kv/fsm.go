package kv

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// command is one entry of the replicated log. Value is []byte so that
// arbitrary bytes survive the JSON encoding (as base64) unchanged.
type command struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Value []byte `json:"value,omitempty"`
}

const opSet = "set"

// fsm is the replicated state: a plain map. Raft calls Apply, Snapshot
// and Restore from one goroutine; HTTP handlers read concurrently, hence
// the lock.
//
// applied is the index of the last command the map reflects. Raft's own
// AppliedIndex counts entries handed to the FSM goroutine, which may
// still be queued, so it cannot tell whether a read would see them.
type fsm struct {
	mu      sync.RWMutex
	data    map[string]string // format-1 records
	data2   map[string]string // format-2 records (2.x only; see format.go)
	compat  int               // the replicated compat level; 0 means 1
	v2      bool              // this build knows format 2
	applied atomic.Uint64
}

func newFSM(v2 bool) *fsm { return &fsm{data: map[string]string{}, data2: map[string]string{}, v2: v2} }

// Apply applies one committed command. A command it cannot decode is
// returned as an error to the leader's Apply future rather than
// panicking, so one bad entry cannot wedge every member.
func (f *fsm) Apply(l *raft.Log) any {
	var c command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		f.applied.Store(l.Index)
		return fmt.Errorf("decode command at index %d: %w", l.Index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.applied.Store(l.Index)
	switch c.Op {
	case opSet:
		f.data[c.Key] = string(c.Value)
		if f.v2 {
			// Expand: 2.x writes both forms while pinned, so that what
			// is written after the migration needs none.
			f.data2[c.Key] = encodeV2(string(c.Value))
		}
		return nil
	default:
		if res, ok := f.applyFormat(c); ok {
			return res
		}
		return fmt.Errorf("unknown op %q at index %d", c.Op, l.Index)
	}
}

func (f *fsm) appliedIndex() uint64 { return f.applied.Load() }

func (f *fsm) get(key string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := f.data[key]
	return v, ok
}

// snapshotFile is the on-disk form of a snapshot; values are []byte
// for the same reason as in command.
type snapshotFile struct {
	// Index is the last command the data reflects (fsm.applied).
	Index uint64            `json:"index"`
	Data  map[string][]byte `json:"data"`
	// Data2 and Compat are 2.x's format-2 records and the compat level;
	// a 1.x build restores the level and leaves the records it cannot
	// read.
	Data2  map[string][]byte `json:"data2,omitempty"`
	Compat int               `json:"compat,omitempty"`
}

// Snapshot copies the map: raft persists the copy in the background
// while Apply keeps running on the original.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{index: f.applied.Load(), data: maps.Clone(f.data), data2: maps.Clone(f.data2), compat: f.compat}, nil
}

// Restore replaces the whole state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s snapshotFile
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	data := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		data[k] = string(v)
	}
	data2 := map[string]string{}
	if f.v2 {
		for k, v := range s.Data2 {
			data2[k] = string(v)
		}
	}
	f.mu.Lock()
	f.data, f.data2, f.compat = data, data2, s.Compat
	f.applied.Store(s.Index)
	f.mu.Unlock()
	return nil
}

type fsmSnapshot struct {
	index  uint64
	data   map[string]string
	data2  map[string]string
	compat int
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	out := snapshotFile{Index: s.index, Data: make(map[string][]byte, len(s.data)), Compat: s.compat}
	for k, v := range s.data {
		out.Data[k] = []byte(v)
	}
	if len(s.data2) > 0 {
		out.Data2 = make(map[string][]byte, len(s.data2))
		for k, v := range s.data2 {
			out.Data2[k] = []byte(v)
		}
	}
	if err := json.NewEncoder(sink).Encode(out); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("close snapshot: %w", err)
	}
	return nil
}

func (s *fsmSnapshot) Release() {}
