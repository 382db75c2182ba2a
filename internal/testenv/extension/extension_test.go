package extension_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/testenv/extension"
	"github.com/ferry-upgrade/ferry/internal/testenv/sourcetree"
)

// system is the service's side the description's calls reach: who
// holds the role primary, the promotions asked for and the checkpoints
// taken, each with how many of the world's starts and stops were done
// when it was made.
type system struct {
	mu          sync.Mutex
	world       *extension.World
	primary     string
	promoted    []string
	promotedAt  []int
	checkpoints []int
	// abortOnPromote: a promotion asks the engine to abort (the
	// operator's request, through the store), from inside its call.
	abortOnPromote bool
	// noReturn marks the checkpoint as the point of no return.
	noReturn bool
	store    *store.Store
}

func (s *system) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/role/"):
		if strings.TrimPrefix(r.URL.Path, "/role/") != s.primary {
			http.Error(w, "not primary", http.StatusServiceUnavailable)
		}
	case r.URL.Path == "/promote" && r.Method == http.MethodPost:
		s.primary = r.URL.Query().Get("to")
		s.promoted = append(s.promoted, s.primary)
		s.promotedAt = append(s.promotedAt, len(s.world.Ops()))
		if s.abortOnPromote && len(s.promoted) == 1 {
			// The call answers once the engine took the abort up (when
			// it may: past the point of no return it refuses it), so that
			// the promotion's end cannot admit the holder first. The
			// engine's checks of the role come meanwhile: unlocked.
			s.mu.Unlock()
			err := s.abort(!s.noReturn)
			s.mu.Lock()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		}
	case r.URL.Path == "/checkpoint" && r.Method == http.MethodPost:
		s.checkpoints = append(s.checkpoints, len(s.world.Ops()))
	default:
		http.NotFound(w, r)
	}
}

// abort asks the engine to abort, as an operator would through the
// store, and if wait, waits until the record is rolling back.
func (s *system) abort(wait bool) error {
	cur, _, err := s.store.Current()
	if err != nil {
		return err
	}
	if _, err := s.store.Request(cur.ID, upgrade.IntentAbort, time.Now(), nil); err != nil || !wait {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if u, _, err := s.store.Current(); err == nil && u.RollingBack() {
			return nil
		}
	}
	return fmt.Errorf("the engine did not take the abort up within 10s")
}

// description uses the four extensions: db moves first, then a
// checkpoint stage, then api with the reverse strategy, whose role
// holder (api-2) goes last after the promoting step, all on the
// in-memory substrate.
func description(url string) string {
	return fmt.Sprintf(`cluster: ext
substrate: inmemory
policy: {tick: 20ms}
hosts: [{name: h1}, {name: h2}, {name: h3}]
components:
  - name: db
    order: 1
    strategy: {type: canary, max_unavailable: 1}
    deadline: 10s
    members:
      - {name: db-1, host: h1, address: 127.0.0.1:9001}
      - {name: db-2, host: h2, address: 127.0.0.1:9002}
  - name: api
    order: 2
    strategy: {type: reverse}
    deadline: 10s
    gate_deadline: 10s
    role: {name: primary, check: {http: "%[1]s/role/{{.Name}}", interval: 20ms}}
    hooks:
      steps:
        promote: [{http: "%[1]s/promote?to={{.To}}", method: POST}]
    members:
      - {name: api-1, host: h1, address: 127.0.0.1:9101}
      - {name: api-2, host: h2, address: 127.0.0.1:9102}
      - {name: api-3, host: h3, address: 127.0.0.1:9103}
releases:
  - version: 1.0.0
    artifacts: {"*": {image: "app:1.0.0", sha256: "1111111111111111111111111111111111111111111111111111111111111111"}}
  - version: 2.0.0
    upgrade_from: ["1.0.x"]
    artifacts: {"*": {image: "app:2.0.0", sha256: "2222222222222222222222222222222222222222222222222222222222222222"}}
    flow:
      - {stage: phase, component: db}
      - {stage: checkpoint, name: before-api, component: db, calls: [{http: "%[1]s/checkpoint", method: POST}]}
      - {stage: phase, component: api}
`, url)
}

// TestUpgradeWithOneOfEach runs an upgrade from 1.0.0 to 2.0.0 through
// the real engine with a strategy, a step, a substrate and a flow
// stage that only this package defines, and checks that each did its
// part, in order: the substrate started every member on 2.0.0, the
// checkpoint was made once, between db's moves and api's, the strategy
// took api-3 before api-1 and the role's holder api-2 last, and the
// step promoted api-1 once, after it moved and before api-2 stopped.
func TestUpgradeWithOneOfEach(t *testing.T) {
	sys := &system{primary: "api-2"}
	u, evs, world, err := upgradeWith(t, sys)
	ctx := context.Background()
	if err != nil || u.State != upgrade.StateCompleted {
		t.Fatalf("upgrade ended %s (%s), err %v; want completed", u.State, u.Reason, err)
	}

	// The substrate: every member stopped and started on 2.0.0, once.
	ops := world.Ops()
	for _, m := range []string{"db-1", "db-2", "api-1", "api-2", "api-3"} {
		if v := world.Version(m); v != "2.0.0" {
			t.Errorf("%s runs %q at the end; want 2.0.0", m, v)
		}
	}
	if len(ops) != 10 {
		t.Errorf("%d starts and stops (%s); want 10: each of 5 members stopped and started once", len(ops), strings.Join(ops, "; "))
	}
	if logs, err := world.Logs(ctx, drvMember("api-2"), false, 10); err != nil || logs != "stop api-2\nstart api-2 2.0.0" {
		t.Errorf("api-2's output %q (%v); want its stop and its start", logs, err)
	}

	// The strategy: api-3, api-1, then the holder api-2.
	var apiStarts []string
	for _, op := range ops {
		if f := strings.Fields(op); f[0] == "start" && strings.HasPrefix(f[1], "api-") {
			apiStarts = append(apiStarts, f[1])
		}
	}
	if want := []string{"api-3", "api-1", "api-2"}; !slices.Equal(apiStarts, want) {
		t.Errorf("api's members started in the order %v; want %v (highest-named first, the role's holder last)", apiStarts, want)
	}
	if !hasEvent(evs, "batch", "the highest-named first") || !hasEvent(evs, "batch", "promoted to the role") {
		t.Error("no batch event says why in the reverse strategy's words")
	}

	// The stage: made once, after db's 4 starts and stops, before api's
	// first stop; its state in the walk between db's and api's.
	sys.mu.Lock()
	checkpoints, promoted, promotedAt := slices.Clone(sys.checkpoints), slices.Clone(sys.promoted), slices.Clone(sys.promotedAt)
	sys.mu.Unlock()
	if !slices.Equal(checkpoints, []int{4}) || !onlyPrefix(ops[:4], "db-") {
		t.Errorf("checkpoints made after %v starts and stops (%s); want one, after db's 4", checkpoints, strings.Join(ops, "; "))
	}
	states := stateEvents(evs)
	for _, want := range []string{"state upgraded-db → checkpointing-before-api", "state checkpointing-before-api → upgrading-api"} {
		if !slices.Contains(states, want) {
			t.Errorf("no event %q among %q", want, states)
		}
	}

	// The step: api-1 promoted once, after api-3 and api-1 moved (4
	// api starts and stops) and before api-2 stopped.
	if !slices.Equal(promoted, []string{"api-1"}) || len(promotedAt) != 1 || promotedAt[0] != 8 || ops[8] != "stop api-2" {
		t.Errorf("promoted %v after %v of the world's operations (%s); want api-1 once, after 8, before api-2 stopped", promoted, promotedAt, strings.Join(ops, "; "))
	}
	if !hasEvent(evs, "effect", "api-1 promoted to primary (from api-2)") {
		t.Error("no effect event journals the promotion")
	}
	t.Logf("%s; the world: %s; promoted %v, checkpoints after %v operations", strings.Join(states, "; "), strings.Join(ops, "; "), promoted, checkpoints)
	if o := u.Effects.Owed(func(effect.Scope) bool { return true }); len(o) != 0 {
		t.Errorf("effects still owed at the end: %v", o)
	}
}

// upgradeWith runs an upgrade of the description to 2.0.0 on the
// in-memory substrate through the real engine and bbolt store, with
// sys answering the description's calls, and returns how it ended, its
// events and the world. The events and the world are logged if the
// test fails.
func upgradeWith(t *testing.T, sys *system) (upgrade.Upgrade, []store.Event, *extension.World, error) {
	t.Helper()
	srv := httptest.NewServer(sys)
	t.Cleanup(srv.Close)
	desc := description(srv.URL)
	if sys.noReturn {
		desc = strings.Replace(desc, "component: db, calls:", "component: db, point_of_no_return: true, calls:", 1)
	}
	c, err := config.Parse([]byte(desc), "ext.yaml")
	if err != nil {
		t.Fatal(err)
	}
	drv, err := substrate.New(c, substrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	world, ok := drv.(*extension.World)
	if !ok {
		t.Fatalf("substrate %s built a %T, not the in-memory world", c.Substrate, drv)
	}
	sub, err := substrate.Lookup(c.Substrate)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.CheckDriver(drv); err != nil {
		t.Errorf("the driver lacks what its capabilities say: %v", err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sys.mu.Lock()
	sys.world, sys.store = world, st
	sys.mu.Unlock()
	var mu sync.Mutex
	var events []store.Event
	e, err := engine.New(engine.Config{Cluster: c, Driver: drv, Store: st, OnEvent: func(ev store.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := e.Begin(ctx, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	u, err := e.Run(ctx)
	mu.Lock()
	evs := slices.Clone(events)
	mu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			for _, ev := range evs {
				t.Logf("event %s %s: %s", ev.Kind, ev.Member, ev.Message)
			}
			t.Logf("world: %s", strings.Join(world.Ops(), "; "))
		}
	})
	return u, evs, world, err
}

// TestAbortAfterThePromotionUndoesIt: the operator aborts while the
// step's call is made (the request is written from inside the call):
// the upgrade rolls back, every member returns to 1.0.0, api-2 never
// moved, and the step's undo, journaled before its call, promotes
// api-2 back, once.
func TestAbortAfterThePromotionUndoesIt(t *testing.T) {
	sys := &system{primary: "api-2", abortOnPromote: true}
	u, evs, world, err := upgradeWith(t, sys)
	if err != nil || u.State != upgrade.StateRolledBack {
		t.Fatalf("upgrade ended %s (%s), err %v; want rolled-back", u.State, u.Reason, err)
	}
	for _, m := range []string{"db-1", "db-2", "api-1", "api-2", "api-3"} {
		if v := world.Version(m); v != "1.0.0" {
			t.Errorf("%s runs %q at the end; want 1.0.0", m, v)
		}
	}
	ops := world.Ops()
	if slices.Contains(ops, "stop api-2") {
		t.Errorf("api-2, the holder that never moved, was stopped: %s", strings.Join(ops, "; "))
	}
	sys.mu.Lock()
	promoted, primary := slices.Clone(sys.promoted), sys.primary
	sys.mu.Unlock()
	if !slices.Equal(promoted, []string{"api-1", "api-2"}) || primary != "api-2" {
		t.Errorf("promoted %v, %s primary at the end; want api-1, then api-2 back (the undo), api-2 primary", promoted, primary)
	}
	if !hasEvent(evs, "effect", "promote api-2 to primary again") {
		t.Error("no effect event says the promotion was undone")
	}
	if o := u.Effects.Owed(func(effect.Scope) bool { return true }); len(o) != 0 {
		t.Errorf("effects still owed at the end: %v", o)
	}
}

// TestCheckpointAsThePointOfNoReturn: a stage of the registered kind
// marked point_of_no_return is one like any stage: the abort asked
// during the promotion, past it, is refused naming the stage, and the
// upgrade completes with the role where the step put it.
func TestCheckpointAsThePointOfNoReturn(t *testing.T) {
	sys := &system{primary: "api-2", abortOnPromote: true, noReturn: true}
	u, evs, world, err := upgradeWith(t, sys)
	if err != nil || u.State != upgrade.StateCompleted {
		t.Fatalf("upgrade ended %s (%s), err %v; want completed", u.State, u.Reason, err)
	}
	if u.NoReturn.String() != "checkpointing-before-api" {
		t.Errorf("the point of no return recorded %q; want checkpointing-before-api", u.NoReturn)
	}
	if !hasEvent(evs, "wait", "abort refused: upgrade "+u.ID+" passed its point of no return, stage checkpointing-before-api") {
		t.Error("no event says the abort was refused, naming the stage")
	}
	for _, m := range []string{"db-1", "db-2", "api-1", "api-2", "api-3"} {
		if v := world.Version(m); v != "2.0.0" {
			t.Errorf("%s runs %q at the end; want 2.0.0", m, v)
		}
	}
	sys.mu.Lock()
	promoted := slices.Clone(sys.promoted)
	sys.mu.Unlock()
	if !slices.Equal(promoted, []string{"api-1"}) {
		t.Errorf("promoted %v; want api-1 once (kept, not undone)", promoted)
	}
}

// drvMember is the driver's member named name, for its output.
func drvMember(name string) driver.Member { return driver.Member{Name: name} }

func hasEvent(evs []store.Event, kind, words string) bool {
	return slices.ContainsFunc(evs, func(ev store.Event) bool { return ev.Kind == kind && strings.Contains(ev.Message, words) })
}

func stateEvents(evs []store.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == "state" {
			out = append(out, ev.Message)
		}
	}
	return out
}

// onlyPrefix reports whether every operation is on a member named
// prefix….
func onlyPrefix(ops []string, prefix string) bool {
	for _, op := range ops {
		if f := strings.Fields(op); len(f) < 2 || !strings.HasPrefix(f[1], prefix) {
			return false
		}
	}
	return true
}

// TestEachExtensionNamedOnlyInItsFile: adding each extension touched
// its own file and nothing else. Every .go file of the repository is
// walked; a string literal that is exactly one of the names the
// extensions register (the strategy's, the step's and its hook list's,
// the substrate's, the stage kind's and its state's) may only be in
// the file that registers it. The description in this package's test
// names them inside a longer literal, as an operator writes them.
func TestEachExtensionNamedOnlyInItsFile(t *testing.T) {
	x, ok := step.ExtraOf(extension.Promoting)
	if !ok {
		t.Fatal("the step is not registered")
	}
	k, ok := config.LookupStageKind(extension.StageCheckpoint)
	if !ok {
		t.Fatal("the stage kind is not registered")
	}
	if _, ok := strategy.Lookup(extension.Reverse); !ok {
		t.Fatal("the strategy is not registered")
	}
	if _, err := substrate.Lookup(extension.InMemory); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("internal", "testenv", "extension")
	own := map[string]string{ // a name -> the only file that may spell it
		extension.Reverse:                             "strategy.go",
		string(extension.Promoting):                   "step.go",
		strings.TrimPrefix(x.Hooks, config.StepHooks): "step.go",
		extension.InMemory:                            "substrate.go",
		extension.StageCheckpoint:                     "stage.go",
		k.State:                                       "stage.go",
	}
	seen := map[string]int{}
	sourcetree.Walk(t, nil, func(rel string, fset *token.FileSet, f *ast.File) {
		sourcetree.StringLits(f, func(lit *ast.BasicLit, v string) {
			file, ok := own[v]
			switch {
			case !ok:
			case rel != filepath.Join(dir, file):
				t.Errorf("%s: %s names the extension %q, which only %s may spell (the others ask its registry)", fset.Position(lit.Pos()), rel, v, filepath.Join(dir, file))
			default:
				seen[v]++
			}
		})
	})
	for v, file := range own {
		if seen[v] != 1 {
			t.Errorf("%q is spelled %d times in %s; want once, where it is registered", v, seen[v], file)
		}
	}
}

// TestCheckpointValidated: the stage kind's rules are config's, at the
// stage's line and key, like the built-in kinds': its name, its one
// call, the keys it does not take; an unknown kind lists it.
func TestCheckpointValidated(t *testing.T) {
	const good = `{stage: checkpoint, name: before-api, component: db, calls: [{http: "%[1]s/checkpoint", method: POST}]}`
	for _, tc := range []struct {
		name, stage, want string
	}{
		{"no name", `{stage: checkpoint, component: db, calls: [{http: "http://x/c"}]}`,
			"ext.yaml:34: releases[1].flow[1].name: must be set: a stage of kind checkpoint is named (its state is checkpointing-NAME)"},
		{"two calls", `{stage: checkpoint, name: c, component: db, calls: [{http: "http://x/c"}, {http: "http://x/d"}]}`,
			"ext.yaml:34: releases[1].flow[1].calls: a checkpoint is one call (it has 2)"},
		{"a gate", `{stage: checkpoint, name: c, component: db, calls: [{http: "http://x/c"}], gate: {http: "http://x/g"}}`,
			"releases[1].flow[1].gate: the checkpoint stage takes no gate"},
		{"no component", `{stage: checkpoint, name: c, calls: [{http: "http://x/c"}]}`,
			"releases[1].flow[1].component: must name the component whose running member (.Any) the stage's calls are made against (known: api, db)"},
		{"an unknown kind", `{stage: checkpoints, name: c}`,
			`releases[1].flow[1].stage: unknown stage "checkpoints"; known: expand, phase, rollout, migrate, finalize, contract, hosts, action, checkpoint`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desc := strings.Replace(description("http://x"), fmt.Sprintf(good, "http://x"), tc.stage, 1)
			_, err := config.Parse([]byte(desc), "ext.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant a problem %q", err, tc.want)
			}
		})
	}
	if _, err := config.Parse([]byte(description("http://x")), "ext.yaml"); err != nil {
		t.Errorf("the good description: %v", err)
	}
}
