package selfupgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// script writes an executable that prints out when asked anything: a
// real program for Check to run.
func script(t *testing.T, out string) (path, sum string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ferry")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nprintf '%s\\n' '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := checksum.File(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, sum
}

// TestCheck: the sum first, then the release the binary says, which
// must be newer than the running ferry's; each refusal names what it
// compared.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, says, sum string
		want            []string // in the error; none: accepted
	}{
		{"newer", `{"release":"1.0.0"}`, "", nil},
		{"same", `{"release":"0.9.0"}`, "", []string{"release 0.9.0", "already"}},
		{"downgrade", `{"release":"0.8.5"}`, "", []string{"release 0.8.5", "older than this ferry's 0.9.0", "downgrade"}},
		{"wrong sum", `{"release":"1.0.0"}`, strings.Repeat("a", 64), []string{"has sha256", "not " + strings.Repeat("a", 64)}},
		{"bad sum", `{"release":"1.0.0"}`, "abc", []string{`--sha256 "abc"`}},
		{"not a ferry", `hello`, "", []string{`answered "hello\n"`, "not a ferry's version"}},
		{"no release", `{"release":"latest"}`, "", []string{"not a ferry's version"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, sum := script(t, c.says)
			if c.sum != "" {
				sum = c.sum
			}
			b, err := Check(ctx, path, sum, "0.9.0")
			if c.want == nil {
				if err != nil || b.Release != "1.0.0" || b.SHA256 != sum {
					t.Fatalf("Check: %+v, %v", b, err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Check: %v, want a refusal", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// agents is a world of agents in memory: each host's release, a
// re-exec that takes effect after delay (or never), a host that does
// not answer.
type agents struct {
	mu       sync.Mutex
	release  map[string]string
	down     map[string]bool
	never    map[string]bool
	reexecs  []string
	deadline map[string]time.Time
	next     map[string]string
}

func newAgents(rel map[string]string) *agents {
	return &agents{release: rel, down: map[string]bool{}, never: map[string]bool{}, deadline: map[string]time.Time{}, next: map[string]string{}}
}

func (a *agents) AgentRelease(ctx context.Context, host string) (string, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down[host] {
		return "", "", fmt.Errorf("host %s: connection refused", host)
	}
	if at, ok := a.deadline[host]; ok {
		if time.Now().Before(at) {
			return "", "", errors.New("connection refused (between programs)")
		}
		a.release[host] = a.next[host]
		delete(a.deadline, host)
	}
	return a.release[host], "build-" + a.release[host], nil
}

func (a *agents) ReexecAgent(ctx context.Context, host, path, sum, release string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reexecs = append(a.reexecs, host)
	if !a.never[host] {
		a.deadline[host] = time.Now().Add(50 * time.Millisecond)
		a.next[host] = release
	} else {
		a.deadline[host] = time.Now().Add(time.Hour)
	}
	return nil
}

type current struct {
	u  upgrade.Upgrade
	ok bool
}

func (c current) Current() (upgrade.Upgrade, bool, error) { return c.u, c.ok, nil }

// TestUpgradeAgents: host by host, each waited for on the new release
// before the next; an agent on it already is skipped; an upgrade in
// progress, an agent that does not answer or is newer are refused
// before any re-exec; one that does not come back stops it, naming
// the host, with the hosts before it done.
func TestUpgradeAgents(t *testing.T) {
	ctx := context.Background()
	bin := Binary{Path: "/x/ferry", SHA256: strings.Repeat("b", 64), Release: "1.0.0"}
	hosts := []string{"h1", "h2", "h3"}
	run := func(a *agents, st Store) (Report, error) {
		return UpgradeAgents(ctx, Config{Binary: bin, Hosts: hosts, Agents: a, Store: st, Wait: 500 * time.Millisecond, Poll: 10 * time.Millisecond})
	}

	a := newAgents(map[string]string{"h1": "0.9.0", "h2": "1.0.0", "h3": ""})
	rep, err := run(a, current{upgrade.Upgrade{ID: "u1", State: upgrade.State{Kind: upgrade.KindCompleted}}, true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.reexecs) != "[h1 h3]" || rep.Upgraded() != 2 || !rep.Agents[1].Skipped || rep.Agents[2].From != "" || rep.Agents[2].Build != "build-1.0.0" {
		t.Errorf("re-execs %v, report %+v", a.reexecs, rep)
	}

	for _, c := range []struct {
		name  string
		setup func(*agents)
		st    Store
		want  string
		busy  bool
	}{
		{"upgrade in progress", func(*agents) {}, current{upgrade.Upgrade{ID: "u2", State: upgrade.State{Kind: upgrade.KindPaused}, From: "1.0.0", To: "2.0.0"}, true}, "upgrade u2 is paused (1.0.0 → 2.0.0)", true},
		{"agent away", func(a *agents) { a.down["h2"] = true }, nil, "host h2's agent", false},
		{"agent newer", func(a *agents) { a.release["h3"] = "1.1.0" }, nil, "host h3's agent is ferry 1.1.0, newer than 1.0.0", false},
	} {
		a := newAgents(map[string]string{"h1": "0.9.0", "h2": "0.9.0", "h3": "0.9.0"})
		c.setup(a)
		_, err := run(a, c.st)
		if !errors.Is(err, ErrRefused) || errors.Is(err, ErrBusy) != c.busy || !strings.Contains(err.Error(), c.want) || len(a.reexecs) != 0 {
			t.Errorf("%s: %v (re-execs %v), want a refusal saying %q, busy %v", c.name, err, a.reexecs, c.want, c.busy)
		}
	}

	a = newAgents(map[string]string{"h1": "0.9.0", "h2": "0.9.0", "h3": "0.9.0"})
	a.never["h2"] = true
	rep, err = run(a, nil)
	if err == nil || !strings.Contains(err.Error(), "host h2: the agent did not answer on release 1.0.0 within 500ms") || errors.Is(err, ErrRefused) {
		t.Errorf("agent that never comes back: %v", err)
	}
	if fmt.Sprint(a.reexecs) != "[h1 h2]" || len(rep.Agents) != 1 || rep.Agents[0].Host != "h1" {
		t.Errorf("re-execs %v, report %+v: want h1 done, h2 tried, h3 untouched", a.reexecs, rep)
	}
}
