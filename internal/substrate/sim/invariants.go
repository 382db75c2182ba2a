package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// Invariant is one rule a simulated upgrade must keep, how often the
// sim checked it, and every time it found it broken.
type Invariant struct {
	Name   string   `json:"name"`
	Checks int      `json:"checks"`
	Broken []string `json:"broken,omitempty"`
}

// The invariants, checked from what the world sees at every instant
// ferry takes a healthy member down (a stop, a swap), and at the end.
const (
	InvMaxUnavailable = "max_unavailable per component"
	InvPerHost        = "max_unavailable_per_host"
	InvPerDomain      = "max_unavailable_per_domain"
	InvQuorum         = "quorum (the strategy's)"
	InvOnePhase       = "one component's phase at a time"
	InvOneSwitchover  = "one switchover at a time"
	InvEnd            = "every member ends on the target (completed) or the source (rolled back)"
)

// maxBroken bounds what is kept of one invariant's breaches.
const maxBroken = 20

// Invariants are the rules of one run.
type Invariants struct {
	byName map[string]*Invariant
	order  []string
}

func newInvariants() *Invariants {
	inv := &Invariants{byName: map[string]*Invariant{}}
	for _, n := range []string{InvMaxUnavailable, InvPerHost, InvPerDomain, InvQuorum, InvOnePhase, InvOneSwitchover, InvHosts, InvEnd} {
		inv.byName[n] = &Invariant{Name: n}
		inv.order = append(inv.order, n)
	}
	return inv
}

func (inv *Invariants) check(name string, ok bool, at time.Time, format string, args ...any) {
	i := inv.byName[name]
	i.Checks++
	if !ok && len(i.Broken) < maxBroken {
		i.Broken = append(i.Broken, fmt.Sprintf("at %s: ", at.Sub(Epoch).Round(time.Millisecond))+fmt.Sprintf(format, args...))
	}
}

// List returns the invariants in their order.
func (inv *Invariants) List() []Invariant {
	out := make([]Invariant, 0, len(inv.order))
	for _, n := range inv.order {
		out = append(out, *inv.byName[n])
	}
	return out
}

// checkDown checks, as ferry takes healthy member m down, its
// component's budgets (counting every member of it not healthy, m
// included; per host, every member on the host), its quorum, and that
// no other component is in its phase (but those a hosts stage moves
// with it). w.mu is held.
func (w *World) checkDown(m *member, why string) {
	now := w.clock.Now()
	comp := w.c.Component(m.comp)
	s := comp.Strategy
	down, onHost, inDomain, healthy := 1, 1, 1, 0
	var others []string
	span := w.span[m.comp]
	for _, part := range [][]*member{w.list[:span[0]], w.list[span[1]:]} {
		for _, o := range part {
			if o.ferryDown && !w.hosts.movesWith(m.comp, o.comp) {
				others = append(others, o.name+" ("+o.comp+")")
			}
		}
	}
	for _, o := range w.onHost[m.host] {
		if o.comp != m.comp && !o.ready {
			onHost++
		}
	}
	for _, o := range w.list[span[0]:span[1]] {
		if o == m {
			continue
		}
		if o.ready {
			healthy++
			continue
		}
		down++
		if o.host == m.host {
			onHost++
		}
		if o.domain == m.domain {
			inDomain++
		}
	}
	note(&w.most.Component, m.comp, down)
	note(&w.most.Host, m.host, onHost)
	if m.domain != "" {
		note(&w.most.Domain, m.comp+"/"+m.domain, inDomain)
	}
	what := fmt.Sprintf("%s taken down (%s)", m.name, why)
	w.inv.check(InvMaxUnavailable, down <= max(s.MaxUnavailable, 1), now, "%s: %d of %s down, max_unavailable %d", what, down, m.comp, max(s.MaxUnavailable, 1))
	if s.MaxUnavailablePerHost > 0 {
		w.inv.check(InvPerHost, onHost <= s.MaxUnavailablePerHost, now, "%s: %d members down on host %s (of every component), max %d", what, onHost, m.host, s.MaxUnavailablePerHost)
	}
	if s.MaxUnavailablePerDomain > 0 {
		w.inv.check(InvPerDomain, inDomain <= s.MaxUnavailablePerDomain, now, "%s: %d of %s down in domain %s, max %d", what, inDomain, m.comp, m.domain, s.MaxUnavailablePerDomain)
	}
	// The quorum the component's strategy keeps, as its registry says.
	if st, ok := strategy.Lookup(string(s.Type)); ok {
		if q := st.Quorum(s.Settings(), len(comp.Members)); q > 0 {
			w.inv.check(InvQuorum, healthy >= q, now, "%s: %d others of %s healthy, quorum %d", what, healthy, m.comp, q)
		}
	}
	sort.Strings(others)
	w.inv.check(InvOnePhase, len(others) == 0, now, "%s while %v are in their phase", what, others)
}

// checkSwitchovers checks, as member m's role starts moving, that no
// other component's role is moving. w.mu is held.
func (w *World) checkSwitchovers(m *member) {
	moving := w.movingRoles(m.comp)
	w.inv.check(InvOneSwitchover, len(moving) == 0, w.clock.Now(), "the role of %s moves (%s down) while %v's moves too", m.comp, m.name, moving)
}

// movingRoles lists, sorted, the components whose role is moving, but
// skip ("" for none). w.mu is held.
func (w *World) movingRoles(skip string) []string {
	var out []string
	for c, yes := range w.moving {
		if yes && c != skip {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// checkEnd checks where every member ended, for an upgrade that ended
// completed (on the target) or rolled back (on what it ran before).
func (w *World) checkEnd(u upgrade.Upgrade) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	for _, n := range w.order {
		m := w.members[n]
		want := ""
		switch u.State {
		case upgrade.StateCompleted:
			want = u.To
		case upgrade.StateRolledBack:
			want = u.From
		default:
			return
		}
		if r := u.Members[n]; r != nil && u.State == upgrade.StateRolledBack && r.From != "" {
			want = r.From
		}
		ok := m.version == want && m.up && m.ready
		w.inv.check(InvEnd, ok, now, "%s ended %s on %s (up %v, healthy %v), want %s", n, u.State, m.version, m.up, m.ready, want)
	}
}
