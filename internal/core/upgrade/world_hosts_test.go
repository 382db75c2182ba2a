package upgrade

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// whosts is the simulated world's side of hosts stages: which hosts
// are locked (a balancer's maintenance mode), the most locked at once,
// and the capacity call's answers: the other hosts can take a host's
// load while fewer than fit are locked (0: always).
type whosts struct {
	locked     map[string]bool
	mostAtOnce int
	locks      int
	// fit is how many hosts may be locked at once before the capacity
	// call says no (0: it always says yes).
	fit     int
	asks    []wask
	answers map[string]Answer
	// reinstalling are the hosts whose reinstall runs (they do not
	// answer meanwhile); installed each host's release as its last
	// reinstall left it, migrated each host's data's.
	reinstalling map[string]bool
	installed    map[string]string
	migrated     map[string]string
}

// beginReinstall: host h stops answering while its reinstall runs.
func (w *world) beginReinstall(h string) {
	if w.hosts.reinstalling == nil {
		w.hosts.reinstalling = map[string]bool{}
	}
	w.hosts.reinstalling[h] = true
}

// reinstall ends host h's reinstall with version: it answers again,
// unless a fault of its reinstall keeps it away past its bound.
func (w *world) reinstall(h, version string) error {
	delete(w.hosts.reinstalling, h)
	f := w.faults["reinstall:"+h]
	if f == "fail-once" && w.faults["failed:reinstall:"+h] == "" {
		w.faults["failed:reinstall:"+h], f = "yes", "fail"
	}
	if f == "fail" && version != w.from {
		w.logf("(world) host %s does not answer after its reinstall with %s", h, version)
		return fmt.Errorf("ssh driver: reinstall of host %s (run on %s): the host did not answer for 20.5s, more than its bound 20s", h, h)
	}
	if w.hosts.installed == nil {
		w.hosts.installed = map[string]string{}
	}
	w.hosts.installed[h] = version
	w.logf("(world) host %s reinstalled with %s, answers again", h, version)
	return nil
}

// migrate migrates host h's data to version, unless a fault says no.
func (w *world) migrate(h, version string) error {
	switch w.faults["migrate:"+h] {
	case "fail":
		return fmt.Errorf("ssh driver: data migration of host %s: exit status 1: schema %s refused", h, version)
	case "fail-once":
		if w.faults["failed:migrate:"+h] == "" {
			w.faults["failed:migrate:"+h] = "yes"
			return fmt.Errorf("ssh driver: data migration of host %s: exit status 1: database busy (once)", h)
		}
	}
	if w.hosts.migrated == nil {
		w.hosts.migrated = map[string]string{}
	}
	w.hosts.migrated[h] = version
	return nil
}

// hostAway reports whether member n's host does not answer (reinstalling).
func (w *world) hostAway(n string) bool {
	if len(w.hosts.reinstalling) == 0 {
		return false
	}
	for i := range w.c.Components {
		for _, m := range w.c.Components[i].Members {
			if m.Name == n {
				return w.hosts.reinstalling[m.Host]
			}
		}
	}
	return false
}

// lock locks host h, unless a fault of its lock says otherwise.
func (w *world) lock(h string) error {
	switch cmp.Or(w.faults["lock:"+h], w.faults["hook:lock"]) {
	case "fail":
		return errors.New("lock hook 1: 503 Service Unavailable")
	case "fail-once":
		if w.faults["failed:lock:"+h] == "" {
			w.faults["failed:lock:"+h] = "yes"
			return errors.New("lock hook 1: 503 Service Unavailable (once)")
		}
	}
	if w.hosts.locked == nil {
		w.hosts.locked = map[string]bool{}
	}
	if !w.hosts.locked[h] {
		w.hosts.locks++
	}
	w.hosts.locked[h] = true
	w.hosts.mostAtOnce = max(w.hosts.mostAtOnce, len(w.hosts.locked))
	return nil
}

// unlock unlocks host h (idempotent).
func (w *world) unlock(h string) { delete(w.hosts.locked, h) }

// askCapacity starts the capacity calls asked for, one at a time per
// host.
func (w *world) askCapacity(hosts []string) {
	for _, h := range hosts {
		if !slices.ContainsFunc(w.hosts.asks, func(a wask) bool { return a.member == h }) {
			w.hosts.asks = append(w.hosts.asks, wask{member: h, start: w.now})
		}
	}
}

// answerCapacity ends the capacity calls whose time has come with what
// the world says then.
func (w *world) answerCapacity() {
	var left []wask
	for _, a := range w.hosts.asks {
		if a.start.Add(w.gateTook).After(w.now) {
			left = append(left, a)
			continue
		}
		others := 0
		for h := range w.hosts.locked {
			if h != a.member {
				others++
			}
		}
		ans := Answer{Yes: true, Words: "200 OK", Asked: a.start}
		if w.hosts.fit > 0 && others >= w.hosts.fit {
			ans = Answer{Words: fmt.Sprintf(`409 Conflict: {"fits":false,"locked":%d,"fit":%d}`, others, w.hosts.fit), Asked: a.start}
		}
		if w.hosts.answers == nil {
			w.hosts.answers = map[string]Answer{}
		}
		w.hosts.answers[a.member] = ans
		verdict := "yes"
		if !ans.Yes {
			verdict = "no (" + ans.Words + ")"
		}
		w.logf("(world) asked at %.3fs whether %s may be locked: %s", a.start.Sub(w.t0).Seconds(), a.member, verdict)
	}
	w.hosts.asks = left
}

func (h *whosts) observe() map[string]Answer {
	if len(h.answers) == 0 {
		return nil
	}
	out := make(map[string]Answer, len(h.answers))
	for n, a := range h.answers {
		out[n] = a
	}
	return out
}

// status says where the hosts stand, for a record with hosts.
func (h *whosts) status(u Upgrade) string {
	if len(u.Hosts) == 0 {
		return ""
	}
	var steps []string
	for _, n := range sortedKeys(u.Hosts) {
		steps = append(steps, n+"="+string(u.Hosts[n].Step))
	}
	out := fmt.Sprintf("hosts: %s\nlocked: %s (most at once %d, locks %d)\n", strings.Join(steps, ", "),
		cmp.Or(strings.Join(sortedKeys(h.locked), ", "), "-"), h.mostAtOnce, h.locks)
	if len(h.installed) > 0 || len(h.migrated) > 0 {
		var in, mi []string
		for _, n := range sortedKeys(h.installed) {
			in = append(in, n+"="+h.installed[n])
		}
		for _, n := range sortedKeys(h.migrated) {
			mi = append(mi, n+"="+h.migrated[n])
		}
		out += fmt.Sprintf("installed: %s; data migrated: %s\n", cmp.Or(strings.Join(in, ", "), "-"), cmp.Or(strings.Join(mi, ", "), "-"))
	}
	return out
}
