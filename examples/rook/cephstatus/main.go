// Command cephstatus is a stand-in for Ceph's own status, for the Rook
// example on a test control plane: Ceph cannot run there, and kwok's
// pods run no containers, so this program answers what `ceph status`
// would from the pods alone, watched through the API server. It is not
// Ceph, and imports nothing of ferry.
//
// What it answers, from the pods of the namespace labelled as Rook
// labels its daemons (app=rook-ceph-mon with mon=ID, rook-ceph-mgr with
// mgr=ID, rook-ceph-osd with ceph-osd-id=ID, rook-ceph-mds with mds=ID,
// rook-ceph-rgw with rgw=ID):
//
//   - a daemon is up while its pod is Running and Ready; a daemon once
//     seen stays known (a mon whose pod is gone is a mon down);
//   - the mons in quorum are the mons up, and there is a quorum while
//     they are more than half of the mons known;
//   - the manager is available (active) once a mgr has been up for
//     -mgr-takeover;
//   - an OSD down for -down-out while the noout flag is unset is marked
//     out, as Ceph's mon_osd_down_out_interval does (600 s in Ceph), and
//     its data is then recovered elsewhere: the placement groups are
//     active+clean only once every OSD has been up again for -recovery,
//     or for -backfill after an OSD was out;
//   - placement groups keep three copies, one per zone (the OSD's node's
//     topology.kubernetes.io/zone), with min_size 2: OSDs down in two
//     zones at once leave some inactive (no I/O);
//   - the noout flag is set by POST /flags/noout and unset by DELETE
//     (`ceph osd set noout` / `unset noout`), each change recorded.
//
// Endpoints: GET /status (the cluster, in the shape of `ceph status -f
// json` where it has one: health, monmap, quorum_names, mgrmap, osdmap,
// pgmap, with quorum_all and pgmap.active_clean added for checks that
// compare one field), GET /daemon/DEPLOYMENT (one daemon by its
// Deployment's name: its state, "in quorum", "active", "up+in" ...),
// GET /ok-to-stop/DEPLOYMENT (200, or 409 with why: `ceph mon|osd
// ok-to-stop`), POST and DELETE /flags/noout, GET /record (what it saw:
// the flag changes, the smallest quorum, the most OSDs down at once per
// zone, OSDs that went down while noout was unset).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster whose pods stand for Ceph's daemons")
	namespace := flag.String("namespace", "rook-ceph", "namespace of the daemons' pods")
	listen := flag.String("listen", "127.0.0.1:9480", "address to serve on (port 0: any; the address is printed)")
	cfg := defaultConfig()
	flag.DurationVar(&cfg.MgrTakeover, "mgr-takeover", cfg.MgrTakeover, "how long a mgr is up before it is active")
	flag.DurationVar(&cfg.DownOut, "down-out", cfg.DownOut, "how long an OSD is down, noout unset, before it is marked out")
	flag.DurationVar(&cfg.Recovery, "recovery", cfg.Recovery, "how long after every OSD is up the placement groups are clean")
	flag.DurationVar(&cfg.Backfill, "backfill", cfg.Backfill, "the same, once an OSD was out and its data moved")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *listen, cfg); err != nil {
		log.Fatalf("cephstatus: %v", err)
	}
}

func run(kubeconfig, namespace, listen string, cfg config) error {
	if kubeconfig == "" {
		return errors.New("no kubeconfig: give -kubeconfig or set KUBECONFIG")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c := newCluster(cfg, time.Now)
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	nodes := informers.NewSharedInformerFactory(cs, 0)
	podInf := pods.Core().V1().Pods().Informer()
	nodeInf := nodes.Core().V1().Nodes().Informer()
	// The pods as each notification left them, in the order they came:
	// the informer's store may be ahead of a notification (a pod already
	// replaced), and a daemon's restart must not be missed.
	var mu sync.Mutex
	seen := map[string]*corev1.Pod{}
	synced := false // the initial list taken in: no partial view is observed
	update := func() {
		mu.Lock()
		if !synced {
			mu.Unlock()
			return
		}
		ps := make([]*corev1.Pod, 0, len(seen))
		for _, p := range seen {
			ps = append(ps, p)
		}
		mu.Unlock()
		c.observe(daemonPods(ps), zones(nodeInf.GetStore()))
	}
	set := func(o any) {
		if p, ok := o.(*corev1.Pod); ok {
			mu.Lock()
			seen[p.Name] = p
			mu.Unlock()
		}
		update()
	}
	podReg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, o any) { set(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				mu.Lock()
				delete(seen, p.Name)
				mu.Unlock()
			}
			update()
		},
	})
	if err != nil {
		return err
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { update() }, UpdateFunc: func(_, _ any) { update() }, DeleteFunc: func(any) { update() },
	}); err != nil {
		return err
	}
	pods.Start(ctx.Done())
	nodes.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podReg.HasSynced, nodeInf.HasSynced) {
		return errors.New("the pods and nodes caches did not sync")
	}
	mu.Lock()
	synced = true
	mu.Unlock()
	update()
	go func() { // time-driven changes: a mgr's takeover, recovery, an OSD out
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				update()
			}
		}
	}()

	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("cephstatus: listening on %s (a stand-in for ceph status: the pods of %s, not Ceph)\n", l.Addr(), namespace)
	srv := &http.Server{Handler: c.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// config holds the stand-in's delays.
type config struct {
	MgrTakeover, DownOut, Recovery, Backfill time.Duration
}

func defaultConfig() config {
	return config{MgrTakeover: time.Second, DownOut: 10 * time.Second, Recovery: time.Second, Backfill: 10 * time.Second}
}

// The daemons' kinds, by their pods' app label, and the label that
// holds each one's id.
var idLabel = map[string]string{
	"rook-ceph-mon": "mon",
	"rook-ceph-mgr": "mgr",
	"rook-ceph-osd": "ceph-osd-id",
	"rook-ceph-mds": "mds",
	"rook-ceph-rgw": "rgw",
}

// pod is what the stand-in reads of a pod.
type pod struct {
	kind, id, deployment, node string
	up                         bool
}

// daemonPods is what the stand-in reads of the daemons' pods: those
// not being deleted, with Rook's labels.
func daemonPods(ps []*corev1.Pod) []pod {
	var out []pod
	for _, p := range ps {
		if p.DeletionTimestamp != nil {
			continue
		}
		label, ok := idLabel[p.Labels["app"]]
		if !ok || p.Labels[label] == "" {
			continue
		}
		out = append(out, pod{kind: strings.TrimPrefix(p.Labels["app"], "rook-ceph-"), id: p.Labels[label],
			deployment: deploymentOf(p), node: p.Spec.NodeName, up: ready(p)})
	}
	return out
}

// deploymentOf is the name of the Deployment a pod belongs to: its
// ReplicaSet's, less the pod template hash.
func deploymentOf(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return ""
	}
	return strings.TrimSuffix(ref.Name, "-"+p.Labels[appsv1.DefaultDeploymentUniqueLabelKey])
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func zones(s cache.Store) map[string]string {
	out := map[string]string{}
	for _, o := range s.List() {
		if n, ok := o.(*corev1.Node); ok {
			out[n.Name] = n.Labels["topology.kubernetes.io/zone"]
		}
	}
	return out
}

// daemon is one Ceph daemon as the stand-in knows it.
type daemon struct {
	Kind, ID, Deployment, Node, Zone string
	Up                               bool
	UpSince, DownSince               time.Time
	// Out: an OSD marked out (down too long without noout).
	Out bool
}

func (d *daemon) name() string { return d.Kind + "." + d.ID }

// cluster is the stand-in's state and its record.
type cluster struct {
	cfg config
	now func() time.Time

	mu      sync.Mutex
	daemons map[string]*daemon // by kind.id
	noout   bool
	// allUpSince: since when every OSD is up (zero while one is down);
	// backfill: an OSD was out since the PGs were last clean.
	allUpSince time.Time
	backfill   bool
	// lastQuorum, lastInactive: as last observed, to count changes.
	lastQuorum, lastInactive bool
	rec                      record
}

// record is what the stand-in saw: GET /record.
type record struct {
	Flags []flagChange `json:"flags"`
	// MinQuorum is the fewest mons in quorum seen, of NumMons;
	// QuorumLost counts the times the quorum was lost.
	MinQuorum  int `json:"min_quorum"`
	NumMons    int `json:"num_mons"`
	QuorumLost int `json:"quorum_lost"`
	// MaxOSDsDown is the most OSDs down at once; MaxOSDsDownPerZone the
	// most down at once in each zone; MaxZonesDown the most zones with
	// an OSD down at once.
	MaxOSDsDown        int            `json:"max_osds_down"`
	MaxOSDsDownPerZone map[string]int `json:"max_osds_down_per_zone"`
	MaxZonesDown       int            `json:"max_zones_down"`
	// DownWithoutNoout names the OSDs that went down while noout was
	// unset, with when; MarkedOut those marked out.
	DownWithoutNoout []string `json:"down_without_noout"`
	MarkedOut        []string `json:"marked_out"`
	// PGsInactive counts the times placement groups became inactive.
	PGsInactive int `json:"pgs_inactive"`
	// Noout: the flag is set now.
	Noout bool `json:"noout"`
}

type flagChange struct {
	At       time.Time `json:"at"`
	Flag     string    `json:"flag"`
	Set      bool      `json:"set"`
	OSDsUp   int       `json:"osds_up"`
	OSDsDown int       `json:"osds_down"`
}

func newCluster(cfg config, now func() time.Time) *cluster {
	return &cluster{cfg: cfg, now: now, daemons: map[string]*daemon{},
		rec: record{MinQuorum: -1, MaxOSDsDownPerZone: map[string]int{}, Flags: []flagChange{}, DownWithoutNoout: []string{}, MarkedOut: []string{}}}
}

// observe takes in the pods (and nodes' zones) as they are now.
func (c *cluster) observe(pods []pod, zoneOf map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	seen := map[string]bool{}
	for _, p := range pods {
		key := p.kind + "." + p.id
		d := c.daemons[key]
		if d == nil {
			d = &daemon{Kind: p.kind, ID: p.id}
			c.daemons[key] = d
		}
		if p.deployment != "" {
			d.Deployment = p.deployment
		}
		if p.node != "" {
			d.Node, d.Zone = p.node, zoneOf[p.node]
		}
		seen[key] = seen[key] || p.up
	}
	for key, d := range c.daemons {
		up := seen[key]
		switch {
		case up && !d.Up:
			d.Up, d.UpSince, d.DownSince = true, now, time.Time{}
			d.Out = false // Ceph marks an OSD in again when it boots
		case !up && (d.Up || d.DownSince.IsZero()):
			d.Up, d.DownSince = false, now
			if d.Kind == "osd" && !c.noout {
				c.rec.DownWithoutNoout = append(c.rec.DownWithoutNoout, fmt.Sprintf("osd.%s at %s", d.ID, now.Format(time.RFC3339Nano)))
			}
		}
		if d.Kind == "osd" && !d.Up && !d.Out && !c.noout && now.Sub(d.DownSince) >= c.cfg.DownOut {
			d.Out, c.backfill = true, true
			c.rec.MarkedOut = append(c.rec.MarkedOut, fmt.Sprintf("osd.%s at %s", d.ID, now.Format(time.RFC3339Nano)))
		}
	}
	s := c.statusLocked()
	if c.rec.MinQuorum < 0 || len(s.QuorumNames) < c.rec.MinQuorum {
		if s.MonMap.NumMons > 0 {
			c.rec.MinQuorum = len(s.QuorumNames)
		}
	}
	c.rec.NumMons = s.MonMap.NumMons
	if s.MonMap.NumMons > 0 && !s.quorum && c.lastQuorum {
		c.rec.QuorumLost++
	}
	c.lastQuorum = s.quorum
	down := map[string]int{}
	n := 0
	for _, d := range c.daemons {
		if d.Kind == "osd" && !d.Up {
			down[d.Zone]++
			n++
		}
	}
	c.rec.MaxOSDsDown = max(c.rec.MaxOSDsDown, n)
	for z, k := range down {
		c.rec.MaxOSDsDownPerZone[z] = max(c.rec.MaxOSDsDownPerZone[z], k)
	}
	c.rec.MaxZonesDown = max(c.rec.MaxZonesDown, len(down))
	if s.PGMap.Inactive > 0 && !c.lastInactive {
		c.rec.PGsInactive++
	}
	c.lastInactive = s.PGMap.Inactive > 0
	if n == 0 && c.allUpSince.IsZero() {
		c.allUpSince = now
	} else if n > 0 {
		c.allUpSince = time.Time{}
	}
	if s.PGMap.ActiveClean {
		c.backfill = false
	}
}

// status is GET /status: `ceph status -f json`'s fields that matter
// here, and two added for checks that compare one field.
type status struct {
	Health struct {
		Status string   `json:"status"`
		Checks []string `json:"checks"`
	} `json:"health"`
	MonMap struct {
		NumMons int `json:"num_mons"`
	} `json:"monmap"`
	QuorumNames []string `json:"quorum_names"`
	// QuorumAll: every mon known is in quorum (added).
	QuorumAll bool `json:"quorum_all"`
	MgrMap    struct {
		Available  bool   `json:"available"`
		ActiveName string `json:"active_name"`
	} `json:"mgrmap"`
	OSDMap struct {
		NumOSDs   int      `json:"num_osds"`
		NumUpOSDs int      `json:"num_up_osds"`
		NumInOSDs int      `json:"num_in_osds"`
		Flags     []string `json:"flags"`
	} `json:"osdmap"`
	PGMap struct {
		NumPGs int `json:"num_pgs"`
		// ActiveClean: every placement group is active+clean (added).
		ActiveClean bool   `json:"active_clean"`
		Inactive    int    `json:"inactive"`
		State       string `json:"state"`
	} `json:"pgmap"`

	quorum bool
}

const numPGs = 512

func (c *cluster) statusLocked() status {
	now := c.now()
	var s status
	var checks []string
	var mgrSince time.Time
	downZones := map[string]bool{}
	for _, d := range c.sorted() {
		switch d.Kind {
		case "mon":
			s.MonMap.NumMons++
			if d.Up {
				s.QuorumNames = append(s.QuorumNames, d.ID)
			}
		case "mgr":
			if d.Up && now.Sub(d.UpSince) >= c.cfg.MgrTakeover && (mgrSince.IsZero() || d.UpSince.Before(mgrSince)) {
				s.MgrMap.Available, s.MgrMap.ActiveName, mgrSince = true, d.ID, d.UpSince
			}
		case "osd":
			s.OSDMap.NumOSDs++
			if d.Up {
				s.OSDMap.NumUpOSDs++
			} else {
				downZones[d.Zone] = true
			}
			if !d.Out {
				s.OSDMap.NumInOSDs++
			}
		}
	}
	if s.QuorumNames == nil {
		s.QuorumNames = []string{}
	}
	s.quorum = len(s.QuorumNames)*2 > s.MonMap.NumMons
	s.QuorumAll = s.MonMap.NumMons > 0 && len(s.QuorumNames) == s.MonMap.NumMons
	s.OSDMap.Flags = []string{}
	if c.noout {
		s.OSDMap.Flags = append(s.OSDMap.Flags, "noout")
		checks = append(checks, "noout flag(s) set")
	}
	s.PGMap.NumPGs = numPGs
	recovery := c.cfg.Recovery
	if c.backfill {
		recovery = c.cfg.Backfill
	}
	switch {
	case len(downZones) >= 2:
		// Three copies, one per zone, min_size 2: with OSDs down in two
		// zones, some placement group has one copy left.
		s.PGMap.Inactive = numPGs / 8
		s.PGMap.State = "undersized+degraded+peered (inactive)"
		checks = append(checks, fmt.Sprintf("Reduced data availability: %d pgs inactive", s.PGMap.Inactive))
	case s.OSDMap.NumUpOSDs < s.OSDMap.NumOSDs:
		s.PGMap.State = "active+undersized+degraded"
	case c.allUpSince.IsZero() || now.Sub(c.allUpSince) < recovery:
		s.PGMap.State = "active+recovering"
		if c.backfill {
			s.PGMap.State = "active+remapped+backfilling"
		}
	default:
		s.PGMap.ActiveClean, s.PGMap.State = true, "active+clean"
	}
	if n := s.MonMap.NumMons - len(s.QuorumNames); n > 0 {
		checks = append(checks, fmt.Sprintf("%d/%d mons down, quorum %s", n, s.MonMap.NumMons, strings.Join(s.QuorumNames, ",")))
	}
	if !s.MgrMap.Available {
		checks = append(checks, "no active mgr")
	}
	if n := s.OSDMap.NumOSDs - s.OSDMap.NumUpOSDs; n > 0 {
		checks = append(checks, fmt.Sprintf("%d osds down", n))
	}
	if !s.PGMap.ActiveClean && s.PGMap.Inactive == 0 {
		checks = append(checks, "placement groups "+s.PGMap.State)
	}
	s.Health.Checks = checks
	if s.Health.Checks == nil {
		s.Health.Checks = []string{}
	}
	switch {
	case !s.quorum || s.PGMap.Inactive > 0:
		s.Health.Status = "HEALTH_ERR"
	case len(checks) > 0:
		s.Health.Status = "HEALTH_WARN"
	default:
		s.Health.Status = "HEALTH_OK"
	}
	return s
}

func (c *cluster) sorted() []*daemon {
	out := make([]*daemon, 0, len(c.daemons))
	for _, d := range c.daemons {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name() < out[j].name() })
	return out
}

// daemonState is one daemon's state in Ceph's words.
func (c *cluster) daemonState(d *daemon, s status) string {
	switch d.Kind {
	case "mon":
		if slices.Contains(s.QuorumNames, d.ID) {
			return "in quorum"
		}
		return "out of quorum"
	case "mgr":
		switch {
		case s.MgrMap.Available && s.MgrMap.ActiveName == d.ID:
			return "active"
		case d.Up:
			return "standby"
		}
	case "osd":
		st := "down"
		if d.Up {
			st = "up"
		}
		if d.Out {
			return st + "+out"
		}
		return st + "+in"
	default:
		if d.Up {
			return "up"
		}
	}
	return "down"
}

// notOKToStop says why daemon d may not stop now (`ceph mon
// ok-to-stop`, `ceph osd ok-to-stop`), or "": a mon whose stop would
// leave no quorum; an OSD while OSDs of another zone are down (the
// placement groups they share with it would go inactive).
func (c *cluster) notOKToStop(d *daemon) string {
	switch d.Kind {
	case "mon":
		mons, others := 0, 0
		for _, o := range c.daemons {
			if o.Kind == "mon" {
				mons++
				if o.Up && o != d {
					others++
				}
			}
		}
		if others*2 <= mons {
			return fmt.Sprintf("stopping mon.%s would leave %d of %d mons in quorum: no quorum", d.ID, others, mons)
		}
	case "osd":
		var zones []string
		for _, o := range c.sorted() {
			if o.Kind == "osd" && !o.Up && o.Zone != d.Zone && !slices.Contains(zones, o.Zone) {
				zones = append(zones, o.Zone)
			}
		}
		if len(zones) > 0 {
			return fmt.Sprintf("osd.%s (%s): OSDs of %s are down: placement groups would go inactive", d.ID, d.Zone, strings.Join(zones, ", "))
		}
	}
	return ""
}

func (c *cluster) setFlag(flag string, set bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noout == set {
		return // Ceph answers the same: the flag is as asked
	}
	c.noout = set
	fc := flagChange{At: c.now(), Flag: flag, Set: set}
	for _, d := range c.daemons {
		if d.Kind != "osd" {
			continue
		}
		if d.Up {
			fc.OSDsUp++
		} else {
			fc.OSDsDown++
		}
	}
	c.rec.Flags = append(c.rec.Flags, fc)
	log.Printf("cephstatus: noout %s (%d osds up, %d down)", map[bool]string{true: "set", false: "unset"}[set], fc.OSDsUp, fc.OSDsDown)
}

func (c *cluster) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		c.mu.Lock()
		s := c.statusLocked()
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("GET /daemon/{deployment}", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := c.statusLocked()
		for _, d := range c.sorted() {
			if d.Deployment == r.PathValue("deployment") {
				writeJSON(w, http.StatusOK, map[string]any{"name": d.name(), "deployment": d.Deployment, "node": d.Node, "zone": d.Zone,
					"up": d.Up, "state": c.daemonState(d, s)})
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no daemon of Deployment " + r.PathValue("deployment")})
	})
	mux.HandleFunc("GET /ok-to-stop/{deployment}", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, d := range c.sorted() {
			if d.Deployment == r.PathValue("deployment") {
				if why := c.notOKToStop(d); why != "" {
					writeJSON(w, http.StatusConflict, map[string]any{"ok": false, "why": why})
					return
				}
				writeJSON(w, http.StatusOK, map[string]any{"ok": true})
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no daemon of Deployment " + r.PathValue("deployment")})
	})
	mux.HandleFunc("POST /flags/noout", func(w http.ResponseWriter, _ *http.Request) {
		c.setFlag("noout", true)
		writeJSON(w, http.StatusOK, map[string]any{"noout": true})
	})
	mux.HandleFunc("DELETE /flags/noout", func(w http.ResponseWriter, _ *http.Request) {
		c.setFlag("noout", false)
		writeJSON(w, http.StatusOK, map[string]any{"noout": false})
	})
	mux.HandleFunc("GET /record", func(w http.ResponseWriter, _ *http.Request) {
		c.mu.Lock()
		rec := c.rec
		rec.Noout = c.noout
		rec.MinQuorum = max(rec.MinQuorum, 0)
		b, err := json.Marshal(rec)
		c.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
