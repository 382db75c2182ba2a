package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/bundle"
	"github.com/ferry-upgrade/ferry/internal/run/bundle/bundletest"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
)

// TestBundleOfRollback: after an upgrade to the sample's exit-at-start
// release rolled back, 'ferry bundle' writes one archive (mode 0600)
// with the record, every event, the output of the member's instances
// that were stopped (its crash-looping instance, now the previous one,
// and the release it went back to), the versions of ferry and of the
// agent, and no token: neither the agent's nor the server's, although
// the description carries both in a hook's headers, nor a var that
// names a secret. With the agent killed and the data directory made
// read-only it still writes the record and the events, and names what
// it could not collect.
func TestBundleOfRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: 2 * time.Second, Deadline: 15 * time.Second, GateDeadline: 15 * time.Second},
		"2.0.0-bad.exit")
	b, err := os.ReadFile(filepath.Join(cl.Dir, "agent", "token"))
	if err != nil {
		t.Fatal(err)
	}
	agentToken := strings.TrimSpace(string(b))
	serverToken, _, err := server.LoadOrCreateToken(filepath.Join(cl.DataDir, server.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	const planted = "planted-db-password-1234"
	desc, err := os.ReadFile(cl.File)
	if err != nil {
		t.Fatal(err)
	}
	hook := `pre_stop: [{http: "http://{{.Address}}/admin/step-down", method: POST, timeout: 5s}]`
	withSecrets := strings.Replace(string(desc), hook, `pre_stop: [{http: "http://{{.Address}}/admin/step-down", method: POST, timeout: 5s, `+
		`headers: {Authorization: "Bearer `+agentToken+`", X-Ferry-Key: "`+serverToken+`"}}]`, 1)
	withSecrets = strings.ReplaceAll(withSecrets, "vars: {raft: ", `vars: {db_password: "`+planted+`", raft: `)
	if withSecrets == string(desc) || !strings.Contains(withSecrets, planted) {
		t.Fatal("the sample's description changed: the secrets were not planted")
	}
	if err := os.WriteFile(cl.File, []byte(withSecrets), 0o644); err != nil {
		t.Fatal(err)
	}

	out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0-bad.exit", "-q")
	if code != 4 {
		t.Fatalf("upgrade to 2.0.0-bad.exit: exit %d, want 4 (rolled back)\n%s", code, out)
	}
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	began := time.Now()
	out, code = ferry(t, cl, "bundle", "-o", path)
	t.Logf("ferry bundle (%s): %s", time.Since(began).Round(time.Millisecond), out)
	if code != 0 {
		t.Fatalf("ferry bundle: exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the bundle's file: %v, mode %v, want 0600", err, fi.Mode())
	}
	files := readBundle(t, path)
	bundletest.NoSecrets(t, files, agentToken, serverToken, planted)

	var man bundle.Manifest
	mustJSON(t, files, "manifest.json", &man)
	t.Logf("%d files; not collected: %+v", len(man.Files), man.NotCollected)
	if len(man.NotCollected) > 0 {
		t.Errorf("with the cluster up, not collected: %+v", man.NotCollected)
	}
	if man.State != "rolled-back" || man.Redacted < 5 || len(man.Files) != len(files)-1 {
		t.Errorf("manifest: state %s, %d redacted, %d files listed of %d", man.State, man.Redacted, len(man.Files), len(files))
	}
	var rec struct {
		ID, State string
	}
	mustJSON(t, files, "upgrade/record.json", &rec)
	if rec.State != "rolled-back" || rec.ID != man.Upgrade {
		t.Errorf("record: %+v", rec)
	}
	// The events, and the member whose move crash-looped.
	var failed string
	sawRollback := false
	for _, line := range strings.Split(strings.TrimSpace(files["upgrade/events.jsonl"]), "\n") {
		var ev store.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events.jsonl: %v: %s", err, line)
		}
		if ev.Kind == "output" && strings.Contains(ev.Message, "exiting at start") {
			failed = ev.Member
		}
		if ev.Kind == "state" && strings.Contains(ev.Message, "→ rolled-back") {
			sawRollback = true
		}
	}
	if failed == "" || !sawRollback {
		t.Fatalf("events.jsonl: crash-loop output of %q, rolled-back %v", failed, sawRollback)
	}
	prev, cur := files["members/"+failed+"/previous.log"], files["members/"+failed+"/current.log"]
	t.Logf("%s's previous instance:\n%s\ncurrent instance (head):\n%.300s", failed, prev, cur)
	if !strings.Contains(prev, "version 2.0.0-bad.exit") || !strings.Contains(prev, "exiting at start") {
		t.Errorf("%s's previous instance is not the crash-looping one", failed)
	}
	if !strings.Contains(cur, "version 1.0.0") {
		t.Errorf("%s's current instance is not the one on 1.0.0 it went back to", failed)
	}
	for _, m := range []string{"kv-1", "kv-2", "kv-3", "api-1", "api-4"} {
		if !strings.Contains(files["members/"+m+"/current.log"], "starting "+m+" version 1.0.0") {
			t.Errorf("members/%s/current.log lacks its start on 1.0.0", m)
		}
	}
	sum := files["summary.txt"]
	t.Logf("summary.txt:\n%s", sum)
	for _, want := range []string{"state:    rolled-back", "FAILED MEMBERS\n  " + failed, "exiting at start", "version 2.0.0-bad.exit",
		"UNDOS STILL OWED\n  none", "NOT COLLECTED\n  nothing"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.txt lacks %q", want)
		}
	}
	var vs bundle.Versions
	mustJSON(t, files, "versions.json", &vs)
	if vs.Ferry.Version == "" || len(vs.Agents) != 1 || vs.Agents[0].Version == "" {
		t.Errorf("versions.json: %+v", vs)
	}
	var dg bundle.DescriptionInfo
	mustJSON(t, files, "description/digest.json", &dg)
	if !dg.Same || dg.RecordedSHA256 == "" {
		t.Errorf("digest.json: %+v", dg)
	}
	if !strings.Contains(files["description/cluster.yaml"], bundle.Redacted) || !strings.Contains(files["description/cluster.yaml"], "step-down") {
		t.Errorf("the redacted description:\n%s", files["description/cluster.yaml"])
	}
	for _, f := range []string{"README.md", "upgrade/plan.json", "cluster/members.json", "cluster/versions.json", "cluster/health.json"} {
		if files[f] == "" {
			t.Errorf("%s is missing or empty", f)
		}
	}

	// The agent away, the data directory read-only: the record and the
	// events are still there, and what is missing is named.
	if err := cl.KillAgent(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		// The members run on; the cluster's Close stops them through it.
		if restarted {
			return
		}
		restarted = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.RestartAgent(ctx); err != nil {
			t.Errorf("restart the agent: %v", err)
		}
	}
	t.Cleanup(restart)
	db := filepath.Join(cl.DataDir, "ferry.db")
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cl.DataDir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(cl.DataDir, 0o755); _ = os.Chmod(db, 0o600) })
	away := filepath.Join(t.TempDir(), "away.tar.gz")
	began = time.Now()
	out, code = ferry(t, cl, "bundle", man.Upgrade, "-o", away)
	took := time.Since(began)
	restart()
	t.Logf("ferry bundle with the agent away (%s): %s", took.Round(time.Millisecond), out)
	if code != 0 {
		t.Fatalf("ferry bundle with the agent away: exit %d\n%s", code, out)
	}
	if took > 30*time.Second {
		t.Errorf("the bundle took %s with the agent away", took)
	}
	files = readBundle(t, away)
	bundletest.NoSecrets(t, files, agentToken, serverToken, planted)
	mustJSON(t, files, "manifest.json", &man)
	missing := map[string]bool{}
	for _, m := range man.NotCollected {
		for _, what := range []string{"output", "build", "observation"} {
			if strings.Contains(m.What, what) && regexp.MustCompile(`did not answer|unreachable|connection refused`).MatchString(m.Why) {
				missing[what] = true
			}
		}
	}
	if len(missing) != 3 {
		t.Errorf("not collected %+v: want the outputs, the agent's build and the observation named, with the agent not answering", man.NotCollected)
	}
	if !strings.Contains(files["upgrade/record.json"], `"rolled-back"`) || strings.Count(files["upgrade/events.jsonl"], "\n") < 20 {
		t.Errorf("without the agent, the record or the events are missing")
	}
	if !strings.Contains(files["summary.txt"], "NOT COLLECTED\n  - ") {
		t.Errorf("summary.txt does not say what was not collected:\n%s", files["summary.txt"])
	}
}

// readBundle reads a bundle's files by their name under its directory,
// checking that every entry is a regular file of mode 0600 under one
// directory named after the upgrade.
func readBundle(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, files := bundletest.Files(t, b)
	return files
}

func mustJSON(t *testing.T, files map[string]string, name string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(files[name]), v); err != nil {
		t.Fatalf("%s: %v\n%.500s", name, err, files[name])
	}
}
