package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
)

// TestAskTheSystem: the observer asks a real HTTP endpoint whether each
// member may stop, rendered for the member (its name in the path), each
// call in its own goroutine: a no comes with the system's own words, a
// yes as a yes, a call that outlives its timeout is a no saying so, a
// member being asked about is not asked twice at once, and each answer
// is in the snapshot with when it was asked and gives one event.
func TestAskTheSystem(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	// No call answers before both asks are made: each is in flight at
	// the second, whatever the machine's load.
	asked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-asked
		switch r.URL.Path {
		case "/ok-to-stop/kv-1":
			http.Error(w, "held by the operator: shard 7 rebalancing", http.StatusConflict)
		case "/ok-to-stop/kv-3":
			<-release // slow: the call's timeout ends it
		}
	}))
	defer srv.Close()
	defer close(release)
	desc := fmt.Sprintf(`cluster: t
hosts: [{name: h1, agent: "127.0.0.1:1"}]
components:
  - name: kv
    strategy: {type: one-at-a-time, quorum: 2}
    members:
      - {name: kv-1, host: h1, address: "127.0.0.1:8101"}
      - {name: kv-2, host: h1, address: "127.0.0.1:8102"}
      - {name: kv-3, host: h1, address: "127.0.0.1:8103"}
    run: {args: [kv]}
    ok_to_stop: {http: "%s/ok-to-stop/{{.Name}}", timeout: 300ms}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
`, srv.URL)
	c, err := config.Parse([]byte(desc), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Cluster: c, Driver: process.New([]process.Host{{Name: "h1", Addr: "127.0.0.1:1"}}), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	o := e.newObserver()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	before := time.Now()
	o.ask([]string{"kv-1", "kv-2", "kv-3"})
	o.ask([]string{"kv-1", "kv-2", "kv-3"}) // while in flight: not asked twice
	close(asked)
	o.asks.Wait()
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3 (one per member, none twice while in flight)", n)
	}
	snap := o.snapshot()
	want := map[string]struct {
		yes   bool
		words string
	}{
		"kv-1": {false, `status 409, want 2xx (body "held by the operator: shard 7 rebalancing")`},
		"kv-2": {true, "200 OK"},
		"kv-3": {false, "300ms"},
	}
	for n, w := range want {
		a, ok := snap.Obs.Answers[n]
		switch {
		case !ok:
			t.Errorf("%s: no answer", n)
		case a.Yes != w.yes || !strings.Contains(a.Words, w.words):
			t.Errorf("%s: yes %t (%s), want %t with %q", n, a.Yes, a.Words, w.yes, w.words)
		case a.Asked.Before(before):
			t.Errorf("%s: asked at %s, before the ask at %s", n, a.Asked, before)
		}
	}
	last := map[string]upgrade.Answer{}
	evs := e.answerEvents(snap, last)
	if len(evs) != 3 || evs[0].Kind != "ok_to_stop" || !strings.Contains(evs[0].Message, "the system says kv-1 may not stop: ") {
		t.Fatalf("events %+v", evs)
	}
	if again := e.answerEvents(snap, last); len(again) != 0 {
		t.Errorf("the same answers reported again: %+v", again)
	}
}
