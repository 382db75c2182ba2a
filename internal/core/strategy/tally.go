package strategy

import "reflect"

// Tally counts, among a view's Members, what the budget, quorum and
// substrate predicates look for: the members of each component, those
// down (not healthy, or in flight) by component, by component and
// failure domain and by host, and those not known by component. Whoever
// keeps a view's Members keeps its Tally with them (Change, as a member
// changes), and a predicate reads a count instead of walking every
// member: a view of ten thousand members is asked at each of ten
// thousand stops. The members' names are only named when a predicate
// refuses, walking them then.
type Tally struct {
	size    map[string]int
	down    map[string]int
	domain  map[domainKey]int
	host    map[string]int
	unknown map[string]int
}

type domainKey struct{ component, domain string }

// NewTally counts ms.
func NewTally(ms []Member) *Tally {
	t := &Tally{size: map[string]int{}, down: map[string]int{}, domain: map[domainKey]int{}, host: map[string]int{}, unknown: map[string]int{}}
	for _, m := range ms {
		t.add(m, 1)
	}
	return t
}

// Change counts m as it is now rather than as it was (was); nothing
// on a nil Tally.
func (t *Tally) Change(was, m Member) {
	if t == nil {
		return
	}
	if was.Component == m.Component && was.Host == m.Host && was.Domain == m.Domain && isDown(was) == isDown(m) && was.Unknown == m.Unknown {
		return
	}
	t.add(was, -1)
	t.add(m, 1)
}

func (t *Tally) add(m Member, d int) {
	t.size[m.Component] += d
	if m.Unknown {
		t.unknown[m.Component] += d
	}
	if !isDown(m) {
		return
	}
	t.down[m.Component] += d
	t.domain[domainKey{m.Component, m.Domain}] += d
	t.host[m.Host] += d
}

// Equal reports whether t and o count the same (zero counts aside).
func (t *Tally) Equal(o *Tally) bool {
	return sameCounts(t.size, o.size) && sameCounts(t.down, o.down) && sameCounts(t.domain, o.domain) && sameCounts(t.host, o.host) &&
		sameCounts(t.unknown, o.unknown)
}

func sameCounts[K comparable](a, b map[K]int) bool {
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	for k, n := range b {
		if a[k] != n {
			return false
		}
	}
	return true
}

// isDown: what a budget counts of a member that is not admitted.
func isDown(m Member) bool { return m.InFlight || !m.Healthy }

// admittedTally counts the admitted members that are up (the others
// are counted down already) where a budget looks, as Admit added them
// to the map of (reflect's pointer of the map).
type admittedTally struct {
	of     uintptr
	n      int
	comp   map[string]int
	domain map[domainKey]int
	host   map[string]int
}

// ResetAdmitted empties Admitted, for a new round.
func (v *View) ResetAdmitted() {
	v.Admitted = map[string]bool{}
	v.admitted = admittedTally{of: reflect.ValueOf(v.Admitted).Pointer()}
}

// Admit adds member n to Admitted: it counts as down from now on in
// this round.
func (v *View) Admit(n string) {
	if v.Admitted == nil {
		v.ResetAdmitted()
	}
	if v.Admitted[n] {
		return
	}
	v.Admitted[n] = true
	t := &v.admitted
	if t.of != reflect.ValueOf(v.Admitted).Pointer() || t.n != len(v.Admitted)-1 {
		t.of = 0 // Admitted was written to directly: not counted here
		return
	}
	t.n++
	m, ok := v.indexed(n)
	if !ok || isDown(m) {
		return
	}
	if t.comp == nil {
		t.comp, t.domain, t.host = map[string]int{}, map[domainKey]int{}, map[string]int{}
	}
	t.comp[m.Component]++
	t.domain[domainKey{m.Component, m.Domain}]++
	t.host[m.Host]++
}

// indexed is member n of the view, found through its Index.
func (v *View) indexed(n string) (Member, bool) {
	i, ok := v.Index[n]
	if !ok || i >= len(v.Members) || v.Members[i].Name != n {
		return Member{}, false
	}
	return v.Members[i], true
}

// counted reports whether the view's counts can be read from its
// Tally: it has one and an Index, and every admitted member was added
// through Admit.
func (v *View) counted() bool {
	return v.Tally != nil && v.Index != nil && v.admitted.of != 0 && v.admitted.of == reflect.ValueOf(v.Admitted).Pointer() &&
		v.admitted.n == len(v.Admitted)
}

// The budgets' scopes, as counted.
const (
	scopeComponent = iota
	scopeDomain
	scopeHost
)

// countTallied is what countIndexed counts, from the Tally: the members
// of c's scope down, in flight or admitted, but c.
func (v *View) countTallied(c Member, scope int) int {
	var down, up int
	switch scope {
	case scopeComponent:
		down, up = v.Tally.down[v.Component], v.admitted.comp[v.Component]
	case scopeDomain:
		k := domainKey{v.Component, c.Domain}
		down, up = v.Tally.domain[k], v.admitted.domain[k]
	case scopeHost:
		down, up = v.Tally.host[c.Host], v.admitted.host[c.Host]
	}
	n := down + up
	// c itself is not counted against its own budget.
	if m, ok := v.indexed(c.Name); ok && inScope(v, c, m, scope) {
		switch {
		case isDown(m):
			n--
		case v.Admitted[m.Name]:
			n--
		}
	}
	return n
}

// inScope reports whether m is in candidate c's scope.
func inScope(v *View, c, m Member, scope int) bool {
	switch scope {
	case scopeComponent:
		return m.Component == v.Component
	case scopeDomain:
		return m.Component == v.Component && m.Domain == c.Domain
	}
	return m.Host == c.Host
}

// quorumTallied is what quorum counts, from the Tally: the members of
// the view's component up and not admitted, but c.
func (v *View) quorumTallied(c Member) int {
	comp := v.Component
	n := v.Tally.size[comp] - v.Tally.down[comp] - v.admitted.comp[comp]
	if m, ok := v.indexed(c.Name); ok && m.Component == comp && !isDown(m) && !v.Admitted[m.Name] {
		n--
	}
	return n
}
