package store

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// thousand is the record of a 1,000-member upgrade half way, as the
// engine writes it in make bench-kube: one canary phase of one
// DaemonSet (batches 1, 2, 4, ..., 64, then 100 at a time), 511 members
// done, a batch of 100 in flight, the rest pending.
func thousand() upgrade.Upgrade {
	const n = 1000
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("agent-kwok-node-%d", i)
	}
	var batches []plan.Batch
	for i, size := 0, 1; i < n; size = min(size*2, 100) {
		batches = append(batches, plan.Batch{Members: names[i:min(i+size, n)]})
		i += size
	}
	set := strategy.Settings{Type: strategy.Canary, MaxBatch: 100, MaxUnavailable: 100}
	u := upgrade.Upgrade{ID: "upg-20300101-000000-abcdef", From: "1.0.0", To: "2.0.0", State: upgrade.Upgrading("agent"),
		Plan: plan.Plan{From: []string{"1.0.0"}, To: "2.0.0", Phases: []plan.Phase{{Component: "agent", Strategy: strategy.Canary,
			MaxUnavailable: 100, Settings: set, Batches: batches}}},
		Members: make(map[string]*upgrade.Member, n), Pin: "1.0.0", Description: fmt.Sprintf("%064x", 1),
		Created: t0, Updated: t0, Alive: t0}
	done := 511
	for i, b := range batches[:len(batches)-4] {
		u.Batches = append(u.Batches, upgrade.Batch{Component: "agent", Number: i + 1, Members: b.Members, Size: len(b.Members),
			Why: "canary: doubled after a clean batch"})
	}
	for i, name := range names {
		m := &upgrade.Member{Name: name, Component: "agent", From: "1.0.0", Target: "2.0.0", Step: upgrade.StepPending}
		switch {
		case i < done:
			at := t0.Add(time.Duration(i) * 50 * time.Millisecond)
			m.Step, m.Since, m.Began, m.HealthySince, m.Started, m.StartDone, m.Stopped = upgrade.StepDone, at, at, at, at, at, at
			m.LastTry, m.Tries, m.Acted, m.StopTook, m.StartTook, m.Busy = at, 1, true, 40*time.Millisecond, 30*time.Millisecond, 3*time.Second
		case i < done+100:
			at := t0.Add(time.Minute)
			m.Step, m.Since, m.Began, m.Stopped, m.LastTry, m.Tries, m.Acting = upgrade.StepStarting, at, at, at, at, 1, i
		}
		u.Members[name] = m
	}
	return u
}

// cpuTime is the CPU time this process used so far (user and system,
// every thread), in nanoseconds: a save's cost when the machine is
// loaded, where its wall time is mostly waiting for a core.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkSave1000 is one engine save of the 1,000-member record
// (thousand), with two events, at the revision it read, under the
// fence: "member" changes one member's step (an outcome folded in),
// "batch" 100 of them (a batch's starts returning together),
// "heartbeat" only the record's times (the engine's save at least every
// second). Each save makes its change as the state machine does: on a
// copy of the members it changes, the others shared.
func BenchmarkSave1000(b *testing.B) {
	for _, kind := range []struct {
		name    string
		members int
	}{{"member", 1}, {"batch", 100}, {"heartbeat", 0}} {
		b.Run(kind.name, func(b *testing.B) {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			u := thousand()
			f, err := s.Fence()
			if err != nil {
				b.Fatal(err)
			}
			rev, err := s.CreateAt(u, f)
			if err != nil {
				b.Fatal(err)
			}
			enc, _ := upgrade.Encode(u)
			steps := []upgrade.MemberStep{upgrade.StepSoaking, upgrade.StepStarting}
			names := make([]string, 0, 100)
			for i := 511; i < 611; i++ {
				names = append(names, fmt.Sprintf("agent-kwok-node-%d", i))
			}
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				next := u
				next.Members = make(map[string]*upgrade.Member, len(u.Members))
				for k, v := range u.Members {
					next.Members[k] = v
				}
				for j := range kind.members {
					m := *next.Members[names[j]]
					m.Step = steps[i%2]
					next.Members[m.Name] = &m
				}
				next.Alive = u.Alive.Add(time.Second)
				next.Updated = next.Alive
				u = next
				b.StartTimer()
				if rev, _, err = s.SaveAt(u, rev, f, []Event{{Kind: "step", Message: "x"}, {Kind: "action", Message: "y"}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(enc)), "record-bytes")
			if fi, err := os.Stat(s.Path()); err == nil {
				b.ReportMetric(float64(fi.Size()), "store-bytes")
			}
		})
	}
}
