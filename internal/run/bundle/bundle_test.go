package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/bundle/bundletest"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// fakeDriver keeps its members' output in memory and holds a token.
type fakeDriver struct {
	logs map[string]string // "member/current" or "member/previous"
	// block makes Logs wait for its context (an agent that hangs).
	block bool
}

func (d *fakeDriver) Observe(context.Context, []driver.Member) ([]driver.Status, error) {
	return nil, nil
}
func (d *fakeDriver) Start(context.Context, driver.Member, driver.Artifact) error { return nil }
func (d *fakeDriver) Stop(context.Context, driver.Member) error                   { return nil }
func (d *fakeDriver) Secrets() []string                                           { return []string{"driver-token-0123456789"} }
func (d *fakeDriver) AgentVersion(context.Context, string) (string, error) {
	return "v9.9.9 (rev abc)", nil
}

func (d *fakeDriver) Logs(ctx context.Context, m driver.Member, previous bool, lines int) (string, error) {
	if d.block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	key := m.Name + "/current"
	if previous {
		key = m.Name + "/previous"
	}
	s, ok := d.logs[key]
	if !ok {
		return "", fmt.Errorf("logs of %s: %w", m.Name, process.ErrNotFound)
	}
	return s, nil
}

// fakeLive is a cluster whose members answer, with a view.
type fakeLive struct{ members []driver.Member }

func (l fakeLive) Members() []driver.Member { return l.members }
func (l fakeLive) Observe(context.Context) (engine.Snapshot, error) {
	return engine.Snapshot{Time: time.Now()}, nil
}
func (l fakeLive) RunPreflight(context.Context, string) engine.Preflight {
	return engine.Preflight{Checks: []engine.Check{{Name: "hosts answer", OK: true, Detail: "2 member(s) observed"}}}
}
func (l fakeLive) MembersView(engine.Snapshot, *upgrade.Upgrade) []engine.MemberView {
	return []engine.MemberView{{Name: "a-1", Status: "healthy"}}
}
func (l fakeLive) VersionsView(engine.Snapshot) []engine.ComponentVersions { return nil }

// testStore is a store with one rolled-back upgrade and its events.
func testStore(t *testing.T) (*store.Store, upgrade.Upgrade) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	u := upgrade.Upgrade{ID: "upg-1", From: "1.0.0", To: "2.0.0", State: upgrade.StateRolledBack, Description: "0000",
		Plan: plan.Plan{From: []string{"1.0.0"}, To: "2.0.0"}, Rollback: &plan.Plan{To: "1.0.0"},
		Reason: "member a-1: crash loop",
		Members: map[string]*upgrade.Member{
			"a-1": {Name: "a-1", Component: "a", From: "1.0.0", Target: "1.0.0", Step: upgrade.StepDone},
			"a-2": {Name: "a-2", Component: "a", From: "1.0.0", Target: "1.0.0", Step: upgrade.StepDone},
		},
		Created: now.Add(-time.Minute), Updated: now, Ended: now}
	if err := st.Create(u); err != nil {
		t.Fatal(err)
	}
	f, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(f, store.Event{Time: now, Upgrade: u.ID, Kind: "output", Member: "a-1", Message: "a-1: crash loop on 2.0.0: its last output:\npanic: boom"},
		store.Event{Time: now, Upgrade: "other", Kind: "state", Message: "another upgrade's event"}); err != nil {
		t.Fatal(err)
	}
	return st, u
}

func files(t *testing.T, b []byte) map[string]string {
	t.Helper()
	top, fs := bundletest.Files(t, b)
	if top != "bundle-upg-1" {
		t.Errorf("the bundle's directory %q, want bundle-upg-1", top)
	}
	return fs
}

// TestWrite: a bundle from a store, a cluster and a driver: the layout,
// each instance bounded, the driver's secret scrubbed from the output,
// the events of this upgrade only, a changed description said so, the
// report copied from DATA-DIR/reports, and the manifest's sums.
func TestWrite(t *testing.T) {
	st, _ := testStore(t)
	dataDir := filepath.Dir(st.Path())
	if err := os.MkdirAll(filepath.Join(dataDir, "reports"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "reports", "upg-1.json"), []byte(`{"upgrade_id": "upg-1", "note": "token=driver-token-0123456789"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, ImportedReleases), []byte(`[{"version": "2.0.1"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 5000) + "\nthe end\n"
	d := &fakeDriver{logs: map[string]string{
		"a-1/current":  "--- ferry agent t: starting a-1 version 1.0.0 (sha256 00), instance 4\nback on 1.0.0\n",
		"a-1/previous": "--- ferry agent t: starting a-1 version 2.0.0 (sha256 01), instance 3\nconnecting with driver-token-0123456789\npanic: boom\n",
		"a-2/current":  long,
	}}
	live := fakeLive{members: []driver.Member{{Name: "a-1", Host: "h"}, {Name: "a-2", Host: "h"}}}
	c := &config.Cluster{Hosts: []config.Host{{Name: "h", Agent: "127.0.0.1:1"}}}
	var buf bytes.Buffer
	man, err := Write(context.Background(), &buf, Config{Store: st, DataDir: dataDir, Description: []byte("cluster: x\nhosts: [{name: h, token: \"desc-secret-value\"}]\n"),
		DescriptionFile: "cluster.yaml", Cluster: c, Live: live, Driver: d, LogBytes: 1000, By: "a test"})
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, buf.Bytes())
	for name, data := range fs {
		for _, s := range []string{"driver-token-0123456789", "desc-secret-value"} {
			if strings.Contains(data, s) {
				t.Errorf("%s holds the secret %q", name, s)
			}
		}
	}
	for _, name := range []string{"README.md", "summary.txt", "manifest.json", "description/cluster.yaml", "description/digest.json",
		"upgrade/record.json", "upgrade/plan.json", "upgrade/events.jsonl", "members/a-1/current.log", "members/a-1/previous.log",
		"members/a-2/current.log", "cluster/members.json", "cluster/versions.json", "cluster/health.json", "reports/upg-1.json", "versions.json",
		"description/releases.json"} {
		if _, ok := fs[name]; !ok {
			t.Errorf("%s is missing", name)
		}
	}
	if _, ok := fs["members/a-2/previous.log"]; ok {
		t.Error("a previous instance that does not exist was written")
	}
	if len(man.NotCollected) != 0 {
		t.Errorf("not collected: %+v", man.NotCollected)
	}
	if a2 := fs["members/a-2/current.log"]; len(a2) > 1200 || !strings.HasSuffix(a2, "the end\n") || !strings.Contains(a2, "left out") {
		t.Errorf("a-2's output was not bounded to its last 1000 bytes: %d bytes, %.100q", len(a2), a2)
	}
	if strings.Contains(fs["upgrade/events.jsonl"], "another upgrade") || strings.Count(fs["upgrade/events.jsonl"], "\n") != 1 {
		t.Errorf("events: %s", fs["upgrade/events.jsonl"])
	}
	var dg DescriptionInfo
	if err := json.Unmarshal([]byte(fs["description/digest.json"]), &dg); err != nil || dg.Same || !strings.Contains(dg.Note, "changed since the upgrade began") {
		t.Errorf("digest.json: %v %+v", err, dg)
	}
	sum := fs["summary.txt"]
	for _, want := range []string{"a-1 (a, 1.0.0 → 2.0.0, rolled back to 1.0.0; now done)", "| panic: boom",
		"its previous instance (version 2.0.0, instance 3)", "its current (or last) instance (version 1.0.0, instance 4)"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, sum)
		}
	}
	var m2 Manifest
	if err := json.Unmarshal([]byte(fs["manifest.json"]), &m2); err != nil {
		t.Fatal(err)
	}
	if len(m2.Files) != len(fs)-1 || m2.By != "a test" || m2.Scrubbed < 2 || m2.Redacted != 1 {
		t.Errorf("manifest: %d files of %d, by %q, scrubbed %d, redacted %d", len(m2.Files), len(fs), m2.By, m2.Scrubbed, m2.Redacted)
	}
}

// TestWriteBadDays: a description that is not YAML is left out whole,
// a driver that keeps no output and an agent that hangs past the
// bundle's time limit are named, and the bundle is written anyway,
// within its limit.
func TestWriteBadDays(t *testing.T) {
	st, _ := testStore(t)
	live := fakeLive{members: []driver.Member{{Name: "a-1", Host: "h"}}}
	c := &config.Cluster{Hosts: []config.Host{{Name: "h"}}}
	var buf bytes.Buffer
	began := time.Now()
	man, err := Write(context.Background(), &buf, Config{Store: st, ID: "upg-1", Description: []byte("password: [unclosed"),
		Cluster: c, Live: live, Driver: &fakeDriver{block: true}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the bundle took %s with an agent that hangs and a limit of 200ms", took)
	}
	fs := files(t, buf.Bytes())
	if _, ok := fs["description/cluster.yaml"]; ok || strings.Contains(buf.String(), "unclosed") {
		t.Error("a description that cannot be redacted was written")
	}
	text := fmt.Sprint(man.NotCollected)
	for _, want := range []string{"the description", "not YAML", "the output of 1 member(s) (a-1)", "time limit (200ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("not collected %s: lacks %q", text, want)
		}
	}
	if fs["upgrade/record.json"] == "" || fs["upgrade/events.jsonl"] == "" {
		t.Error("the record or the events are missing")
	}

	// No driver that keeps output, no cluster: named, not fatal.
	buf.Reset()
	man, err = Write(context.Background(), &buf, Config{Store: st, Cluster: c, Live: live, Driver: struct{ driver.Driver }{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(man.NotCollected); !strings.Contains(text, "does not keep its members' output") || !strings.Contains(text, "no description was given") {
		t.Errorf("not collected: %s", text)
	}
	buf.Reset()
	if man, err = Write(context.Background(), &buf, Config{Store: st, LiveErr: errors.New("cluster.yaml does not load: line 3")}); err != nil {
		t.Fatal(err)
	} else if text := fmt.Sprint(man.NotCollected); !strings.Contains(text, "line 3") {
		t.Errorf("not collected: %s", text)
	}

	// No such upgrade: no bundle.
	if _, err := Write(context.Background(), io.Discard, Config{Store: st, ID: "upg-none"}); !errors.Is(err, ErrNoUpgrade) {
		t.Errorf("an unknown upgrade: %v", err)
	}
	if _, err := Write(context.Background(), io.Discard, Config{Store: st, ID: "../etc"}); !errors.Is(err, ErrNoUpgrade) {
		t.Errorf("a path as an upgrade id: %v", err)
	}
}

// TestWriteReportOfTrafficUpgrade: an upgrade whose batches were judged
// (it ran with traffic) but whose report is not in DATA-DIR/reports, as
// when a server drove it, has the report missing said in the manifest
// and the summary (a local bundle left it out and said nothing was), and
// has the server's when one is given.
func TestWriteReportOfTrafficUpgrade(t *testing.T) {
	st, u := testStore(t)
	f, err := st.Fence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(f, store.Event{Time: time.Now(), Upgrade: u.ID, Kind: "impact", Component: "a", Message: "a batch 1 hurt the clients: p99 ×3"}); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Dir(st.Path())
	var buf bytes.Buffer
	man, err := Write(context.Background(), &buf, Config{Store: st, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, buf.Bytes())
	if text := fmt.Sprint(man.NotCollected); !strings.Contains(text, "the impact report (reports/upg-1.json)") || !strings.Contains(text, "GET /v1/upgrade/report") {
		t.Errorf("not collected: %s; want the impact report named, and where it is", text)
	}
	if !strings.Contains(fs["summary.txt"], "the impact report") {
		t.Errorf("summary.txt does not say the impact report is missing:\n%s", fs["summary.txt"])
	}

	buf.Reset()
	man, err = Write(context.Background(), &buf, Config{Store: st, DataDir: dataDir, Report: []byte(`{"upgrade_id": "upg-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if fs := files(t, buf.Bytes()); fs["reports/upg-1.json"] == "" || strings.Contains(fmt.Sprint(man.NotCollected), "impact report") {
		t.Errorf("with the server's report: reports/upg-1.json %q, not collected %+v", fs["reports/upg-1.json"], man.NotCollected)
	}
}
