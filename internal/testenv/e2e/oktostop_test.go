package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
)

// TestOKToStopRefusalAndOverride: kv asks each member whether it may
// stop (the sample's GET /admin/ok-to-stop, a real endpoint of the
// real process). The operator holds kv-2 through the member's own API:
// kv-1 and kv-3 are upgraded (the raft leader, if one of them, waits
// to go last, after kv-2), kv-2 is not admitted and the upgrade waits,
// the refusal by ok_to_stop with the system's own words in
// 'ferry upgrade status' and in the server's API the dashboard reads;
// 'ferry upgrade override ok_to_stop --member kv-2' admits it, and the
// upgrade completes.
func TestOKToStopRefusalAndOverride(t *testing.T) {
	h := holdKV2(t)
	cl, remote, started, held, systemsWords := h.cl, h.remote, h.started, h.held, h.systemsWords
	out, code := remote("upgrade", "status")
	if code != 0 || !strings.Contains(out, "refused:  ok_to_stop refused kv-2 (the system says no: ") || !strings.Contains(out, systemsWords) {
		t.Errorf("ferry upgrade status does not show the refusal with the system's words: exit %d\n%s", code, out)
	}

	out, code = remote("upgrade", "override", "ok_to_stop", "--member", held)
	if code != 0 {
		t.Fatalf("override: exit %d\n%s", code, out)
	}
	code, out = started.wait(t)
	t.Logf("ferry --addr upgrade start:\n%s", tail(out, 12))
	if code != 0 || !strings.Contains(out, "state:    completed") {
		t.Fatalf("the upgrade after the override: exit %d", code)
	}
	expectAllOn(t, cl, "2.0.0")
	out, code = remote("events")
	for _, want := range []string{"the system says kv-1 may stop", "the system says kv-3 may stop", "the system says kv-2 may not stop: ", systemsWords, "ok_to_stop refused kv-2"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("the events do not say %q (exit %d)", want, code)
		}
	}
}

// heldKV2 is a sample cluster whose kv asks each member whether it may
// stop, kv-2 held by the operator, and an upgrade to 2.0.0 through a
// server, waiting on kv-2's refusal by ok_to_stop.
type heldKV2 struct {
	cl           *demo.Cluster
	remote       func(args ...string) (string, int)
	api          func() upgrade.Upgrade
	started      *background
	held         string
	systemsWords string
}

// holdKV2 starts it and returns once kv-2 is refused, in the system's
// words, and every other kv member is done or waits after it.
func holdKV2(t *testing.T) heldKV2 {
	t.Helper()
	cl := startCluster(t, demo.ClusterOptions{OKToStop: true, Soak: 500 * time.Millisecond, GateDeadline: 3 * time.Minute}, "2.0.0")
	const held, why = "kv-2", "rebalancing shard 7 (e2e)"
	req, err := http.NewRequest(http.MethodPut, "http://"+cl.Addresses[held]+"/admin/hold", strings.NewReader(why))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("hold %s: %s", held, resp.Status)
	}

	addr := startServer(t, cl)
	token, _, err := server.LoadOrCreateToken(filepath.Join(cl.DataDir, server.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	remote := func(args ...string) (string, int) {
		return ferry(t, cl, append([]string{"--addr", addr}, args...)...)
	}
	// The record as the dashboard reads it: GET /v1/upgrade.
	api := func() upgrade.Upgrade {
		req, err := http.NewRequest(http.MethodGet, addr+"/v1/upgrade", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var us struct {
			Upgrade upgrade.Upgrade `json:"upgrade"`
		}
		if resp.StatusCode != http.StatusOK {
			return upgrade.Upgrade{}
		}
		if err := json.NewDecoder(resp.Body).Decode(&us); err != nil {
			t.Fatalf("GET /v1/upgrade: %v", err)
		}
		return us.Upgrade
	}
	systemsWords := "held by the operator: " + why
	started := startFerry(t, cl, "--addr", addr, "upgrade", "start", "--to", "2.0.0")
	var u upgrade.Upgrade
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := json.MarshalIndent(u, "", " ")
			t.Logf("the upgrade as the API said it last: %s\nferry upgrade start said:\n%s", tail(string(b), 60), started.out.String())
		}
	})
	// The other kv members go, but for the raft leader if it is one of
	// them: it goes last (role_last), after kv-2, so it waits too.
	waitFor(t, 2*time.Minute, "kv-2 refused by ok_to_stop in the system's words, every other kv member done or after it", func() bool {
		started.alive(t)
		u = api()
		refused := map[string]strategy.Refusal{}
		for _, r := range u.Refusals {
			refused[r.Member] = r
		}
		r, ok := refused[held]
		if !ok || r.Predicate != strategy.PredOKToStop || !strings.Contains(r.Reason, "the system says no: ") || !strings.Contains(r.Reason, systemsWords) {
			return false
		}
		for _, n := range []string{"kv-1", "kv-3"} {
			after := refused[n].Predicate == strategy.PredRoleLast && strings.Contains(refused[n].Reason, held)
			if m := u.Members[n]; m == nil || m.Step != upgrade.StepDone && !after {
				return false
			}
		}
		return true
	})
	t.Logf("refusals in the API: %+v", u.Refusals)
	if u.State != upgrade.Upgrading("kv") {
		t.Errorf("state %s while kv-2 is refused, want upgrading-kv", u.State)
	}
	// It waits: nothing more moves while the system says no.
	vs := versions(t, cl)
	for n, v := range vs {
		want := "1.0.0"
		if m := u.Members[n]; m != nil && m.Step == upgrade.StepDone {
			want = "2.0.0"
		}
		if v != want {
			t.Errorf("%s runs %s while kv-2 is held, want %s", n, v, want)
		}
	}
	if vs[held] != "1.0.0" {
		t.Errorf("%s, held, runs %s", held, vs[held])
	}
	return heldKV2{cl: cl, remote: remote, api: api, started: started, held: held, systemsWords: systemsWords}
}

// TestScopedOverrideAndRevoke: with kv-2 refused by ok_to_stop, an
// override of ok_to_stop for api's members does not admit it (the
// machine steps again after it, kv-2 still refused); it is revoked;
// one for kv in the phase in progress, expiring in 10 minutes, admits
// it and the upgrade completes. The record keeps the three entries,
// their scope and expiry.
func TestScopedOverrideAndRevoke(t *testing.T) {
	h := holdKV2(t)
	override := func(args ...string) time.Time {
		t.Helper()
		at := time.Now()
		if out, code := h.remote(append([]string{"upgrade", "override", "ok_to_stop"}, args...)...); code != 0 {
			t.Fatalf("override %v: exit %d\n%s", args, code, out)
		}
		return at
	}
	at := override("--component", "api")
	waitFor(t, time.Minute, "a step after the override for api, kv-2 still refused by ok_to_stop", func() bool {
		u := h.api()
		for _, r := range u.Refusals {
			if r.Member == h.held && r.Predicate == strategy.PredOKToStop && u.Updated.After(at) && len(u.Overrides) == 1 {
				return true
			}
		}
		return false
	})
	override("--component", "api", "--revoke")
	override("--component", "kv", "--phase", "--for", "10m")
	code, out := h.started.wait(t)
	if code != 0 || !strings.Contains(out, "state:    completed") {
		t.Fatalf("the upgrade after the override for kv: exit %d\n%s", code, tail(out, 12))
	}
	u, _ := status(t, h.cl)
	os := u.Overrides
	if len(os) != 3 || os[0].Component != "api" || !os[1].Revoke || os[2].Component != "kv" || os[2].Phase != 1 ||
		os[2].Until.Sub(os[2].At) != 10*time.Minute {
		t.Fatalf("the record's overrides: %+v", os)
	}
	for _, o := range os {
		t.Logf("override: %s, by %s", o, o.By)
	}
}
