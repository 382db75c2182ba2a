package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/proof/traffic"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestMigrationsAndPin is the mixed-version proof, in the spirit of
// OpenStack's grenade: the kv store gets a format change in 2.0.0
// (records with a checksum, which 1.0.0 cannot read) behind a pin.
// Under client traffic: 1.0.0 and 2.0.0 members side by side, pinned
// to format 1, every acknowledged value readable on every member; all
// on 2.0.0 and migrated, awaiting finalize (policy manual); an abort
// rolls everything back to 1.0.0 and loses nothing; a second upgrade is
// finalized: the pin moves, the old records are migrated and dropped,
// every value still reads, and a 1.0.0 member now refuses to serve.
func TestMigrationsAndPin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	o := demo.ClusterOptions{Soak: time.Second, Deadline: 20 * time.Second, GateDeadline: 20 * time.Second, Finalize: "manual"}
	o.Releases = []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"]},
		{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}, Migrations: demo.KVMigrations}}
	cl := startCluster(t, o)
	rec, stopTraffic := liveTraffic(cl, 7)
	defer stopTraffic()

	t.Run("mixed versions pinned to format 1", func(t *testing.T) {
		fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		// Pause while the second kv member moves (the order is ferry's:
		// the leader goes last): it finishes, the third stays on 1.0.0.
		var moved []string
		waitFor(t, 90*time.Second, "a second kv member on its way to 2.0.0", func() bool {
			fg.alive(t)
			u, ok := status(t, cl)
			moved = nil
			for _, b := range u.Batches {
				if b.Component == "kv" {
					moved = append(moved, b.Members...)
				}
			}
			return ok && len(moved) == 2 && u.Members[moved[1]].Step.InFlight()
		})
		if out, code := ferry(t, cl, "upgrade", "pause"); code != 0 {
			t.Fatalf("pause: exit %d\n%s", code, out)
		}
		waitFor(t, 60*time.Second, "paused", func() bool { u, _ := status(t, cl); return u.State == upgrade.StatePaused })
		expectOn(t, cl, map[string]string{moved[0]: "2.0.0", moved[1]: "2.0.0"}, "1.0.0")
		moreWrites(t, rec, 200)
		for _, m := range []string{"kv-1", "kv-2", "kv-3"} {
			f := format(t, cl, m)
			if f.Compat != 1 {
				t.Errorf("%s: compat %d while pinned, want 1", m, f.Compat)
			}
		}
		readEverywhere(t, cl, rec)
		if out, code := ferry(t, cl, "upgrade", "resume"); code != 0 {
			t.Fatalf("resume: exit %d\n%s", code, out)
		}
		waitFor(t, 120*time.Second, "awaiting finalize", func() bool { u, _ := status(t, cl); return u.State == upgrade.StateAwaitingFinalize })
		expectAllOn(t, cl, "2.0.0")
		for _, m := range []string{"kv-1", "kv-2", "kv-3"} {
			f := format(t, cl, m)
			if f.Compat != 1 || f.Records.V2 < f.Records.V1 || f.Records.V1 == 0 {
				t.Errorf("%s after migrate, before finalize: %+v, want compat 1 and every format-1 record migrated", m, f)
			}
		}
		readEverywhere(t, cl, rec)

		// Before finalize, going back loses nothing.
		if out, code := ferry(t, cl, "upgrade", "abort"); code != 0 {
			t.Fatalf("abort: exit %d\n%s", code, out)
		}
		if code, out := fg.wait(t); code != 4 {
			t.Errorf("the foreground upgrade exit %d, want 4\n%s", code, out)
		}
		if u, _ := status(t, cl); u.State != upgrade.StateRolledBack {
			t.Fatalf("after abort: %s (%s)", u.State, u.Reason)
		}
		expectAllOn(t, cl, "1.0.0")
		moreWrites(t, rec, 100)
		readEverywhere(t, cl, rec)
	})
	if t.Failed() {
		return
	}

	t.Run("finalize moves the pin; there is no going back", func(t *testing.T) {
		fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		waitFor(t, 120*time.Second, "awaiting finalize", func() bool { u, _ := status(t, cl); return u.State == upgrade.StateAwaitingFinalize })
		out, code := ferry(t, cl, "upgrade", "finalize")
		if code != 0 || !strings.Contains(out, "finalize of upgrade") {
			t.Fatalf("finalize: exit %d\n%s", code, out)
		}
		if code, out := fg.wait(t); code != 0 {
			t.Fatalf("the foreground upgrade: exit %d\n%s", code, out)
		}
		u, _ := status(t, cl)
		if u.State != upgrade.StateCompleted || u.Pin != "2.0.0" || u.Finalized.IsZero() {
			t.Fatalf("after finalize: %s, pin %s, finalized %s", u.State, u.Pin, u.Finalized)
		}
		n := moreWrites(t, rec, 200)
		for _, m := range []string{"kv-1", "kv-2", "kv-3"} {
			var f kvFormat
			// A follower applies the latest writes a moment after the leader.
			waitFor(t, 5*time.Second, m+" with every record in format 2 only", func() bool {
				f = format(t, cl, m)
				return f.Compat == 2 && f.Records.V1 == 0 && f.Records.V2 >= n
			})
			t.Logf("%s after finalize and contract: compat %d, format-1 records %d, format-2 records %d", m, f.Compat, f.Records.V1, f.Records.V2)
		}
		readEverywhere(t, cl, rec)
		if out, code := ferry(t, cl, "upgrade", "abort"); code != 3 || !strings.Contains(out, "has ended (completed)") {
			t.Errorf("abort after the end: exit %d\n%s", code, out)
		}
		rec := stopTraffic()
		checkWrites(t, cl, rec)
		if n := failedRequests(rec); n > 0 {
			t.Errorf("%d of %d client requests failed across mixed versions, rollback and finalize", n, len(rec.Samples()))
		}

		// Why there is no going back: 1.0.0 cannot read format 2.
		kv3 := cl.Members[2]
		startBehindFerry(t, cl, kv3, "kv", "1.0.0")
		var body string
		waitFor(t, 30*time.Second, "kv-3 on 1.0.0 answering", func() bool {
			resp, err := http.Get("http://" + cl.Addresses["kv-3"] + "/kv/" + url.PathEscape(anyKey(rec)) + "?stale=1")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = fmt.Sprintf("%d %s", resp.StatusCode, b)
			return resp.StatusCode == http.StatusServiceUnavailable
		})
		if !strings.Contains(body, "newer than this release") {
			t.Errorf("kv-3 on 1.0.0 after finalize answered %s", body)
		}
	})
}

// kvFormat is the sample kv's GET /admin/format.
type kvFormat struct {
	Version string `json:"version"`
	Compat  int    `json:"compat"`
	Records struct {
		V1 int `json:"v1"`
		V2 int `json:"v2"`
	} `json:"records"`
}

func format(t *testing.T, cl *demo.Cluster, member string) kvFormat {
	t.Helper()
	resp, err := http.Get("http://" + cl.Addresses[member] + "/admin/format")
	if err != nil {
		t.Fatalf("%s: GET /admin/format: %v", member, err)
	}
	defer resp.Body.Close()
	var f kvFormat
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET /admin/format: %d %v", member, resp.StatusCode, err)
	}
	return f
}

// moreWrites waits until the clients got n more writes acknowledged and
// returns how many there are.
func moreWrites(t *testing.T, rec *traffic.Recorder, n int) int {
	t.Helper()
	start := len(rec.Acked())
	waitFor(t, 60*time.Second, fmt.Sprintf("%d more acknowledged writes", n), func() bool { return len(rec.Acked()) >= start+n })
	return len(rec.Acked())
}

// readEverywhere reads every acknowledged write from every kv member
// directly, whatever version it runs.
func readEverywhere(t *testing.T, cl *demo.Cluster, rec *traffic.Recorder) {
	t.Helper()
	acked := rec.Acked()
	c := &http.Client{Timeout: 5 * time.Second}
	for _, m := range []string{"kv-1", "kv-2", "kv-3"} {
		bad := 0
		for k, v := range acked {
			got, status, err := kvRead(c, cl.Addresses[m], k, v)
			if err != nil || status != http.StatusOK || got != v {
				if bad < 3 {
					t.Errorf("%s: key %s: got %q (status %d, %v), want %q", m, k, got, status, err, v)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d acknowledged values not readable", m, bad, len(acked))
		}
	}
	t.Logf("%d acknowledged values read on each of kv-1, kv-2, kv-3", len(acked))
}

func anyKey(rec *traffic.Recorder) string {
	for k := range rec.Acked() {
		return k
	}
	return "none"
}

// kvRead reads key from one kv member's own state (a stale read: what
// that member, on its version, can read). A follower may apply the
// latest writes a moment after the leader: a read that does not match
// yet is tried again for up to two seconds.
func kvRead(c *http.Client, addr, key, want string) (string, int, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, status, err := func() (string, int, error) {
			resp, err := c.Get("http://" + addr + "/kv/" + url.PathEscape(key) + "?stale=1")
			if err != nil {
				return "", 0, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return string(b), resp.StatusCode, err
		}()
		if (err == nil && status == http.StatusOK && got == want) || time.Now().After(deadline) {
			return got, status, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
