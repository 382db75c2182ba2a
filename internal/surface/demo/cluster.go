package demo

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// Release is one entry of the sample cluster's catalog.
type Release struct {
	Version string
	// Path is the sample binary built with this version (and fault).
	Path string
	// UpgradeFrom lists the versions (or x-ranges) that may upgrade to
	// it; empty for the first release. DowngradeTo lists the earlier
	// patches of its line it may go back to.
	UpgradeFrom []string
	DowngradeTo []string
	// Migrations is the release's migrations block, as YAML (flow
	// style), or empty.
	Migrations string
	// Flow is the release's flow, as YAML (flow style), or empty.
	Flow string
	// SigningKey and Signature, if set, sign the release's load: the
	// public key's file and the artifact's detached signature.
	SigningKey, Signature string
	// RequiresFerry is the release's requires_ferry; FerryPath, if set,
	// the ferry binary it names (ferry: {path, sha256}) for the agents
	// to re-execute on as its upgrade's first step.
	RequiresFerry, FerryPath string
}

// KVMigrations are the sample kv store's steps to its format 2, as the
// migrations block of release 2.0.0: pin the cluster to format 1 before
// any member moves (expand), give every record its format-2 form in
// batches once all members run 2.0.0 (migrate, repeated until done),
// move the pin to format 2 (finalize: from then on 1.0.0 cannot read
// what is written), drop the format-1 records (contract).
const KVMigrations = `{component: kv, deadline: 2m, interval: 200ms,
      expand: [{http: "http://{{.Any}}/admin/compat?level=1", method: POST}],
      migrate: [{http: "http://{{.Any}}/admin/migrate?batch=2000", method: POST, json: {path: done, equals: true}}],
      finalize: [{http: "http://{{.Any}}/admin/compat?level=2", method: POST}],
      contract: [{http: "http://{{.Any}}/admin/contract", method: POST}]}`

// ClusterOptions describe a sample cluster to start.
type ClusterOptions struct {
	// drawn, if set, is told the ports drawn (by their placeholder
	// names) before anything starts: a test takes one to cause a clash.
	drawn func(ports map[string]string)
	// Dir is the cluster's work directory (description, agent, data).
	Dir string
	// Self is the ferry binary that runs the agent.
	Self     string
	Releases []Release
	// Start is the release the members start on.
	Start string
	// Soak, Deadline and GateDeadline are each component's
	// min_healthy_time, healthy_deadline and gate deadline.
	Soak, Deadline, GateDeadline time.Duration
	// KVSoak, if set, is kv's soak instead of Soak (tests about the
	// api tier keep the kv phase short).
	KVSoak time.Duration
	// OnFailure is the policy: rollback (default) or pause; Finalize
	// auto (default) or manual.
	OnFailure string
	Finalize  string
	// OnImpact: continue (default), pause or rollback.
	OnImpact string
	// GateDelay makes kv's cluster check take that long (the sample's
	// /cluster?delay=), as a slow real gate would.
	GateDelay time.Duration
	// SlowSteps makes each step of an api member's move last about that
	// long (its drain, its stop in lame duck, its post-start hook), for
	// tests that act in the middle of one.
	SlowSteps time.Duration
	// OKToStop makes kv ask each member whether it may stop (its
	// GET /admin/ok-to-stop, which says no while the member is held
	// through PUT /admin/hold): the system's own answer, predicate
	// ok_to_stop.
	OKToStop bool
	// Pin gives kv and api members the cluster's pin as an argument
	// (--pin {{.Pin}}), which they report on GET /version.
	Pin bool
	// Hosts, if more than 1, spreads the members over that many hosts,
	// host-1 … host-N, each with an agent of its own on loopback (kv-i
	// and api-i on host ((i-1) mod N)+1; the load balancer and the
	// coordinator on host-1), and tells the load balancer each backend's
	// host; every host is then locked and unlocked through the
	// balancer's maintenance mode (host_defaults), and its capacity call
	// asks that backends on HostCapacity hosts (default 1) stay in
	// rotation without it. The api component has then no pre_phase hook
	// (a hosts stage runs none).
	Hosts, HostCapacity int
	// Coordinator adds the sample coordinator pair (coord-1, coord-2,
	// component coord, upgraded first: strategy active-standby, its
	// role "active", hooks.switchover its handover call); every api
	// member then stamps each write on the active one. SlowHandover
	// makes each handover wait that long before it happens.
	Coordinator  bool
	SlowHandover time.Duration
	// Simplex makes kv one member (kv-1) that cannot avoid downtime:
	// strategy offline, its data backed up before it goes (a tar of its
	// data directory and a sha256sum of it, into DIR/backups), verified
	// (the checksum, then tar's listing as the restore check), restored
	// by the rollback; the newest 2 kept. Fault files make the next
	// backup fail to verify: DIR/faults/backup-corrupt (the tar changed
	// after its sums were written), DIR/faults/restore-check-fails.
	Simplex bool
	// Bare writes the description and starts the agents and the load
	// balancer, no member: for `ferry rehearse`, which brings the
	// members up itself and stops them at its end.
	Bare   bool
	Logger *slog.Logger
}

// kvMore, kvHooks and kvBackup are kv's parts of the description that
// a simplex kv (ClusterOptions.Simplex) replaces.
const (
	kvMore = `
      - {name: kv-2, host: ${KV2HOST}, address: "127.0.0.1:${KV2}", vars: {raft: "127.0.0.1:${KV2R}"}}
      - {name: kv-3, host: ${KV3HOST}, address: "127.0.0.1:${KV3}", vars: {raft: "127.0.0.1:${KV3R}"}}`
	kvHooks = `
    hooks:
      # Ceph's ok-to-stop is the quorum check; the leader hands its
      # leadership over before it stops, so writes barely notice.
      pre_stop: [{http: "http://{{.Address}}/admin/step-down", method: POST, timeout: 5s}]`
	kvBackup = `
    # One member: the upgrade cannot avoid downtime. Its data is backed
    # up with it stopped, verified, and restored if the upgrade goes
    # back. The commands are fixed scripts; every value is an argument.
    backup:
      dir: ${DIR}/backups
      data: "${DIR}/data/{{.Name}}"
      command:
        exec: [sh, -c, 'cd "$1" && tar -C "$2" -cf data.tar . && sha256sum data.tar > SHA256SUMS && if [ -e "$3/faults/backup-corrupt" ]; then echo corrupt >> data.tar; fi',
               backup, "{{.Backup}}", "${DIR}/data/{{.Name}}", "${DIR}"]
        timeout: 30s
      sums: SHA256SUMS
      check:
        exec: [sh, -c, 'if [ -e "$2/faults/restore-check-fails" ]; then echo "fault: restore-check-fails" >&2; exit 1; fi; tar -tf "$1/data.tar" > /dev/null',
               check, "{{.Backup}}", "${DIR}"]
      restore:
        exec: [sh, -c, 'rm -rf "$2" && mkdir -p "$2" && tar -C "$2" -xf "$1/data.tar"', restore, "{{.Backup}}", "${DIR}/data/{{.Name}}"]
        timeout: 30s
      keep: 2`
)

// coordComponent is the coordinator pair's part of the description
// (ClusterOptions.Coordinator); its ${...} are filled in with the
// rest.
const coordComponent = `  # An active/standby pair (sample coord) whose active member stamps
  # every write the api members make: the standby is upgraded first,
  # then the role is handed to it (hooks.switchover, .To the member it
  # goes to: journaled, undone by an abort), then the former active.
  - name: coord
    order: 0
    strategy: {type: active-standby}
    members:
      - {name: coord-1, host: host-1, address: "127.0.0.1:${COORD1}"}
      - {name: coord-2, host: host-1, address: "127.0.0.1:${COORD2}"}
    run:
      # A lease of 8 s: an active stopped without a switchover leaves
      # the pair without one for that long, longer than the load
      # balancer's retries of a write that waits for a stamp can hide.
      args: [coord, --name, "{{.Name}}", --http, "{{.Address}}", --lease, 8s, --handover-delay, "${HANDOVERDELAY}",
             --peer, "{{range .Members}}{{if ne .Name $.Name}}{{.Name}}={{.Address}}{{end}}{{end}}"${PINARGS}]
      stop_timeout: 10s
    health:
      member:  {http: "http://{{.Address}}/ready", interval: 100ms, timeout: 1s}
      cluster: {http: "http://{{.Any}}/cluster", json: {path: ok, equals: true}, interval: 100ms, timeout: 1s}
    role: {name: active, check: {http: "http://{{.Address}}/role", json: {path: role, equals: active}, interval: 100ms, timeout: 1s}}
    soak: ${SOAK}
    deadline: ${DEADLINE}
    gate_deadline: ${GATE}
    hooks:
      switchover: [{http: "http://{{.Any}}/admin/handover?to={{.To}}", method: POST, timeout: ${HANDOVERTIMEOUT}}]`

// Cluster is a running sample cluster: a ferry agent owning three kv
// members, four api members and a load balancer, all real processes.
type Cluster struct {
	Dir string
	// File is the cluster description; DataDir ferry's store for it.
	File    string
	DataDir string
	Config  *config.Cluster
	Driver  driver.Driver
	// LB is the load balancer's client URL, LBAdmin its admin URL.
	LB, LBAdmin string
	// Members are the members ferry upgrades, then the load balancer.
	Members []driver.Member
	// Addresses maps each upgraded member to its HTTP address.
	Addresses map[string]string

	stopAgent func()
	// agentArgs start the agent again (RestartAgent).
	self, agentAddr, agentDir string
	// stopOthers stop the agents of the hosts after host-1 (Hosts).
	stopOthers []func()
}

// StartCluster writes the description, starts the agent, the load
// balancer and every member on the start release (engine.Up, what
// 'ferry cluster up' does), and waits until all are healthy and the
// load balancer sees every backend.
//
// Its ports are drawn at random below the kernel's ephemeral range; a
// member that finds its port taken (another process bound it between
// the draw and the member's start) makes it start again on new ports,
// up to three times.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	before := map[string]bool{}
	if es, err := os.ReadDir(o.Dir); err == nil {
		for _, e := range es {
			before[e.Name()] = true
		}
	}
	for try := 1; ; try++ {
		cl, err := startCluster(ctx, o)
		if err == nil || try == 3 || ctx.Err() != nil || !portClash(o.Dir) {
			return cl, err
		}
		o.Logger.Warn("demo: a member's port was taken; starting again on new ports", "try", try, "err", err)
		// What this try made (description, agent, store, the members'
		// data with the old addresses in it) goes; what was there stays.
		es, err := os.ReadDir(o.Dir)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if !before[e.Name()] {
				if err := os.RemoveAll(filepath.Join(o.Dir, e.Name())); err != nil {
					return nil, err
				}
			}
		}
	}
}

// portClash reports whether a member's log in the cluster directory
// dir says its address was in use.
func portClash(dir string) bool {
	logs, _ := filepath.Glob(filepath.Join(dir, "agent*", "logs", "*", "*.log"))
	agents, _ := filepath.Glob(filepath.Join(dir, "agent*", "agent.log"))
	logs = append(logs, agents...)
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil && loopback.Clash(b) {
			return true
		}
	}
	return false
}

func startCluster(ctx context.Context, o ClusterOptions) (cl *Cluster, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Soak == 0 {
		o.Soak = 3 * time.Second
	}
	if o.Deadline == 0 {
		o.Deadline = 30 * time.Second
	}
	if o.GateDeadline == 0 {
		o.GateDeadline = 30 * time.Second
	}
	if o.OnFailure == "" {
		o.OnFailure = "rollback"
	}
	if o.Finalize == "" {
		o.Finalize = "auto"
	}
	if o.OnImpact == "" {
		o.OnImpact = "continue"
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	hosts := max(1, o.Hosts)
	names := []string{"AGENT", "KV1", "KV2", "KV3", "KV1R", "KV2R", "KV3R", "API1", "API2", "API3", "API4", "LB", "LBADMIN"}
	if o.Coordinator {
		names = append(names, "COORD1", "COORD2")
	}
	for i := 2; i <= hosts; i++ {
		names = append(names, fmt.Sprintf("AGENT%d", i))
	}
	ports, err := loopback.Ports(rand.Uint64(), len(names))
	if err != nil {
		return nil, err
	}
	kvSoak := o.Soak
	if o.KVSoak > 0 {
		kvSoak = o.KVSoak
	}
	vars := map[string]string{"DIR": dir, "SOAK": o.Soak.String(), "KVSOAK": kvSoak.String(), "DEADLINE": o.Deadline.String(),
		"GATE": o.GateDeadline.String(), "POLICY": o.OnFailure, "FINALIZE": o.Finalize, "IMPACT": o.OnImpact,
		"GATEQ": "", "GATETIMEOUT": "1s", "LAMEDUCK": "0s", "SLOWPRESTOP": "", "POSTSTART": "[]", "OKTOSTOP": "", "PINARGS": "", "COORD": "", "COORDARGS": "",
		"HANDOVERDELAY": o.SlowHandover.String(), "HANDOVERTIMEOUT": (o.SlowHandover + 5*time.Second).String()}
	if o.OKToStop {
		vars["OKTOSTOP"] = "\n    # The system's own answer: each kv member says whether it may stop\n" +
			"    # (no while the operator holds it), asked before its batch and\n" +
			"    # again after its drain.\n" +
			`    ok_to_stop: {http: "http://{{.Address}}/admin/ok-to-stop", timeout: 1s}`
	}
	vars["KVSTRATEGY"] = "{type: one-at-a-time, quorum: 2, max_unavailable: 1}"
	vars["KVMORE"], vars["KVHOOKS"] = kvMore, kvHooks
	vars["KVADDRS"] = "127.0.0.1:${KV1},127.0.0.1:${KV2},127.0.0.1:${KV3}"
	if o.Simplex {
		vars["KVSTRATEGY"] = "{type: offline}"
		vars["KVMORE"], vars["KVHOOKS"] = "", kvBackup
		vars["KVADDRS"] = "127.0.0.1:${KV1}"
	}
	if o.Pin {
		vars["PINARGS"] = `, --pin, "{{.Pin}}"`
	}
	if o.Coordinator {
		vars["COORD"] = coordComponent
		vars["COORDARGS"] = `, --coord, "127.0.0.1:${COORD1},127.0.0.1:${COORD2}"`
	}
	if o.GateDelay > 0 {
		vars["GATEQ"] = "?delay=" + o.GateDelay.String()
		vars["GATETIMEOUT"] = (o.GateDelay + 2*time.Second).String()
	}
	for i, n := range names {
		vars[n] = strconv.Itoa(ports[i])
	}
	placeOnHosts(vars, hosts, o.HostCapacity)
	if o.drawn != nil {
		o.drawn(vars)
	}
	if o.SlowSteps > 0 {
		// Each step of an api member's move takes about that long: a
		// second drain call and a post-start check that are slow (the
		// sample kv's delayed cluster check), a stop in lame duck.
		slow := fmt.Sprintf(`{http: "http://127.0.0.1:%s/cluster?delay=%s", timeout: %s}`, vars["KV1"], o.SlowSteps, o.SlowSteps+5*time.Second)
		vars["LAMEDUCK"] = o.SlowSteps.String()
		vars["SLOWPRESTOP"] = "\n        - " + slow
		vars["POSTSTART"] = "[" + slow + "]"
	}
	var rel strings.Builder
	for _, r := range o.Releases {
		sum, err := fileSHA256(r.Path)
		if err != nil {
			return nil, fmt.Errorf("demo: release %s: %w", r.Version, err)
		}
		fmt.Fprintf(&rel, "  - version: %q\n", r.Version)
		if len(r.UpgradeFrom) > 0 {
			q := make([]string, len(r.UpgradeFrom))
			for i, f := range r.UpgradeFrom {
				q[i] = strconv.Quote(f)
			}
			fmt.Fprintf(&rel, "    upgrade_from: [%s]\n", strings.Join(q, ", "))
		}
		if len(r.DowngradeTo) > 0 {
			q := make([]string, len(r.DowngradeTo))
			for i, f := range r.DowngradeTo {
				q[i] = strconv.Quote(f)
			}
			fmt.Fprintf(&rel, "    downgrade_to: [%s]\n", strings.Join(q, ", "))
		}
		if r.Migrations != "" {
			fmt.Fprintf(&rel, "    migrations: %s\n", placeholder.ReplaceAllStringFunc(r.Migrations, func(m string) string {
				if v, ok := vars[m[2:len(m)-1]]; ok {
					return v
				}
				return m
			}))
		}
		if r.Flow != "" {
			fmt.Fprintf(&rel, "    flow: %s\n", r.Flow)
		}
		if r.RequiresFerry != "" {
			fmt.Fprintf(&rel, "    requires_ferry: %q\n", r.RequiresFerry)
		}
		if r.FerryPath != "" {
			fsum, err := fileSHA256(r.FerryPath)
			if err != nil {
				return nil, fmt.Errorf("demo: release %s: ferry: %w", r.Version, err)
			}
			fmt.Fprintf(&rel, "    ferry: {path: %q, sha256: %q}\n", r.FerryPath, fsum)
		}
		sig := ""
		if r.SigningKey != "" {
			fmt.Fprintf(&rel, "    signing_key: %q\n", r.SigningKey)
			sig = fmt.Sprintf(", signature: %q", r.Signature)
		}
		fmt.Fprintf(&rel, "    artifacts: {\"*\": {path: %q, sha256: %q%s}}\n", r.Path, sum, sig)
	}
	vars["RELEASES"] = strings.TrimRight(rel.String(), "\n")
	// Only ${NAME} placeholders are filled in: os.Expand would also eat
	// the $i and $m of the Go templates inside the description.
	fill := func(t string) string {
		return placeholder.ReplaceAllStringFunc(t, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	// Twice: a part put in whole (the coordinator's) has its own.
	desc := fill(fill(clusterTemplate))
	cl = &Cluster{Dir: dir, File: filepath.Join(dir, "cluster.yaml"), DataDir: filepath.Join(dir, "ferry"),
		LB: "http://127.0.0.1:" + vars["LB"], LBAdmin: "http://127.0.0.1:" + vars["LBADMIN"], Addresses: map[string]string{}}
	if err := os.WriteFile(cl.File, []byte(desc), 0o644); err != nil {
		return nil, err
	}
	agentDir := filepath.Join(dir, "agent")
	agentAddr := "127.0.0.1:" + vars["AGENT"]
	cl.self, cl.agentAddr, cl.agentDir = o.Self, agentAddr, agentDir
	cl.stopAgent, err = startAgent(ctx, o.Self, agentAddr, agentDir)
	if err != nil {
		return nil, err
	}
	driverHosts, err := cl.startOtherAgents(ctx, vars, hosts)
	if err != nil {
		cl.Close()
		return nil, err
	}
	started := cl // the error returns below return a nil cluster
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	c, err := config.Load(cl.File)
	if err != nil {
		return nil, fmt.Errorf("demo: the generated description is invalid: %w", err)
	}
	cl.Config = c
	tok, err := bearer.Read(filepath.Join(agentDir, "token"))
	if err != nil {
		return nil, err
	}
	cl.Driver = process.New(append([]process.Host{{Name: "host-1", Addr: agentAddr, Token: tok}}, driverHosts...))
	st, err := store.Open(cl.DataDir)
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Config{Cluster: c, Driver: cl.Driver, Store: st, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	lb := driver.Member{Name: "lb", Component: "lb", Host: "host-1", Address: "127.0.0.1:" + vars["LB"],
		Args: []string{"lb", "--http", "127.0.0.1:" + vars["LB"], "--admin", "127.0.0.1:" + vars["LBADMIN"]}, StopTimeout: 10 * time.Second}
	for _, n := range []string{"API1", "API2", "API3", "API4"} {
		b := fmt.Sprintf("api-%s=127.0.0.1:%s", n[3:], vars[n])
		if hosts > 1 {
			b += "@" + vars[n+"HOST"]
		}
		lb.Args = append(lb.Args, "--backend", b)
	}
	cl.Members = append(eng.Members(), lb)
	for _, m := range eng.Members() {
		cl.Addresses[m.Name] = m.Address
	}
	// The load balancer is not part of the description (ferry does not
	// upgrade it): started here; then every member as 'ferry cluster up'
	// starts them, kv together (a raft cluster), api one at a time.
	art, err := eng.Artifact("api", o.Start)
	if err != nil {
		return nil, err
	}
	if err := cl.Driver.Start(ctx, lb, art); err != nil {
		return nil, fmt.Errorf("demo: start lb: %w", err)
	}
	if o.Bare {
		return cl, nil
	}
	if _, err := eng.Up(ctx, o.Start, nil); err != nil {
		return nil, fmt.Errorf("demo: cluster up: %w", err)
	}
	if err := waitHealthy(ctx, eng, cl.LBAdmin, dir, 60*time.Second); err != nil {
		return nil, err
	}
	return cl, nil
}

// Engine returns a new engine over the cluster and its store, as a
// ferry process would build it, except that its Run returns when the
// upgrade pauses: in the demo and the tests no operator resumes it.
func (cl *Cluster) Engine(logger *slog.Logger, onEvent func(store.Event)) (*engine.Engine, *store.Store, error) {
	return cl.EngineWith(func(c *engine.Config) { c.Logger, c.OnEvent = logger, onEvent })
}

// EngineWith is Engine with the configuration set by opt.
func (cl *Cluster) EngineWith(opt func(*engine.Config)) (*engine.Engine, *store.Store, error) {
	st, err := store.Open(cl.DataDir)
	if err != nil {
		return nil, nil, err
	}
	cfg := engine.Config{Cluster: cl.Config, Driver: cl.Driver, Store: st, ExitOnPause: true}
	if opt != nil {
		opt(&cfg)
	}
	e, err := engine.New(cfg)
	return e, st, err
}

// KillAgent kills the agent with SIGKILL (the members run on: they
// are in sessions of their own), as a host's agent crashing would.
func (cl *Cluster) KillAgent() error {
	b, err := os.ReadFile(filepath.Join(cl.agentDir, "agent.pid"))
	if err != nil {
		return fmt.Errorf("demo: the agent's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("demo: the agent's pid file: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	cl.stopAgent()
	return nil
}

// RestartAgent starts the agent again on its directory: it re-adopts
// the members that still run.
func (cl *Cluster) RestartAgent(ctx context.Context) error {
	stop, err := startAgent(ctx, cl.self, cl.agentAddr, cl.agentDir)
	if err != nil {
		return err
	}
	cl.stopAgent = stop
	return nil
}

// Close stops every member, then the agent.
func (cl *Cluster) Close() {
	if cl.Driver != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, m := range cl.Members {
			wg.Add(1)
			go func() { defer wg.Done(); _ = cl.Driver.Stop(sctx, m) }()
		}
		wg.Wait()
	}
	if cl.stopAgent != nil {
		cl.stopAgent()
	}
	for _, stop := range cl.stopOthers {
		stop()
	}
}

// Verify reads back every acknowledged write through the load balancer.
func (cl *Cluster) Verify(acked map[string]string) Writes { return verify(cl.LB, acked) }
