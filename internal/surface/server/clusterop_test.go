package server

import (
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// TestClusterUpDownThroughAPI: POST /v1/cluster/up on a cluster that
// runs the release leaves every member alone; down stops them all; up
// starts them again, healthy; up at another release than what runs is
// refused, having started nothing; both are refused while another
// process holds the engine lock.
func TestClusterUpDownThroughAPI(t *testing.T) {
	cl := startCluster(t, 300*time.Millisecond)
	c := serve(t, clusterServer(t, cl))

	var rep engine.ClusterReport
	c.do("POST", "/v1/cluster/up", map[string]string{"version": "1.0.0"}).expect(t, "up on a running cluster", 200).json(t, &rep)
	if len(rep.Members) != 7 {
		t.Fatalf("up: %d members, want 7: %+v", len(rep.Members), rep)
	}
	for _, m := range rep.Members {
		if m.Action != "kept" || m.Version != "1.0.0" {
			t.Errorf("up on a running cluster: %+v, want kept", m)
		}
	}
	c.do("POST", "/v1/cluster/up", map[string]string{"version": "2.0.0"}).expect(t, "up at another release", 422, CodeVersionsDiffer)
	c.do("POST", "/v1/cluster/up", map[string]string{"version": "9.9.9"}).expect(t, "up at an unknown release", 400, CodeUnknownRelease)
	c.do("POST", "/v1/cluster/up", map[string]string{}).expect(t, "up without a version", 400, CodeBadRequest)

	// Another process drives the cluster: refused.
	st, err := store.Open(cl.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.LockEngine()
	if err != nil {
		t.Fatal(err)
	}
	c.do("POST", "/v1/cluster/down", nil).expect(t, "down while another process holds the lock", 409, CodeUpgradeInProgress)
	unlock()

	c.do("POST", "/v1/cluster/down", map[string]string{}).expect(t, "down", 200).json(t, &rep)
	for _, m := range rep.Members {
		if m.Action != "stopped" {
			t.Errorf("down: %+v, want stopped", m)
		}
	}
	var ms Members
	c.do("GET", "/v1/members", nil).expect(t, "members after down", 200).json(t, &ms)
	for _, m := range ms.Members {
		if m.Status != "down" {
			t.Errorf("after down: %+v", m)
		}
	}

	c.do("POST", "/v1/cluster/up", map[string]string{"version": "1.0.0"}).expect(t, "up after down", 200).json(t, &rep)
	for _, m := range rep.Members {
		if m.Action != "started" || m.HealthyAfterS <= 0 {
			t.Errorf("up after down: %+v, want started, with the time it took", m)
		}
	}
	c.do("GET", "/v1/members", nil).expect(t, "members after up", 200).json(t, &ms)
	for _, m := range ms.Members {
		if m.Status != "healthy" || m.Running != "1.0.0" {
			t.Errorf("after up: %+v", m)
		}
	}
	t.Logf("up after down took %.1fs", rep.DurationS)
}
