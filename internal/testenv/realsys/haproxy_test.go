package realsys

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/run/store"
)

var sample struct {
	once   sync.Once
	v1, v2 string
	err    error
}

// sampleBuilds builds the sample cluster's releases 1.0.0 and 2.0.0.
func sampleBuilds(t *testing.T) (string, string) {
	t.Helper()
	sample.once.Do(func() {
		for v, p := range map[string]*string{"1.0.0": &sample.v1, "2.0.0": &sample.v2} {
			*p = filepath.Join(binDir, "sample-"+v)
			out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+v, "-o", *p,
				"github.com/ferry-upgrade/ferry/examples/sample/cmd/sample").CombinedOutput()
			if err != nil {
				sample.err = err
				t.Logf("go build the sample %s: %s", v, out)
				return
			}
		}
	})
	if sample.err != nil {
		t.Fatal(sample.err)
	}
	return sample.v1, sample.v2
}

// TestSampleBehindHAProxy: the sample cluster's api tier behind a real
// load balancer (HAProxy, Debian's) instead of the sample's own, drained
// through HAProxy's stats page by a pre_stop hook and put back by its
// undo; upgraded under ferry's own traffic through HAProxy: no request
// failed, no acknowledged write lost, every member on 2.0.0, every
// server back in HAProxy's rotation.
func TestSampleBehindHAProxy(t *testing.T) {
	needRealsys(t)
	if len(env.Missing("HAPROXY")) > 0 {
		if realsysOn == "1" {
			t.Fatal("HAProxy is not installed: scripts/realsys.sh build installs it from Debian's packages")
		}
		t.Skip("HAProxy is not installed: scripts/realsys.sh build installs it from Debian's packages")
	}
	v1, v2 := sampleBuilds(t)
	c := newCluster(t, SampleHAProxy(v1, v2), "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.StartHAProxy(ctx, env["HAPROXY"]); err != nil {
		t.Fatal(err)
	}
	ferry(t, c, 0, "cluster", "up", "--version", "1.0.0")
	if err := waitUntil(ctx, 20*time.Second, "HAProxy sees every api server up", func() (bool, error) {
		sts, err := c.HAProxyServers(ctx)
		if err != nil {
			return false, nil
		}
		for _, s := range sts {
			if s != "UP" {
				return false, nil
			}
		}
		return len(sts) == 4, nil
	}); err != nil {
		t.Fatal(err)
	}

	out := ferry(t, c, 0, "upgrade", "start", "--to", "2.0.0", "--traffic", "-q", "-o", "json")
	var res struct {
		State string `json:"state"`
		Proof struct {
			Traffic struct {
				Requests struct {
					Total  int     `json:"total"`
					Failed int     `json:"failed"`
					P99MS  float64 `json:"p99_ms"`
				} `json:"requests"`
				Writes struct {
					Acknowledged int      `json:"acknowledged"`
					Lost         int      `json:"lost"`
					LostKeys     []string `json:"lost_keys"`
				} `json:"writes"`
			} `json:"traffic"`
		} `json:"proof"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("upgrade -o json: %v\n%.2000s", err, out)
	}
	tr := res.Proof.Traffic
	t.Logf("through HAProxy: %s; %d requests during the upgrade, %d failed, p99 %.1f ms; %d acknowledged writes, %d lost",
		res.State, tr.Requests.Total, tr.Requests.Failed, tr.Requests.P99MS, tr.Writes.Acknowledged, tr.Writes.Lost)
	if res.State != "completed" {
		t.Fatalf("the upgrade ended %s", res.State)
	}
	if tr.Requests.Total < 200 || tr.Requests.Failed > 0 {
		t.Errorf("%d of %d requests failed", tr.Requests.Failed, tr.Requests.Total)
	}
	if tr.Writes.Acknowledged < 100 || tr.Writes.Lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost: %v", tr.Writes.Lost, tr.Writes.Acknowledged, tr.Writes.LostKeys)
	}
	expectOn(t, c, "2.0.0")
	sts, err := c.HAProxyServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for s, st := range sts {
		if st != "UP" {
			t.Errorf("after the upgrade HAProxy has %s %s, want UP (put back by the drain's undo)", s, st)
		}
	}

	// Each api member was drained through HAProxy and put back: the
	// journal opened and closed an effect for each.
	var evs []store.Event
	dec := json.NewDecoder(strings.NewReader(ferry(t, c, 0, "events", "-o", "json")))
	for {
		var ev store.Event
		if err := dec.Decode(&ev); err != nil {
			break
		}
		evs = append(evs, ev)
	}
	opened, closed := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		if ev.Kind == "effect" && strings.HasPrefix(ev.Member, "api-") {
			switch {
			case strings.Contains(ev.Message, " opened "):
				opened[ev.Member] = true
			case strings.Contains(ev.Message, " closed: ") || strings.Contains(ev.Message, " undone"):
				closed[ev.Member] = true
			}
		}
	}
	if len(opened) != 4 || len(closed) != 4 {
		t.Errorf("drain effects opened for %v, closed for %v: want every api member's", opened, closed)
	}
}
