package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// hostsFlow is release 2.0.0's flow: kv and api upgraded host by host,
// the stage's budget two hosts at once; the capacity call (backends
// left on 2 hosts) lets one at a time.
const hostsFlow = `[{stage: hosts, components: [kv, api], max_unavailable: 2}]`

// startHosts starts the sample on three hosts, each its own agent on
// loopback (kv-i and api-i on host-i, api-4 on host-1), every host
// locked through the load balancer's maintenance mode.
func startHosts(t *testing.T) *demo.Cluster {
	t.Helper()
	return startCluster(t, demo.ClusterOptions{Hosts: 3, HostCapacity: 2, Soak: time.Second, KVSoak: time.Second,
		Deadline: 30 * time.Second, GateDeadline: 30 * time.Second,
		Releases: []demo.Release{{Version: "1.0.0", Path: bin.sample["1.0.0"]},
			{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}, Flow: hostsFlow}}})
}

// lockWatch polls the load balancer's locked hosts every 20 ms,
// independently of ferry: the most locked at once, and every host it
// saw locked, in order.
type lockWatch struct {
	mu       sync.Mutex
	most     int
	seen     []string
	rounds   int
	stop     context.CancelFunc
	finished chan struct{}
}

func watchLocks(cl *demo.Cluster) *lockWatch {
	ctx, cancel := context.WithCancel(context.Background())
	lw := &lockWatch{stop: cancel, finished: make(chan struct{})}
	client := &http.Client{Timeout: time.Second}
	go func() {
		defer close(lw.finished)
		for ctx.Err() == nil {
			if locked, err := lockedHosts(client, cl); err == nil {
				lw.mu.Lock()
				lw.rounds++
				lw.most = max(lw.most, len(locked))
				for _, h := range locked {
					if len(lw.seen) == 0 || lw.seen[len(lw.seen)-1] != h {
						lw.seen = append(lw.seen, h)
					}
				}
				lw.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return lw
}

func (lw *lockWatch) end() (most int, seen []string, rounds int) {
	lw.stop()
	<-lw.finished
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.most, lw.seen, lw.rounds
}

// lockedHosts asks the load balancer which hosts are locked.
func lockedHosts(client *http.Client, cl *demo.Cluster) ([]string, error) {
	resp, err := client.Get(cl.LBAdmin + "/admin/hosts")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Locked []string `json:"locked"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("GET /admin/hosts: %w", err)
	}
	return st.Locked, nil
}

// TestHostsStage: three agents on loopback, each a host carrying
// members of kv and api. The hosts stage locks one host at a time (its
// budget is two, but the capacity call says the other hosts could not
// take the load of a second: host_capacity refuses it), upgrades every
// member on it (kv, then api) and unlocks it, under client traffic:
// every member on 2.0.0, no request failed, every acknowledged write
// read back, the balancer never saw two hosts locked, and nothing is
// left locked.
func TestHostsStage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startHosts(t)
	out, code := ferry(t, cl, "plan", "--to", "2.0.0")
	if code != 0 || !strings.Contains(out, "hosts: max_unavailable 2 hosts") || !strings.Contains(out, "host-1 (kv-1, api-1, api-4)") {
		t.Fatalf("ferry plan: exit %d, want the hosts stage's host batches\n%s", code, out)
	}
	t.Logf("ferry plan:\n%s", out)

	locks := watchLocks(cl)
	obs := watch(cl)
	stop := clientTraffic(cl, 18)
	began := time.Now()
	out, code = ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
	took := time.Since(began)
	rec := stop()
	most, seen, rounds := locks.end()
	obs.check(t)
	if code != 0 {
		t.Fatalf("ferry upgrade start: exit %d\n%s", code, out)
	}
	expectAllOn(t, cl, "2.0.0")
	checkWrites(t, cl, rec)
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d of %d requests failed", n, len(rec.Samples()))
	}
	t.Logf("upgraded in %s; the balancer saw hosts locked in turn %v (%d polls), at most %d at once", took.Round(time.Millisecond), seen, rounds, most)
	if most != 1 || len(seen) != 3 {
		t.Errorf("the balancer saw %d hosts locked at once and %v locked in turn; want 1 at a time, each of the 3 once", most, seen)
	}
	if locked, err := lockedHosts(http.DefaultClient, cl); err != nil || len(locked) > 0 {
		t.Errorf("locked at the end: %v (%v)", locked, err)
	}

	u, ok := status(t, cl)
	if !ok || u.State != upgrade.StateCompleted || len(u.Effects) > 0 {
		t.Fatalf("record: %s, effects %v", u.State, u.Effects)
	}
	evs := eventsOf(t, cl, u.ID)
	var order []string
	refused := ""
	for _, ev := range evs {
		switch {
		case ev.Kind == "host" && strings.HasSuffix(ev.Message, "→ locking"):
			order = append(order, strings.TrimSuffix(strings.Fields(ev.Message)[1], ":"))
		case ev.Kind == "wait" && refused == "" && strings.Contains(ev.Message, "host_capacity refused") && strings.Contains(ev.Message, "status 409"):
			refused = ev.Message
		}
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(order))); len(order) != 3 || len(distinct) != 3 {
		t.Errorf("hosts locked in the events: %v, want each of the three once", order)
	}
	// The capacity call refused a second host while one was locked, in
	// the balancer's words.
	if !strings.Contains(refused, `\"fits\":false`) || !strings.Contains(refused, `\"hosts_left\":1`) {
		t.Errorf("no refusal by host_capacity in the balancer's words in the events; the first: %q", refused)
	}
	t.Logf("hosts locked in the order %v; %s", order, refused)
	// Each host's members moved while it was locked, kv before api.
	for _, h := range order {
		var steps []string
		in := false
		for _, ev := range evs {
			switch {
			case ev.Kind == "host" && strings.HasPrefix(ev.Message, "host "+h+": ") && strings.HasSuffix(ev.Message, "→ locked"):
				in = true
			case ev.Kind == "host" && strings.HasPrefix(ev.Message, "host "+h+": ") && strings.HasSuffix(ev.Message, "→ unlocking"):
				in = false
			case in && ev.Kind == "step" && strings.HasSuffix(ev.Message, "→ stopping"):
				steps = append(steps, ev.Member)
			}
		}
		if len(steps) < 2 || !strings.HasPrefix(steps[0], "kv-") || !strings.HasPrefix(steps[len(steps)-1], "api-") {
			t.Errorf("host %s: members stopped while it was locked: %v, want its kv member, then its api members", h, steps)
		}
	}
}

// TestHostsKillThenAbort: ferry is killed with SIGKILL while a host is
// locked (its lock journaled, its members moving); 'ferry upgrade
// abort' then finds the lock in the journal: the rollback returns the
// members moved with their host locked, unlocks it, and ends
// rolled-back with every member on 1.0.0, no request failed and
// nothing locked.
func TestHostsKillThenAbort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startHosts(t)
	live, stop := liveTraffic(cl, 19)
	var killedWith []string
	runAndKillWhen(t, cl, []string{"upgrade", "start", "--to", "2.0.0", "-q"}, func() bool {
		u, ok := status(t, cl)
		if !ok {
			return false
		}
		for _, n := range sortedHostNames(u) {
			if h := u.Hosts[n]; h.Step == upgrade.HostLocked {
				for _, m := range u.Members {
					if m.Step.InFlight() {
						locked, err := lockedHosts(http.DefaultClient, cl)
						killedWith = locked
						return err == nil && slices.Contains(locked, n)
					}
				}
			}
		}
		return false
	})
	u, _ := status(t, cl)
	t.Logf("killed with %v locked at the balancer; the record owes %d effect(s): %v", killedWith, len(u.Effects), effectsText(u))
	if len(killedWith) == 0 || !slices.ContainsFunc(u.Effects, func(e effect.Effect) bool { return e.Scope.Kind == effect.ScopeHost }) {
		t.Fatalf("no host lock owed in the journal after the kill: %v", effectsText(u))
	}
	// The clients go on with the host locked and nobody driving.
	waitFor(t, time.Minute, "100 acknowledged writes", func() bool { return len(live.Acked()) >= 100 })
	out, code := ferry(t, cl, "upgrade", "abort", "-q")
	rec := stop()
	if code != 0 {
		t.Fatalf("ferry upgrade abort: exit %d\n%s", code, out)
	}
	u, _ = status(t, cl)
	if u.State != upgrade.StateRolledBack || len(u.Effects) > 0 {
		t.Fatalf("after the abort: %s (%s), effects %v", u.State, u.Reason, effectsText(u))
	}
	expectAllOn(t, cl, "1.0.0")
	if locked, err := lockedHosts(http.DefaultClient, cl); err != nil || len(locked) > 0 {
		t.Errorf("locked after the abort: %v (%v)", locked, err)
	}
	if drained, _ := lbState(t, cl); len(drained) > 0 {
		t.Errorf("backends drained after the abort: %v", drained)
	}
	checkWrites(t, cl, rec)
	if n := failedRequests(rec); n != 0 {
		t.Errorf("%d of %d requests failed", n, len(rec.Samples()))
	}
	unlocked := 0
	for _, ev := range eventsOf(t, cl, u.ID) {
		if ev.Kind == "effect" && strings.Contains(ev.Message, "undone: host "+killedWith[0]+" locked") {
			unlocked++
		}
	}
	if unlocked == 0 {
		t.Errorf("no event says host %s's lock was undone", killedWith[0])
	}
	t.Logf("rolled back: every member on 1.0.0, nothing locked, %d requests, none failed", len(rec.Samples()))
}

func sortedHostNames(u upgrade.Upgrade) []string {
	out := make([]string, 0, len(u.Hosts))
	for n := range u.Hosts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func effectsText(u upgrade.Upgrade) []string {
	var out []string
	for _, e := range u.Effects {
		out = append(out, e.ID+" ("+e.Scope.String()+"): "+e.What)
	}
	return out
}
