package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
)

// TestOperatorCommands drives one live cluster through the CLI as an
// operator would: the preflight and each refusal (an unhealthy
// cluster, a corrupted artifact, a second upgrade, a changed
// description, an abort after the end), each checked for its message
// and for having changed nothing; then pause and resume of a running
// upgrade, and an abort that rolls it back.
func TestOperatorCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster")
	}
	cl := startCluster(t, demo.ClusterOptions{Soak: time.Second, Deadline: 20 * time.Second, GateDeadline: 20 * time.Second}, "1.0.1", "2.0.0")
	ctx := context.Background()

	t.Run("every listing as JSON", func(t *testing.T) {
		var p plan.Plan
		jsonOut(t, cl, &p, "plan", "--to", "2.0.0")
		if p.To != "2.0.0" || len(p.Phases) != 2 || len(p.Phases[0].Batches) != 3 || p.Phases[0].Quorum != 2 {
			t.Errorf("plan: %+v", p)
		}
		var vv []engine.ComponentVersions
		jsonOut(t, cl, &vv, "versions")
		if len(vv) != 2 || vv[0].Versions["1.0.0"] != 3 || vv[1].Versions["1.0.0"] != 4 {
			t.Errorf("versions: %+v", vv)
		}
		var mv []engine.MemberView
		jsonOut(t, cl, &mv, "members")
		if len(mv) != 7 || mv[0].Name != "kv-1" || mv[0].Status != "healthy" || mv[0].Running != "1.0.0" {
			t.Errorf("members: %+v", mv)
		}
		var rv []engine.ReleaseView
		jsonOut(t, cl, &rv, "releases", "list")
		states := map[string]string{}
		for _, r := range rv {
			states[r.Version] = r.State
		}
		if states["1.0.0"] != "active" || states["1.0.1"] != "available" || states["2.0.0"] != "available" {
			t.Errorf("releases: %+v", rv)
		}
		var v struct {
			Valid   bool `json:"valid"`
			Members int  `json:"members"`
		}
		jsonOut(t, cl, &v, "validate")
		if !v.Valid || v.Members != 7 {
			t.Errorf("validate: %+v", v)
		}
	})

	t.Run("health passes on a healthy cluster", func(t *testing.T) {
		out, code := ferry(t, cl, "health", "--to", "2.0.0")
		if code != 0 || strings.Contains(out, "FAIL") {
			t.Fatalf("exit %d\n%s", code, out)
		}
		for _, want := range []string{"member kv-1 healthy", "cluster gate kv", "upgrade path to 2.0.0", "artifact of api 2.0.0", "sha256 matches", "artifact of kv 1.0.0"} {
			if !strings.Contains(out, want) {
				t.Errorf("health output lacks %q\n%s", want, out)
			}
		}
	})

	t.Run("start refused on an unhealthy cluster, nothing changed", func(t *testing.T) {
		api2 := cl.Members[4]
		if api2.Name != "api-2" {
			t.Fatalf("member order changed: %s", api2.Name)
		}
		if err := cl.Driver.Stop(ctx, api2); err != nil {
			t.Fatal(err)
		}
		out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		if code != 5 || !strings.Contains(out, "preflight failed") || !strings.Contains(out, "FAIL  member api-2 healthy") || !strings.Contains(out, "nothing was changed") {
			t.Errorf("exit %d, want 5 and the failed check named\n%s", code, out)
		}
		if _, ok := status(t, cl); ok {
			t.Errorf("a refused start left an upgrade record")
		}
		expectOn(t, cl, map[string]string{"api-2": "1.0.0 (not running)"}, "1.0.0")
		out, code = ferry(t, cl, "health")
		if code != 1 || !strings.Contains(out, "member api-2 healthy") || !strings.Contains(out, "FAIL") {
			t.Errorf("health: exit %d, want 1 with api-2 failing\n%s", code, out)
		}
		// Put it back as it was.
		art, err := engineArtifact(cl, "api", "1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Driver.Start(ctx, api2, art); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "api-2 healthy again", func() bool {
			_, code := ferry(t, cl, "health")
			return code == 0
		})
	})

	t.Run("start refused when an artifact's checksum is wrong", func(t *testing.T) {
		p := cl.Config.ResolvePath(cl.Config.Release("2.0.0").Artifacts["*"].Path)
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(append([]byte{}, orig...), 0), 0o755); err != nil {
			t.Fatal(err)
		}
		out, code := ferry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		if err := os.WriteFile(p, orig, 0o755); err != nil {
			t.Fatal(err)
		}
		if code != 5 || !strings.Contains(out, "FAIL  artifact of kv 2.0.0") || !strings.Contains(out, "the catalog says") {
			t.Errorf("exit %d, want 5 naming the artifact\n%s", code, out)
		}
		if _, ok := status(t, cl); ok {
			t.Errorf("a refused start left an upgrade record")
		}
	})

	t.Run("a second start and a changed description are refused while an upgrade runs", func(t *testing.T) {
		// An upgrade whose ferry died: it is in progress, driven by no one.
		runAndKillWhen(t, cl, []string{"upgrade", "start", "--to", "1.0.1", "-q"}, func() bool {
			u, ok := status(t, cl)
			return ok && u.State == upgrade.Upgrading("kv")
		})
		before, _ := status(t, cl)
		out, code := ferry(t, cl, "upgrade", "start", "--to", "1.0.1", "-q")
		if code != 3 || !strings.Contains(out, "already in progress") || !strings.Contains(out, before.ID) || !strings.Contains(out, "ferry upgrade resume") {
			t.Errorf("second start: exit %d, want 3 naming %s\n%s", code, before.ID, out)
		}
		changed := filepath.Join(cl.Dir, "changed.yaml")
		b, _ := os.ReadFile(cl.File)
		if err := os.WriteFile(changed, append(b, []byte("# an edit\n")...), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range [][]string{{"upgrade", "resume", "-q"}, {"upgrade", "abort", "-q"}, {"upgrade", "pause"}} {
			out, code := ferry(t, cl, append([]string{"-f", changed}, cmd...)...)
			if code != 3 || !strings.Contains(out, "cluster locked by an upgrade in progress") || !strings.Contains(out, "changed since upgrade "+before.ID) {
				t.Errorf("%v with a changed description: exit %d, want 3 and the lock named\n%s", cmd, code, out)
			}
		}
		after, _ := status(t, cl)
		if after.Intent != before.Intent || after.State != before.State {
			t.Errorf("a refused command changed the record: intent %+v → %+v, state %s → %s", before.Intent, after.Intent, before.State, after.State)
		}
		out, code = ferry(t, cl, "upgrade", "resume", "-q")
		if code != 0 {
			t.Fatalf("resume with the original description: exit %d\n%s", code, out)
		}
		expectAllOn(t, cl, "1.0.1")
		out, code = ferry(t, cl, "upgrade", "abort")
		if code != 3 || !strings.Contains(out, "has ended (completed)") {
			t.Errorf("abort after the end: exit %d\n%s", code, out)
		}
	})

	t.Run("pause finishes the step in flight and holds; resume goes on (a patch downgrade)", func(t *testing.T) {
		fg := startFerry(t, cl, "upgrade", "start", "--to", "1.0.0", "-q")
		waitFor(t, 60*time.Second, "the upgrade moving", func() bool {
			u, ok := status(t, cl)
			return ok && u.To == "1.0.0" && u.State.Kind == upgrade.KindUpgrading
		})
		if out, code := ferry(t, cl, "upgrade", "pause"); code != 0 || !strings.Contains(out, "pause of upgrade") {
			t.Fatalf("pause: exit %d\n%s", code, out)
		}
		var paused upgrade.Upgrade
		waitFor(t, 60*time.Second, "paused", func() bool {
			paused, _ = status(t, cl)
			return paused.State == upgrade.StatePaused
		})
		for _, m := range paused.Members {
			if m.Step.InFlight() {
				t.Errorf("paused with %s in flight (%s)", m.Name, m.Step)
			}
		}
		// Held: for two seconds (twenty ticks) no member moves.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			u, _ := status(t, cl)
			for n, m := range u.Members {
				if m.Step != paused.Members[n].Step {
					t.Fatalf("%s moved while paused: %s → %s", n, paused.Members[n].Step, m.Step)
				}
			}
		}
		if out, code := ferry(t, cl, "upgrade", "pause"); code != 3 || !strings.Contains(out, "already paused") {
			t.Errorf("second pause: exit %d\n%s", code, out)
		}
		if out, code := ferry(t, cl, "upgrade", "resume"); code != 0 || !strings.Contains(out, "resume of upgrade") {
			t.Fatalf("resume: exit %d\n%s", code, out)
		}
		if code, out := fg.wait(t); code != 0 {
			t.Fatalf("the foreground upgrade: exit %d\n%s", code, out)
		}
		expectAllOn(t, cl, "1.0.0")
	})

	t.Run("abort rolls back a running upgrade", func(t *testing.T) {
		fg := startFerry(t, cl, "upgrade", "start", "--to", "2.0.0", "-q")
		waitFor(t, 60*time.Second, "kv-1 done", func() bool {
			u, ok := status(t, cl)
			return ok && u.To == "2.0.0" && u.Members["kv-1"] != nil && u.Members["kv-1"].Step == upgrade.StepDone
		})
		if out, code := ferry(t, cl, "upgrade", "abort"); code != 0 || !strings.Contains(out, "abort of upgrade") {
			t.Fatalf("abort: exit %d\n%s", code, out)
		}
		code, out := fg.wait(t)
		u, _ := status(t, cl)
		if u.State != upgrade.StateRolledBack || u.Reason != "aborted by the operator" {
			t.Fatalf("after abort: %s (%s); foreground exit %d\n%s", u.State, u.Reason, code, out)
		}
		if code != 4 {
			t.Errorf("the foreground 'upgrade start' exit %d, want 4 (not completed)", code)
		}
		expectAllOn(t, cl, "1.0.0")
		out, _ = ferry(t, cl, "events")
		if !strings.Contains(out, "abort requested by the operator") || !strings.Contains(out, "rolling-back") {
			t.Errorf("events do not tell the abort:\n%s", out)
		}
	})
}

// jsonOut runs a ferry listing with -o json and decodes it into v.
func jsonOut(t *testing.T, cl *demo.Cluster, v any, args ...string) {
	t.Helper()
	out, code := ferry(t, cl, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("ferry %v -o json: exit %d\n%s", args, code, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("ferry %v -o json: %v\n%s", args, err, out)
	}
}
