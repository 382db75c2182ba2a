package cli

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
)

// statusRecord is a record with every part 'ferry upgrade status'
// prints: the flow's name of the state, a path, accepted downtime, the
// point of no return, a migration stage, the batch in progress, hosts,
// waiting, held, an outage, a refusal, an override and its revoke, a
// failed and an open effect, a skipped member.
func statusRecord() upgrade.Upgrade {
	at := time.Date(2026, 3, 4, 10, 30, 0, 0, time.UTC)
	p := plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Path: []string{"2.0.0", "3.0.0"},
		Flow: []plan.Stage{{Kind: "phase", Component: "kv", State: "upgrading-storage"}, {Kind: "finalize", PointOfNoReturn: true}},
		Phases: []plan.Phase{{Component: "kv", Settings: strategy.Settings{Type: "canary", MaxUnavailable: 1}, MaxUnavailable: 1, Quorum: 2,
			Batches: []plan.Batch{{Members: []string{"kv-3"}}, {Members: []string{"kv-2", "kv-1"}}},
			Skipped: []plan.Skipped{{Member: "kv-4", Reason: "runs 2.0.0 already"}}}}}
	u := upgrade.New("upg-full", p, map[string]string{"kv-1": "1.0.0", "kv-2": "1.0.0", "kv-3": "1.0.0", "kv-4": "2.0.0"}, nil, at)
	u.State = upgrade.Upgrading("kv")
	u.Final, u.Downtime = "3.0.0", "kv offline"
	u.Members["kv-3"].Step = upgrade.StepDone
	u.Members["kv-2"].Step, u.Members["kv-2"].Detail = upgrade.StepSoaking, "healthy"
	u.Batches = []upgrade.Batch{
		{Phase: 0, Component: "kv", Number: 1, Members: []string{"kv-3"}, Size: 1, Why: "canary", Began: at, Ended: at.Add(40 * time.Second)},
		{Phase: 0, Component: "kv", Number: 2, Members: []string{"kv-2"}, Size: 2, Why: "doubled", Began: at.Add(50 * time.Second)},
	}
	u.Refusals = []strategy.Refusal{{Predicate: "quorum", Member: "kv-1", Reason: "2 of 3 healthy"}}
	u.Waiting = "kv-1 waits"
	u.Effects = effect.Journal{{ID: "e1", Key: "k", Scope: effect.Member("kv-2"), What: "drained", UndoWhat: "put back", State: effect.StateFailed, Tries: 3, Error: "503"},
		{ID: "e2", Key: "k2", Scope: effect.Upgrade(), What: "flag", State: effect.StateOpen}}
	u.Overrides = []upgrade.Override{{Predicate: "quorum", Component: "kv", Phase: 1, Until: at.Add(30 * time.Minute), By: "ann", At: at.Add(60 * time.Second)},
		{Predicate: "quorum", Component: "kv", Phase: 1, Revoke: true, By: "bob", At: at.Add(90 * time.Second)}}
	u.Outage = &upgrade.Outage{Since: at, Detail: "refused"}
	u.Held = &upgrade.Held{Since: at, Until: at.Add(time.Hour), Windows: "mon 22:00-04:00 UTC"}
	u.Stage = upgrade.Stage{Tries: 2, Detail: "40 of 100"}
	u.Pin, u.Finalized, u.NoReturn = "1.0.0", at.Add(time.Minute), upgrade.StateFinalizing
	u.Hosts = map[string]*upgrade.HostMove{"h1": {Name: "h1", Step: upgrade.HostLocked}, "h2": {Name: "h2", Step: upgrade.HostPending}}
	u.Updated = at.Add(95 * time.Second)
	return u
}

// TestStatusOutputUnchanged: 'ferry upgrade status', printed from the
// API's types now, says what it said when it printed the record
// itself: testdata/status holds the output of the CLI before (main at
// 66d7bbd, whose printer is 1d2b43a's; TZ=UTC) for the records of core/upgrade's testdata/records/v1
// and statusRecord, and the CLI prints the same, locally and through a
// server (--addr); -o json prints the API's object, the same both ways.
func TestStatusOutputUnchanged(t *testing.T) {
	local := time.Local
	time.Local = time.UTC
	t.Cleanup(func() { time.Local = local })
	recs := map[string]upgrade.Upgrade{"full": statusRecord()}
	files, err := filepath.Glob("../../core/upgrade/testdata/records/v1/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no records (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if recs[strings.TrimSuffix(filepath.Base(f), ".json")], err = upgrade.Decode(b); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	desc, err := config.Load(offlineDescription(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for name, rec := range recs {
		want, err := os.ReadFile(filepath.Join("testdata", "status", name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, name)
		st, err := store.Open(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Create(rec); err != nil {
			t.Fatal(err)
		}
		var out, errb, localJSON bytes.Buffer
		if code := Main([]string{"--data-dir", data, "upgrade", "status"}, &out, &errb); code != 0 || out.String() != string(want) {
			t.Errorf("%s: exit %d %s\n%s\nwant (testdata/status/%s.txt):\n%s", name, code, errb.String(), out.String(), name, want)
		}
		if code := Main([]string{"--data-dir", data, "-o", "json", "upgrade", "status"}, &localJSON, &errb); code != 0 || !strings.Contains(localJSON.String(), `"api_version": "ferry.dev/v1"`) {
			t.Errorf("%s: -o json: exit %d %s\n%s", name, code, errb.String(), localJSON.String())
		}

		// Through a server that serves the same store (not started: it
		// drives nothing).
		tokFile := filepath.Join(data, server.TokenFile)
		tok, _, err := server.LoadOrCreateToken(tokFile)
		if err != nil {
			t.Fatal(err)
		}
		s, err := server.New(server.Config{Cluster: desc, Driver: process.New([]process.Host{{Name: "host-1", Addr: "127.0.0.1:1"}}), Store: st, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		out.Reset()
		errb.Reset()
		code := Main([]string{"--addr", ts.URL, "--token-file", tokFile, "upgrade", "status"}, &out, &errb)
		if code != 0 || out.String() != string(want) {
			t.Errorf("%s through a server: exit %d %s\n%s\nwant (testdata/status/%s.txt):\n%s", name, code, errb.String(), out.String(), name, want)
		}
		out.Reset()
		code = Main([]string{"--addr", ts.URL, "--token-file", tokFile, "-o", "json", "upgrade", "status"}, &out, &errb)
		ts.Close()
		s.Close()
		if code != 0 || out.String() != localJSON.String() {
			t.Errorf("%s: -o json through a server: exit %d %s\n%s\nlocally:\n%s", name, code, errb.String(), out.String(), localJSON.String())
		}
	}
}
