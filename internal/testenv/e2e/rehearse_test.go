package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/rehearsal"
	"github.com/ferry-upgrade/ferry/internal/surface/demo"
	"github.com/ferry-upgrade/ferry/internal/surface/rehearse"
)

// rehearsalGroups are the seeds TestRehearse runs `ferry rehearse`
// with on the sample cluster (CockroachDB's mixedversion tests run
// several seeded plans the same way), chosen so that each moment of an
// abort is drawn: 1 aborts after the kv phase, 3 after the api phase,
// 10 before any member moves, 2 and 4 not at all.
// Each group is rehearsed in turn on a cluster of its own, the groups
// side by side (the last one then rehearses 2.0.0-mixbad).
var rehearsalGroups = [][]uint64{{1, 2, 10}, {3, 4}}

// mixbadFlow lets the api tier go first, so that new api members meet
// the old kv store: the mixed state the 2.0.0-mixbad build cannot
// serve in.
const mixbadFlow = `[{stage: phase, component: api}, {stage: phase, component: kv}]`

// bareCluster is the sample cluster's description with its agent and
// load balancer running and no member: what `ferry rehearse` brings up
// itself (releases 1.0.0, 2.0.0, and 2.0.0-mixbad with the api first).
func bareCluster(t *testing.T) *demo.Cluster {
	t.Helper()
	return startCluster(t, demo.ClusterOptions{Bare: true, Soak: 300 * time.Millisecond, Releases: []demo.Release{
		{Version: "1.0.0", Path: bin.sample["1.0.0"]},
		{Version: "2.0.0", Path: bin.sample["2.0.0"], UpgradeFrom: []string{"1.0.x"}},
		{Version: "2.0.0-mixbad", Path: bin.sample["2.0.0-mixbad"], UpgradeFrom: []string{"1.0.x"}, Flow: mixbadFlow},
	}})
}

// rehearseOn runs `ferry rehearse` on the cluster's description and
// returns its output, exit code and report.
func rehearseOn(t *testing.T, cl *demo.Cluster, to string, seed uint64) (string, int, rehearse.Report) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "rehearsal.json")
	began := time.Now()
	out, code := ferry(t, cl, "rehearse", "--to", to, "--seed", fmt.Sprint(seed), "--report", report, "--window", "1s", "--quiet", "500ms")
	t.Logf("ferry rehearse --to %s --seed %d: exit %d in %s\n%s", to, seed, code, time.Since(began).Round(time.Millisecond), out)
	var rep rehearse.Report
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the report: %v", err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("the report: %v", err)
	}
	if txt, err := os.ReadFile(strings.TrimSuffix(report, ".json") + ".txt"); err != nil || !strings.Contains(string(txt), rep.Plan) {
		t.Errorf("the text summary beside the report lacks the plan (%v):\n%s", err, txt)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != rep.Plan || !strings.HasPrefix(first, fmt.Sprintf("seed %d; plan: ", seed)) {
		t.Errorf("first line %q, want the plan with the seed (%q)", first, rep.Plan)
	}
	return out, code, rep
}

// TestRehearse runs `ferry rehearse` on the sample cluster with five
// seeds: every stage the schedule lists is checked and passes, the
// members move in the order the seed chose, the copy is stopped at the
// end; then the release with a mixed-version incompatibility is caught
// in the mixed state after the api phase, named, and rolled back. Two
// clusters rehearse side by side, each its runs in turn.
func TestRehearse(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts real clusters")
	}
	began := time.Now()
	var mu sync.Mutex
	aborts := map[string]bool{}
	t.Run("clusters", func(t *testing.T) {
		for i, seeds := range rehearsalGroups {
			t.Run(fmt.Sprintf("cluster-%d", i+1), func(t *testing.T) {
				t.Parallel()
				cl := bareCluster(t)
				for _, seed := range seeds {
					t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
						out, code, rep := rehearseOn(t, cl, "2.0.0", seed)
						if code != 0 || !rep.Passed {
							t.Fatalf("exit %d, passed %v: %s", code, rep.Passed, rep.Failed)
						}
						var got []string
						for _, s := range rep.Stages {
							got = append(got, s.Stage)
							var names []string
							for _, c := range s.Checks {
								names = append(names, c.Name)
								switch {
								case !c.OK && c.Advisory:
									t.Logf("stage %q: advisory check %q: %s", s.Stage, c.Name, c.Detail)
								case !c.OK:
									t.Errorf("stage %q check %q failed: %s", s.Stage, c.Name, c.Detail)
								}
							}
							if want := []string{"kv members", "kv cluster", "api members", "traffic", "latency"}; !slices.Equal(names, want) {
								t.Errorf("stage %q made the checks %v, want %v", s.Stage, names, want)
							}
						}
						if want := rep.Schedule.Stages(); !slices.Equal(got, want) {
							t.Errorf("stages checked %v, want the schedule's %v", got, want)
						}
						mu.Lock()
						aborts[rep.Schedule.AbortAt] = true
						mu.Unlock()
						if rep.Schedule.AbortAt != "" {
							if len(rep.Runs) != 2 || rep.Runs[0].State != "rolled-back" || rep.Runs[1].State != "completed" {
								t.Errorf("aborted at %q: upgrades %+v, want rolled-back then completed", rep.Schedule.AbortAt, rep.Runs)
							}
						}
						final := rep.Stages[len(rep.Stages)-1]
						if final.Stage != rehearsal.StageFinal || final.Versions["kv"]["2.0.0"] != 3 || final.Versions["api"]["2.0.0"] != 4 {
							t.Errorf("after finalize: %v, want kv 2.0.0×3, api 2.0.0×4", final.Versions)
						}
						// The api tier's first batch is the first of the seed's order
						// (its strategy keeps the plan's order: no role, none down).
						last := rep.Runs[len(rep.Runs)-1]
						var api []string
						for _, o := range rep.Schedule.Order {
							if o.Name == "api" {
								api = o.Members
							}
						}
						for _, b := range last.Batches {
							if b.Component == "api" {
								if b.Members[0] != api[0] {
									t.Errorf("api's first batch %v, want %s first (the seed's order %v)", b.Members, api[0], api)
								}
								break
							}
						}
						if !strings.Contains(out, "the copy is stopped") {
							t.Errorf("the copy was not stopped")
						}
						for n, v := range versions(t, cl) {
							if !strings.HasSuffix(v, "(not running)") {
								t.Errorf("%s still runs %s after the rehearsal", n, v)
							}
						}
					})
				}
				if i == 0 {
					// Pointed at a cluster whose members run, rehearse
					// refuses before it touches anything, naming them.
					t.Run("a cluster in service is refused", func(t *testing.T) {
						if out, code := ferry(t, cl, "cluster", "up", "--version", "1.0.0"); code != 0 {
							t.Fatalf("cluster up: exit %d\n%s", code, out)
						}
						out, code := ferry(t, cl, "rehearse", "--to", "2.0.0", "--seed", "1")
						if code == 0 || !strings.Contains(out, "kv-1 (1.0.0)") || !strings.Contains(out, "already run(s)") {
							t.Errorf("rehearse of a running cluster: exit %d, want refused naming kv-1\n%s", code, out)
						}
						expectAllOn(t, cl, "1.0.0")
						if out, code := ferry(t, cl, "cluster", "down"); code != 0 {
							t.Fatalf("cluster down: exit %d\n%s", code, out)
						}
					})
				}
				if i == len(rehearsalGroups)-1 {
					t.Run("mixbad", func(t *testing.T) {
						out, code, rep := rehearseOn(t, cl, "2.0.0-mixbad", 2)
						if code != 1 || rep.Passed {
							t.Fatalf("exit %d, passed %v: the mixed-version incompatibility went through", code, rep.Passed)
						}
						want := `stage "after phase api": check "traffic": `
						if !strings.HasPrefix(rep.Failed, want) || !strings.Contains(out, "rehearsal failed (seed 2): "+want) {
							t.Errorf("failure %q, want it to name %s", rep.Failed, want)
						}
						var mixed *rehearse.Stage
						for i, s := range rep.Stages {
							if s.Stage == "after phase api" && !s.Passed {
								mixed = &rep.Stages[i]
							}
						}
						if mixed == nil || mixed.Versions["api"]["2.0.0-mixbad"] != 4 || mixed.Versions["kv"]["1.0.0"] != 3 {
							t.Fatalf("the failed mixed stage %+v, want api 2.0.0-mixbad×4 with kv 1.0.0×3", mixed)
						}
						last := rep.Stages[len(rep.Stages)-1]
						if last.Stage != rehearsal.StageRollback || !last.Passed || last.Versions["api"]["1.0.0"] != 4 {
							t.Errorf("last stage %+v, want the rollback's checks passing on api 1.0.0×4", last)
						}
					})
				}
			})
		}
	})
	if want := []string{"", "after phase api", "after phase kv", rehearsal.StageBefore}; !slices.Equal(slices.Sorted(maps.Keys(aborts)), want) {
		t.Errorf("the seeds aborted at %v, want each of %v (the seeds' choices changed: choose others)", slices.Sorted(maps.Keys(aborts)), want)
	}
	t.Logf("five seeds and the mixed-version release rehearsed in %s", time.Since(began).Round(time.Second))
}
