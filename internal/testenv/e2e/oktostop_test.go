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
