package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// world is a stand-in cluster on a clock the test moves: 3 mons, a mgr
// and 4 OSDs, two per zone.
type world struct {
	t    *testing.T
	c    *cluster
	now  time.Time
	down map[string]bool // kind.id
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), down: map[string]bool{}}
	w.c = newCluster(config{MgrTakeover: time.Second, DownOut: 10 * time.Second, Recovery: time.Second, Backfill: 10 * time.Second},
		func() time.Time { return w.now })
	w.tick(0)
	w.tick(2 * time.Second)
	return w
}

// tick moves the clock by d and observes the pods.
func (w *world) tick(d time.Duration) {
	w.now = w.now.Add(d)
	var ps []pod
	for _, id := range []string{"a", "b", "c"} {
		ps = append(ps, pod{kind: "mon", id: id, deployment: "rook-ceph-mon-" + id, up: !w.down["mon."+id]})
	}
	ps = append(ps, pod{kind: "mgr", id: "a", deployment: "rook-ceph-mgr-a", up: !w.down["mgr.a"]})
	for i := range 4 {
		id := fmt.Sprint(i)
		ps = append(ps, pod{kind: "osd", id: id, deployment: "rook-ceph-osd-" + id, node: "node-" + id, up: !w.down["osd."+id]})
	}
	w.c.observe(ps, map[string]string{"node-0": "a", "node-1": "a", "node-2": "b", "node-3": "b"})
}

func (w *world) status() status {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.statusLocked()
}

func (w *world) state(kind, id string) string {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.daemonState(w.c.daemons[kind+"."+id], w.c.statusLocked())
}

func TestStandIn(t *testing.T) {
	w := newWorld(t)
	if s := w.status(); s.Health.Status != "HEALTH_OK" || !s.QuorumAll || !s.MgrMap.Available || !s.PGMap.ActiveClean {
		t.Fatalf("a healthy cluster: %+v", s)
	}

	// A mon down: quorum kept, not all in it; two down: quorum lost.
	w.down["mon.b"] = true
	w.tick(0)
	if s := w.status(); !s.quorum || s.QuorumAll || w.state("mon", "b") != "out of quorum" || s.Health.Status != "HEALTH_WARN" {
		t.Errorf("one mon down: %+v, mon.b %s", s, w.state("mon", "b"))
	}
	w.down["mon.c"] = true
	w.tick(0)
	if s := w.status(); s.quorum || s.Health.Status != "HEALTH_ERR" {
		t.Errorf("two mons down: %+v", s)
	}
	w.down = map[string]bool{}
	w.tick(0)
	if w.c.rec.MinQuorum != 1 || w.c.rec.QuorumLost != 1 {
		t.Errorf("record: min quorum %d, lost %d times; want 1, 1", w.c.rec.MinQuorum, w.c.rec.QuorumLost)
	}

	// The mgr is active only a while after it is up again.
	w.down["mgr.a"] = true
	w.tick(0)
	w.down["mgr.a"] = false
	w.tick(500 * time.Millisecond)
	if s := w.status(); s.MgrMap.Available || w.state("mgr", "a") != "standby" {
		t.Errorf("mgr just up: available %t, %s", s.MgrMap.Available, w.state("mgr", "a"))
	}
	w.tick(time.Second)
	if w.state("mgr", "a") != "active" {
		t.Errorf("mgr up for 1.5s: %s", w.state("mgr", "a"))
	}

	// noout set: an OSD down stays in; the PGs are clean a second after
	// it is up again.
	w.c.setFlag("noout", true)
	w.down["osd.1"] = true
	w.tick(0)
	w.tick(30 * time.Second)
	if s := w.status(); s.OSDMap.NumInOSDs != 4 || s.PGMap.ActiveClean || w.state("osd", "1") != "down+in" {
		t.Errorf("osd.1 down 30s with noout: %+v, %s", s.OSDMap, w.state("osd", "1"))
	}
	w.down["osd.1"] = false
	w.tick(0)
	if s := w.status(); s.PGMap.ActiveClean || s.PGMap.State != "active+recovering" {
		t.Errorf("osd.1 just up: %+v", s.PGMap)
	}
	w.tick(1100 * time.Millisecond)
	if s := w.status(); !s.PGMap.ActiveClean {
		t.Errorf("1.1s after every OSD is up: %+v", s.PGMap)
	}
	w.c.setFlag("noout", false)
	if len(w.c.rec.DownWithoutNoout) != 0 || len(w.c.rec.Flags) != 2 || !w.c.rec.Flags[0].Set || w.c.rec.Flags[1].Set {
		t.Errorf("record: %+v", w.c.rec)
	}

	// Without noout: recorded, marked out after 10s, backfill after.
	w.down["osd.2"] = true
	w.tick(0)
	w.tick(11 * time.Second)
	if s := w.status(); s.OSDMap.NumInOSDs != 3 || w.state("osd", "2") != "down+out" {
		t.Errorf("osd.2 down 11s without noout: %+v, %s", s.OSDMap, w.state("osd", "2"))
	}
	w.down["osd.2"] = false
	w.tick(0)
	w.tick(2 * time.Second)
	if s := w.status(); s.PGMap.ActiveClean || s.PGMap.State != "active+remapped+backfilling" {
		t.Errorf("2s after an OSD out came back: %+v", s.PGMap)
	}
	w.tick(9 * time.Second)
	if s := w.status(); !s.PGMap.ActiveClean {
		t.Errorf("11s after: %+v", s.PGMap)
	}
	if got, out := w.c.rec.DownWithoutNoout, w.c.rec.MarkedOut; len(got) != 1 || !strings.HasPrefix(got[0], "osd.2 at ") ||
		len(out) != 1 || !strings.HasPrefix(out[0], "osd.2 at ") {
		t.Errorf("record: down without noout %q, marked out %q", got, w.c.rec.MarkedOut)
	}

	// OSDs down in two zones at once: inactive PGs.
	w.c.setFlag("noout", true)
	w.down["osd.0"], w.down["osd.1"] = true, true
	w.tick(0)
	if s := w.status(); s.PGMap.Inactive != 0 {
		t.Errorf("two OSDs of one zone down: %+v", s.PGMap)
	}
	w.c.mu.Lock()
	okSameZone, okOtherZone := w.c.notOKToStop(w.c.daemons["osd.0"]), w.c.notOKToStop(w.c.daemons["osd.3"])
	okMon := w.c.notOKToStop(w.c.daemons["mon.a"])
	w.c.mu.Unlock()
	if okSameZone != "" || okOtherZone != "osd.3 (b): OSDs of a are down: placement groups would go inactive" || okMon != "" {
		t.Errorf("ok-to-stop with two OSDs of zone a down: osd.0 %q, osd.3 %q, mon.a %q", okSameZone, okOtherZone, okMon)
	}
	w.down["osd.3"] = true
	w.down["mon.b"] = true
	w.tick(0)
	w.c.mu.Lock()
	okMon = w.c.notOKToStop(w.c.daemons["mon.a"])
	w.c.mu.Unlock()
	if okMon != "stopping mon.a would leave 1 of 3 mons in quorum: no quorum" {
		t.Errorf("ok-to-stop mon.a with mon.b down: %q", okMon)
	}
	if s := w.status(); s.PGMap.Inactive == 0 || s.Health.Status != "HEALTH_ERR" {
		t.Errorf("OSDs of two zones down: %+v", s)
	}
	if r := w.c.rec; r.MaxZonesDown != 2 || r.MaxOSDsDownPerZone["a"] != 2 || r.MaxOSDsDownPerZone["b"] != 1 || r.PGsInactive != 1 || r.MaxOSDsDown != 3 {
		t.Errorf("record: %+v", r)
	}
}
