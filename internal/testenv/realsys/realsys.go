// Package realsys runs real clustered systems ferry did not write (etcd,
// NATS with JetStream) as ferry's examples describe them
// (examples/SYSTEM/cluster.yaml.tmpl), for the end-to-end tests of this
// package and the same-run comparison (internal/testenv/realsys/compare): a
// cluster in a directory of its own with its agent, brought up by
// 'ferry cluster up' or started by a script (os/exec, for adoption),
// the system's own client under load (tools/realsys/*load), upgraded by
// 'ferry upgrade start' or by a naive rolling restart, and asked what
// it runs through its own version report.
//
// The binaries come from scripts/realsys.sh (built once, cached); Env
// finds them.
package realsys

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/health"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Env is what `scripts/realsys.sh env` says: the binaries' paths and
// versions (ETCD_N, ETCD_N_VERSION, NATS_N1, ETCDLOAD, ...).
type Env map[string]string

// LoadEnv runs `scripts/realsys.sh env`. It builds nothing.
func LoadEnv(ctx context.Context) (Env, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(Root(), "scripts", "realsys.sh"), "env")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("realsys: scripts/realsys.sh env: %w", err)
	}
	env := Env{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// Missing lists the keys whose file is not there (not built).
func (e Env) Missing(keys ...string) []string {
	var out []string
	for _, k := range keys {
		if p := e[k]; p == "" {
			out = append(out, k)
		} else if _, err := os.Stat(p); err != nil {
			out = append(out, k+" ("+p+")")
		}
	}
	return out
}

// System is one real system as the harness runs it.
type System struct {
	// Name is the example's directory under examples/: etcd, nats.
	Name string
	// N and N1 are the two releases (versions as the catalog writes
	// them), NBin and N1Bin their binaries.
	N, N1       string
	NBin, N1Bin string
	// Load is the system's own client under load (tools/realsys).
	Load string
	// ports are the example's address placeholders, each filled with a
	// free port; loadArgs gives the load tool its endpoints.
	ports    []string
	loadArgs func(p map[string]string) []string
	// loadReady, when set, waits until the system can take the load
	// tool's first request (NATS: JetStream's meta group complete).
	loadReady func(ctx context.Context, c *Cluster) error
	// form, when set, waits until the members form their cluster, and
	// may restart one the cluster left out (NATS: natsRejoin); Formed
	// runs it.
	form func(ctx context.Context, c *Cluster) error
	// stuck, when set, names the system's own known defect that a
	// failed upgrade's reason shows, "" for any other failure.
	stuck func(reason string) string
	// members are the members' names and the placeholders of the
	// addresses their version report answers on.
	members [][2]string
	// version is the system's own version report: the JSON field path
	// at http://ADDRESS/path.
	versionPath, versionField string
}

// Etcd is etcd v3.5 → v3.6, as env says where they are.
func Etcd(env Env) *System {
	return &System{Name: "etcd", N: strings.TrimPrefix(env["ETCD_N_VERSION"], "v"), N1: strings.TrimPrefix(env["ETCD_N1_VERSION"], "v"),
		NBin: env["ETCD_N"], N1Bin: env["ETCD_N1"], Load: env["ETCDLOAD"],
		ports: []string{"E1", "E2", "E3", "E1_PEER", "E2_PEER", "E3_PEER"},
		loadArgs: func(p map[string]string) []string {
			return []string{"-endpoints", p["E1"] + "," + p["E2"] + "," + p["E3"]}
		},
		members:     [][2]string{{"e1", "E1"}, {"e2", "E2"}, {"e3", "E3"}},
		versionPath: "/version", versionField: "etcdserver"}
}

// NATS is nats-server v2.10 → v2.11 (JetStream), as env says.
func NATS(env Env) *System {
	return &System{Name: "nats", N: strings.TrimPrefix(env["NATS_N_VERSION"], "v"), N1: strings.TrimPrefix(env["NATS_N1_VERSION"], "v"),
		NBin: env["NATS_N"], N1Bin: env["NATS_N1"], Load: env["NATSLOAD"],
		ports: []string{"N1_HTTP", "N2_HTTP", "N3_HTTP", "N1_CLIENT", "N2_CLIENT", "N3_CLIENT", "N1_ROUTE", "N2_ROUTE", "N3_ROUTE"},
		loadArgs: func(p map[string]string) []string {
			return []string{"-servers", "nats://" + p["N1_CLIENT"] + ",nats://" + p["N2_CLIENT"] + ",nats://" + p["N3_CLIENT"]}
		},
		loadReady:   jetStreamReady,
		form:        natsRejoin,
		stuck:       natsStuck,
		members:     [][2]string{{"n1", "N1_HTTP"}, {"n2", "N2_HTTP"}, {"n3", "N3_HTTP"}},
		versionPath: "/varz", versionField: "version"}
}

// jszMeta is the part of NATS's GET /jsz that says how its JetStream
// meta group stands; replicas are listed by the meta leader only.
type jszMeta struct {
	Meta *struct {
		Leader   string    `json:"leader"`
		Size     int       `json:"cluster_size"`
		Replicas []jszPeer `json:"replicas"`
	} `json:"meta_cluster"`
}

// jszPeer is a server the meta leader lists in its group.
type jszPeer struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline"`
}

// jetStreamReady waits until JetStream's meta group holds every server
// of c, each current (metaGroup): before that, creating a replicated
// stream fails ("no suitable peers for placement"), and the servers'
// /healthz does not say it.
func jetStreamReady(ctx context.Context, c *Cluster) error {
	names, monitors := c.monitors()
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer yet"
	err := waitUntil(ctx, 2*time.Minute, "JetStream's meta group holds every server, current", func() (bool, error) {
		g := jetStreamGroup(client, names, monitors)
		last = g.last
		return g.ok, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

// metaStanding is how JetStream's meta group stands (metaGroup).
type metaStanding struct {
	// ok: the group holds every server, each current.
	ok bool
	// leader and group (the leader, then the servers it lists) once
	// the servers agree on a leader.
	leader string
	group  []string
	// leftOut are the servers the leader does not hold as current
	// members: not listed, offline or not current.
	leftOut []string
	// last says what is missing.
	last string
}

// jetStreamGroup asks every server's /jsz once (monitors[i] is server
// names[i]'s monitoring address) and judges the answers (metaGroup). A
// server that does not answer counts as one that follows no leader:
// the leader's group says whether it is left out.
func jetStreamGroup(client *http.Client, names, monitors []string) metaStanding {
	answers := make([]jszMeta, len(monitors))
	var failed []string
	for i, m := range monitors {
		resp, err := client.Get("http://" + m + "/jsz")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&answers[i])
			resp.Body.Close()
		}
		if err != nil {
			answers[i] = jszMeta{}
			failed = append(failed, fmt.Sprintf("%s: GET /jsz: %v", names[i], err))
		}
	}
	g := metaGroup(names, answers)
	if len(failed) > 0 {
		g.ok = false
		g.last += " (" + strings.Join(failed, "; ") + ")"
	}
	return g
}

// metaGroup judges JetStream's meta group from answers[i], server
// names[i]'s /jsz: it holds every server when they all name the same
// meta leader and the leader lists every other server, online and
// current. The group's cluster_size is not asked, for nats-server
// (2.10.27, raft.go) counts in it the peers the group has added, and
// counts them again only when it adds or removes one: a server started
// again takes the size it stored (2, from a group formed of two) but
// takes every server it stored, and itself, as added, so a leader
// holding all three keeps cluster_size 2 for good (seen in CI once the
// cluster was brought down and up again). Its quorum is the same as
// for 3 (size/2+1: 2). A server the leader heard from but never added
// is listed not current: an answer of its that reaches the leader gets
// it added.
func metaGroup(names []string, answers []jszMeta) metaStanding {
	var g metaStanding
	var leaderless []string
	for i, j := range answers {
		switch {
		case j.Meta == nil || j.Meta.Leader == "":
			// Left out of the group, a server may follow nobody: the
			// others' leader still says who is in the group.
			leaderless = append(leaderless, names[i])
			continue
		case g.leader != "" && j.Meta.Leader != g.leader:
			return metaStanding{last: fmt.Sprintf("meta leaders %s and %s", g.leader, j.Meta.Leader)}
		}
		g.leader = j.Meta.Leader
	}
	if g.leader == "" {
		g.last = "no meta leader (" + strings.Join(leaderless, ", ") + ")"
		return g
	}
	li := slices.Index(names, g.leader)
	if li < 0 || answers[li].Meta == nil || answers[li].Meta.Leader != g.leader {
		g.last = fmt.Sprintf("meta leader %s does not say it leads", g.leader)
		return g
	}
	meta := answers[li].Meta
	g.group = []string{g.leader}
	for _, r := range meta.Replicas {
		g.group = append(g.group, r.Name)
	}
	var unlisted, behind []string
	for _, n := range names {
		k := slices.IndexFunc(meta.Replicas, func(r jszPeer) bool { return r.Name == n })
		switch {
		case n == g.leader:
		case k < 0:
			unlisted = append(unlisted, n)
		case meta.Replicas[k].Offline || !meta.Replicas[k].Current:
			behind = append(behind, fmt.Sprintf("%s offline %v, current %v", n, meta.Replicas[k].Offline, meta.Replicas[k].Current))
			g.leftOut = append(g.leftOut, n)
		}
	}
	g.leftOut = append(unlisted, g.leftOut...)
	switch {
	case len(unlisted) > 0:
		g.last = fmt.Sprintf("meta leader %s's group holds %d servers of %d (%v, cluster_size %d)", g.leader, len(names)-len(unlisted), len(names), g.group, meta.Size)
	case len(behind) > 0:
		g.last = fmt.Sprintf("meta leader %s: %s (cluster_size %d)", g.leader, strings.Join(behind, "; "), meta.Size)
	case len(leaderless) > 0:
		g.last = fmt.Sprintf("%s: no meta leader (meta leader %s's group: %v)", strings.Join(leaderless, ", "), g.leader, g.group)
	default:
		g.ok = true
	}
	return g
}

// natsRejoin waits until JetStream's meta group holds every server
// (metaGroup), restarting the servers it left out (Cluster.restart:
// where each runs), at most twice. nats-server 2.10.27, its three
// servers started together, now and then forms its meta group of two:
// the third follows the leader (its log shows the leader's entries
// applied) but its answers never reach the leader (no peer added: the
// leader's /jsz lists it nowhere, or not current), a state that lasts
// (45 s and more, seen; 30 s in CI); every R3 stream then fails with
// "no suitable peers for placement", and the group loses its quorum
// once one of the two stops. A restart of the server left out gives it
// new routes, and the leader adds it. Restarting the whole cluster
// instead starts the three together again.
func natsRejoin(ctx context.Context, c *Cluster) error {
	names, monitors := c.monitors()
	client := &http.Client{Timeout: 2 * time.Second}
	const restarts = 2
	for try := 0; ; try++ {
		var g metaStanding
		err := waitUntil(ctx, 20*time.Second, "JetStream's meta group holds every server, current", func() (bool, error) {
			g = jetStreamGroup(client, names, monitors)
			return g.ok, nil
		})
		if err == nil {
			if try > 0 {
				c.log("realsys: JetStream's meta group holds every server, current (leader %s)", g.leader)
			}
			return nil
		}
		if try == restarts || ctx.Err() != nil {
			return fmt.Errorf("%w (last: %s)", err, g.last)
		}
		// No leader agreed on, or none left out: nobody to restart.
		for _, name := range g.leftOut {
			c.log("realsys: %s: restarting %s, which the meta group left out (restart %d of at most %d)", g.last, name, try+1, restarts)
			if err := c.restart(ctx, name); err != nil {
				return err
			}
		}
	}
}

// natsStuck knows nats-server 2.10's health check that stays "group
// node unhealthy" for a stream of a restarted server (its stuck
// catch-up: nats-io/nats-server#6964, whose report #7535 changed): seen
// once in CI, a member restarted at its rollback answered 503 for the
// whole 90 s deadline while its peers logged "Duplicate Route" against
// it. Restarting the server mends it, which a rollback that failed
// does not do.
func natsStuck(reason string) string {
	if strings.Contains(reason, "is not current: group node unhealthy") {
		return "nats-server's health check stuck at \"group node unhealthy\" (nats-io/nats-server#6964)"
	}
	return ""
}

// SampleHAProxy is ferry's sample cluster (kv, api) behind HAProxy,
// its releases 1.0.0 and 2.0.0 built at v1 and v2. Its load is ferry's
// own traffic (the description's traffic:), through HAProxy.
func SampleHAProxy(v1, v2 string) *System {
	return &System{Name: "sample-haproxy", N: "1.0.0", N1: "2.0.0", NBin: v1, N1Bin: v2,
		ports: []string{"KV1", "KV2", "KV3", "KV1_RAFT", "KV2_RAFT", "KV3_RAFT", "API1", "API2", "API3", "API4",
			"HAPROXY_FRONTEND", "HAPROXY_STATS"},
		members: [][2]string{{"kv-1", "KV1"}, {"kv-2", "KV2"}, {"kv-3", "KV3"},
			{"api-1", "API1"}, {"api-2", "API2"}, {"api-3", "API3"}, {"api-4", "API4"}},
		versionPath: "/version", versionField: "version"}
}

// Options are a cluster's settings.
type Options struct {
	// Soak is each member's soak (the naive loop's settle).
	Soak time.Duration
	// Extra are more releases for the catalog, as YAML list items (a
	// bad release).
	Extra string
	// Seed picks the ports (0: a random seed); the cluster says which
	// it used.
	Seed uint64
	// Log receives what the harness does (t.Logf, or stderr).
	Log func(format string, args ...any)
}

// Cluster is one system's cluster: its directory (description, agent,
// data), its agent, and the processes started outside ferry.
type Cluster struct {
	Sys   *System
	Dir   string
	File  string
	Data  string
	Ferry string
	Ports map[string]string
	Seed  uint64
	Agent string
	log   func(string, ...any)

	agent        *exec.Cmd
	agentCh      chan struct{}
	outside      []*exec.Cmd
	outsideNames []string
	outsideDone  []chan struct{}

	haproxy   *exec.Cmd
	haproxyCh chan struct{}
}

// New renders the system's example into dir with free ports and starts
// its agent (ferry binary ferry). Close stops everything.
func New(ctx context.Context, sys *System, ferry, dir string, o Options) (*Cluster, error) {
	if o.Log == nil {
		o.Log = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	}
	if o.Soak == 0 {
		o.Soak = 2 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Sys: sys, Dir: dir, File: filepath.Join(dir, "cluster.yaml"), Data: filepath.Join(dir, "data"), Ferry: ferry,
		Seed: o.Seed, log: o.Log, Ports: map[string]string{}}
	ports, err := loopback.Ports(o.Seed, len(sys.ports)+1)
	if err != nil {
		return nil, err
	}
	c.Agent = fmt.Sprintf("127.0.0.1:%d", ports[0])
	for i, name := range sys.ports {
		c.Ports[name] = fmt.Sprintf("127.0.0.1:%d", ports[i+1])
	}
	o.Log("realsys: %s cluster in %s (port seed %d: FERRY_REALSYS_SEED=%d replays it)", sys.Name, dir, o.Seed, o.Seed)
	vars := map[string]string{"AGENT": c.Agent, "TOKEN_FILE": "agent/token", "DATA": c.Data, "SOAK": o.Soak.String(),
		"EXTRA_RELEASES": o.Extra, "N_VERSION": sys.N, "N1_VERSION": sys.N1, "N_PATH": sys.NBin, "N1_PATH": sys.N1Bin}
	for k, v := range c.Ports {
		vars[k] = v
	}
	for k, p := range map[string]string{"N_SHA256": sys.NBin, "N1_SHA256": sys.N1Bin} {
		if vars[k], err = checksum.File(p); err != nil {
			return nil, err
		}
	}
	tmpl, err := os.ReadFile(filepath.Join(Root(), "examples", sys.Name, "cluster.yaml.tmpl"))
	if err != nil {
		return nil, err
	}
	desc, err := Fill(string(tmpl), vars)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.File, []byte(desc), 0o644); err != nil {
		return nil, err
	}
	if err := c.startAgent(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

var placeholderRE = regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)

// Fill replaces each ${NAME} of text with vars[NAME] (only those: the
// {{...}} are ferry's templates); a placeholder without a value is an
// error.
func Fill(text string, vars map[string]string) (string, error) {
	var missing []string
	out := placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			missing = append(missing, m)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("realsys: no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// startAgent runs the cluster's agent in its own session (its members
// outlive any ferry process) and waits until it answers.
func (c *Cluster) startAgent(ctx context.Context) error {
	dir := filepath.Join(c.Dir, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Ferry, "agent", "--listen", c.Agent, "--dir", dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("realsys: start the agent: %w", err)
	}
	c.agent, c.agentCh = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(c.agentCh) }()
	return waitUntil(ctx, 20*time.Second, "the agent answers on "+c.Agent, func() (bool, error) {
		select {
		case <-c.agentCh:
			return false, fmt.Errorf("the agent exited; see %s", filepath.Join(c.Dir, "agent.log"))
		default:
		}
		if _, err := os.Stat(filepath.Join(dir, "token")); err != nil {
			return false, nil
		}
		resp, err := http.Get("http://" + c.Agent + "/v1/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
}

// waitUntil polls cond every 50ms until it holds, fails, or limit
// passes.
func waitUntil(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("realsys: waiting until %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("realsys: %s: not within %s", what, limit)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Run runs ferry with args on the cluster's description and data
// directory, and returns its output and exit code.
func (c *Cluster) Run(ctx context.Context, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, c.Ferry, append([]string{"-f", c.File, "--data-dir", filepath.Join(c.Dir, "ferry")}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, nil
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode(), nil
	}
	return out.String(), -1, fmt.Errorf("realsys: ferry %v: %w", args, err)
}

// Engine is an engine over the cluster, as a ferry process builds it.
func (c *Cluster) Engine() (*engine.Engine, *store.Store, error) {
	cfg, err := config.Load(c.File)
	if err != nil {
		return nil, nil, err
	}
	d, err := c.Driver(cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(filepath.Join(c.Dir, "ferry"))
	if err != nil {
		return nil, nil, err
	}
	e, err := engine.New(engine.Config{Cluster: cfg, Driver: d, Store: st})
	return e, st, err
}

// Versions asks every member for its version through the system's own
// version report; "" for a member that does not answer.
func (c *Cluster) Versions(ctx context.Context) map[string]string {
	out := map[string]string{}
	cl := &http.Client{Timeout: 2 * time.Second}
	for _, m := range c.Sys.members {
		name, addr := m[0], c.Ports[m[1]]
		out[name] = ""
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+c.Sys.versionPath, nil)
		resp, err := cl.Do(req)
		if err != nil {
			continue
		}
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if v, ok := doc[c.Sys.versionField].(string); ok {
			out[name] = v
		}
	}
	return out
}

// StartOutside starts every member at release N as a script would
// (os/exec, each in its own session), not through ferry or its agent:
// the argv and files the description gives, in a directory of the
// harness's. It waits until each answers its version report and
// passes its member check; for a system that says how (Formed), first
// until they form their cluster.
func (c *Cluster) StartOutside(ctx context.Context) error {
	e, _, err := c.Engine()
	if err != nil {
		return err
	}
	for _, m := range e.Members() {
		dir := filepath.Join(c.Dir, "outside", m.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, f := range m.Files {
			if err := os.WriteFile(filepath.Join(dir, f.Path), []byte(f.Content), f.Mode); err != nil {
				return err
			}
		}
		cmd, done, err := c.startOutside(m.Name, m.Args)
		if err != nil {
			return err
		}
		c.outside = append(c.outside, cmd)
		c.outsideNames = append(c.outsideNames, m.Name)
		c.outsideDone = append(c.outsideDone, done)
	}
	if c.Sys.form != nil {
		// Before the member checks: a member the cluster left out may
		// fail its own (NATS: "JetStream is not current with the meta
		// leader") until it is restarted.
		if err := c.waitAnswer(ctx); err != nil {
			return err
		}
		if err := c.Formed(ctx); err != nil {
			return err
		}
	}
	return c.waitOutsideHealthy(ctx)
}

// Formed waits until the members form their cluster, for a system that
// says how (NATS: JetStream's meta group holds every server, natsRejoin),
// restarting a member the cluster left out where it runs, a bounded
// number of times, and logging each restart; for any other system it
// returns at once. It fails when the cluster does not form.
func (c *Cluster) Formed(ctx context.Context) error {
	if c.Sys.form == nil {
		return nil
	}
	return c.Sys.form(ctx, c)
}

// monitors are the members' names and the addresses their version
// report answers on (NATS: its monitoring port).
func (c *Cluster) monitors() (names, addrs []string) {
	for _, m := range c.Sys.members {
		names = append(names, m[0])
		addrs = append(addrs, c.Ports[m[1]])
	}
	return names, addrs
}

// restart restarts member name at release N where it runs: a process
// the harness started outside ferry as it started it (restartOutside),
// any other through its agent as ferry's driver does (its graceful
// stop, then its start); then waits until every member answers its
// version report.
func (c *Cluster) restart(ctx context.Context, name string) error {
	if slices.Contains(c.outsideNames, name) {
		return c.restartOutside(ctx, name)
	}
	e, d, m, err := c.member(name)
	if err != nil {
		return err
	}
	art, err := e.Artifact(m.Component, c.Sys.N)
	if err != nil {
		return err
	}
	if err := d.Stop(ctx, m); err != nil {
		return fmt.Errorf("realsys: restart %s: %w", name, err)
	}
	if err := d.Start(ctx, m, art); err != nil {
		return fmt.Errorf("realsys: restart %s: %w", name, err)
	}
	c.log("realsys: %s restarted through the agent on %s", name, c.Sys.N)
	return c.waitAnswer(ctx)
}

// member is member name of the cluster's description, with an engine
// and the driver that reach it as ferry's would.
func (c *Cluster) member(name string) (*engine.Engine, driver.Driver, driver.Member, error) {
	cfg, err := config.Load(c.File)
	if err != nil {
		return nil, nil, driver.Member{}, err
	}
	e, _, err := c.Engine()
	if err != nil {
		return nil, nil, driver.Member{}, err
	}
	d, err := c.Driver(cfg)
	if err != nil {
		return nil, nil, driver.Member{}, err
	}
	ms := e.Members()
	i := slices.IndexFunc(ms, func(m driver.Member) bool { return m.Name == name })
	if i < 0 {
		return nil, nil, driver.Member{}, fmt.Errorf("realsys: no member %s in %s", name, c.File)
	}
	return e, d, ms[i], nil
}

// startOutside starts member name's process with args in its directory
// under outside/, its output appended to output.log there; done is
// closed once it has exited.
func (c *Cluster) startOutside(name string, args []string) (*exec.Cmd, chan struct{}, error) {
	dir := filepath.Join(c.Dir, "outside", name)
	logf, err := os.OpenFile(filepath.Join(dir, "output.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(c.Sys.NBin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("realsys: start %s outside ferry: %w", name, err)
	}
	logf.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reaped here, so that it is gone once stopped, not a zombie
	c.log("realsys: %s started outside ferry: pid %d", name, cmd.Process.Pid)
	return cmd, done, nil
}

// restartOutside stops member name's process started outside ferry
// (SIGTERM, SIGKILL after 10 s), starts it again with the same argv
// and waits until every member answers its version report.
func (c *Cluster) restartOutside(ctx context.Context, name string) error {
	i := slices.Index(c.outsideNames, name)
	if i < 0 {
		return fmt.Errorf("realsys: %s was not started outside ferry", name)
	}
	old, done := c.outside[i], c.outsideDone[i]
	terminate(old.Process, done)
	cmd, done, err := c.startOutside(name, old.Args[1:])
	if err != nil {
		return err
	}
	c.outside[i], c.outsideDone[i] = cmd, done
	return c.waitAnswer(ctx)
}

// waitAnswer waits until every member answers its version report with
// N.
func (c *Cluster) waitAnswer(ctx context.Context) error {
	return waitUntil(ctx, 60*time.Second, "every member answers on "+c.Sys.N, func() (bool, error) {
		for _, v := range c.Versions(ctx) {
			if v != c.Sys.N {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitOutsideHealthy waits until every member answers its version
// report with N and passes its member check.
func (c *Cluster) waitOutsideHealthy(ctx context.Context) error {
	cfg, err := config.Load(c.File)
	if err != nil {
		return err
	}
	return waitUntil(ctx, 60*time.Second, "the members started outside ferry answer, healthy", func() (bool, error) {
		for _, v := range c.Versions(ctx) {
			if v != c.Sys.N {
				return false, nil
			}
		}
		for _, comp := range cfg.Components {
			for i := range comp.Members {
				if !health.Do(ctx, comp.Health.Member.Call, cfg.DataFor(&comp, &comp.Members[i])).OK {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// OutsidePIDs are the pids of the members started outside ferry.
func (c *Cluster) OutsidePIDs() []int {
	var out []int
	for _, cmd := range c.outside {
		out = append(out, cmd.Process.Pid)
	}
	return out
}

// Driver is the cluster's process driver, its agent's token read.
func (c *Cluster) Driver(cfg *config.Cluster) (driver.Driver, error) {
	return newDriver(cfg)
}

// Close stops the members (through the agent, and those started
// outside it), then the agent. It is best effort: a test's cleanup.
func (c *Cluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, code, err := c.Run(ctx, "cluster", "down"); err != nil || code != 0 {
		c.log("realsys: cluster down: exit %d %v\n%s", code, err, out)
	}
	for _, cmd := range c.outside {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	if c.haproxy != nil {
		terminate(c.haproxy.Process, c.haproxyCh)
	}
	if c.agent != nil {
		terminate(c.agent.Process, c.agentCh)
	}
}

// terminate stops process p gracefully (SIGTERM), with SIGKILL after
// 10 s, and returns once done (closed when its Wait returned) says it
// is gone.
func terminate(p *os.Process, done <-chan struct{}) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		<-done
	}
}

// Report is what the load tool says clients saw.
type Report struct {
	System       string         `json:"system"`
	Requests     int            `json:"requests"`
	Failed       int            `json:"failed"`
	Retries      int            `json:"retries"`
	Reconnects   int            `json:"reconnects"`
	Acknowledged int            `json:"acknowledged"`
	Verified     int            `json:"verified"`
	Lost         int            `json:"lost"`
	LostKeys     []string       `json:"lost_keys"`
	P50MS        float64        `json:"p50_ms"`
	P99MS        float64        `json:"p99_ms"`
	DurationS    float64        `json:"duration_s"`
	FailedPerSec map[string]int `json:"failed_per_second"`
	Errors       []string       `json:"errors"`
}

// Load is the system's own client running against the cluster.
type Load struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	errb bytes.Buffer
	done chan error
}

// StartLoad starts the load tool at rate requests per second and
// returns once its first write was acknowledged.
func (c *Cluster) StartLoad(ctx context.Context, rate int) (*Load, error) {
	if c.Sys.loadReady != nil {
		if err := c.Sys.loadReady(ctx, c); err != nil {
			return nil, err
		}
	}
	ready := filepath.Join(c.Dir, fmt.Sprintf("load-ready-%d", time.Now().UnixNano()))
	args := append(c.Sys.loadArgs(c.Ports), "-rate", strconv.Itoa(rate), "-ready", ready)
	l := &Load{cmd: exec.Command(c.Sys.Load, args...), done: make(chan error, 1)}
	l.cmd.Stdout, l.cmd.Stderr = &l.out, &l.errb
	if err := l.cmd.Start(); err != nil {
		return nil, fmt.Errorf("realsys: start %s: %w", c.Sys.Load, err)
	}
	go func() { l.done <- l.cmd.Wait() }()
	exited := false
	err := waitUntil(ctx, 60*time.Second, "the load's first write is acknowledged", func() (bool, error) {
		select {
		case err := <-l.done:
			exited = true
			return false, fmt.Errorf("the load tool exited (%v): %s", err, l.errb.String())
		default:
		}
		_, err := os.Stat(ready)
		return err == nil, nil
	})
	if err != nil {
		if !exited {
			_ = l.cmd.Process.Kill()
			<-l.done // its stderr is complete once it is waited for
			err = fmt.Errorf("%w; the load tool said: %s", err, l.errb.String())
		}
		return nil, err
	}
	return l, nil
}

// Stop stops the load (SIGINT), waits for it to read every
// acknowledged write back, and returns its report.
func (l *Load) Stop() (Report, error) {
	_ = l.cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-l.done:
	case <-time.After(2 * time.Minute):
		_ = l.cmd.Process.Kill()
		err = <-l.done
	}
	var r Report
	if err != nil {
		return r, fmt.Errorf("realsys: the load tool: %v: %s", err, l.errb.String())
	}
	if err := json.Unmarshal(l.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("realsys: the load tool's report: %v: %s", err, l.out.String())
	}
	return r, nil
}

// Tails returns the last n lines of the cluster's logs: the agent's,
// each member's output (agent/logs/NAME/current.log) and those of the
// members started outside ferry, for a failed test to show.
func (c *Cluster) Tails(n int) string {
	var b strings.Builder
	files := []string{filepath.Join(c.Dir, "agent.log"), filepath.Join(c.Dir, "haproxy.log")}
	for _, pat := range []string{"agent/logs/*/current.log", "outside/*/output.log"} {
		m, _ := filepath.Glob(filepath.Join(c.Dir, pat))
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- %s (first and last %d lines)\n%s\n...\n%s\n", strings.TrimPrefix(f, c.Dir+"/"), n, strings.Join(ls[:min(n, len(ls))], "\n"), strings.Join(ls[max(0, len(ls)-n):], "\n"))
	}
	return b.String()
}

// StartHAProxy runs HAProxy (binary bin) in front of the cluster's api
// tier, with examples/SYSTEM/haproxy.cfg.tmpl filled in, in the
// foreground (-db) as a process of the harness (it is not a member:
// ferry does not upgrade it), and waits until its stats page answers.
// Close stops it.
func (c *Cluster) StartHAProxy(ctx context.Context, bin string) error {
	tmpl, err := os.ReadFile(filepath.Join(Root(), "examples", c.Sys.Name, "haproxy.cfg.tmpl"))
	if err != nil {
		return err
	}
	cfg, err := Fill(string(tmpl), c.Ports)
	if err != nil {
		return err
	}
	path := filepath.Join(c.Dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, bin, "-c", "-f", path).CombinedOutput(); err != nil {
		return fmt.Errorf("realsys: haproxy -c: %v: %s", err, out)
	}
	logf, err := os.Create(filepath.Join(c.Dir, "haproxy.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("realsys: start haproxy: %w", err)
	}
	logf.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.haproxy, c.haproxyCh = cmd, done
	return waitUntil(ctx, 20*time.Second, "HAProxy's stats page answers", func() (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("haproxy exited; see %s", filepath.Join(c.Dir, "haproxy.log"))
		default:
		}
		resp, err := http.Get("http://" + c.Ports["HAPROXY_STATS"] + "/stats;csv")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
}

// HAProxyServers returns each api server's status in HAProxy (UP,
// DRAIN, DOWN, MAINT), from its stats page's CSV.
func (c *Cluster) HAProxyServers(ctx context.Context) (map[string]string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Ports["HAPROXY_STATS"]+"/stats;csv", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var status = -1
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ",")
		if strings.HasPrefix(line, "# ") {
			for i, h := range f {
				if h == "status" {
					status = i
				}
			}
			continue
		}
		if len(f) > status && status > 0 && f[0] == "api" && f[1] != "FRONTEND" && f[1] != "BACKEND" {
			out[f[1]] = f[status]
		}
	}
	return out, nil
}
