package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ from what the code answers")

// TestTypesAreTheAPIsOwn: no type the API's bodies hold, however deep,
// is another ferry package's: their JSON is written here alone, so a
// change of the state machine's record (a field renamed, added, its
// type changed) cannot change the API's JSON; it breaks FromRecord's
// build instead, where the API decides.
func TestTypesAreTheAPIsOwn(t *testing.T) {
	own := reflect.TypeFor[Upgrade]().PkgPath()
	seen := map[reflect.Type]bool{}
	var walk func(ty reflect.Type, at string)
	walk = func(ty reflect.Type, at string) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		if p := ty.PkgPath(); p != "" && p != own && p != "time" {
			t.Errorf("%s is %s, a type of %s: the API's bodies hold their own types only", at, ty, p)
			return
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(ty.Elem(), at+"[]")
		case reflect.Map:
			walk(ty.Key(), at+"{key}")
			walk(ty.Elem(), at+"{}")
		case reflect.Struct:
			if ty == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range ty.NumField() {
				f := ty.Field(i)
				if f.IsExported() {
					walk(f.Type, at+"."+f.Name)
				}
			}
		case reflect.Interface:
			t.Errorf("%s is an interface: its JSON would be whatever is put in it", at)
		}
	}
	for _, ty := range []reflect.Type{reflect.TypeFor[UpgradeStatus](), reflect.TypeFor[ActionResult](), reflect.TypeFor[StartRequest](),
		reflect.TypeFor[ActionRequest](), reflect.TypeFor[OverrideRequest]()} {
		walk(ty, ty.Name())
	}
}

// golden compares b with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, b []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(b, want) {
		t.Errorf("the API's JSON of %s changed:\n%s\nwant (testdata/%s):\n%s", name, b, name, want)
	}
}

func indent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestRecordFormatsGiveOneAPI: the records ferry wrote before the
// record had a schema (core/upgrade's testdata/records/v1), and the
// same records written again in the current schema, whose JSON differs
// (a schema, each phase's settings.type), are the same API JSON, kept
// as golden files: the record's format moved, the API did not.
func TestRecordFormatsGiveOneAPI(t *testing.T) {
	files, err := filepath.Glob("../../core/upgrade/testdata/records/v1/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no records of schema 1 (%v)", err)
	}
	for _, f := range files {
		v1, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := upgrade.Decode(v1)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		v2, err := upgrade.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := upgrade.Decode(v2)
		if err != nil {
			t.Fatal(err)
		}
		var a, b map[string]any
		_ = json.Unmarshal(v1, &a)
		_ = json.Unmarshal(v2, &b)
		if reflect.DeepEqual(a, b) {
			t.Fatalf("%s: the record of schema %d reads as its schema 1 JSON: nothing shows the format moved", f, upgrade.Schema)
		}
		fromV1, fromV2 := indent(t, FromRecord(rec)), indent(t, FromRecord(again))
		if !bytes.Equal(fromV1, fromV2) {
			t.Errorf("%s: the API's JSON of the schema 1 record and of the same record in schema %d differ", f, upgrade.Schema)
		}
		golden(t, "from-record-v1-"+filepath.Base(f), fromV1)
	}
}

// at is a fixed instant, so that golden files do not move.
var at = time.Date(2026, 3, 4, 10, 30, 0, 0, time.UTC)

// fullRecord is a record with every part the API shows set, and the
// engine's own fields too (which the API leaves out).
func fullRecord() upgrade.Upgrade {
	p := plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Path: []string{"2.0.0", "3.0.0"},
		Flow: []plan.Stage{{Kind: "phase", Component: "kv", State: "upgrading-storage"}, {Kind: "finalize", PointOfNoReturn: true}},
		Phases: []plan.Phase{{Component: "kv", Settings: strategy.Settings{Type: "canary", MaxUnavailable: 1}, MaxUnavailable: 1, Quorum: 2,
			Batches: []plan.Batch{{Members: []string{"kv-3"}}, {Members: []string{"kv-2", "kv-1"}}},
			Skipped: []plan.Skipped{{Member: "kv-4", Reason: "runs 2.0.0 already"}}, Note: "kv-1 holds the role: last"}}}
	u := upgrade.New("upg-full", p, map[string]string{"kv-1": "1.0.0", "kv-2": "1.0.0", "kv-3": "1.0.0", "kv-4": "2.0.0"}, nil, at)
	u.State = upgrade.Upgrading("kv")
	u.Final, u.Downtime, u.Description = "3.0.0", "", "3f2a…"
	u.Members["kv-3"].Step, u.Members["kv-3"].Since, u.Members["kv-3"].Began = upgrade.StepDone, at.Add(40*time.Second), at.Add(5*time.Second)
	u.Members["kv-2"].Step, u.Members["kv-2"].Since, u.Members["kv-2"].Detail = upgrade.StepSoaking, at.Add(70*time.Second), "healthy"
	u.Members["kv-2"].HealthyPID, u.Members["kv-2"].Acting, u.Members["kv-2"].Tries = 4242, 17, 5 // the engine's own
	u.Batches = []upgrade.Batch{
		{Phase: 0, Component: "kv", Number: 1, Members: []string{"kv-3"}, Size: 1, Why: "canary", Began: at.Add(5 * time.Second),
			Ended: at.Add(40 * time.Second), Outcome: strategy.Outcome{Size: 1, Clean: true}, Bound: 30 * time.Second},
		{Phase: 0, Component: "kv", Number: 2, Members: []string{"kv-2"}, Size: 2, Why: "doubled after a clean batch", Began: at.Add(50 * time.Second), Waited: true},
	}
	u.Refusals = []strategy.Refusal{{Predicate: "quorum", Member: "kv-1", Reason: "2 of 3 healthy with kv-2 down"}}
	u.Waiting = "kv-1 waits on quorum"
	u.Effects = effect.Journal{{ID: "e1", Key: "lb/kv-2/drain", Scope: effect.Member("kv-2"), What: "kv-2 drained at the load balancer",
		UndoWhat: "put it back", State: effect.StateFailed, Opened: at.Add(51 * time.Second), Tries: 3, Error: "503 from lb", Acting: 9}}
	u.Overrides = []upgrade.Override{
		{Predicate: "quorum", Component: "kv", Phase: 1, Until: at.Add(30 * time.Minute), By: "ann", At: at.Add(60 * time.Second), Reason: "kv-4 is being replaced"},
		{Predicate: "quorum", Component: "kv", Phase: 1, Revoke: true, By: "bob@ops", At: at.Add(90 * time.Second)},
	}
	u.Intent, u.IntentSeen = upgrade.Intent{Kind: upgrade.IntentResume, Seq: 2, Time: at.Add(20 * time.Second)}, 2
	u.Outage = &upgrade.Outage{Since: at.Add(80 * time.Second), Detail: "agent h2: connection refused"}
	u.Held = &upgrade.Held{Since: at.Add(85 * time.Second), Until: at.Add(8 * time.Hour), Windows: "mon-fri 22:00-04:00 Europe/Berlin"}
	u.Stage = upgrade.Stage{Since: at.Add(10 * time.Second), Tries: 2, Detail: "migrated 40 of 100 rows", Acting: 3}
	u.Bound = upgrade.Bound{Batches: 30 * time.Second, Gates: 2 * time.Second}
	u.ActionSeq, u.EffectSeq, u.Alive, u.GateSince = 42, 1, at.Add(95*time.Second), at.Add(49*time.Second) // the engine's own
	u.Updated = at.Add(95 * time.Second)
	return u
}

// TestFromRecord: a record with every part the API shows gives the
// golden JSON (testdata/from-record-full.json), which holds none of
// the engine's own fields.
func TestFromRecord(t *testing.T) {
	b := indent(t, FromRecord(fullRecord()))
	golden(t, "from-record-full.json", b)
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "action_seq", "effect_seq", "intent_seen", "alive", "gate_since", "boundary", "resume_to"} {
		if _, ok := keys[k]; ok {
			t.Errorf("the API shows the record's %q, the engine's own", k)
		}
	}
	for _, s := range []string{"healthy_pid", "acting", `"tries": 5`} {
		if strings.Contains(string(b), s) {
			t.Errorf("the API shows the record's %s, the engine's own", s)
		}
	}
	for _, want := range []string{`"api_version": "ferry.dev/v1"`, `"shown_state": "upgrading-storage"`, `"members_done": 2`,
		`"summary": "quorum refused kv-1 (2 of 3 healthy with kv-2 down)"`, `"summary": "revoked: predicate quorum for component kv in phase 1 of the plan"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the API's JSON lacks %s", want)
		}
	}
}

// TestOldClientsReadTheAPI: a client of the release before the API had
// types of its own decoded the answer into the record's type
// (upgrade.Upgrade): what it printed from it (state, the flow's name
// of it, each member's step, the batch in progress, overrides with who,
// effects) it still reads from the API's JSON.
func TestOldClientsReadTheAPI(t *testing.T) {
	rec := fullRecord()
	b, err := json.Marshal(UpgradeStatus{Upgrade: FromRecord(rec), DrivenBy: "server"})
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Upgrade  upgrade.Upgrade `json:"upgrade"`
		DrivenBy string          `json:"driven_by"`
	}
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatalf("an old client cannot decode the API's upgrade: %v", err)
	}
	u := old.Upgrade
	if u.ID != rec.ID || u.State != rec.State || upgrade.ShownWith(&u) != upgrade.ShownWith(&rec) || old.DrivenBy != "server" {
		t.Errorf("old client: %s %s %q", u.ID, u.State, upgrade.ShownWith(&u))
	}
	if n, of := u.BatchOf(); n != 2 || of != 2 || u.Current() == nil || u.Current().Number != 2 {
		t.Errorf("old client: batch %d/%d, current %+v", n, of, u.Current())
	}
	for name, m := range rec.Members {
		if u.Members[name] == nil || u.Members[name].Step != m.Step || u.Members[name].Detail != m.Detail {
			t.Errorf("old client: member %s = %+v", name, u.Members[name])
		}
	}
	if len(u.Overrides) != 2 || u.Overrides[0].String() != rec.Overrides[0].String() || u.Overrides[1].By != "bob@ops" {
		t.Errorf("old client: overrides %v", u.Overrides)
	}
	if len(u.Effects) != 1 || u.Effects[0].Detail() != rec.Effects[0].Detail() || u.Effects[0].Scope != rec.Effects[0].Scope {
		t.Errorf("old client: effects %+v", u.Effects)
	}
	if u.Held == nil || u.Outage == nil || u.Stage.Detail != rec.Stage.Detail || u.Intent.Kind != upgrade.IntentResume {
		t.Errorf("old client: held %v outage %v stage %+v intent %+v", u.Held, u.Outage, u.Stage, u.Intent)
	}
}

// TestCheckVersion: a request without api_version is of this version
// (clients before the field); another version is refused, naming this
// one.
func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "ferry.dev/v1": true, "ferry.dev/v2": false, "v1": false} {
		why := CheckVersion(v)
		if (why == "") != ok || (!ok && !strings.Contains(why, APIVersion)) {
			t.Errorf("CheckVersion(%q) = %q", v, why)
		}
	}
}
