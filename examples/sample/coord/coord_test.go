package coord

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
)

const testLease = 600 * time.Millisecond

// pair starts two members, c-1 and c-2, on loopback listeners it owns,
// and waits until one is active and the other follows it.
func pair(t *testing.T, delay time.Duration) (map[string]*Server, map[string]string) {
	t.Helper()
	lns := map[string]net.Listener{"c-1": sampletest.Listen(t), "c-2": sampletest.Listen(t)}
	addrs := map[string]string{}
	for n, ln := range lns {
		addrs[n] = ln.Addr().String()
	}
	servers := map[string]*Server{}
	for n, ln := range lns {
		other := "c-1"
		if n == "c-1" {
			other = "c-2"
		}
		s, err := New(Config{Name: n, Peers: []Peer{{Name: other, Addr: addrs[other]}}, Lease: testLease, HandoverDelay: delay,
			Version: "1.0.0", Logger: sampletest.Logger(t), Listener: ln})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		servers[n] = s
		t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	}
	sampletest.WaitFor(t, 5*time.Second, "one active, one standby, the pair whole", func() bool {
		return whole(addrs) != ""
	})
	return servers, addrs
}

// role is what member addr says of itself on GET /role.
func role(addr string) Status {
	var st Status
	code, body := sampletest.Do(http.MethodGet, "http://"+addr+"/role", nil)
	if code == http.StatusOK {
		_ = json.Unmarshal([]byte(body), &st)
	}
	return st
}

// whole returns the active's name when one member is active, the other
// follows it and both say the pair is whole ("" otherwise).
func whole(addrs map[string]string) string {
	active, standby := "", ""
	for n, a := range addrs {
		switch st := role(a); st.Role {
		case RoleActive:
			active = n
		case RoleStandby:
			standby = st.Holder
		}
		code, body := sampletest.Do(http.MethodGet, "http://"+a+"/cluster", nil)
		if code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
			return ""
		}
	}
	if active == "" || standby != active {
		return ""
	}
	return active
}

func stamp(t *testing.T, addr string) (uint64, int) {
	t.Helper()
	code, body := sampletest.Do(http.MethodPost, "http://"+addr+"/v1/stamp", nil)
	var r struct {
		Stamp uint64 `json:"stamp"`
	}
	_ = json.Unmarshal([]byte(body), &r)
	return r.Stamp, code
}

func other(n string) string {
	if n == "c-1" {
		return "c-2"
	}
	return "c-1"
}

// TestPairHandsOver: two members started together elect one active
// (the lower name); only it stamps. A handover made on the standby is
// passed to the active, answers once the standby holds the role, and
// the stamps go on increasing from the new active; the old one follows.
func TestPairHandsOver(t *testing.T) {
	_, addrs := pair(t, 0)
	active := whole(addrs)
	if active != "c-1" {
		t.Errorf("started together, %s took the role, want c-1 (the lower name)", active)
	}
	before, code := stamp(t, addrs[active])
	if code != http.StatusOK {
		t.Fatalf("stamp on the active: %d", code)
	}
	if _, code := stamp(t, addrs[other(active)]); code != http.StatusServiceUnavailable {
		t.Errorf("stamp on the standby: %d, want 503", code)
	}
	to := other(active)
	code, body := sampletest.Do(http.MethodPost, "http://"+addrs[to]+"/admin/handover?to="+to, nil)
	if code != http.StatusOK {
		t.Fatalf("handover to %s: %d %s", to, code, body)
	}
	if st := role(addrs[to]); st.Role != RoleActive {
		t.Fatalf("after the handover answered, %s is %s", to, st.Role)
	}
	after, code := stamp(t, addrs[to])
	if code != http.StatusOK || after <= before {
		t.Errorf("stamp after the handover: %d (%d), before it %d: want a larger one", after, code, before)
	}
	sampletest.WaitFor(t, 5*time.Second, "the pair whole again", func() bool { return whole(addrs) == to })
	// A handover to the member holding the role is done already.
	if code, body := sampletest.Do(http.MethodPost, "http://"+addrs[active]+"/admin/handover?to="+to, nil); code != http.StatusOK || !strings.Contains(body, "holds the role already") {
		t.Errorf("handover to the holder: %d %s", code, body)
	}
	if code, _ := sampletest.Do(http.MethodPost, "http://"+addrs[to]+"/admin/handover?to=nobody", nil); code != http.StatusBadRequest {
		t.Errorf("handover to a stranger: %d, want 400", code)
	}
}

// TestSlowHandoverCancelled: a slow handover whose caller gives up goes
// on, but a handover back to the active before it happens cancels it:
// the active keeps the role (what ferry's undo of a switchover whose
// call an abort cancelled does).
func TestSlowHandoverCancelled(t *testing.T) {
	_, addrs := pair(t, 2*time.Second)
	active := whole(addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addrs[active]+"/admin/handover?to="+other(active), nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a 2 s handover answered within 200 ms: %s", resp.Status)
	}
	code, body := sampletest.Do(http.MethodPost, "http://"+addrs[other(active)]+"/admin/handover?to="+active, nil)
	if code != http.StatusOK || !strings.Contains(body, "cancelled") {
		t.Fatalf("handover back to %s: %d %s", active, code, body)
	}
	// Cancelled, the handover under way ends without landing.
	sampletest.WaitFor(t, 5*time.Second, "no handover under way", func() bool { return role(addrs[active]).Handover == "" })
	if got := whole(addrs); got != active {
		t.Errorf("the active is %q, want %s", got, active)
	}
}

// TestStopWithoutHandover: an active stopped hands nothing over; its
// standby takes the role on a later term once the lease ran out, not
// before.
func TestStopWithoutHandover(t *testing.T) {
	servers, addrs := pair(t, 0)
	active := whole(addrs)
	st := role(addrs[active])
	stopped := time.Now()
	if err := servers[active].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	standby := other(active)
	sampletest.WaitFor(t, 5*time.Second, standby+" active", func() bool { return role(addrs[standby]).Role == RoleActive })
	took := time.Since(stopped)
	if took < testLease/2 {
		t.Errorf("%s took over %s after the stop: before its lease of %s could have run out", standby, took, testLease)
	}
	if got := role(addrs[standby]); got.Term <= st.Term {
		t.Errorf("term %d after the takeover, %d before", got.Term, st.Term)
	}
	if _, code := stamp(t, addrs[standby]); code != http.StatusOK {
		t.Errorf("the new active does not stamp: %d", code)
	}
}
