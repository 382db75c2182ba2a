package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/run/store/etcdstore"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
	"github.com/ferry-upgrade/ferry/internal/testenv/etcdtest"
)

// haTTL is the servers' lease in this test: a standby takes the
// upgrade up about this long after the leader dies.
const haTTL = 5 * time.Second

// TestHAServersSurviveLeaderKills runs three 'ferry server' processes
// on a real three-member etcd (--store etcd://) and upgrades the sample
// cluster back and forth between 1.0.0 and 1.0.1 through them, while
// the leader (the server the etcd election elected, the only one that
// drives) is SIGKILLed at seeded random moments and started again as a
// standby. Every upgrade must complete with every member on its
// target; the start request, acknowledged by whichever server took it
// (a standby forwards it to the leader), must be the upgrade that ran;
// an independent observer must never see more members down than the
// policy allows; every write the clients had acknowledged must read
// back; a standby must take the upgrade up within two leases of the
// kill; once per run the leader is SIGSTOPped past its lease, a
// standby takes over, and the stopped server, continued, says it lost
// its lease and stops; and etcd's history of the record must show one
// writer at a time: its revisions 1, 2, 3... each saved once, the
// fence's term never going back (the continued server wrote nothing).
//
// FERRY_HA_KILLS sets how many kills (default 20, the count for CI; 'make faults'
// runs 100), FERRY_HA_SEED the seed (default: the time, printed).
func TestHAServersSurviveLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster and a real etcd")
	}
	kills := envInt(t, "FERRY_HA_KILLS", 20)
	seed := envSeed(t, "FERRY_HA_SEED")
	t.Logf("seed %d (FERRY_HA_SEED=%d reproduces the kill moments), %d kills, leases of %s", seed, seed, kills, haTTL)
	rng := rand.New(rand.NewPCG(seed, 2))
	etcd := etcdtest.Start(t, 3, seed)

	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 30 * time.Second, GateDeadline: 30 * time.Second}, "1.0.1")
	stopTraffic := clientTraffic(cl, seed)
	obs := watch(cl)
	ha := startHA(t, cl, etcd.Endpoints, seed)

	target, killed, upgrades, stopped := "1.0.1", 0, 0, false
	var takeovers []time.Duration
	for killed < kills {
		if upgrades++; upgrades > 2*kills+2 {
			t.Fatalf("%d upgrades for %d kills: the upgrades end before the kill moments", upgrades, kills)
		}
		id := ha.start(t, target)
		for killed < kills && killed < upgrades*3 {
			time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond) // the seeded moment
			u := ha.current(t)
			if u.ID != id || u.State.Terminal() {
				break
			}
			took, ok := ha.killLeader(t, id)
			if !ok {
				break // the upgrade ended before the kill: it counts for nothing
			}
			killed++
			takeovers = append(takeovers, took)
			t.Logf("kill %d (upgrade %d, to %s, %s): a standby drove the upgrade %s after", killed, upgrades, target, u.State, took.Round(time.Millisecond))
		}
		if !stopped {
			if u := ha.current(t); u.ID == id && !u.State.Terminal() {
				stopped = ha.stopLeader(t, id)
			}
		}
		u := ha.wait(t, id, 4*time.Minute)
		if u.State != upgrade.StateCompleted.String() || u.To != target {
			t.Fatalf("upgrade %s to %s ended %s: %s", id, target, u.State, u.Reason)
		}
		expectAllOn(t, cl, target)
		t.Logf("upgrade %d to %s completed (%s)", upgrades, target, id)
		ha.oneWriterAtATime(t, id)
		if target == "1.0.1" {
			target = "1.0.0"
		} else {
			target = "1.0.1"
		}
	}
	if !stopped {
		t.Errorf("no upgrade ran long enough for the SIGSTOP of its leader")
	}
	var worst time.Duration
	for _, d := range takeovers {
		worst = max(worst, d)
	}
	t.Logf("%d kills over %d upgrades; takeover (kill to the next save by another server): worst %s, lease %s", killed, upgrades, worst.Round(time.Millisecond), haTTL)
	obs.check(t)
	checkWrites(t, cl, stopTraffic())
}

// ha is three ferry servers on one etcd.
type ha struct {
	cl        *demo.Cluster
	endpoints []string
	prefix    string
	token     string
	urls      []string
	dirs      []string
	procs     []*background
	etcd      *etcdstore.Store // the test's own look at etcd
	client    *http.Client
	extra     []string // more arguments of every 'ferry server'
}

// startHA starts three servers on etcd, each with the extra arguments.
func startHA(t *testing.T, cl *demo.Cluster, endpoints []string, seed uint64, extra ...string) *ha {
	t.Helper()
	ports, err := loopback.Ports(seed^0x5eed, 3)
	if err != nil {
		t.Fatal(err)
	}
	h := &ha{cl: cl, endpoints: endpoints, prefix: "/ferry-ha/", token: fmt.Sprintf("ha-test-token-%016x", seed), client: &http.Client{Timeout: 30 * time.Second}, extra: extra}
	h.etcd, err = etcdstore.Open(etcdstore.Config{Endpoints: endpoints, Prefix: h.prefix, Name: "the test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.etcd.Close() })
	t.Cleanup(func() { h.dumpOnFailure(t) })
	for i, p := range ports {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("server-%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, server.TokenFile), []byte(h.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		h.dirs = append(h.dirs, dir)
		h.urls = append(h.urls, fmt.Sprintf("http://127.0.0.1:%d", p))
		h.procs = append(h.procs, nil)
		h.run(t, i)
	}
	waitFor(t, 30*time.Second, "a server leading the election", func() bool { return h.leader(t) >= 0 })
	return h
}

// run starts server i (again).
func (h *ha) run(t *testing.T, i int) {
	t.Helper()
	var hosts []string
	for _, e := range h.endpoints {
		hosts = append(hosts, strings.TrimPrefix(e, "http://"))
	}
	bg := startFerryIn(t, h.cl, h.dirs[i], append([]string{"server", "--listen", strings.TrimPrefix(h.urls[i], "http://"),
		"--store", "etcd://" + strings.Join(hosts, ","), "--etcd-prefix", h.prefix, "--lease-ttl", haTTL.String()}, h.extra...)...)
	h.procs[i] = bg
	waitFor(t, 30*time.Second, "server "+h.urls[i]+" listening", func() bool {
		bg.alive(t)
		return strings.Contains(bg.out.String(), "listening on")
	})
}

// dumpOnFailure logs, when the test failed, the election's leader as
// etcd names it and each server's last lines: what each said about its
// lease, the election and the engine (a failed wait says only that
// something did not happen in time).
func (h *ha) dumpOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leader, err := h.etcd.Leader(ctx)
	t.Logf("the election's leader as etcd names it: %q (err %v)", leader, err)
	for i, p := range h.procs {
		if p == nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(p.out.String(), "\n"), "\n")
		t.Logf("--- server %d (%s), its last %d lines:\n%s", i, h.urls[i], min(len(lines), 40), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// leader is the index of the server leading the election, -1 for none.
func (h *ha) leader(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url, err := h.etcd.Leader(ctx)
	if err != nil {
		t.Logf("the election's leader: %v", err)
		return -1
	}
	for i, u := range h.urls {
		if u == url {
			return i
		}
	}
	return -1
}

// call sends a request to server i with the token.
func (h *ha) call(i int, method, path string, body any) (int, []byte, error) {
	code, _, b, err := h.callH(i, method, path, body)
	return code, b, err
}

// callH is call with the answer's header.
func (h *ha) callH(i int, method, path string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.urls[i]+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// start asks a standby (when there is one) to start the upgrade to
// target, so that the write is forwarded to the leader, and returns
// the upgrade's ID as acknowledged.
func (h *ha) start(t *testing.T, target string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		i := (h.leader(t) + 1) % len(h.urls)
		code, hdr, b, err := h.callH(i, "POST", "/v1/upgrade", server.StartRequest{To: target})
		if err == nil && code == http.StatusAccepted {
			if hdr.Get("X-Ferry-Leader") == "" {
				t.Fatalf("the start through %s, not the leader, was not forwarded (no X-Ferry-Leader)", h.urls[i])
			}
			var st server.UpgradeStatus
			if err := json.Unmarshal(b, &st); err != nil || st.Upgrade.ID == "" || st.Upgrade.To != target {
				t.Fatalf("the start's answer: %v: %s", err, b)
			}
			t.Logf("upgrade to %s started through %s (a standby: forwarded to %s): %s", target, h.urls[i], hdr.Get("X-Ferry-Leader"), st.Upgrade.ID)
			return st.Upgrade.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("start the upgrade to %s through %s: %d %v: %s", target, h.urls[i], code, err, b)
		}
		t.Logf("start through %s: %d %v: %s; again", h.urls[i], code, err, bytes.TrimSpace(b))
		time.Sleep(500 * time.Millisecond)
	}
}

// current reads the current upgrade through etcd.
func (h *ha) current(t *testing.T) upgrade.Upgrade {
	t.Helper()
	u, _, err := h.etcd.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// killLeader SIGKILLs the leading server, starts it again as a
// standby, and returns how long after the kill another server saved
// upgrade id's record (a later fence's term), failing past two leases;
// ok is false when the record says the upgrade ended under the killed
// server's term (endedUnder): the kill came after its last save, and
// nothing was left to take up.
func (h *ha) killLeader(t *testing.T, id string) (took time.Duration, ok bool) {
	t.Helper()
	i, before := h.leading(t, id)
	_ = h.procs[i].cmd.Process.Signal(syscall.SIGKILL)
	<-h.procs[i].exited
	killedAt := time.Now()
	h.run(t, i)
	waitFor(t, 2*haTTL+10*time.Second, "another server saving the record after the kill", func() bool {
		w := h.writer(t, id)
		if w.Fence.Term > before.Fence.Term {
			took, ok = time.Since(killedAt), true
			return true
		}
		return h.endedUnder(t, id, before)
	})
	if !ok {
		t.Logf("kill of the leader %s (term %d) came after its last save: upgrade %s had ended; not counted", h.urls[i], before.Fence.Term, id)
		return 0, false
	}
	if took > 2*haTTL {
		t.Errorf("a standby took the upgrade up %s after the leader's kill: more than two leases (%s)", took, 2*haTTL)
	}
	return took, true
}

// endedUnder says whether upgrade id's record says it ended, saved last
// under the fence of before: the leader signalled after that save had
// nothing left for another server to take up. The fence is read only
// once the record is seen ended (no save comes after that), so it is
// the last save's.
func (h *ha) endedUnder(t *testing.T, id string, before etcdstore.Written) bool {
	t.Helper()
	cur := h.current(t)
	return cur.ID == id && cur.State.Terminal() && h.writer(t, id).Fence.Term == before.Fence.Term
}

// stopLeader SIGSTOPs the leading server past its lease, waits for
// another server to save upgrade id's record, SIGCONTs it, and waits
// for it to say its lease ended (it stops driving; the history checked
// at the upgrade's end shows it wrote nothing more). It returns false,
// having SIGCONTed the server, when the upgrade ended under the stopped
// server's term: the stop came after its last save (once in CI, at
// load 15, the wait below failed so, then with no such check).
func (h *ha) stopLeader(t *testing.T, id string) bool {
	t.Helper()
	i, before := h.leading(t, id)
	_ = h.procs[i].cmd.Process.Signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	// A longer wait than a kill's (the issue bounds the takeover after a
	// death, checked there): what this step shows is that the continued
	// server writes nothing. A slower takeover is logged here, and a
	// failure logs each server's last lines (dumpOnFailure).
	taken := false
	waitFor(t, 12*haTTL, "another server saving the record while the leader is stopped", func() bool {
		w := h.writer(t, id)
		taken = w.Fence.Term > before.Fence.Term
		return taken || h.endedUnder(t, id, before)
	})
	took := time.Since(stoppedAt)
	if !taken {
		_ = h.procs[i].cmd.Process.Signal(syscall.SIGCONT)
		t.Logf("SIGSTOP of the leader %s (term %d) came after its last save: upgrade %s had ended; again at the next upgrade", h.urls[i], before.Fence.Term, id)
		return false
	}
	if took > 2*haTTL {
		t.Logf("a standby took the upgrade up %s after the leader's SIGSTOP: more than two leases (%s)", took.Round(time.Millisecond), 2*haTTL)
	}
	_ = h.procs[i].cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, 15*time.Second, "the continued server saying its lease ended", func() bool {
		h.procs[i].alive(t)
		return strings.Contains(h.procs[i].out.String(), "its lease ended")
	})
	t.Logf("SIGSTOP of the leader %s (term %d): a standby saved the record %s after; continued, it said its lease ended", h.urls[i], before.Fence.Term, took.Round(time.Millisecond))
	return true
}

// leading is the leading server, which must be one while upgrade id
// runs, and the last save of its record.
func (h *ha) leading(t *testing.T, id string) (int, etcdstore.Written) {
	t.Helper()
	i := h.leader(t)
	if i < 0 {
		t.Fatal("no server leads while the upgrade runs")
	}
	return i, h.writer(t, id)
}

// writer is the fence and revision of upgrade id's last save.
func (h *ha) writer(t *testing.T, id string) etcdstore.Written {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.etcd.Client().Get(ctx, h.etcd.WriterKey(id))
	if err != nil {
		t.Fatal(err)
	}
	var w etcdstore.Written
	if len(resp.Kvs) > 0 {
		if err := json.Unmarshal(resp.Kvs[0].Value, &w); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// wait polls a live server's GET /v1/upgrade until upgrade id ends.
func (h *ha) wait(t *testing.T, id string, limit time.Duration) api.Upgrade {
	t.Helper()
	var u api.Upgrade
	waitFor(t, limit, "upgrade "+id+" ending", func() bool {
		for i := range h.urls {
			code, b, err := h.call(i, "GET", "/v1/upgrade", nil)
			if err != nil || code != http.StatusOK {
				continue
			}
			var st server.UpgradeStatus
			if json.Unmarshal(b, &st) == nil && st.Upgrade.ID == id {
				u = st.Upgrade
				return u.Terminal()
			}
		}
		return false
	})
	return u
}

// oneWriterAtATime reads etcd's whole history of upgrade id's record
// and writer keys: every revision of the record saved exactly once,
// in order, and the saving fence's term never going back, so no two
// servers ever wrote it in turns.
func (h *ha) oneWriterAtATime(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	head, err := h.etcd.Client().Get(ctx, h.etcd.WriterKey(id))
	if err != nil || len(head.Kvs) == 0 {
		t.Fatalf("upgrade %s's writer key: %v", id, err)
	}
	end := head.Kvs[0].ModRevision
	var saves []etcdstore.Written
	for resp := range h.etcd.Client().Watch(ctx, h.etcd.WriterKey(id), clientv3.WithRev(1)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			var w etcdstore.Written
			if err := json.Unmarshal(ev.Kv.Value, &w); err != nil {
				t.Fatal(err)
			}
			saves = append(saves, w)
			if ev.Kv.ModRevision >= end {
				cancel()
			}
		}
	}
	terms := map[uint64]int{}
	for i, w := range saves {
		if w.Revision != store.Revision(i+1) {
			t.Fatalf("upgrade %s: save %d of the record is revision %d, want %d: a revision saved twice or skipped", id, i+1, w.Revision, i+1)
		}
		if i > 0 && w.Fence.Term < saves[i-1].Fence.Term {
			t.Fatalf("upgrade %s: revision %d saved under term %d after revision %d under term %d: two writers in turns", id, w.Revision, w.Fence.Term, saves[i-1].Revision, saves[i-1].Fence.Term)
		}
		terms[w.Fence.Term]++
	}
	t.Logf("upgrade %s: %d revisions of the record in etcd's history, saved under %d terms in order, each revision once", id, len(saves), len(terms))
}
