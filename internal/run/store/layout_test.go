package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// testdata/layout1 is a store the embedded store wrote before it kept
// a record in parts (commit 5a7b4b8): every record whole under
// upgrades/ID, the operator's requests inside it. It holds five past
// records written before the schema existed, raw
// (internal/core/upgrade/testdata/records/v1: completed, paused,
// rolling back, a hosts stage, a switchover; the completed one under
// another ID), and the current one (cluster-upgrading-api.json),
// then saved by an engine under a fence (api-2 stopping, revision 1),
// paused by the operator (intent 3) and given an override, with four
// events; and its backup.
const layout1 = "testdata/layout1"

// copyStore copies the store files of dir into a new directory.
func copyStore(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	for _, name := range []string{"ferry.db", "ferry.db.bak"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// encoded is a record's encoding, to compare two records.
func encoded(t *testing.T, u upgrade.Upgrade) string {
	t.Helper()
	b, err := upgrade.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStoreOfTheLayoutBefore: a store written before records were kept
// in parts reads as it did: each past record as upgrade.Decode reads
// its file, the current one with the operator's request and override,
// its revision and its events, by a view that writes nothing and by the
// engine. The engine's first save writes it in parts (an older ferry
// then refuses it, naming a newer ferry, instead of reading a record of
// no members), and it reads back as saved, the operator's request and
// override kept (ReadRequests too, before and after); the backup gets
// the same writes.
func TestStoreOfTheLayoutBefore(t *testing.T) {
	dir := copyStore(t, layout1)
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	v1 := "../../core/upgrade/testdata/records/v1/"
	for file, id := range map[string]string{
		"cluster-paused.json":               "upg-20300101-000000-d13c0c",
		"cluster-rolling-back.json":         "upg-20300101-000000-fa0be9",
		"hosts-upgrading-hosts.json":        "upg-20300101-000000-4caa4e",
		"standby-upgrading-controller.json": "upg-20300101-000000-b2772f",
	} {
		b, err := os.ReadFile(filepath.Join(v1, file))
		if err != nil {
			t.Fatal(err)
		}
		want, err := upgrade.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ro.Get(id)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if encoded(t, got) != encoded(t, want) {
			t.Errorf("%s: the stored record reads otherwise than its file", file)
		}
	}
	const id = "upg-20300101-000000-979a0d"
	cur, rev, err := ro.Read("")
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID != id || rev != 1 || cur.Intent.Kind != upgrade.IntentPause || cur.Intent.Seq != 3 || len(cur.Overrides) != 1 ||
		cur.Members["api-2"].Step != upgrade.StepStopping || cur.State != upgrade.Upgrading("api") {
		t.Fatalf("the current record: %s at revision %d, intent %+v, overrides %v, api-2 %s, %s", cur.ID, rev, cur.Intent, cur.Overrides,
			cur.Members["api-2"].Step, cur.State)
	}
	requests := func(when string, rev Revision) {
		t.Helper()
		r, err := ro.ReadRequests(id)
		if err != nil || r.Revision != rev || r.Intent != cur.Intent || !slices.Equal(r.Overrides, cur.Overrides) {
			t.Fatalf("ReadRequests %s: %+v %v, want revision %d, the intent %+v and the override", when, r, err, rev, cur.Intent)
		}
	}
	requests("of the record whole", 1)
	if evs, err := ro.Events(id, 0, 0); err != nil || len(evs) != 4 {
		t.Fatalf("events: %d, %v; want 4", len(evs), err)
	}
	if f, ok, err := ro.LastFinalized(); err != nil || !ok || f.ID != "upg-20300101-000000-979a0c" || f.State != upgrade.StateCompleted {
		t.Fatalf("LastFinalized: %s %v %v", f.ID, ok, err)
	}

	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Fence()
	if err != nil {
		t.Fatal(err)
	}
	next := cur
	next.Intent, next.Overrides = upgrade.Intent{}, nil // the engine's copy, before the operator's: kept by the store
	next.Members = map[string]*upgrade.Member{}
	for n, m := range cur.Members {
		next.Members[n] = m
	}
	m := *cur.Members["api-2"]
	m.Step = upgrade.StepStarting
	next.Members["api-2"] = &m
	next.Alive = time.Date(2030, 1, 1, 0, 11, 0, 0, time.UTC)
	if rev, _, err = s.SaveAt(next, rev, f, []Event{{Upgrade: id, Kind: "step", Member: "api-2", Message: "api-2: stopping → starting"}}); err != nil {
		t.Fatal(err)
	}
	got, rev2, err := ro.Read(id)
	if err != nil {
		t.Fatal(err)
	}
	want := next
	want.Intent, want.Overrides = cur.Intent, cur.Overrides
	if rev2 != 2 || encoded(t, got) != encoded(t, want) {
		t.Fatalf("after the engine's save: revision %d (want 2), and the record reads otherwise than saved:\n%s\nwant\n%s", rev2, encoded(t, got), encoded(t, want))
	}
	requests("of the record in parts", 2)
	if err := s.view(func(tx *bolt.Tx) error {
		if value(tx, bucketRecords, []byte(id)) == nil || value(tx, bucketMembers, memberKey(id, "api-2")) == nil {
			t.Errorf("the record is not kept in parts after its save")
		}
		_, err := upgrade.Decode(value(tx, bucketUpgrades, []byte(id)))
		if !errors.Is(err, upgrade.ErrRecord) {
			t.Errorf("an older ferry's read of upgrades/%s: %v, want a record it refuses (upgrade.ErrRecord)", id, err)
		}
		t.Logf("an older ferry reads: %v", err)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b, ok, err := Backup(dir)
	if err != nil || !ok || encoded(t, b) != encoded(t, want) {
		t.Fatalf("the backup after the save: %v %v, reads otherwise than the store", ok, err)
	}
}

// TestSaveWritesWhatChanged: a save writes the parts that changed: one
// member's step changes that member's key, the head, the times and the
// revision, not the other members; a save of the same record again
// (its times alone moved) writes no member and no head. A member
// changed in place (not copied) is seen too. A handle that did not
// write the record last (another process's) compares with the store's
// encodings; one whose last write the store no longer holds (another
// wrote since) likewise.
func TestSaveWritesWhatChanged(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u := thousand()
	f, err := s.Fence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAt(u, f); err != nil {
		t.Fatal(err)
	}
	// wrote saves u with h, and returns the members' keys it
	// wrote and whether it wrote the head.
	wrote := func(h *Store, u upgrade.Upgrade) (members []string, head bool) {
		t.Helper()
		last := h.takeLast()
		if err := h.updateRecord(func(t *rtx) (bool, *lastWrite, error) {
			changed, w, err := put(t, u, last)
			for _, o := range t.ops {
				switch {
				case bytes.Equal(o.bucket, bucketMembers):
					members = append(members, string(o.key[len(memberPrefix(u.ID)):]))
				case bytes.Equal(o.bucket, bucketRecords):
					head = true
				}
			}
			return changed, w, err
		}); err != nil {
			t.Fatal(err)
		}
		return members, head
	}
	u.Alive = u.Alive.Add(time.Second)
	if ms, head := wrote(s, u); len(ms) != 0 || head {
		t.Fatalf("a heartbeat wrote members %v (head %v), want none", ms, head)
	}
	next := u
	next.Members = map[string]*upgrade.Member{}
	for n, m := range u.Members {
		next.Members[n] = m
	}
	m := *u.Members["agent-kwok-node-600"]
	m.Step = upgrade.StepSoaking
	next.Members[m.Name] = &m
	next.ActionSeq++
	if ms, head := wrote(s, next); len(ms) != 1 || ms[0] != m.Name || !head {
		t.Fatalf("a save of one member's step wrote members %v (head %v), want %s and the head", ms, head, m.Name)
	}
	next.Members[m.Name].Step = upgrade.StepRejoining // in place
	if ms, _ := wrote(s, next); len(ms) != 1 || ms[0] != m.Name {
		t.Fatalf("a member changed in place: wrote %v, want %s", ms, m.Name)
	}
	other, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ms, head := wrote(other, next); len(ms) != 0 || head {
		t.Fatalf("another handle's save of the same record wrote members %v (head %v), want none", ms, head)
	}
	changed := next
	changed.Members = map[string]*upgrade.Member{}
	for n, m := range next.Members {
		changed.Members[n] = m
	}
	o := *next.Members["agent-kwok-node-700"]
	o.Step = upgrade.StepDraining
	changed.Members[o.Name] = &o
	if ms, _ := wrote(other, changed); len(ms) != 1 || ms[0] != o.Name {
		t.Fatalf("the other handle's change: wrote %v, want %s", ms, o.Name)
	}
	// The first handle's memory is stale now (the other wrote last): it
	// compares with the store again, writes agent-kwok-node-700 back
	// and deletes the member it dropped.
	delete(next.Members, "agent-kwok-node-999")
	ms, _ := wrote(s, next)
	slices.Sort(ms)
	if !slices.Equal(ms, []string{"agent-kwok-node-700", "agent-kwok-node-999"}) {
		t.Fatalf("a save after another handle's: wrote %v, want agent-kwok-node-700 written back and agent-kwok-node-999 deleted", ms)
	}
	got, err := s.Get(u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if encoded(t, got) != encoded(t, next) {
		t.Fatalf("the record reads otherwise than saved")
	}
}
