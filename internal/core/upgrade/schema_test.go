package upgrade_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestRecordsOfSchema1 reads back the records ferry wrote before
// records carried a schema (testdata/records/v1: an upgrade mid-phase,
// paused, rolling back, completed, in a hosts stage, at a switchover,
// written by the simulator's real engine): each decodes, is migrated to
// the current schema, is understood, and encodes and decodes again to
// the same record.
func TestRecordsOfSchema1(t *testing.T) {
	files, err := filepath.Glob("testdata/records/v1/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no records of schema 1 in testdata/records/v1 (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"schema"`) {
				t.Fatal("a record of schema 1 has no schema key")
			}
			u, err := upgrade.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if u.Schema != upgrade.Schema || u.ID == "" || len(u.Members) == 0 || len(u.Plan.Phases) == 0 {
				t.Fatalf("decoded: schema %d, id %q, %d members, %d phases", u.Schema, u.ID, len(u.Members), len(u.Plan.Phases))
			}
			if err := upgrade.Understood(u); err != nil {
				t.Fatal(err)
			}
			again, err := upgrade.Encode(u)
			if err != nil {
				t.Fatal(err)
			}
			v, err := upgrade.Decode(again)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(mustJSON(t, u), mustJSON(t, v)) {
				t.Fatal("the record changed through Encode and Decode")
			}
		})
	}
}

func mustJSON(t *testing.T, u upgrade.Upgrade) map[string]any {
	t.Helper()
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRecordMigratedFromPhaseStrategy: a record of schema 1 whose phases
// name their strategy only in "strategy" (plans recorded before their
// settings) gets it in settings.type, which the machine reads; one that
// names none anywhere is refused rather than given the default.
func TestRecordMigratedFromPhaseStrategy(t *testing.T) {
	rec := edit(t, "cluster-paused.json", func(m map[string]any) {
		for _, ph := range m["plan"].(map[string]any)["phases"].([]any) {
			delete(ph.(map[string]any), "settings")
		}
	})
	u, err := upgrade.Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range u.Plan.Phases {
		if ph.Settings.Type != ph.Strategy || ph.Strategy == "" {
			t.Fatalf("phase %s: settings.type %q, strategy %q", ph.Component, ph.Settings.Type, ph.Strategy)
		}
	}
	none := edit(t, "cluster-paused.json", func(m map[string]any) {
		ph := m["plan"].(map[string]any)["phases"].([]any)[1].(map[string]any)
		delete(ph, "settings")
		ph["strategy"] = ""
	})
	if _, err := upgrade.Decode(none); !errors.Is(err, upgrade.ErrRecord) || !strings.Contains(err.Error(), "names no strategy") {
		t.Fatalf("a phase with no strategy: %v", err)
	}
}

// TestRecordsRefused: a record this build cannot take up is refused,
// saying what it does not know, never guessed at.
func TestRecordsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		change     func(m map[string]any)
		want       string // in the error
		decodes    bool   // Decode reads it; Understood refuses it
	}{
		{"newer schema", "cluster-paused.json", func(m map[string]any) { m["schema"] = upgrade.Schema + 1 },
			"written by a newer ferry (schema 3)", false},
		{"unknown state", "cluster-paused.json", func(m map[string]any) { m["state"] = "defragmenting" },
			`names unknown state "defragmenting"`, false},
		{"unknown strategy", "cluster-upgrading-api.json", func(m map[string]any) {
			m["plan"].(map[string]any)["phases"].([]any)[1].(map[string]any)["settings"].(map[string]any)["type"] = "blue-green"
		}, `strategy "blue-green" (plan phase 2, api; known: `, true},
		{"unknown rollback strategy", "cluster-rolling-back.json", func(m map[string]any) {
			m["rollback"].(map[string]any)["phases"].([]any)[0].(map[string]any)["settings"].(map[string]any)["type"] = "surge"
		}, `strategy "surge" (rollback phase 1, kv`, true},
		{"unknown member step", "standby-upgrading-controller.json", func(m map[string]any) {
			for _, mm := range m["members"].(map[string]any) {
				if mm.(map[string]any)["step"] == "stopping" {
					mm.(map[string]any)["step"] = "hibernating"
					break
				}
			}
		}, `step "hibernating" (member `, true},
		{"unknown host step", "hosts-upgrading-hosts.json", func(m map[string]any) {
			m["hosts"].(map[string]any)["h1"].(map[string]any)["step"] = "rebooting"
		}, `host step "rebooting" (host h1)`, true},
		{"state of no phase", "cluster-upgrading-api.json", func(m map[string]any) { m["state"] = "upgrading-db" },
			`state "upgrading-db" (no phase of its plan is db's)`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := upgrade.Decode(edit(t, tc.file, tc.change))
			if tc.decodes {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				err = upgrade.Understood(u)
			}
			if !errors.Is(err, upgrade.ErrRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrRecord with %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// edit returns the testdata record file, changed.
func edit(t *testing.T, file string, change func(m map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/records/v1", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
