package upgrade

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const awayCluster = `cluster: t
hosts: [{name: h1, agent: 127.0.0.1:7101}]
components:
  - name: kv
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members:
      - {name: kv-1, host: h1, address: 127.0.0.1:8101}
      - {name: kv-2, host: h1, address: 127.0.0.1:8102}
      - {name: kv-3, host: h1, address: 127.0.0.1:8103}
    health:
      member: {http: "http://{{.Address}}/ready"}
    soak: 2s
    deadline: 5s
`

func awayWorld(t *testing.T) *world {
	t.Helper()
	w := describedWorld(t, awayCluster)
	w.ready = time.Second
	if err := w.begin("2.0.0"); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestFerryAway is a table of times ferry itself was away (killed and
// resumed, or stopped and continued) at each step of kv-1's move, for
// longer than its 5s deadline: every deadline moves by the time ferry
// could not check, and the upgrade completes without a rollback. A
// member restarted while ferry was away has its soak broken (a new
// process), and still completes.
func TestFerryAway(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      MemberStep
		away    time.Duration
		kill    bool
		restart bool // kv-1 restarts on its own while ferry is away
	}{
		{"killed while starting, 8s", StepStarting, 8 * time.Second, true, false},
		{"stopped while starting, 8s", StepStarting, 8 * time.Second, false, false},
		{"killed while soaking, 40s", StepSoaking, 40 * time.Second, true, false},
		{"stopped while soaking, 40s", StepSoaking, 40 * time.Second, false, false},
		{"killed while stopping, 6s", StepStopping, 6 * time.Second, true, false},
		{"stopped while soaking, kv-1 restarted meanwhile", StepSoaking, 8 * time.Second, false, true},
		{"killed while soaking, kv-1 restarted meanwhile", StepSoaking, 8 * time.Second, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := awayWorld(t)
			w.run(time.Minute, func() bool { return w.u.Members["kv-1"].Step == tc.at })
			if tc.restart {
				m := w.members["kv-1"]
				m.started, m.healthySince = w.now.Add(tc.away/2), w.now.Add(tc.away/2)
			}
			w.away(tc.away, tc.kill)
			w.run(10*time.Minute, nil)
			if w.u.State != StateCompleted || w.u.RollingBack() {
				t.Fatalf("ended %s (%s), want completed\n%s", w.u.State, w.u.Reason, w.trace.String())
			}
			if broke := w.u.Members["kv-1"].SoakBroke; broke != tc.restart {
				t.Errorf("kv-1's soak broke: %v, want %v\n%s", broke, tc.restart, w.trace.String())
			}
			if !strings.Contains(w.trace.String(), "ferry could not check for") {
				t.Errorf("the time ferry could not check is not said\n%s", w.trace.String())
			}
		})
	}
}

// TestFerryKillStorm kills ferry every 0.3 to 4s (seeded, printed),
// each time down for 50 to 500ms: each resume goes on where the last
// left off (no soak restarted by it, no deadline run out), so the
// upgrade completes without a rollback.
func TestFerryKillStorm(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	w := awayWorld(t)
	kills := 0
	for !w.u.State.Terminal() && kills < 200 {
		life := time.Duration(300+rng.IntN(3700)) * time.Millisecond
		end := w.now.Add(life)
		w.run(life, func() bool { return !w.now.Before(end) })
		if w.u.State.Terminal() {
			break
		}
		w.away(time.Duration(50+rng.IntN(450))*time.Millisecond, true)
		kills++
	}
	t.Logf("%d kills", kills)
	if w.u.State != StateCompleted || w.u.RollingBack() {
		t.Fatalf("seed %d: ended %s (%s) after %d kills, want completed", seed, w.u.State, w.u.Reason, kills)
	}
	for n, m := range w.u.Members {
		if m.SoakBroke {
			t.Errorf("seed %d: %s's soak broke, though it never restarted", seed, n)
		}
	}
}
