package kv

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

func TestFormatV2Records(t *testing.T) {
	for _, v := range []string{"", "x", "hello: world", "v2:00000000:trick"} {
		got, err := decodeV2(encodeV2(v))
		if err != nil || got != v {
			t.Errorf("round trip of %q: %q, %v", v, got, err)
		}
	}
	rec := encodeV2("value")
	bad := rec[:len(rec)-1] + "X"
	if _, err := decodeV2(bad); !errors.Is(err, errChecksum) {
		t.Errorf("a changed value: err = %v, want the checksum error", err)
	}
	for _, rec := range []string{"value", "v2:zz:x", "v2:0000"} {
		if _, err := decodeV2(rec); err == nil {
			t.Errorf("decodeV2(%q) accepted it", rec)
		}
	}
}

func TestKnowsV2(t *testing.T) {
	for v, want := range map[string]bool{"1.0.0": false, "1.9.3": false, "2.0.0": true, "2.0.0-bad.exit": true, "10.1.0": true, "dev": true} {
		if got := knowsV2(v); got != want {
			t.Errorf("knowsV2(%q) = %v, want %v", v, got, want)
		}
	}
}

type applier struct {
	t   *testing.T
	f   *fsm
	idx uint64
}

func (a *applier) apply(op, key, val string) any {
	a.t.Helper()
	a.idx++
	b, _ := json.Marshal(command{Op: op, Key: key, Value: []byte(val)})
	return a.f.Apply(&raft.Log{Index: a.idx, Data: b})
}

// TestFormatLifecycle applies the same log to a 1.x and a 2.x state
// machine: pinned at format 1 both read everything; migrate and the
// dual write keep format 2 current; after compat 2, 1.x refuses to read
// and 2.x reads format 2; contract drops format 1.
func TestFormatLifecycle(t *testing.T) {
	old, cur := &applier{t: t, f: newFSM(false)}, &applier{t: t, f: newFSM(true)}
	both := func(op, key, val string) (any, any) { return old.apply(op, key, val), cur.apply(op, key, val) }
	read := func(a *applier, key string) string {
		v, _, err := a.f.read(key)
		if err != nil {
			return "error: " + err.Error()
		}
		return v
	}
	both(opSet, "a", "1")
	both(opSet, "b", "2")
	both(opSet, "c", "3")
	// As if the 2.x member had restored a snapshot taken under 1.x: the
	// records have no format-2 form yet.
	cur.f.data2 = map[string]string{}
	both(opCompat, "", "1")
	ro, rc := both(opMigrate, "", "2")
	if ro == nil {
		t.Errorf("1.x applied migrate: %v", ro)
	}
	if m := rc.(migrateResult); m.Migrated != 2 || m.Remaining != 1 {
		t.Errorf("first batch: %+v", m)
	}
	both(opSet, "a", "1b") // the dual write keeps a's format-2 record in step
	if rc := cur.apply(opMigrate, "", "2").(migrateResult); rc.Migrated != 1 || rc.Remaining != 0 {
		t.Errorf("second batch: %+v", rc)
	}
	old.apply(opMigrate, "", "2")
	if read(old, "a") != "1b" || read(cur, "a") != "1b" || cur.f.data2["a"] != encodeV2("1b") {
		t.Errorf("pinned at 1: old reads %q, new reads %q, format-2 a = %q", read(old, "a"), read(cur, "a"), cur.f.data2["a"])
	}
	both(opCompat, "", "2")
	both(opSet2, "d", "4")
	if got := read(old, "a"); got != "error: "+errTooNew.Error() {
		t.Errorf("1.x after compat 2 reads %q", got)
	}
	if read(cur, "d") != "4" || read(cur, "a") != "1b" {
		t.Errorf("2.x after compat 2: d %q, a %q", read(cur, "d"), read(cur, "a"))
	}
	if _, ok := cur.f.data["d"]; ok {
		t.Errorf("a format-2 write also wrote format 1")
	}
	if n := cur.apply(opContract, "", "").(int); n != 3 || len(cur.f.data) != 0 || len(cur.f.data2) != 4 {
		t.Errorf("contract removed %d; left v1 %d, v2 %d", n, len(cur.f.data), len(cur.f.data2))
	}
	// A snapshot of 2.x restored by 1.x keeps the level, not the records.
	snap, _ := cur.f.Snapshot()
	var buf bytes.Buffer
	if err := snap.Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	restored := newFSM(false)
	if err := restored.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if restored.compat != 2 || len(restored.data2) != 0 {
		t.Errorf("1.x restore: compat %d, %d format-2 records", restored.compat, len(restored.data2))
	}
}

// sink is a raft.SnapshotSink over a buffer.
type sink struct{ *bytes.Buffer }

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { return nil }
func (s *sink) Close() error  { return nil }
