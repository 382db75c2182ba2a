package kv_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
	"github.com/ferry-upgrade/ferry/examples/sample/kv"
)

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

func get(t *testing.T, url string, wantCode int, want string) {
	t.Helper()
	code, body := sampletest.Do(http.MethodGet, url, nil)
	if code != wantCode || (wantCode == http.StatusOK && body != want) {
		t.Fatalf("GET %s: %d %q, want %d %q", url, code, body, wantCode, want)
	}
}

// follower returns the index of some running member other than leader.
func follower(c *sampletest.KVCluster, leader int) int {
	for i := range c.Peers {
		if i != leader && c.Server(i) != nil {
			return i
		}
	}
	return -1
}

func TestParsePeers(t *testing.T) {
	got, err := kv.ParsePeers("kv-1=127.0.0.1:9101=127.0.0.1:8101, kv-2=127.0.0.1:9102=127.0.0.1:8102")
	if err != nil {
		t.Fatal(err)
	}
	want := []kv.Peer{{"kv-1", "127.0.0.1:9101", "127.0.0.1:8101"}, {"kv-2", "127.0.0.1:9102", "127.0.0.1:8102"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "kv-1=a", "kv-1=a=b,kv-1=c=d", "=a=b"} {
		if _, err := kv.ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q): no error", bad)
		}
	}
}

func TestWriteOnLeaderIsReadableFromLeader(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	c.Put("color", "blue")
	c.Get("color", "blue")
	c.Put("color", "green")
	c.Get("color", "green")
	l := c.WaitLeader()
	get(t, c.URL(l)+"/kv/absent", http.StatusNotFound, "")

	code, body := sampletest.Do(http.MethodGet, c.URL(l)+"/version", nil)
	v := decode[map[string]string](t, body)
	if code != http.StatusOK || v["name"] != c.Peers[l].ID || v["component"] != "kv" || v["version"] != "test" {
		t.Fatalf("/version: %d %s", code, body)
	}
	// Every member agrees on the leader and on quorum, and is ready.
	sampletest.WaitFor(t, 10*time.Second, "members to agree on the leader", func() bool {
		l := c.WaitLeader()
		for i := range c.Peers {
			code, body := sampletest.Do(http.MethodGet, c.URL(i)+"/cluster", nil)
			st := decode[kv.ClusterStatus](t, body)
			if code != http.StatusOK || !st.Quorum || st.Leader != c.Peers[l].ID || st.LeaderHTTP != c.Peers[l].HTTPAddr || st.Voters != 3 {
				t.Logf("%s /cluster: %d %s", c.Peers[i].ID, code, body)
				return false
			}
			code, body = sampletest.Do(http.MethodGet, c.URL(i)+"/ready", nil)
			rs := decode[kv.ReadyStatus](t, body)
			if code != http.StatusOK || !rs.Ready || rs.Leader != c.Peers[l].ID {
				t.Logf("%s /ready: %d %s", c.Peers[i].ID, code, body)
				return false
			}
		}
		return true
	})
}

func TestFollowerAnswers421WithLeaderHint(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	// Tried until it holds, since on a loaded machine leadership can
	// move between finding the leader and asking a follower.
	sampletest.WaitFor(t, 10*time.Second, "421 with the leader's address from a follower", func() bool {
		l := c.WaitLeader()
		f := follower(c, l)
		for _, method := range []string{http.MethodPut, http.MethodGet} {
			code, body := sampletest.Do(method, c.URL(f)+"/kv/k", []byte("v"))
			e := decode[map[string]string](t, body)
			if code != http.StatusMisdirectedRequest || e["error"] != "not leader" ||
				e["leader"] != c.Peers[l].ID || e["leader_http"] != c.Peers[l].HTTPAddr {
				t.Logf("%s on follower %s: %d %s", method, c.Peers[f].ID, code, body)
				return false
			}
		}
		return true
	})
	c.Put("k", "v")
	// A stale read on any member sees the write once it is applied there.
	for i := range c.Peers {
		sampletest.WaitFor(t, 5*time.Second, "stale read on "+c.Peers[i].ID, func() bool {
			code, body := sampletest.Do(http.MethodGet, c.URL(i)+"/kv/k?stale=1", nil)
			return code == http.StatusOK && body == "v"
		})
	}
}

func TestStepDownMovesLeadership(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	c.Put("before", "1")
	old := c.WaitLeader()

	start := time.Now()
	code, body := sampletest.Do(http.MethodPost, c.URL(old)+"/admin/step-down", nil)
	took := time.Since(start)
	res := decode[map[string]string](t, body)
	if code != http.StatusOK || res["leader"] == "" || res["leader"] == c.Peers[old].ID {
		t.Fatalf("step-down: %d %s", code, body)
	}
	t.Logf("step-down took %s; new leader %s", took, res["leader"])
	nl := c.Index(res["leader"])
	if got := c.WaitLeader(); got != nl {
		t.Fatalf("leader is %s, step-down said %s", c.Peers[got].ID, res["leader"])
	}
	// On a member that is not the leader it is a no-op naming the leader.
	code, body = sampletest.Do(http.MethodPost, c.URL(old)+"/admin/step-down", nil)
	if res := decode[map[string]string](t, body); code != http.StatusOK || res["leader"] != c.Peers[nl].ID {
		t.Fatalf("step-down on follower: %d %s", code, body)
	}
	c.Put("after", "2")
	c.Get("before", "1")
	c.Get("after", "2")
}

// TestOKToStopWhileHeld: a member answers 200 to GET /admin/ok-to-stop
// until it is held (PUT /admin/hold with a reason), then 409 with the
// reason in plain words, and 200 again once released; a hold without a
// reason is refused.
func TestOKToStopWhileHeld(t *testing.T) {
	c := sampletest.StartKV(t, 1)
	u := c.URL(0)
	if code, body := sampletest.Do(http.MethodGet, u+"/admin/ok-to-stop", nil); code != http.StatusOK || body != "ok to stop\n" {
		t.Fatalf("before the hold: %d %q", code, body)
	}
	if code, body := sampletest.Do(http.MethodPut, u+"/admin/hold", []byte("  ")); code != http.StatusBadRequest {
		t.Fatalf("a hold without a reason: %d %q", code, body)
	}
	if code, body := sampletest.Do(http.MethodPut, u+"/admin/hold", []byte("shard 7 rebalancing")); code != http.StatusNoContent {
		t.Fatalf("hold: %d %q", code, body)
	}
	if code, body := sampletest.Do(http.MethodGet, u+"/admin/ok-to-stop", nil); code != http.StatusConflict || body != "held by the operator: shard 7 rebalancing\n" {
		t.Fatalf("while held: %d %q", code, body)
	}
	if code, body := sampletest.Do(http.MethodDelete, u+"/admin/hold", nil); code != http.StatusNoContent {
		t.Fatalf("release: %d %q", code, body)
	}
	if code, body := sampletest.Do(http.MethodGet, u+"/admin/ok-to-stop", nil); code != http.StatusOK {
		t.Fatalf("once released: %d %q", code, body)
	}
}

func TestTwoOfThreeKeepQuorum(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	c.Put("a", "1")
	// Shutting the leader down hands leadership over first.
	old := c.WaitLeader()
	c.Stop(old)
	c.Put("b", "2")
	c.Get("a", "1")
	c.Get("b", "2")
	sampletest.WaitFor(t, 10*time.Second, "both remaining members to report quorum", func() bool {
		l := c.WaitLeader()
		for i := range c.Peers {
			if i == old {
				continue
			}
			code, body := sampletest.Do(http.MethodGet, c.URL(i)+"/cluster", nil)
			if st := decode[kv.ClusterStatus](t, body); code != http.StatusOK || !st.Quorum || st.Leader != c.Peers[l].ID {
				t.Logf("%s /cluster with one member down: %d %s", c.Peers[i].ID, code, body)
				return false
			}
		}
		return true
	})
	// A second member down loses the majority: no quorum, no writes.
	c.Stop(follower(c, c.WaitLeader()))
	last := follower(c, old)
	sampletest.WaitFor(t, 5*time.Second, "lone member to report no quorum", func() bool {
		code, _ := sampletest.Do(http.MethodGet, c.URL(last)+"/cluster", nil)
		return code == http.StatusServiceUnavailable
	})
	if code, body := sampletest.Do(http.MethodPut, c.URL(last)+"/kv/c", []byte("3")); code == http.StatusNoContent {
		t.Fatalf("write accepted without a majority: %d %s", code, body)
	}
}

func TestRestartedMemberKeepsItsData(t *testing.T) {
	const total = 100
	c := sampletest.StartKV(t, 3)
	f := follower(c, c.WaitLeader())
	key := func(i int) string { return fmt.Sprintf("k%02d", i) }
	val := func(i int) string { return fmt.Sprintf("v%02d", i) }
	for i := range 20 {
		c.Put(key(i), val(i))
	}
	// Part of the member's state comes back from a snapshot, the rest
	// from its log, and what it missed from the leader once it rejoins.
	sampletest.WaitFor(t, 5*time.Second, "member to apply k19", func() bool {
		code, body := sampletest.Do(http.MethodGet, c.URL(f)+"/kv/k19?stale=1", nil)
		return code == http.StatusOK && body == "v19"
	})
	if err := c.Server(f).Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 30; i++ {
		c.Put(key(i), val(i))
	}
	c.Stop(f)
	// Keep writing for a while with the member down: the leader's
	// failed attempts to reach it pile up, as in a real restart.
	for i := 30; i < total; i++ {
		c.Put(key(i), val(i))
		time.Sleep(20 * time.Millisecond) // pacing, not synchronisation
	}
	c.Restart(f)
	start := time.Now()
	sampletest.WaitFor(t, 10*time.Second, "restarted member ready", func() bool {
		code, _ := sampletest.Do(http.MethodGet, c.URL(f)+"/ready", nil)
		return code == http.StatusOK
	})
	t.Logf("restarted member ready after %s", time.Since(start))
	// Ready means caught up: every write is there without waiting.
	for i := range total {
		get(t, c.URL(f)+"/kv/"+key(i)+"?stale=1", http.StatusOK, val(i))
	}

	// The whole cluster down and up again: everything is still there.
	for i := range c.Peers {
		c.Stop(i)
	}
	for i := range c.Peers {
		c.Restart(i)
	}
	for i := range total {
		c.Get(key(i), val(i))
	}
}

// TestOldReleaseAfterFinalizeIsNotReady: once the cluster is pinned to
// format 2 (ferry's finalize), a member restarted as a 1.x build answers
// every read 503, so its /ready must say it cannot serve, and why: a
// health check that takes it for healthy sends clients to it (issue 22,
// defect 1). Restarted as a build that knows format 2, it is ready again.
func TestOldReleaseAfterFinalizeIsNotReady(t *testing.T) {
	c := sampletest.StartKV(t, 3)
	f := follower(c, c.WaitLeader())
	c.Put("a", "1")
	sampletest.WaitFor(t, 10*time.Second, "compat level 2", func() bool {
		code, _ := sampletest.Do(http.MethodPost, c.URL(f)+"/admin/compat?level=2", nil)
		return code == http.StatusOK
	})
	sampletest.WaitFor(t, 5*time.Second, "the follower at compat 2", func() bool {
		_, body := sampletest.Do(http.MethodGet, c.URL(f)+"/admin/format", nil)
		return decode[struct{ Compat int }](t, body).Compat == 2
	})

	c.Stop(f)
	c.RestartAt(f, "1.0.0")
	var code int
	var body string
	sampletest.WaitFor(t, 10*time.Second, "the 1.0.0 member saying why it is not ready", func() bool {
		code, body = sampletest.Do(http.MethodGet, c.URL(f)+"/ready", nil)
		if code == http.StatusOK {
			t.Fatalf("1.0.0 member after finalize: /ready %d %s", code, body)
		}
		return strings.Contains(body, "cluster format 2 is newer than this release (1.0.0) understands")
	})
	if st := decode[kv.ReadyStatus](t, body); code != http.StatusServiceUnavailable || st.Ready {
		t.Errorf("1.0.0 member after finalize: /ready %d %+v", code, st)
	}
	if code, body := sampletest.Do(http.MethodGet, c.URL(f)+"/kv/a?stale=1", nil); code != http.StatusServiceUnavailable {
		t.Errorf("1.0.0 member after finalize reads a: %d %s", code, body)
	}

	c.Stop(f)
	c.Restart(f)
	sampletest.WaitFor(t, 10*time.Second, "the member ready again on a release that knows format 2", func() bool {
		code, _ := sampletest.Do(http.MethodGet, c.URL(f)+"/ready", nil)
		return code == http.StatusOK
	})
}
