package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// The strategies these tests describe, by their registered names
// (config itself names none).
const (
	OneAtATime = StrategyType(strategy.OneAtATime)
	Canary     = StrategyType(strategy.Canary)
)

// TestApplyDefaults builds a cluster in Go, leaving everything with a
// default out, and checks the table in defaults.go.
func TestApplyDefaults(t *testing.T) {
	c := &Cluster{
		Components: []Component{{
			Name:     "kv",
			Strategy: Strategy{},
			Health:   Health{Member: &Check{Call: Call{HTTP: "http://x/ready"}}, Cluster: &Check{Call: Call{TCP: "x:1"}}},
			Hooks: Hooks{
				PreStop:   []Call{{HTTP: "http://x/drain", Body: "{}"}, {HTTP: "post http://x/a"}, {Exec: []string{"true"}}},
				PostStart: []Call{{HTTP: "http://x/enable", Method: "put"}},
			},
		}, {
			Name:     "api",
			Strategy: Strategy{Type: Canary, MaxUnavailable: 3},
		}},
		Releases: []Release{{Artifacts: map[string]Artifact{"*": {SHA256: "ABCDEF"}}}},
	}
	c.ApplyDefaults()
	c.ApplyDefaults() // idempotent

	if c.Substrate != SubstrateProcess {
		t.Errorf("substrate = %q", c.Substrate)
	}
	kv, api := &c.Components[0], &c.Components[1]
	if want := (Strategy{Type: OneAtATime, MaxBatch: 1, MaxUnavailable: 1}); !reflect.DeepEqual(kv.Strategy, want) {
		t.Errorf("kv strategy = %+v, want %+v", kv.Strategy, want)
	}
	if want := (Strategy{Type: Canary, MaxBatch: 3, MaxUnavailable: 3}); !reflect.DeepEqual(api.Strategy, want) {
		t.Errorf("api strategy = %+v, want %+v (max_batch = max_unavailable)", api.Strategy, want)
	}
	if kv.Soak != 0 || kv.Deadline != Duration(60*time.Second) || kv.GateDeadline != Duration(60*time.Second) ||
		kv.Run.StopTimeout != Duration(10*time.Second) {
		t.Errorf("kv durations: soak %s deadline %s gate %s stop %s", kv.Soak, kv.Deadline, kv.GateDeadline, kv.Run.StopTimeout)
	}
	for name, ch := range map[string]*Check{"member": kv.Health.Member, "cluster": kv.Health.Cluster} {
		if ch.Interval != Duration(250*time.Millisecond) || ch.Timeout != Duration(2*time.Second) ||
			ch.SuccessThreshold != 1 || ch.FailureThreshold != 1 {
			t.Errorf("%s check = %+v", name, *ch)
		}
	}
	if m := kv.Health.Member.Method; m != "GET" {
		t.Errorf("member check method = %q, want GET", m)
	}
	if m := kv.Health.Cluster.Method; m != "" {
		t.Errorf("tcp check method = %q, want none", m)
	}
	pre := kv.Hooks.PreStop
	for i, want := range []struct{ method, url string }{{"POST", "http://x/drain"}, {"POST", "http://x/a"}, {"", ""}} {
		if pre[i].Method != want.method || pre[i].HTTP != want.url || pre[i].Timeout != Duration(5*time.Second) {
			t.Errorf("pre_stop[%d] = %q %q %s, want %q %q 5s", i, pre[i].Method, pre[i].HTTP, pre[i].Timeout, want.method, want.url)
		}
	}
	if m := kv.Hooks.PostStart[0].Method; m != "PUT" {
		t.Errorf("post_start method = %q, want PUT", m)
	}
	if got := c.Releases[0].Artifacts["*"].SHA256; got != "abcdef" {
		t.Errorf("sha256 = %q, want lower case", got)
	}
	if c.Policy.OnFailure != "rollback" || c.Policy.Tick != Duration(100*time.Millisecond) {
		t.Errorf("policy = %+v", c.Policy)
	}
}

// TestDefaultsKeepWhatIsWritten checks that written values win.
func TestDefaultsKeepWhatIsWritten(t *testing.T) {
	c := mustParse(t, edited(t,
		edit{"policy: {on_failure: rollback}", "policy: {on_failure: pause, tick: 1s}"},
		edit{"cluster: t\n", "cluster: t\nsubstrate: process\n"},
		edit{`member: {http: "http://{{.Address}}/ready"}`, `member: {http: "http://{{.Address}}/ready", method: head, interval: 1s, timeout: 3s, success_threshold: 2, failure_threshold: 3}`},
	))
	ch := c.Components[0].Health.Member
	if ch.Method != "HEAD" || ch.Interval != Duration(time.Second) || ch.Timeout != Duration(3*time.Second) ||
		ch.SuccessThreshold != 2 || ch.FailureThreshold != 3 {
		t.Errorf("member check = %+v", *ch)
	}
	if c.Policy.OnFailure != "pause" || c.Policy.Tick != Duration(time.Second) {
		t.Errorf("policy = %+v", c.Policy)
	}
}
