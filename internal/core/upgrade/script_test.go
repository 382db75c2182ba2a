package upgrade

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// TestScripts runs the scenarios in testdata/*.txt: each is a whole
// upgrade (or a piece of one) driven against a simulated world, with
// the trace the machine produced, so that a reader sees an upgrade as
// it happens. go test -run TestScripts -rewrite regenerates the traces.
//
// Commands:
//
//	cluster            the description (YAML input; the releases
//	                   1.0.0 and 2.0.0 are added when it lists none)
//	world k=v...       took, ready, gate-took, tick, recover (the gates
//	                   red for that long after a member's return: durations),
//	                   version, leader, down=member, fit=N (hosts
//	                   locked at once before a host's capacity call
//	                   says no)
//	fault k=v...       member=M kind=exit|never-ready|crash-after|start-fails,
//	                   or hook=LIST kind=fail|fail-once|unready (the
//	                   member unready while its hook runs, 50 actions
//	                   long)|slow (50 actions long), or undo kind=fail;
//	                   hook=lock kind=fail|fail-once (every host's
//	                   lock), or host=H kind=fail (host H's lock),
//	                   or backup=M kind=unverified|fail-once (member
//	                   M's backup does not verify, or its command
//	                   fails once),
//	                   reinstall=H kind=fail|fail-once (host H not
//	                   back within its bound after its reinstall,
//	                   going up),
//	                   migrate=H kind=fail|fail-once
//	begin to=V [ferry=R] plans and starts the upgrade; prints the plan;
//	                   ferry=R: its agents first moved to ferry R
//	fault ferry kind=fail  the agents' move to a newer ferry fails
//	run [for=D] [until=state:S|step:M:S|batch:N|effects|switching|host:H:S|ferry]
//	intent kind=K      pause, resume, abort, finalize
//	override predicate=P [member=M] | effect=ID
//	outage on|off      the substrate stops (starts) answering
//	refuse on|off      the substrate is refused (a host's key changed)
//	kill member=M / heal member=M   trouble ferry did not cause
//	ferry for=D kill|stop  ferry itself away for D: SIGKILL then a
//	                   resume, or SIGSTOP then SIGCONT
//	system member=M [no=WORDS]  what the system says when asked
//	                   whether M may stop (ok_to_stop): no, in its
//	                   words, or yes without no=
//	status             where everything stands
//	pins               each member's pin as last started, the record's
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			return // testdata/records: records as stored (schema_test.go)
		}
		var w *world
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			dur := func(k string, def time.Duration) time.Duration {
				if v, ok := args[k]; ok {
					x, err := time.ParseDuration(v)
					if err != nil {
						t.Fatalf("%s: %s=%q: %v", d.Pos, k, v, err)
					}
					return x
				}
				return def
			}
			switch d.Cmd {
			case "cluster":
				y := d.Input
				if !strings.Contains(y, "releases:") {
					y += "\n" + scriptReleases
				}
				c, err := config.Parse([]byte(y), "script.yaml")
				if err != nil {
					return "error: " + err.Error()
				}
				v := args["version"]
				if v == "" {
					v = "1.0.0"
				}
				w = newWorld(c, v)
				return "ok"
			case "world":
				w.took = dur("took", w.took)
				w.ready = dur("ready", w.ready)
				w.gateTook = dur("gate-took", w.gateTook)
				w.recover = dur("recover", w.recover)
				w.tick = dur("tick", w.tick)
				w.statusEvery = dur("status-every", w.statusEvery)
				if l, ok := args["leader"]; ok {
					w.leader = l
				}
				if n, ok := args["down"]; ok {
					w.exit(w.members[n], "killed")
				}
				if f, ok := args["fit"]; ok {
					fmt.Sscan(f, &w.hosts.fit)
				}
				return "ok"
			case "fault":
				switch {
				case args["member"] != "":
					w.faults[args["member"]] = args["kind"]
				case args["backup"] != "":
					w.faults["backup:"+args["backup"]] = args["kind"]
				case args["hook"] != "":
					w.faults["hook:"+args["hook"]] = args["kind"]
				case args["host"] != "":
					w.faults["lock:"+args["host"]] = args["kind"]
				case args["reinstall"] != "":
					w.faults["reinstall:"+args["reinstall"]] = args["kind"]
				case args["migrate"] != "":
					w.faults["migrate:"+args["migrate"]] = args["kind"]
				case d.CmdArgs[0].Key == "ferry":
					w.faults["ferry"] = args["kind"]
				default:
					w.faults["undo"] = args["kind"]
				}
				return "ok"
			case "begin":
				if err := w.begin(args["to"]); err != nil {
					return "error: " + err.Error()
				}
				if req, ok := args["ferry"]; ok {
					// The engine's part: a substrate with agents, a
					// release that requires a newer ferry than they run.
					w.u.Ferry = &FerryFirst{Requires: req}
				}
				var b strings.Builder
				for _, ph := range w.u.Plan.Phases {
					var bs []string
					for _, bb := range ph.Batches {
						if len(bb.Hosts) > 0 {
							bs = append(bs, "["+strings.Join(bb.Hosts, " ")+": "+strings.Join(bb.Members, " ")+"]")
							continue
						}
						bs = append(bs, "["+strings.Join(bb.Members, " ")+"]")
					}
					kind := ""
					if ph.Rollout {
						kind = " rollout"
					}
					if ph.Part != "" {
						kind += " (" + ph.Part + ")"
					}
					fmt.Fprintf(&b, "%s%s %s: %s\n", ph.Component, kind, ph.Strategy, strings.Join(bs, " "))
				}
				if len(w.u.Plan.Flow) > 0 {
					var st []string
					for _, f := range w.u.Plan.Flow {
						n := StageState(f).String()
						if f.PointOfNoReturn {
							n += "!"
						}
						st = append(st, n)
					}
					fmt.Fprintf(&b, "flow: %s\n", strings.Join(st, " "))
				}
				return b.String()
			case "run":
				w.trace.Reset()
				var stop func() bool
				if u := args["until"]; u != "" {
					stop = until(t, w, u)
				}
				w.run(dur("for", 10*time.Minute), stop)
				return w.trace.String()
			case "intent":
				w.u.Intent = Intent{Kind: IntentKind(args["kind"]), Seq: w.u.Intent.Seq + 1, Time: w.now}
				return "ok"
			case "override":
				w.u.Overrides = append(w.u.Overrides, Override{Predicate: args["predicate"], Member: args["member"],
					Effect: args["effect"], By: "tester", At: w.now})
				return "ok"
			case "outage":
				w.outage = args["on"] != "" || d.CmdArgs[0].Key == "on"
				return "ok"
			case "refuse":
				w.refused = ""
				if d.CmdArgs[0].Key == "on" {
					w.refused = "ssh host h2 (10.0.0.12:22): its key CHANGED: known_hosts holds SHA256:OLD (ssh-ed25519, line 2), and it presented SHA256:NEW (ssh-ed25519)"
				}
				return "ok"
			case "kill":
				w.exit(w.members[args["member"]], "killed")
				return "ok"
			case "heal":
				m := w.members[args["member"]]
				m.running, m.healthy, m.healthySince, m.started, m.detail = true, true, w.now, w.now, "ready"
				return "ok"
			case "ferry":
				w.trace.Reset()
				_, kill := args["kill"]
				w.away(dur("for", time.Minute), kill)
				return w.trace.String()
			case "system":
				w.says[args["member"]] = args["no"]
				return "ok"
			case "status":
				return w.status()
			case "pins":
				// Each member's version and the pin it was last started
				// with ("-": not started by ferry), and the record's pin.
				var b strings.Builder
				for _, n := range w.order {
					m := w.members[n]
					fmt.Fprintf(&b, "%s %s pin %s\n", n, m.version, cmp.Or(m.pin, "-"))
				}
				fmt.Fprintf(&b, "record pin %s, point of no return %s\n", w.u.Pin, cmp.Or(w.u.NoReturn.String(), "-"))
				return b.String()
			}
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		})
	})
}

// until returns a stop condition: state:S, step:M:S, batch:N (that
// many batches formed), effects (one journaled), switching (a batch's
// extra step has its call in flight), host:H:S (host H in step S).
func until(t *testing.T, w *world, u string) func() bool {
	kind, rest, _ := strings.Cut(u, ":")
	switch kind {
	case "state":
		return func() bool { return w.u.State.String() == rest }
	case "step":
		m, st, _ := strings.Cut(rest, ":")
		return func() bool { r := w.u.Members[m]; return r != nil && string(r.Step) == st }
	case "batch":
		var n int
		fmt.Sscan(rest, &n)
		return func() bool { return len(w.u.Batches) >= n }
	case "effects":
		return func() bool { return len(w.u.Effects) > 0 }
	case "ferry":
		// The agents' move to a newer ferry is in flight.
		return func() bool { return w.u.Ferry != nil && w.u.Ferry.Acting != 0 }
	case "host":
		h, st, _ := strings.Cut(rest, ":")
		return func() bool { r := w.u.Hosts[h]; return r != nil && string(r.Step) == st }
	case "switching":
		// A batch's extra step (a switchover) has its call in flight.
		return func() bool {
			for _, b := range w.u.Batches {
				for _, x := range b.Before {
					if x.Acting != 0 {
						return true
					}
				}
			}
			return false
		}
	}
	t.Fatalf("until %q: unknown condition", u)
	return nil
}

// scriptReleases is the catalog scripts get when they give none.
const scriptReleases = `releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/a-1, sha256: 3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/a-2, sha256: 9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a5c7e9b2d}}
`
