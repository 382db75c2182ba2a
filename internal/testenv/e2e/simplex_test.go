package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestSimplexBackupAndRestore upgrades a sample cluster whose kv is one
// member (StarlingX's simplex: strategy offline, a backup described),
// on real processes, in turn:
//
//   - without --accept-downtime: refused (exit 5), naming kv-1 and
//     why, through the data directory and through a server; nothing
//     changed;
//   - a backup whose checksum does not match its sums file, then one
//     whose restore check fails: each stops the upgrade before the
//     install (no start on the target in the events), rolled back,
//     kv-1 on 1.0.0, every write acknowledged before still readable;
//   - a release that exits at its start (a crash loop, after the
//     install), under client traffic: stopped, restored from the
//     backup, 1.0.0 started; every acknowledged write reads back;
//   - a release that runs but never becomes ready: a key written to it
//     directly (acknowledged by 2.0.0) is gone after the restore (the
//     data is the backup's, taken at the stop), every write
//     acknowledged before the upgrade reads back;
//   - 2.0.0: completed, the backups of kv-1 pruned to the 2 newest.
func TestSimplexBackupAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Simplex: true, Soak: 2 * time.Second, Deadline: 12 * time.Second, GateDeadline: 15 * time.Second},
		"2.0.0", "2.0.0-bad.exit", "2.0.0-bad.never")
	faults := filepath.Join(cl.Dir, "faults")
	if err := os.MkdirAll(faults, 0o755); err != nil {
		t.Fatal(err)
	}
	backups := filepath.Join(cl.Dir, "backups", "kv-1")
	// Writes acknowledged before any upgrade: they must survive each one.
	stopBefore := clientTraffic(cl, 19)
	time.Sleep(3 * time.Second) // a few hundred writes at 100 requests/s
	// Each client's keys are the same in every run of traffic (w0-1,
	// …): what must read back is each key's last acknowledged value.
	acked := stopBefore().Acked()
	checkAcked := func(t *testing.T) {
		t.Helper()
		w := cl.Verify(acked)
		t.Logf("acknowledged writes (each key's last): %d, read back %d, lost %d", w.Acknowledged, w.Verified, w.Lost)
		if w.Acknowledged < 100 {
			t.Errorf("only %d acknowledged writes: too few to prove anything", w.Acknowledged)
		}
		if w.Lost > 0 {
			t.Errorf("%d acknowledged writes lost, e.g. %v", w.Lost, w.LostKeys)
		}
	}
	checkAcked(t)

	run := func(t *testing.T, to string) (upgrade.Upgrade, []store.Event) {
		t.Helper()
		var mu sync.Mutex
		var events []store.Event
		e, _, err := cl.Engine(nil, func(ev store.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := e.BeginWith(ctx, to, engine.BeginOptions{AcceptDowntime: true}); err != nil {
			t.Fatalf("begin: %v", err)
		}
		u, err := e.Run(ctx)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		t.Logf("%s: %s in %s: %s", to, u.State, u.Ended.Sub(u.Created).Round(time.Millisecond), u.Reason)
		mu.Lock()
		defer mu.Unlock()
		return u, append([]store.Event(nil), events...)
	}
	said := func(evs []store.Event, what string) bool {
		for _, ev := range evs {
			if strings.Contains(ev.Message, what) {
				return true
			}
		}
		return false
	}

	t.Run("refused without accept-downtime", func(t *testing.T) {
		// Through the data directory, and through a server (the API's
		// POST /v1/upgrade without "accept_downtime"); the server ends
		// with this subtest.
		addr := startServer(t, cl)
		for _, via := range [][]string{nil, {"--addr", addr}} {
			out, code := ferry(t, cl, append(via, "upgrade", "start", "--to", "2.0.0", "-q")...)
			t.Logf("%v: exit %d: %s", via, code, strings.TrimSpace(out))
			if code != 5 {
				t.Errorf("%v: exit %d, want 5", via, code)
			}
			for _, want := range []string{"cannot be zero-downtime", "kv: strategy offline", "kv-1", "accept-downtime", "nothing was changed"} {
				if !strings.Contains(out, want) {
					t.Errorf("%v: the refusal does not say %q", via, want)
				}
			}
		}
		if u, ok := status(t, cl); ok {
			t.Errorf("an upgrade was recorded: %s %s", u.ID, u.State)
		}
		expectAllOn(t, cl, "1.0.0")
	})

	for _, tc := range []struct{ fault, cause string }{
		{"backup-corrupt", "checksum: data.tar has SHA-256"},
		{"restore-check-fails", "restore check: "},
	} {
		t.Run("unverified "+tc.fault, func(t *testing.T) {
			f := filepath.Join(faults, tc.fault)
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(f)
			u, evs := run(t, "2.0.0")
			if u.State != upgrade.StateRolledBack || !strings.Contains(u.Reason, tc.cause) {
				t.Fatalf("ended %s (%s), want rolled-back naming %q", u.State, u.Reason, tc.cause)
			}
			if said(evs, "start kv-1 on 2.0.0") {
				t.Errorf("kv-1 was started on 2.0.0 after a backup that did not verify")
			}
			if said(evs, "restore kv-1") {
				t.Errorf("a backup that did not verify was restored")
			}
			expectAllOn(t, cl, "1.0.0")
			checkAcked(t)
		})
	}

	t.Run("crash loop after the install: restored", func(t *testing.T) {
		stop := clientTraffic(cl, 20)
		u, evs := run(t, "2.0.0-bad.exit")
		rec := stop()
		if u.State != upgrade.StateRolledBack || !strings.Contains(u.Reason, "crash loop") {
			t.Fatalf("ended %s (%s), want rolled-back on a crash loop", u.State, u.Reason)
		}
		for _, want := range []string{"back up kv-1 (1.0.0) into", "start kv-1 on 2.0.0-bad.exit", "restore kv-1 (1.0.0) from", "start kv-1 on 1.0.0"} {
			if !said(evs, want) {
				t.Errorf("no event says %q", want)
			}
		}
		for k, v := range rec.Acked() {
			acked[k] = v
		}
		t.Logf("requests during the upgrade: %d, failed %d (kv down from its stop to its restart on 1.0.0)", len(rec.Samples()), failedRequests(rec))
		expectAllOn(t, cl, "1.0.0")
		checkAcked(t)
	})

	t.Run("never ready: the data is the backup's", func(t *testing.T) {
		kv := "http://" + cl.Addresses["kv-1"]
		marker := fmt.Sprintf("written-by-2.0.0-bad-%d", time.Now().UnixNano())
		wrote := make(chan error, 1)
		go func() {
			// Once kv-1 runs the bad release (it serves, it is never
			// ready), write a key to it directly.
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				// Until raft has elected it (it serves, never ready).
				if v := versionOf(kv); v == "2.0.0-bad.never" && put(kv+"/kv/"+marker, "lost-by-the-restore") == nil {
					wrote <- nil
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			wrote <- errors.New("kv-1 never ran 2.0.0-bad.never")
		}()
		u, evs := run(t, "2.0.0-bad.never")
		if err := <-wrote; err != nil {
			t.Fatalf("the write to 2.0.0-bad.never: %v", err)
		}
		if u.State != upgrade.StateRolledBack || !strings.Contains(u.Reason, "never-ready") {
			t.Fatalf("ended %s (%s), want rolled-back on never-ready", u.State, u.Reason)
		}
		if !said(evs, "restore kv-1 (1.0.0) from") {
			t.Errorf("no restore event")
		}
		expectAllOn(t, cl, "1.0.0")
		code, body := get(kv + "/kv/" + marker)
		t.Logf("the key 2.0.0-bad.never acknowledged, after the restore: %d %s", code, body)
		if code != http.StatusNotFound {
			t.Errorf("the key written to 2.0.0-bad.never reads %d %q after the restore, want 404: the data was not the backup's", code, body)
		}
		checkAcked(t)
	})

	t.Run("completed, backups pruned", func(t *testing.T) {
		ents, _ := os.ReadDir(backups)
		t.Logf("backups of kv-1 before: %d", len(ents))
		u, evs := run(t, "2.0.0")
		if u.State != upgrade.StateCompleted {
			t.Fatalf("ended %s (%s), want completed", u.State, u.Reason)
		}
		if !said(evs, "prune the backups of kv") {
			t.Errorf("no prune event")
		}
		ents, err := os.ReadDir(backups)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Logf("backups of kv-1 after: %v", names)
		if len(names) != 2 || !strings.Contains(strings.Join(names, " "), u.ID) {
			t.Errorf("backups %v, want the 2 newest, %s among them", names, u.ID)
		}
		expectAllOn(t, cl, "2.0.0")
		checkAcked(t)
	})
}

func versionOf(base string) string {
	code, body := get(base + "/version")
	if code != http.StatusOK {
		return ""
	}
	// {"version":"…",…}
	_, rest, ok := strings.Cut(body, `"version":"`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func get(url string) (int, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func put(url, body string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("PUT %s: %d %s", url, resp.StatusCode, b)
	}
	return nil
}
