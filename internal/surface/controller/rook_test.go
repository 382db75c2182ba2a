package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/surface/controller"
	"github.com/ferry-upgrade/ferry/internal/testenv/ferrybuild"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// rookDir is the example this file runs.
const rookDir = "../../../examples/rook"

// cephStatusAddr is where examples/rook/cluster.yaml expects cephstatus;
// the test runs it on a free port and writes that one in its place.
const cephStatusAddr = "127.0.0.1:9480"

// The example's releases and their digests (cluster.yaml).
const (
	rookGood   = "19.2.1"
	rookBad    = "19.2.2"
	rookDigest = "1921192119211921192119211921192119211921192119211921192119211921"
	// rookGoodFerry is what 19.2.1 requires of ferry; release rookNext
	// requires rookNextFerry, newer than this tree's ferry.
	rookGoodFerry = "0.9.0"
	rookNext      = "20.2.0"
	rookNextFerry = "99.0.0"
)

// TestRookExampleValid: the example's description is valid as written,
// and its components are what README.md says (without FERRY_KUBE too).
func TestRookExampleValid(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(rookDir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(b, "examples/rook/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, comp := range c.ComponentsInOrder() {
		got = append(got, comp.Name+"/"+string(comp.Strategy.Type)+"/"+comp.Workload.Per)
	}
	if want := "mon/one-at-a-time/workload mgr/canary/workload osd/by-domain/workload rgw/canary/ mds/canary/workload"; strings.Join(got, " ") != want {
		t.Errorf("components %q, want %q", got, want)
	}
}

// TestRookExample runs examples/rook on the real control plane (kwok
// nodes in four zones) through the Upgrade resource and the controller:
// Ceph 18.2.4 to 19.2.1, the mons one at a time, the manager, noout
// set, the OSDs one zone at a time in growing batches, noout unset,
// rgw, mds. Ceph cannot run here and kwok's pods run no containers:
// the checks, ok-to-stop and noout are answered by cephstatus, the
// example's stand-in, from the pods (it is not Ceph). The controller
// is SIGKILLed in the middle of the OSD phase and a second replica
// takes the upgrade up from the resource's status. The order of states
// and batches is asserted from the events; the invariants (quorum never
// lost, at most 2 OSDs down, in one zone at a time, noout unset at the
// end) from the events' order, cephstatus's own record and a watch of
// the pods of the test's own. 19.2.1 requires ferry 0.9.0, which the
// controller meets: its Upgrade says so (FerryUnderstands) before any
// daemon moves. Then release 19.2.2, whose OSD image never gets Ready,
// is rolled back by image. Then release 20.2.0, which requires ferry
// 99.0.0: the controller (0.9.0) refuses it, naming both versions, and
// nothing of the cluster moves; given the 99.0.0 image, it moves its
// own Deployment (the test plays the kubelet, as TestControllerFirst
// does: it starts a ferry linked as 99.0.0 and stops the old one), and
// the new controller takes the upgrade up and moves the first mon; the
// test ends there.
func TestRookExample(t *testing.T) {
	began := time.Now()
	env := kubetest.Start(t, kubetest.Options{})
	sa := install(t, env)
	// The ferry release 20.2.0 requires, built while the cluster comes up.
	type built struct {
		bin ferrybuild.Binary
		err error
	}
	nextFerry, buildDone := make(chan built, 1), make(chan struct{})
	buildDir := t.TempDir()
	t.Cleanup(func() { <-buildDone }) // before buildDir's removal
	go func() {
		defer close(buildDone)
		b, err := ferrybuild.Build(buildDir, rookNextFerry)
		nextFerry <- built{b, err}
	}()
	// The controller's own Deployment (deploy/controller.yaml's, one
	// replica): a stand-in on a kwok node, which the controller moves to
	// a newer ferry first; its replicas run as processes of the test.
	oldFerryImage := "registry.local/ferry:" + buildinfo.Release()
	for _, f := range []string{"nodes.yaml", "workloads.yaml"} {
		b, err := os.ReadFile(filepath.Join(rookDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Apply(string(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Apply(controllerDeployment(t, oldFerryImage)); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(5*time.Minute, "28 daemons' pods Ready on 20 nodes", func() (bool, string, error) {
		out, err := env.Kubectl("get", "pods", "-n", "rook-ceph", "--no-headers")
		n := strings.Count(out, " 1/1 ")
		return n == 28, fmt.Sprintf("%d Ready", n), err
	}); err != nil {
		t.Fatal(err)
	}
	ceph := startCephStatus(t, env)
	if err := env.WaitUntil(time.Minute, "cephstatus: HEALTH_OK", func() (bool, string, error) {
		var s cephStatus
		err := ceph.get("/status", &s)
		return err == nil && s.Health.Status == "HEALTH_OK", fmt.Sprintf("%+v %v", s.Health, err), nil
	}); err != nil {
		t.Fatal(err)
	}
	desc, err := os.ReadFile(filepath.Join(rookDir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	description := strings.ReplaceAll(string(desc), cephStatusAddr, ceph.addr)
	events := watchUpgradeEvents(t, env)
	obs := observeRook(t, env)
	t.Logf("cluster up, cephstatus HEALTH_OK at %s, in %s", ceph.addr, time.Since(began).Round(time.Millisecond))

	// 19.2.1, the controller killed in the middle of the OSD phase.
	first := startReplica(t, sa, "controller-a")
	start := time.Now()
	if err := env.Apply(upgradeResource("ceph-19-2-1", description, rookGood)); err != nil {
		t.Fatal(err)
	}
	var before controller.Upgrade
	// Bounds for a loaded machine (its upgrade takes 1 to 3 minutes at
	// a load average of 25 to 30 on 2 cores), not expectations.
	if err := env.WaitUntil(8*time.Minute, "7 OSDs done", func() (bool, string, error) {
		before = getUpgrade(t, env, "ceph-19-2-1")
		done := 0
		for _, m := range before.Status.Members {
			if m.Component == "osd" && m.Step == "done" {
				done++
			}
		}
		if before.Status.State == "failed" || before.Status.State == "rolling-back" {
			return false, "", fmt.Errorf("%s: %s", before.Status.State, before.Status.Reason)
		}
		return done >= 7, fmt.Sprintf("state %s batch %s progress %s", before.Status.State, before.Status.Batch, before.Status.Progress), nil
	}); err != nil {
		first.dump()
		t.Fatal(err)
	}
	columns, _ := env.Kubectl("get", "upgrades", "-n", "ferry-system")
	status, _ := ceph.raw("/status")
	uids := daemonPods(t, env)
	first.kill()
	killed := time.Now()
	t.Logf("kubectl get upgrades, before the kill (%s after the start):\n%s\ncephstatus /status then: %s",
		killed.Sub(start).Round(time.Millisecond), columns, status)
	second := startReplica(t, sa, "controller-b")
	after := waitUpgrade(t, env, "ceph-19-2-1", "completed", second)
	took := time.Since(start)
	seen := obs.take()
	var rec cephRecord
	if err := ceph.get("/record", &rec); err != nil {
		t.Fatal(err)
	}
	evs := events.of(t, "ceph-19-2-1", after.Status.LastSeq)
	t.Logf("completed in %s (%s after the kill); observer: %+v; cephstatus record: %+v", took.Round(time.Millisecond),
		time.Since(killed).Round(time.Millisecond), seen, rec)
	logEvents(t, evs)
	if !strings.Contains(second.output(), "controller: starting") {
		t.Errorf("the second controller did not say it started")
	}

	// Ferry first: the release requires a ferry the controller meets,
	// and the Upgrade said so before any daemon moved (the first save
	// the watch saw with a member past pending carried the condition).
	c := condition(after, controller.FerryCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ControllerUnderstands" ||
		c.Message != fmt.Sprintf("ferry %s, %s required", buildinfo.Release(), rookGoodFerry) {
		t.Errorf("condition %s: %+v; want true: ferry %s, %s required", controller.FerryCondition, c, buildinfo.Release(), rookGoodFerry)
	}
	if f := after.Status.Ferry; f == nil || f.Controller != buildinfo.Release() || f.Requires != rookGoodFerry || len(f.Effects) != 0 {
		t.Errorf("status.ferry %+v: want the controller's release %s, %s required, no effect", f, buildinfo.Release(), rookGoodFerry)
	}
	if fc, ok := events.atFirstMove("ceph-19-2-1"); !ok || fc == nil || fc.Status != metav1.ConditionTrue {
		t.Errorf("when the first daemon moved, condition %s was %+v (seen %t): want true before any daemon moves", controller.FerryCondition, fc, ok)
	} else {
		t.Logf("when the first daemon moved: %s=%s %s: %s", fc.Type, fc.Status, fc.Reason, fc.Message)
	}
	t.Logf("controller processes that exited on their own (a lease lost on a loaded machine) and were started again: %d, %d",
		first.restarted(), second.restarted())

	// The order, from the events: each component's phase in turn, the
	// mons alone in their batches, the OSDs a zone at a time in growing
	// batches between noout set and unset.
	if got := upgradingStates(evs); strings.Join(got, " ") != "mon mgr osd rgw mds" {
		t.Errorf("the phases in the events: %q, want mon mgr osd rgw mds", got)
	}
	batches := batchesOf(evs, false)
	for _, b := range batches["mon"] {
		if len(b) != 1 {
			t.Errorf("a mon batch of %d: %v; one at a time", len(b), b)
		}
	}
	if n := len(batches["mon"]); n != 3 {
		t.Errorf("%d mon batches, want 3", n)
	}
	checkOSDBatches(t, batches["osd"], 2)
	nooutSet, firstOSD, lastOSD, nooutUnset, rgw := -1, -1, -1, -1, -1
	for i, e := range evs {
		switch {
		case e.Kind == "effect" && strings.Contains(e.Message, "opened (phase osd): pre_phase hook 1 of osd") && nooutSet < 0:
			nooutSet = i
		case e.Kind == "batch" && strings.HasPrefix(e.Message, "osd batch 1: "):
			firstOSD = i
		case e.Kind == "batch" && strings.HasPrefix(e.Message, "osd batch ") && strings.Contains(e.Message, " done in "):
			lastOSD = i
		case e.Kind == "effect" && nooutSet >= 0 && strings.HasPrefix(e.Message, effectID(evs[nooutSet].Message)+" undone"):
			nooutUnset = i
		case e.Kind == "state" && strings.Contains(e.Message, "→ upgrading-rgw"):
			rgw = i
		}
	}
	if !(nooutSet >= 0 && nooutSet < firstOSD && firstOSD < lastOSD && lastOSD < nooutUnset && nooutUnset < rgw) {
		t.Errorf("events: noout set #%d, first osd batch #%d, last osd batch done #%d, noout undone #%d, rgw's phase #%d: want in that order",
			nooutSet, firstOSD, lastOSD, nooutUnset, rgw)
	}

	// The invariants, seen by the pods' watch and by the stand-in.
	checkRookInvariants(t, seen, rec, 2)
	if len(rec.Flags) != 2 || !rec.Flags[0].Set || rec.Flags[1].Set || rec.Flags[0].OSDsDown != 0 || rec.Flags[1].OSDsDown != 0 {
		t.Errorf("noout's changes in cephstatus: %+v; want set, then unset, each with every OSD up", rec.Flags)
	} else if !rec.Flags[0].At.Before(seen.FirstOSDDown) || !rec.Flags[1].At.After(seen.LastOSDUp) {
		t.Errorf("noout set at %s, unset at %s; the pods' watch saw the first OSD down at %s, the last up again at %s",
			rec.Flags[0].At, rec.Flags[1].At, seen.FirstOSDDown, seen.LastOSDUp)
	}

	// The versions, and what ferry changed on the way put back.
	checkRookVersions(t, env, rookGood)
	for _, c := range []struct{ what, args, want string }{
		{"the OSDs' strategies", "deployments -l app=rook-ceph-osd -o jsonpath={.items[*].spec.strategy.type}", strings.TrimSpace(strings.Repeat("Recreate ", 20))},
		{"the OSDs' replicas", "deployments -l app=rook-ceph-osd -o jsonpath={.items[*].spec.replicas}", strings.TrimSpace(strings.Repeat("1 ", 20))},
		{"ferry's stop annotations", "deployments -o jsonpath={.items[*].metadata.annotations.ferry\\.dev/stopped-replicas}", ""},
		{"rgw's strategy", "deployment/rook-ceph-rgw-my-store-a -o jsonpath={.spec.strategy.rollingUpdate.maxSurge}/{.spec.strategy.rollingUpdate.maxUnavailable}", "25%/25%"},
		{"rgw's pause", "deployment/rook-ceph-rgw-my-store-a -o jsonpath={.spec.paused}", ""},
	} {
		if got, err := env.Kubectl(append([]string{"get", "-n", "rook-ceph"}, strings.Fields(c.args)...)...); err != nil || got != c.want {
			t.Errorf("%s after the upgrade: %q (%v), want %q", c.what, got, err, c.want)
		}
	}
	checkNoUndoOwed(t, after)

	// The daemons done before the kill were not replaced again.
	now := daemonPods(t, env)
	replaced := 0
	for _, m := range before.Status.Members {
		if m.Step != "done" || m.Component == "rgw" {
			continue
		}
		replaced++
		if uids[m.Name] == "" || now[m.Name] != uids[m.Name] {
			t.Errorf("%s, done before the kill, was replaced after it (%s → %s)", m.Name, uids[m.Name], now[m.Name])
		}
	}
	t.Logf("%d daemons done before the kill kept their pods", replaced)

	// 19.2.2: the first OSD never gets Ready; rolled back by image.
	obs.take()
	start = time.Now()
	if err := env.Apply(upgradeResource("ceph-19-2-2", description, rookBad)); err != nil {
		t.Fatal(err)
	}
	bad := waitUpgrade(t, env, "ceph-19-2-2", "rolled-back", second)
	took = time.Since(start)
	seen = obs.take()
	if err := ceph.get("/record", &rec); err != nil {
		t.Fatal(err)
	}
	evs = events.of(t, "ceph-19-2-2", bad.Status.LastSeq)
	t.Logf("rolled back in %s: %s; observer: %+v", took.Round(time.Millisecond), bad.Status.Reason, seen)
	logEvents(t, evs)
	if !regexp.MustCompile(`member rook-ceph-osd-\d+: not healthy on 19\.2\.2 within healthy_deadline (1m0s|60s)`).MatchString(bad.Status.Reason) {
		t.Errorf("the reason %q does not name the OSD and its deadline", bad.Status.Reason)
	}
	forward, back := batchesOf(evs, false), batchesOf(evs, true)
	if len(forward["osd"]) != 1 || len(forward["osd"][0]) != 1 {
		t.Errorf("osd batches before the failure: %v; want the canary alone", forward["osd"])
	}
	if len(back["osd"]) != 1 || len(back["mgr"]) != 1 || len(back["mon"]) != 3 {
		t.Errorf("rollback batches: %v; want the osd canary, the mgr and the 3 mons", back)
	}
	checkRookInvariants(t, seen, rec, 1)
	if len(rec.Flags) != 4 || !rec.Flags[2].Set || rec.Flags[3].Set {
		t.Errorf("noout's changes in cephstatus: %+v; want it set and unset again around the failed OSD phase and its rollback", rec.Flags)
	}
	checkRookVersions(t, env, rookGood)
	checkNoUndoOwed(t, bad)

	next := <-nextFerry
	if next.err != nil {
		t.Fatal(next.err)
	}
	rookFerryFirst(t, env, sa, description, second, events, obs, next.bin)
	t.Logf("the whole test: %s", time.Since(began).Round(time.Millisecond))
}

// rookFerryFirst: release 20.2.0 requires ferry 99.0.0. The
// controller, driving (ferry 0.9.0), refuses it naming both versions,
// and nothing of the cluster moves; given the 99.0.0 image
// (spec.ferryImage), it moves its own Deployment first and the replica
// on 99.0.0 (started by the test, playing the kubelet) takes the
// upgrade up; the test ends once that one has moved the first mon.
func rookFerryFirst(t *testing.T, env *kubetest.Env, sa, description string, driving *replica, events *upgradeEvents, obs *rookObserver, next ferrybuild.Binary) {
	const name = "ceph-20-2-0"
	deps, uids := rookDeployments(t, env), daemonPods(t, env)
	obs.take()
	start := time.Now()
	if err := env.Apply(upgradeResource(name, description, rookNext)); err != nil {
		t.Fatal(err)
	}
	var u controller.Upgrade
	if err := env.WaitUntil(2*time.Minute, "the condition FerryUnderstands false", func() (bool, string, error) {
		u = getUpgrade(t, env, name)
		c := condition(u, controller.FerryCondition)
		return c != nil && c.Status == metav1.ConditionFalse, fmt.Sprintf("state %q conditions %+v", u.Status.State, u.Status.Conditions), nil
	}); err != nil {
		driving.dump()
		t.Fatal(err)
	}
	c := condition(u, controller.FerryCondition)
	columns, _ := env.Kubectl("get", "upgrades", "-n", "ferry-system")
	t.Logf("%s, %s after its apply: state %s; %s=%s %s: %s\nkubectl get upgrades:\n%s", name, time.Since(start).Round(time.Millisecond),
		u.Status.State, c.Type, c.Status, c.Reason, c.Message, columns)
	both := fmt.Sprintf("release %s requires ferry %s; this controller is ferry %s", rookNext, rookNextFerry, buildinfo.Release())
	if c.Reason != "NeedsNewerController" || !strings.HasPrefix(c.Message, both+": it moves nothing of the cluster") {
		t.Errorf("the condition does not refuse naming both versions (%q): %+v", both, c)
	}
	if u.Status.State != "ferry-first" || len(u.Status.Members) != 0 || len(u.Status.Record) != 0 {
		t.Errorf("state %q, %d members, record %s: want ferry-first, nothing begun", u.Status.State, len(u.Status.Members), u.Status.Record)
	}
	if f := u.Status.Ferry; f == nil || f.Controller != buildinfo.Release() || f.Requires != rookNextFerry {
		t.Errorf("status.ferry %+v: want the controller's release %s and the %s required", f, buildinfo.Release(), rookNextFerry)
	}
	// Nothing of the cluster moved, by the API: every Deployment's
	// generation, image and replicas as they were, every daemon's pod
	// the same. (The pods' watch, below, covers the whole time up to
	// the old controller's exit.)
	if now := rookDeployments(t, env); now != deps {
		t.Errorf("the Deployments changed while the controller refused %s:\n%s\nthen\n%s", rookNext, deps, now)
	}
	if now := daemonPods(t, env); !maps.Equal(now, uids) {
		t.Errorf("daemons' pods replaced while the controller refused %s: %v, then %v", rookNext, uids, now)
	}

	// The operator names the newer ferry's image: the controller moves
	// its own Deployment first.
	// The kubelet's stand-in (TestControllerFirst's) starts a replica of
	// the newer ferry and stops the old one with SIGTERM, which releases
	// its lease.
	k := playKubelet(t, env, "registry.local/ferry:"+buildinfo.Release(),
		func() interface{ output() string } { return startReplicaOf(t, next.Path, sa, "controller-c") }, driving.term)
	defer k.stop()
	image := "registry.local/ferry:" + rookNextFerry + "@sha256:" + ferryDigest
	moved := time.Now()
	if _, err := env.Kubectl("patch", "upgrade", name, "-n", "ferry-system", "--type=merge", "-p", `{"spec":{"ferryImage":"`+image+`"}}`); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitUntil(4*time.Minute, "rook-ceph-mon-a done on "+rookNext+" by the "+rookNextFerry+" controller", func() (bool, string, error) {
		u = getUpgrade(t, env, name)
		if u.Status.State == "failed" || u.Status.State == "refused" || u.Status.State == "rolling-back" {
			return false, "", fmt.Errorf("%s: %s", u.Status.State, u.Status.Reason)
		}
		done := slices.ContainsFunc(u.Status.Members, func(m controller.MemberStatus) bool { return m.Name == "rook-ceph-mon-a" && m.Step == "done" })
		return done, fmt.Sprintf("state %q waiting %q ferry %+v", u.Status.State, u.Status.Waiting, u.Status.Ferry), nil
	}); err != nil {
		t.Fatal(err)
	}
	seen := obs.take()
	k.mu.Lock()
	changed, started, stopped, nextReplica, images := k.changed, k.started, k.stopped, k.next, slices.Clone(k.images)
	k.mu.Unlock()
	t.Logf("the image named; %s after: the Deployment moved after %s, the %s controller started after %s, the old one stopped after %s; the first daemon down after %s",
		time.Since(moved).Round(time.Millisecond), changed.Sub(moved).Round(time.Millisecond), rookNextFerry, started.Sub(moved).Round(time.Millisecond),
		stopped.Sub(moved).Round(time.Millisecond), seen.FirstDown.Sub(moved).Round(time.Millisecond))
	if img := deploymentImage(t, env); img != image || len(images) != 2 {
		t.Errorf("the Deployment's images: %v, now %q; want %s, then %s", images, img, images[0], image)
	}
	if nextReplica == nil || !strings.Contains(nextReplica.output(), "controller: starting") {
		t.Fatalf("the %s controller did not start", rookNextFerry)
	}
	if !strings.Contains(driving.output(), "moved the controller's own Deployment") {
		t.Errorf("the old controller does not say it moved its Deployment")
	}
	if f := u.Status.Ferry; f == nil || f.Controller != rookNextFerry || len(f.Effects) != 0 || f.Image != image {
		t.Errorf("status.ferry %+v: want controller %s, its image, no effect owed", f, rookNextFerry)
	}
	if fc, ok := events.atFirstMove(name); !ok || fc == nil || fc.Status != metav1.ConditionTrue ||
		fc.Message != fmt.Sprintf("ferry %s, %s required", rookNextFerry, rookNextFerry) {
		t.Errorf("when the first daemon moved, condition %s was %+v (seen %t): want true, said by the %s controller", controller.FerryCondition, fc, ok, rookNextFerry)
	}
	// The order, seen by the pods' watch: no daemon down from the
	// Upgrade's apply until the old controller had exited.
	if seen.FirstDown.IsZero() || !seen.FirstDown.After(stopped) {
		t.Errorf("the first daemon went down at %s; the old controller stopped at %s: want after", seen.FirstDown.Format(time.StampMilli), stopped.Format(time.StampMilli))
	}
	// And said by the events: the refusal, the controller's move, the
	// move kept by the new controller, then the members.
	evs := events.of(t, name, u.Status.LastSeq)
	refusedAt, movedAt, keptAt, memberAt := 0, 0, 0, 0
	for _, ev := range evs {
		seq := int(ev.Seq)
		switch {
		case ev.Kind == "ferry" && strings.Contains(ev.Message, both+": it moves nothing") && refusedAt == 0:
			refusedAt = seq
		case ev.Kind == "ferry" && strings.Contains(ev.Message, image) && strings.Contains(ev.Message, "journaled with its undo"):
			movedAt = seq
		case ev.Kind == "ferry" && strings.Contains(ev.Message, "kept"):
			keptAt = seq
		case ev.Member != "" && memberAt == 0:
			memberAt = seq
		}
	}
	logEvents(t, evs)
	if !(refusedAt > 0 && refusedAt < movedAt && movedAt < keptAt && keptAt < memberAt) {
		t.Errorf("events: refused #%d, the Deployment moved #%d, kept #%d, the first member's #%d: want in that order", refusedAt, movedAt, keptAt, memberAt)
	}
	if img, _ := env.Kubectl("get", "deployment", "rook-ceph-mon-a", "-n", "rook-ceph", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != "registry.local/ceph/ceph:v"+rookNext+"@sha256:"+strings.Repeat("20", 32) {
		t.Errorf("rook-ceph-mon-a's image: %q, want %s's", img, rookNext)
	}
}

// rookDeployments says, one line each, every Deployment of rook-ceph:
// its name, generation (any change of its spec bumps it), image and
// replicas.
func rookDeployments(t *testing.T, env *kubetest.Env) string {
	t.Helper()
	out, err := env.Kubectl("get", "deployments", "-n", "rook-ceph", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.generation} {.spec.template.spec.containers[0].image} {.spec.replicas}{"\n"}{end}`)
	if err != nil || strings.Count(out, "\n") != 27 {
		t.Fatalf("the Deployments of rook-ceph (want 27): %v\n%s", err, out)
	}
	return out
}

// cephStatusProc is the example's stand-in, running.
type cephStatusProc struct{ addr string }

// startCephStatus builds examples/rook/cephstatus and runs it on a free
// port against env's API server, until the test ends.
func startCephStatus(t *testing.T, env *kubetest.Env) *cephStatusProc {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cephstatus")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ferry-upgrade/ferry/examples/rook/cephstatus").CombinedOutput(); err != nil {
		t.Fatalf("build cephstatus: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-kubeconfig", env.Kubeconfig, "-namespace", "rook-ceph", "-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := lockedWriter{&sync.Mutex{}, &bytes.Buffer{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("cephstatus log:\n%s", logs.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case l := <-lines:
		addr, ok := strings.CutPrefix(l, "cephstatus: listening on ")
		if !ok {
			t.Fatalf("cephstatus said %q", l)
		}
		return &cephStatusProc{addr: strings.Fields(addr)[0]}
	case <-time.After(time.Minute):
		t.Fatalf("cephstatus did not say where it listens within a minute:\n%s", logs.String())
	}
	return nil
}

func (c *cephStatusProc) raw(path string) (string, error) {
	resp, err := http.Get("http://" + c.addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func (c *cephStatusProc) get(path string, v any) error {
	b, err := c.raw(path)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(b), v)
}

// cephStatus is what the test reads of cephstatus's /status.
type cephStatus struct {
	Health struct {
		Status string   `json:"status"`
		Checks []string `json:"checks"`
	} `json:"health"`
}

// cephRecord is cephstatus's /record.
type cephRecord struct {
	Flags []struct {
		At       time.Time `json:"at"`
		Set      bool      `json:"set"`
		OSDsDown int       `json:"osds_down"`
	} `json:"flags"`
	MinQuorum          int            `json:"min_quorum"`
	NumMons            int            `json:"num_mons"`
	QuorumLost         int            `json:"quorum_lost"`
	MaxOSDsDown        int            `json:"max_osds_down"`
	MaxOSDsDownPerZone map[string]int `json:"max_osds_down_per_zone"`
	MaxZonesDown       int            `json:"max_zones_down"`
	DownWithoutNoout   []string       `json:"down_without_noout"`
	MarkedOut          []string       `json:"marked_out"`
	PGsInactive        int            `json:"pgs_inactive"`
	Noout              bool           `json:"noout"`
}

// rookSeen is what the test's own watch of the pods saw between two
// takes: the fewest mons and rgw pods Ready at once, the most OSDs
// down at once in one zone, zones with an OSD down at once, mds down,
// when the first OSD went down and the last came back, when the first
// daemon of any kind went down.
type rookSeen struct {
	MinMonsUp, MinRGWReady   int
	MaxOSDsDownPerZone       map[string]int
	MaxZonesDown, MaxMDSDown int
	FirstOSDDown, LastOSDUp  time.Time
	FirstDown                time.Time
	Rounds                   int
	downNow                  int
	worst                    string
}

type rookObserver struct {
	mu   sync.Mutex
	seen rookSeen
	zone map[string]string // OSD id → its node's zone
}

// observeRook watches the pods of rook-ceph (a watch sees every
// transition; a poll would miss a pod kwok replaces within
// milliseconds), independently of ferry and of cephstatus.
func observeRook(t *testing.T, env *kubetest.Env) *rookObserver {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeZone := map[string]string{}
	for _, n := range nodes.Items {
		nodeZone[n.Name] = n.Labels["topology.kubernetes.io/zone"]
	}
	o := &rookObserver{zone: map[string]string{}}
	pods, err := cs.CoreV1().Pods("rook-ceph").List(ctx, metav1.ListOptions{LabelSelector: "app=rook-ceph-osd"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		o.zone[p.Labels["ceph-osd-id"]] = nodeZone[p.Spec.NodeName]
	}
	o.take()
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		pods := map[string]corev1.Pod{}
		for ctx.Err() == nil {
			list, err := cs.CoreV1().Pods("rook-ceph").List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			clear(pods)
			for _, p := range list.Items {
				pods[p.Name] = p
			}
			o.observe(pods)
			w, err := cs.CoreV1().Pods("rook-ceph").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(pods, p.Name)
				} else {
					pods[p.Name] = *p
				}
				o.observe(pods)
			}
			w.Stop()
		}
	}()
	return o
}

// take returns what was seen since the last take and starts anew.
func (o *rookObserver) take() rookSeen {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen
	o.seen = rookSeen{MinMonsUp: 3, MinRGWReady: 2, MaxOSDsDownPerZone: map[string]int{}}
	return s
}

func (o *rookObserver) observe(pods map[string]corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := &o.seen
	s.Rounds++
	up := map[string]bool{} // kind/id with a Ready pod
	rgw := 0
	for _, pod := range pods {
		p := &pod
		if !ready(p) {
			continue
		}
		switch app := p.Labels["app"]; app {
		case "rook-ceph-mon":
			up["mon/"+p.Labels["mon"]] = true
		case "rook-ceph-osd":
			up["osd/"+p.Labels["ceph-osd-id"]] = true
		case "rook-ceph-mds":
			up["mds/"+p.Labels["mds"]] = true
		case "rook-ceph-mgr":
			up["mgr"] = true
		case "rook-ceph-rgw":
			rgw++
		}
	}
	mons := 0
	for _, id := range []string{"a", "b", "c"} {
		if up["mon/"+id] {
			mons++
		}
	}
	s.MinMonsUp = min(s.MinMonsUp, mons)
	s.MinRGWReady = min(s.MinRGWReady, rgw)
	mds := 0
	for _, id := range []string{"myfs-a", "myfs-b"} {
		if !up["mds/"+id] {
			mds++
		}
	}
	s.MaxMDSDown = max(s.MaxMDSDown, mds)
	down := map[string][]string{}
	n := 0
	for id, z := range o.zone {
		if !up["osd/"+id] {
			down[z] = append(down[z], "osd."+id)
			n++
		}
	}
	for z, ids := range down {
		if len(ids) > s.MaxOSDsDownPerZone[z] {
			s.MaxOSDsDownPerZone[z] = len(ids)
			sort.Strings(ids)
			s.worst = fmt.Sprintf("%s: %v", z, ids)
		}
	}
	s.MaxZonesDown = max(s.MaxZonesDown, len(down))
	now := time.Now()
	if n > 0 && s.FirstOSDDown.IsZero() {
		s.FirstOSDDown = now
	}
	if n == 0 && s.downNow > 0 {
		s.LastOSDUp = now
	}
	s.downNow = n
	if s.FirstDown.IsZero() && (n > 0 || mons < 3 || mds > 0 || rgw < 2 || !up["mgr"]) {
		s.FirstDown = now
	}
}

func checkRookInvariants(t *testing.T, seen rookSeen, rec cephRecord, perZone int) {
	t.Helper()
	if seen.Rounds == 0 {
		t.Errorf("the pods' watch saw nothing")
	}
	if seen.MinMonsUp < 2 || rec.MinQuorum < 2 || rec.QuorumLost != 0 {
		t.Errorf("quorum: at least %d mons up to the pods' watch, %d in quorum to cephstatus (lost %d times); want 2 of 3 always",
			seen.MinMonsUp, rec.MinQuorum, rec.QuorumLost)
	}
	for z, n := range seen.MaxOSDsDownPerZone {
		if n > perZone {
			t.Errorf("%d OSDs down at once in %s (the pods' watch; worst: %s); at most %d", n, z, seen.worst, perZone)
		}
	}
	for z, n := range rec.MaxOSDsDownPerZone {
		if n > 2 {
			t.Errorf("%d OSDs down at once in %s (cephstatus); at most 2", n, z)
		}
	}
	if seen.MaxZonesDown > 1 || rec.MaxZonesDown > 1 || rec.PGsInactive != 0 {
		t.Errorf("zones with an OSD down at once: %d (the pods' watch), %d (cephstatus), PGs inactive %d times; one zone at a time",
			seen.MaxZonesDown, rec.MaxZonesDown, rec.PGsInactive)
	}
	if seen.MaxMDSDown > 1 || seen.MinRGWReady < 1 {
		t.Errorf("mds down at once %d, rgw pods Ready at least %d of 2: max_unavailable 1 for each", seen.MaxMDSDown, seen.MinRGWReady)
	}
	if len(rec.DownWithoutNoout) > 0 || len(rec.MarkedOut) > 0 || rec.Noout {
		t.Errorf("cephstatus: OSDs down without noout %v, marked out %v, noout set at the end %t", rec.DownWithoutNoout, rec.MarkedOut, rec.Noout)
	}
}

// checkRookVersions: every daemon's pod Ready on version's image,
// pinned by its digest.
func checkRookVersions(t *testing.T, env *kubetest.Env, version string) {
	t.Helper()
	want := "registry.local/ceph/ceph:v" + version + "@sha256:" + rookDigest
	if err := env.WaitUntil(time.Minute, "28 pods Ready on "+version, func() (bool, string, error) {
		out, err := env.Kubectl("get", "pods", "-n", "rook-ceph", "-o",
			`jsonpath={range .items[*]}{.metadata.deletionTimestamp}{.spec.containers[0].image} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		good := strings.Count(out, want+" True\n")
		return good == 28 && strings.Count(out, "\n") == 28, out, err
	}); err != nil {
		t.Error(err)
	}
}

func checkNoUndoOwed(t *testing.T, u controller.Upgrade) {
	t.Helper()
	var rec struct {
		Effects []json.RawMessage `json:"effects"`
	}
	if err := json.Unmarshal(u.Status.Record, &rec); err != nil || len(rec.Effects) > 0 {
		t.Errorf("the record of %s still owes undos: %s (%v)", u.Name, rec.Effects, err)
	}
}

// waitUpgrade waits for the Upgrade name to end in state want; past
// its bound, the replica driving it dumps its goroutines.
func waitUpgrade(t *testing.T, env *kubetest.Env, name, want string, driving *replica) controller.Upgrade {
	t.Helper()
	var u controller.Upgrade
	if err := env.WaitUntil(8*time.Minute, name+" "+want, func() (bool, string, error) {
		u = getUpgrade(t, env, name)
		for _, end := range []string{"completed", "failed", "rolled-back", "refused"} {
			if u.Status.State == end && end != want {
				return false, "", fmt.Errorf("ended %s: %s", end, u.Status.Reason)
			}
		}
		return u.Status.State == want, fmt.Sprintf("state %s batch %s progress %s waiting %s", u.Status.State, u.Status.Batch, u.Status.Progress, u.Status.Waiting), nil
	}); err != nil {
		driving.dump()
		t.Fatal(err)
	}
	return u
}

// daemonPods maps each daemon's Deployment (a member's name) to its
// pod's UID.
func daemonPods(t *testing.T, env *kubetest.Env) map[string]string {
	t.Helper()
	out, err := env.Kubectl("get", "pods", "-n", "rook-ceph", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && p.DeletionTimestamp == nil {
			m[strings.TrimSuffix(ref.Name, "-"+p.Labels["pod-template-hash"])] = string(p.UID)
		}
	}
	return m
}

// upgradeEvents collects every event of each Upgrade from a watch of
// the resources: a status keeps the last events only, and every save
// the watch sees brings the new ones.
type upgradeEvents struct {
	mu  sync.Mutex
	evs map[string]map[uint64]controller.Event
	// firstMove is, for each Upgrade, its condition FerryUnderstands in
	// the first save that showed a member past pending.
	firstMove map[string]*metav1.Condition
}

func watchUpgradeEvents(t *testing.T, env *kubetest.Env) *upgradeEvents {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := dc.Resource(schema.GroupVersionResource{Group: controller.GroupVersion.Group, Version: controller.GroupVersion.Version, Resource: "upgrades"}).Namespace("ferry-system")
	ue := &upgradeEvents{evs: map[string]map[uint64]controller.Event{}, firstMove: map[string]*metav1.Condition{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	take := func(o *unstructured.Unstructured) {
		b, err := json.Marshal(o.Object)
		if err != nil {
			return
		}
		var u controller.Upgrade
		if json.Unmarshal(b, &u) != nil {
			return
		}
		ue.mu.Lock()
		defer ue.mu.Unlock()
		m := ue.evs[u.Name]
		if m == nil {
			m = map[uint64]controller.Event{}
			ue.evs[u.Name] = m
		}
		for _, e := range u.Status.Events {
			m[e.Seq] = e
		}
		if _, ok := ue.firstMove[u.Name]; !ok && slices.ContainsFunc(u.Status.Members, func(m controller.MemberStatus) bool { return m.Step != "pending" }) {
			ue.firstMove[u.Name] = condition(u, controller.FerryCondition)
		}
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			l, err := res.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for i := range l.Items {
				take(&l.Items[i])
			}
			w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				if o, ok := ev.Object.(*unstructured.Unstructured); ok {
					take(o)
				}
			}
			w.Stop()
		}
	}()
	return ue
}

// of returns the events of Upgrade name 1 .. last, in order; one that
// no save the watch saw carried fails the test.
func (ue *upgradeEvents) of(t *testing.T, name string, last uint64) []controller.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ue.mu.Lock()
		var out []controller.Event
		var missing []uint64
		for seq := uint64(1); seq <= last; seq++ {
			if e, ok := ue.evs[name][seq]; ok {
				out = append(out, e)
			} else {
				missing = append(missing, seq)
			}
		}
		ue.mu.Unlock()
		if len(missing) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of the %d events of %s not seen in any save the watch saw: %v", len(missing), last, name, missing)
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// atFirstMove is Upgrade name's condition FerryUnderstands in the first
// save the watch saw with a member past pending (nil: none then); false
// if it saw none.
func (ue *upgradeEvents) atFirstMove(name string) (*metav1.Condition, bool) {
	ue.mu.Lock()
	defer ue.mu.Unlock()
	c, ok := ue.firstMove[name]
	return c, ok
}

func logEvents(t *testing.T, evs []controller.Event) {
	var b strings.Builder
	for _, e := range evs {
		if e.Kind == "health" || e.Kind == "wait" {
			continue
		}
		fmt.Fprintf(&b, "%s %-6s %s\n", e.Time.Format("15:04:05"), e.Kind, e.Message)
	}
	t.Logf("events (without health and wait):\n%s", b.String())
}

// upgradingStates lists the components whose phase the events' states
// enter, in order.
func upgradingStates(evs []controller.Event) []string {
	var out []string
	re := regexp.MustCompile(`→ upgrading-([a-z]+)`)
	for _, e := range evs {
		if m := re.FindStringSubmatch(e.Message); e.Kind == "state" && m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// batchesOf lists, per component, the members of each batch formed, in
// order: the upgrade's, or its rollback's.
func batchesOf(evs []controller.Event, rollback bool) map[string][][]string {
	re := regexp.MustCompile(`^([a-z]+) (rollback )?batch \d+: ([^(]+) \(size`)
	out := map[string][][]string{}
	for _, e := range evs {
		m := re.FindStringSubmatch(e.Message)
		if e.Kind != "batch" || m == nil || (m[2] != "") != rollback {
			continue
		}
		out[m[1]] = append(out[m[1]], strings.Split(strings.TrimSpace(m[3]), ", "))
	}
	return out
}

// checkOSDBatches: every OSD once; each batch within one zone, the
// zones one after the other, each begun with a batch of one (the
// canary), none larger than most, and some of most (it grew).
func checkOSDBatches(t *testing.T, batches [][]string, most int) {
	t.Helper()
	zoneOf := func(member string) string { // rook-ceph-osd-N is on kwok-node-N, zone N/5
		n, _ := strconv.Atoi(strings.TrimPrefix(member, "rook-ceph-osd-"))
		return "zone-" + string(rune('a'+n/5))
	}
	var zones []string
	seen := map[string]bool{}
	for _, b := range batches {
		z := zoneOf(b[0])
		for _, m := range b {
			if zoneOf(m) != z {
				t.Errorf("osd batch %v spans zones", b)
			}
			if seen[m] {
				t.Errorf("%s in two batches", m)
			}
			seen[m] = true
		}
		if len(b) > most {
			t.Errorf("osd batch %v: more than %d", b, most)
		}
		if len(zones) == 0 || zones[len(zones)-1] != z {
			if slices.Contains(zones, z) {
				t.Errorf("%s moved again after another zone: %v", z, batches)
			}
			zones = append(zones, z)
			if len(b) != 1 {
				t.Errorf("%s began with %v, not a canary of one", z, b)
			}
		}
	}
	if !slices.ContainsFunc(batches, func(b []string) bool { return len(b) == most }) {
		t.Errorf("no osd batch of %d: the canary never grew: %v", most, batches)
	}
	if len(seen) != 20 || len(zones) != 4 {
		t.Errorf("%d OSDs in %d zones moved; want 20 in 4: %v", len(seen), len(zones), batches)
	}
}

// effectID is the id of the effect an "effect eN opened ..." event
// names: "effect eN".
func effectID(msg string) string {
	f := strings.Fields(msg)
	if len(f) < 2 {
		return msg
	}
	return f[0] + " " + f[1]
}

// String is what was written so far.
func (w lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// replica is one replica of the controller, as a Deployment runs it: a
// 'ferry controller' process, started again when it exits on its own
// (a replica that loses its lease, as on a loaded machine, exits and
// its pod is restarted), until the test kills it with SIGKILL.
type replica struct {
	bin, name, kubeconfig string
	out                   lockedWriter
	exited                chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd
	stop     bool
	restarts int
}

func startReplica(t *testing.T, kubeconfig, name string) *replica {
	t.Helper()
	return startReplicaOf(t, ferryBin, kubeconfig, name)
}

// startReplicaOf is startReplica with another ferry binary.
func startReplicaOf(t *testing.T, bin, kubeconfig, name string) *replica {
	t.Helper()
	r := &replica{bin: bin, name: name, kubeconfig: kubeconfig, out: lockedWriter{&sync.Mutex{}, &bytes.Buffer{}}, exited: make(chan struct{})}
	go r.run()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("controller %s output:\n%s", name, r.output())
		}
	})
	return r
}

func (r *replica) run() {
	defer close(r.exited)
	for {
		r.mu.Lock()
		if r.stop {
			r.mu.Unlock()
			return
		}
		// The default lease (15 s): on a loaded machine a 4 s lease's
		// renewal comes late, and the fence it lapses stops the engine.
		cmd := exec.Command(r.bin, "controller", "--kubeconfig", r.kubeconfig, "--namespace", "ferry-system",
			"--leader-elect", "-v")
		cmd.Env = append(os.Environ(), "HOSTNAME="+r.name)
		cmd.Stdout, cmd.Stderr = r.out, r.out
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(r.out, "--- replica %s: %v\n", r.name, err)
			r.mu.Unlock()
			return
		}
		r.cmd = cmd
		r.mu.Unlock()
		err := cmd.Wait()
		r.mu.Lock()
		if !r.stop {
			r.restarts++
			fmt.Fprintf(r.out, "--- replica %s: the process exited on its own (%v): started again\n", r.name, err)
		}
		r.mu.Unlock()
	}
}

// dump makes the replica's process print its goroutines and exit
// (SIGQUIT), for a test that timed out; it is not started again.
func (r *replica) dump() {
	r.mu.Lock()
	r.stop = true
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(syscall.SIGQUIT)
	}
	r.mu.Unlock()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
	}
}

// term stops the replica's process with SIGTERM, as a pod's
// termination does (it releases its lease); it is not started again.
func (r *replica) term() {
	r.mu.Lock()
	r.stop = true
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	r.mu.Unlock()
	<-r.exited
}

// kill SIGKILLs the replica's process; it is not started again.
func (r *replica) kill() {
	r.mu.Lock()
	r.stop = true
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
	}
	r.mu.Unlock()
	<-r.exited
}

func (r *replica) output() string { return r.out.String() }

func (r *replica) restarted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts
}
