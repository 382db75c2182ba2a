package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/surface/demo/loopback"
	"github.com/ferry-upgrade/ferry/internal/testenv/sshtest"
)

// sshSimplex is a simplex (StarlingX's one-host system) on one
// namespace host: kv one member (strategy offline) whose data is backed
// up on the host itself (a tar of its data directory and its
// sha256sum, into the host's backups directory, outside the data),
// checked by tar's listing, restored by unpacking it; api beside it; a
// fault file the hosts share makes the next backup not verify. The
// releases are 1.0.0, 2.0.0 and 2.0.0-bad.exit (exits at its start).
const sshSimplex = `cluster: simplex
substrate: ssh
hosts:
  - ${HOST}
components:
  - name: kv
    order: 1
    strategy: {type: offline}
    members:
      - {name: kv-1, host: h1, address: "${IP}:8101", vars: {raft: "${IP}:9101"}}
    run:
      args: [kv, --id, "{{.Name}}", --http, "{{.Address}}", --raft, "{{.Vars.raft}}", --data, data, --peers, "{{.Name}}={{.Vars.raft}}={{.Address}}"]
      stop_timeout: 10s
    health:
      member:  {http: "http://{{.Address}}/ready", expect_status: 200, interval: 100ms, timeout: 1s}
      cluster: {http: "http://{{.Any}}/cluster", json: {path: quorum, equals: true}, interval: 100ms, timeout: 1s}
    soak: 1s
    deadline: 20s
    gate_deadline: 30s
    backup:
      dir: ${DIR}/backups
      data: "${DIR}/members/{{.Name}}/data"
      command:
        exec: [sh, -c, 'cd "$1" && tar -C "$2" -cf data.tar . && sha256sum data.tar > SHA256SUMS && if [ -e "$3" ]; then echo corrupt >> data.tar; fi; echo "on ${SSH_CONNECTION:-none}"',
               backup, "{{.Backup}}", "${DIR}/members/{{.Name}}/data", "${FAULT}"]
        timeout: 30s
      sums: SHA256SUMS
      check: {exec: [tar, -tf, "{{.Backup}}/data.tar"]}
      restore:
        exec: [sh, -c, 'rm -rf "$2" && mkdir -p "$2" && tar -C "$2" -xf "$1/data.tar"', restore, "{{.Backup}}", "${DIR}/members/{{.Name}}/data"]
        timeout: 30s
      keep: 2
  - name: api
    order: 2
    strategy: {type: offline}
    members:
      - {name: api-1, host: h1, address: "${IP}:8201"}
    run:
      args: [api, --name, "{{.Name}}", --http, "{{.Address}}", --kv, "${IP}:8101"]
      stop_timeout: 10s
    health:
      member: {http: "http://{{.Address}}/ready", interval: 100ms, timeout: 1s}
    soak: 1s
    deadline: 20s
releases:
  - version: "1.0.0"
    artifacts: {"*": {path: "${BIN1}", sha256: "${SUM1}"}}
  - version: "2.0.0"
    upgrade_from: ["1.0.x"]
    artifacts: {"*": {path: "${BIN2}", sha256: "${SUM2}"}}
  - version: "2.0.0-bad.exit"
    upgrade_from: ["1.0.x"]
    artifacts: {"*": {path: "${BINBAD}", sha256: "${SUMBAD}"}}
policy: {on_failure: rollback, tick: 200ms}
`

// TestSSHSimplexBackupOnHost: a simplex over SSH, its backup made,
// checked and restored on the host itself (capability backup-on-host),
// under client traffic, in turn:
//
//   - a release that exits at its start (after the install): rolled
//     back, kv-1 restored from its backup and on 1.0.0; every write
//     acknowledged before or during it reads back; the backup command
//     ran on the host (its own words say so in the events);
//   - a backup that does not verify (it changed after its sums were
//     written): the upgrade stops before the install (no start of kv-1
//     on 2.0.0), rolled back;
//   - 2.0.0: completed, the backups on the host pruned to the newest 2,
//     every acknowledged write read back.
func TestSSHSimplexBackupOnHost(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a real cluster on namespace hosts")
	}
	env := sshtest.New(t, 1)
	h := env.Hosts[0]
	dir := t.TempDir()
	fault := filepath.Join(dir, "backup-corrupt")
	ports, err := loopback.Ports(rand.Uint64(), 2)
	if err != nil {
		t.Fatal(err)
	}
	lbAddr, lbAdmin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	vars := map[string]string{"HOST": h.YAML(), "IP": h.IP, "DIR": h.Dir, "FAULT": fault}
	for key, v := range map[string]string{"1": "1.0.0", "2": "2.0.0", "BAD": "2.0.0-bad.exit"} {
		b, err := os.ReadFile(bin.sample[v])
		if err != nil {
			t.Fatal(err)
		}
		vars["BIN"+key], vars["SUM"+key] = bin.sample[v], sha(b)
	}
	desc := os.Expand(sshSimplex, func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return "${" + k + "}" // the shell's own, in the backup's commands
	})
	cl := upSSH(t, env, dir, desc, lbAddr, lbAdmin, []string{"api-1=" + h.IP + ":8201@h1"})
	backups := filepath.Join(h.Dir, "backups", "kv-1")
	seed := uint64(time.Now().UnixNano())
	t.Logf("traffic seed %d", seed)
	live, stop := liveTraffic(cl.Cluster, seed)
	waitFor(t, 30*time.Second, "100 writes acknowledged before the upgrades", func() bool { return len(live.Acked()) >= 100 })

	run := func(to string) upgrade.Upgrade {
		t.Helper()
		out, code := ferry(t, cl.Cluster, "upgrade", "start", "--to", to, "--accept-downtime", "-q")
		u, _ := status(t, cl.Cluster)
		t.Logf("ferry upgrade start --to %s: exit %d, %s: %s\n%s", to, code, u.State, u.Reason, out)
		return u
	}
	said := func(u upgrade.Upgrade, what string) bool {
		for _, ev := range eventsOf(t, cl.Cluster, u.ID) {
			if strings.Contains(ev.Message, what) {
				return true
			}
		}
		return false
	}

	u := run("2.0.0-bad.exit")
	if u.State != upgrade.StateRolledBack || !said(u, "restored from "+filepath.Join(backups, u.ID)) {
		t.Errorf("the release that exits: %s, want rolled-back with kv-1 restored from %s", u.State, filepath.Join(backups, u.ID))
	}
	// The command says where it ran: sshd's SSH_CONNECTION on the host
	// ends with the host's address and port 22.
	if !said(u, "ran on host h1: on ") || !said(u, h.IP+" 22)") {
		t.Errorf("no event says the backup command ran on the host (%s)", h.IP)
	}
	expectAllOn(t, cl.Cluster, "1.0.0")

	if err := os.WriteFile(fault, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	u = run("2.0.0")
	if err := os.Remove(fault); err != nil {
		t.Fatal(err)
	}
	if u.State != upgrade.StateRolledBack || !said(u, "checksum") || said(u, "start kv-1 on 2.0.0") {
		t.Errorf("a backup that does not verify: %s (%s), want rolled back on its checksum before any start on 2.0.0", u.State, u.Reason)
	}
	expectAllOn(t, cl.Cluster, "1.0.0")

	u = run("2.0.0")
	rec := stop()
	if u.State != upgrade.StateCompleted || len(u.Effects) > 0 {
		t.Errorf("2.0.0: %s (%s), owing %v", u.State, u.Reason, u.Effects)
	}
	expectAllOn(t, cl.Cluster, "2.0.0")
	checkWrites(t, cl.Cluster, rec)
	es, err := os.ReadDir(backups)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range es {
		kept = append(kept, e.Name())
	}
	t.Logf("backups kept on the host: %v; %d of %d requests failed (the simplex's downtime)", kept, failedRequests(rec), len(rec.Samples()))
	if len(kept) != 2 {
		t.Errorf("backups kept on the host: %v, want the newest 2", kept)
	}
}
