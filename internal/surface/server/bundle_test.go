package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/bundle"
	"github.com/ferry-upgrade/ferry/internal/run/bundle/bundletest"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// TestBundleWithTheClusterAway: GET /v1/upgrades/{id}/bundle serves an
// upgrade's bundle (application/gzip, its file name, its length) while
// the only agent does not answer: the record and the events are in it,
// the members' output is named as not collected, and the server's
// token, quoted by an event, is not. Unknown and malformed ids, a bad
// parameter and a missing token are refused.
func TestBundleWithTheClusterAway(t *testing.T) {
	if bundle.ImportedReleases != ImportedFile {
		t.Fatalf("the bundle looks for the imported releases in %s, the server keeps them in %s", bundle.ImportedReleases, ImportedFile)
	}
	s := newTestServer(t, offlineCluster(t))
	c := serve(t, s)
	c.do("GET", "/v1/upgrades/current/bundle", nil).expect(t, "a bundle before any upgrade", 404, CodeNoUpgrade)

	now := time.Now().UTC()
	u := upgrade.Upgrade{ID: "upg-test-1", From: "1.0.0", To: "2.0.0", State: upgrade.StateRolledBack,
		Plan:    plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Phases: []plan.Phase{}},
		Reason:  "member app-1: crash loop: exited 2 times since its start on 2.0.0",
		Members: map[string]*upgrade.Member{"app-1": {Name: "app-1", Component: "app", From: "1.0.0", Target: "1.0.0", Step: upgrade.StepDone}},
		Created: now.Add(-time.Minute), Updated: now, Ended: now}
	if err := boltOf(s).Create(u); err != nil {
		t.Fatal(err)
	}
	if _, err := boltOf(s).Append(
		store.Event{Time: now, Upgrade: u.ID, Kind: "output", Member: "app-1", Message: "app-1: crash loop on 2.0.0: its last output:\nfatal: bad config"},
		store.Event{Time: now, Upgrade: u.ID, Kind: "action", Message: "hook answered: echo of Authorization: Bearer " + s.cfg.Token},
		store.Event{Time: now, Upgrade: u.ID, Kind: "state", Message: "state rolling-back → rolled-back"},
	); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := c.do("GET", "/v1/upgrades/"+u.ID+"/bundle", nil).expect(t, "the bundle", 200)
	t.Logf("bundle: %d bytes in %s", len(r.body), time.Since(began).Round(time.Millisecond))
	if ct, cd := r.header.Get("Content-Type"), r.header.Get("Content-Disposition"); ct != "application/gzip" || cd != `attachment; filename="bundle-upg-test-1.tar.gz"` {
		t.Errorf("Content-Type %q, Content-Disposition %q", ct, cd)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("Content-Length %q for %d bytes", cl, len(r.body))
	}
	files := bundleFiles(t, r.body)
	bundletest.NoSecrets(t, files, s.cfg.Token)
	if !strings.Contains(files["upgrade/record.json"], `"rolled-back"`) || strings.Count(files["upgrade/events.jsonl"], "\n") != 3 ||
		!strings.Contains(files["upgrade/events.jsonl"], "Bearer "+bundle.Redacted) {
		t.Errorf("record or events: %s\n%s", files["upgrade/record.json"], files["upgrade/events.jsonl"])
	}
	var man bundle.Manifest
	if err := json.Unmarshal([]byte(files["manifest.json"]), &man); err != nil {
		t.Fatal(err)
	}
	var what []string
	for _, m := range man.NotCollected {
		what = append(what, m.What)
	}
	if !slices.ContainsFunc(what, func(w string) bool { return strings.Contains(w, "the output of 1 member(s) of host host-1 (app-1)") }) {
		t.Errorf("not collected: %q, want the output of app-1", what)
	}
	if !strings.Contains(files["summary.txt"], "app-1 (app, 1.0.0 → 2.0.0") || !strings.Contains(files["summary.txt"], "fatal: bad config") {
		t.Errorf("summary.txt:\n%s", files["summary.txt"])
	}

	// current: the current upgrade, and once cleared the last one.
	c.do("DELETE", "/v1/upgrade", nil).expect(t, "clear", 200)
	r = c.do("GET", "/v1/upgrades/current/bundle?log_lines=10", nil).expect(t, "the last upgrade's bundle", 200)
	if !strings.Contains(r.header.Get("Content-Disposition"), "bundle-upg-test-1.tar.gz") {
		t.Errorf("current after a clear: %q", r.header.Get("Content-Disposition"))
	}
	c.do("GET", "/v1/upgrades/upg-nope/bundle", nil).expect(t, "an unknown upgrade", 404, CodeNoUpgrade)
	c.do("GET", "/v1/upgrades/a%20b/bundle", nil).expect(t, "a malformed id", 400, CodeBadRequest)
	c.do("GET", "/v1/upgrades/..%2Fetc/bundle", nil).expect(t, "a path in the id", 400, CodeBadRequest)
	c.do("GET", "/v1/upgrades/"+u.ID+"/bundle?log_lines=0", nil).expect(t, "log_lines=0", 400, CodeBadRequest)
	c.do("GET", "/v1/upgrades/"+u.ID+"/bundle?x=1", nil).expect(t, "an unknown parameter", 400, CodeBadRequest)
	c.do("GET", "/v1/upgrades/"+u.ID+"/bundle", nil, "Authorization", "").expect(t, "no token", 401, CodeUnauthorized)
}

// TestBundleThroughAPI: after a real upgrade of the sample cluster
// driven by the server, its bundle holds each upgraded member's output
// of the instance that was stopped (on 1.0.0, the previous one) and of
// the one that replaced it (2.0.0), the agent's build, and neither the
// server's nor the agent's token; 'ferry bundle' on the same data
// directory writes the same files.
func TestBundleThroughAPI(t *testing.T) {
	cl := startCluster(t, 300*time.Millisecond)
	s := clusterServer(t, cl)
	c := serve(t, s)
	var us UpgradeStatus
	c.do("POST", "/v1/upgrade", map[string]string{"to": "2.0.0"}).expect(t, "start", 202).json(t, &us)
	waitFor(t, 2*time.Minute, "the upgrade's end", func() bool {
		u := current(t, c).Upgrade
		if u.Terminal() && u.State != upgrade.StateCompleted.String() {
			t.Fatalf("the upgrade ended %s: %s", u.State, u.Reason)
		}
		return u.State == upgrade.StateCompleted.String()
	})
	began := time.Now()
	r := c.do("GET", "/v1/upgrades/"+us.Upgrade.ID+"/bundle?log_lines=200", nil).expect(t, "the bundle", 200)
	t.Logf("bundle through the API: %d bytes in %s", len(r.body), time.Since(began).Round(time.Millisecond))
	files := bundleFiles(t, r.body)
	tok, err := os.ReadFile(filepath.Join(cl.Dir, "agent", "token"))
	if err != nil {
		t.Fatal(err)
	}
	bundletest.NoSecrets(t, files, s.cfg.Token, strings.TrimSpace(string(tok)))
	for _, m := range []string{"kv-1", "kv-2", "kv-3", "api-1", "api-2", "api-3", "api-4"} {
		prev, cur := files["members/"+m+"/previous.log"], files["members/"+m+"/current.log"]
		if !strings.Contains(prev, "starting "+m+" version 1.0.0") || !strings.Contains(cur, "starting "+m+" version 2.0.0") {
			t.Errorf("%s: previous instance %.200q, current %.200q", m, prev, cur)
		}
	}
	var man bundle.Manifest
	if err := json.Unmarshal([]byte(files["manifest.json"]), &man); err != nil {
		t.Fatal(err)
	}
	if len(man.NotCollected) > 0 || man.State != "completed" || !strings.Contains(man.By, "ferry server") {
		t.Errorf("manifest: %+v", man)
	}
	var vs bundle.Versions
	if err := json.Unmarshal([]byte(files["versions.json"]), &vs); err != nil || len(vs.Agents) != 1 || vs.Agents[0].Version == "" {
		t.Errorf("versions.json: %v %s", err, files["versions.json"])
	}

	// The CLI, on the same data directory while the server holds it.
	path := filepath.Join(t.TempDir(), "cli.tar.gz")
	out, err := exec.Command(bins.ferry, "-f", cl.File, "--data-dir", cl.DataDir, "bundle", us.Upgrade.ID, "-o", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ferry bundle: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cli := bundleFiles(t, b)
	var names, cliNames []string
	for n := range files {
		names = append(names, n)
	}
	for n := range cli {
		cliNames = append(cliNames, n)
	}
	slices.Sort(names)
	slices.Sort(cliNames)
	if !slices.Equal(names, cliNames) {
		t.Errorf("the server's bundle has %q, the CLI's %q", names, cliNames)
	}
	for _, f := range []string{"upgrade/record.json", "upgrade/events.jsonl", "description/cluster.yaml", "members/api-1/previous.log"} {
		if files[f] != cli[f] {
			t.Errorf("%s differs between the server's bundle and the CLI's", f)
		}
	}

	// The CLI through the server (--addr): the server's bundle, under
	// the name it gives.
	dir := t.TempDir()
	cmd := exec.Command(bins.ferry, "-f", cl.File, "--data-dir", cl.DataDir, "--addr", c.base, "bundle")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ferry --addr bundle: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, bundle.FileName(us.Upgrade.ID)))
	if err != nil {
		t.Fatalf("ferry --addr bundle wrote no %s: %v", bundle.FileName(us.Upgrade.ID), err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, bundle.FileName(us.Upgrade.ID))); fi.Mode().Perm() != 0o600 {
		t.Errorf("the bundle's mode: %v", fi.Mode())
	}
	if remote := bundleFiles(t, got); remote["upgrade/record.json"] != files["upgrade/record.json"] || len(remote) != len(files) {
		t.Errorf("the bundle through --addr differs: %d files", len(remote))
	}
}

// bundleFiles reads a bundle's files by their name under its directory.
func bundleFiles(t *testing.T, b []byte) map[string]string {
	t.Helper()
	_, files := bundletest.Files(t, b)
	return files
}
