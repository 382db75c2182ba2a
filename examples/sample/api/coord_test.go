package api_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/examples/sample/api"
	"github.com/ferry-upgrade/ferry/examples/sample/coord"
	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
)

// startCoords starts a coordinator pair with lease and returns its
// members and their addresses, c-1 first.
func startCoords(t *testing.T, lease time.Duration) ([]*coord.Server, []string) {
	t.Helper()
	lns := []net.Listener{sampletest.Listen(t), sampletest.Listen(t)}
	addrs := []string{lns[0].Addr().String(), lns[1].Addr().String()}
	var out []*coord.Server
	for i, name := range []string{"c-1", "c-2"} {
		peer := coord.Peer{Name: "c-2", Addr: addrs[1]}
		if i == 1 {
			peer = coord.Peer{Name: "c-1", Addr: addrs[0]}
		}
		s, err := coord.New(coord.Config{Name: name, Peers: []coord.Peer{peer}, Lease: lease,
			Logger: sampletest.Logger(t), Listener: lns[i]})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
		out = append(out, s)
	}
	// The standby learns the holder from the first heartbeat (every
	// sixth of the lease).
	sampletest.WaitFor(t, max(5*time.Second, lease/2), "c-1 active", func() bool {
		code, body := sampletest.Do(http.MethodGet, "http://"+addrs[1]+"/role", nil)
		return code == http.StatusOK && strings.Contains(body, `"holder":"c-1"`)
	})
	return out, addrs
}

func putStamp(t *testing.T, base, key string) (int, uint64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/kv/"+key, strings.NewReader("v"))
	resp, err := sampletest.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, _ := strconv.ParseUint(resp.Header.Get("X-Stamp"), 10, 64)
	return resp.StatusCode, n
}

// TestWritesGetStampsAcrossASwitchover: with a coordinator pair, each
// write carries a stamp from the active one; after a switchover the
// stamps go on, larger; with the active stopped and no switchover, a
// write fails (503) once the stamp budget is spent, while the standby
// waits out its lease.
func TestWritesGetStampsAcrossASwitchover(t *testing.T) {
	kvc := sampletest.StartKV(t, 3)
	// A lease far longer than the test: c-1 must not take the role by
	// itself before the last PUT, however slow the machine (at load 30 a
	// 5 s lease ran out before it, and c-1 answered).
	coords, addrs := startCoords(t, 30*time.Second)
	_, base := startAPI(t, api.Config{KVAddrs: kvc.HTTPAddrs(), CoordAddrs: addrs, CoordBudget: 500 * time.Millisecond})
	waitReady(t, base)
	code, first := putStamp(t, base, "a")
	if code != http.StatusNoContent || first == 0 {
		t.Fatalf("PUT a: %d, stamp %d", code, first)
	}
	code, body := sampletest.Do(http.MethodPost, "http://"+addrs[0]+"/admin/handover?to=c-2", nil)
	if code != http.StatusOK {
		t.Fatalf("handover: %d %s", code, body)
	}
	code, second := putStamp(t, base, "b")
	if code != http.StatusNoContent || second <= first {
		t.Fatalf("PUT b after the switchover: %d, stamp %d (before: %d)", code, second, first)
	}
	var st coord.Status
	_, body = sampletest.Do(http.MethodGet, "http://"+addrs[1]+"/role", nil)
	_ = json.Unmarshal([]byte(body), &st)
	if st.Role != coord.RoleActive {
		t.Fatalf("c-2 is %s after the switchover", st.Role)
	}
	if err := coords[1].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _ := putStamp(t, base, "c"); code != http.StatusServiceUnavailable {
		t.Errorf("PUT with the active stopped and no switchover: %d, want 503 (the 30 s lease has not run out)", code)
	}
}
