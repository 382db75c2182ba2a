package strategy

import (
	"reflect"
	"strings"
	"testing"
)

// hostView is a view of hosts written as "name[/domain]:flags", flags
// l (locked), d (a member down), u (unknown), r (a role holder), c
// (asks its capacity: yes), n (asks its capacity: no), a (asks its
// capacity: not answered yet).
func hostView(maxU, perDomain int, specs ...string) *HostView {
	v := &HostView{MaxUnavailable: maxU, MaxUnavailablePerDomain: perDomain, Admitted: map[string]bool{}}
	for _, sp := range specs {
		name, flags, _ := strings.Cut(sp, ":")
		h := Host{}
		if n, d, ok := strings.Cut(name, "/"); ok {
			name, h.Domain = n, d
		}
		h.Name = name
		for _, f := range flags {
			switch f {
			case 'l':
				h.Locked = true
			case 'd':
				h.Down = append(h.Down, name+"-m")
			case 'u':
				h.Unknown = true
			case 'r':
				h.Role = true
			case 'c':
				h.AskCapacity, h.Capacity = true, Answer{Answered: true, Yes: true}
			case 'n':
				h.AskCapacity, h.Capacity = true, Answer{Answered: true, Words: "409: 2 of 3 hosts would carry 150% of the load"}
			case 'a':
				h.AskCapacity = true
			}
		}
		v.Hosts = append(v.Hosts, h)
	}
	return v
}

func hostOf(v *HostView, name string) Host {
	for _, h := range v.Hosts {
		if h.Name == name {
			return h
		}
	}
	panic(name)
}

// TestHostPredicates: each host predicate alone, refusing and
// admitting.
func TestHostPredicates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v         *HostView
		candidate string
		admitted  []string
		pred      string // "" for admitted
		reason    string
	}{
		{"budget free", hostView(1, 0, "h1", "h2", "h3"), "h1", nil, "", ""},
		{"one locked", hostView(1, 0, "h1", "h2:l", "h3"), "h1", nil, PredHostsUnavailable, "1 of 1 hosts already out: h2 locked"},
		{"one admitted in the round", hostView(1, 0, "h1", "h2", "h3"), "h1", []string{"h2"}, PredHostsUnavailable, "h2 admitted"},
		{"a host with a member down is out", hostView(1, 0, "h1", "h2:d"), "h1", nil, PredHostsUnavailable, "h2 (h2-m down)"},
		{"the host with a member down itself", hostView(1, 0, "h1", "h2:d"), "h2", nil, "", ""},
		{"two at once", hostView(2, 0, "h1", "h2:l", "h3"), "h1", nil, "", ""},
		{"per domain", hostView(2, 1, "h1/z1", "h2/z1:l", "h3/z2"), "h1", nil, PredHostsPerDomain, "z1: 1 of 1 hosts already out: h2 locked"},
		{"per domain, other domain", hostView(2, 1, "h1/z1", "h2/z1:l", "h3/z2"), "h3", nil, "", ""},
		{"substrate", hostView(1, 0, "h1:u"), "h1", nil, PredSubstrate, "does not answer"},
		{"capacity yes", hostView(1, 0, "h1:c"), "h1", nil, "", ""},
		{"capacity no, in its words", hostView(2, 0, "h1:n", "h2:l"), "h1", nil, PredHostCapacity, "the hosts left cannot take its load: 409: 2 of 3 hosts would carry 150% of the load"},
		{"capacity not answered", hostView(1, 0, "h1:a"), "h1", nil, PredHostCapacity, AskingTheSystem},
		{"capacity not asked of a locked host", hostView(1, 0, "h1:la"), "h1", nil, "", ""},
		{"the budget first, then capacity", hostView(1, 0, "h1:n", "h2:l"), "h1", nil, PredHostsUnavailable, "h2 locked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.admitted {
				tc.v.Admitted[a] = true
			}
			r := AdmitHost(tc.v, hostOf(tc.v, tc.candidate), nil)
			switch {
			case tc.pred == "" && r != nil:
				t.Errorf("refused: %s", r)
			case tc.pred != "" && r == nil:
				t.Errorf("admitted, want a refusal by %s", tc.pred)
			case tc.pred != "" && (r.Predicate != tc.pred || !strings.Contains(r.Reason, tc.reason)):
				t.Errorf("refusal %s, want %s with %q", r, tc.pred, tc.reason)
			}
		})
	}
	// Overridden by name for one host: the next predicate answers.
	v := hostView(1, 0, "h1:n")
	off := func(p, h string) bool { return p == PredHostCapacity && h == "h1" }
	if r := AdmitHost(v, hostOf(v, "h1"), off); r != nil {
		t.Errorf("host_capacity overridden for h1: %s", r)
	}
	if !Known(PredHostCapacity) || !Known(PredHostsUnavailable) || !Known(PredHostsPerDomain) {
		t.Errorf("host predicates not known by name: %v", PredicateNames())
	}
}

// TestNextHosts: hosts are taken in order (a member down first, a role
// holder last), as many as admitted, each counted as locked for the
// next.
func TestNextHosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    *HostView
		size int
		want []string
	}{
		{"one at a time, plan order", hostView(1, 0, "h1", "h2", "h3"), 1, []string{"h1"}},
		{"the role's host last", hostView(1, 0, "h1:r", "h2", "h3"), 1, []string{"h2"}},
		{"a host with a member down first", hostView(1, 0, "h1", "h2", "h3:d"), 1, []string{"h3"}},
		{"two, one per domain", hostView(2, 1, "h1/z1", "h2/z1", "h3/z2"), 2, []string{"h1", "h3"}},
		{"none while one is locked", hostView(1, 0, "h1", "h2:l"), 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NextHosts(unlocked(tc.v), tc.size, admitIn(tc.v))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NextHosts = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExpectedHosts: the batches a plan shows, within the host budget
// and per domain.
func TestExpectedHosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    *HostView
		want [][]string
		note string
	}{
		{"one at a time", hostView(1, 0, "h1", "h2", "h3"), [][]string{{"h1"}, {"h2"}, {"h3"}}, "1 host at a time"},
		{"two at a time", hostView(2, 0, "h1", "h2", "h3"), [][]string{{"h1", "h2"}, {"h3"}}, "2 hosts at a time"},
		{"two, one per domain", hostView(2, 1, "h1/z1", "h2/z1", "h3/z2", "h4/z2"), [][]string{{"h1", "h3"}, {"h2", "h4"}}, "at most 1 per failure domain"},
		{"down first", hostView(1, 0, "h1", "h2:d"), [][]string{{"h2"}, {"h1"}}, "h2 first: a member on it is down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := ExpectedHosts(tc.v.MaxUnavailable, tc.v.MaxUnavailablePerDomain, tc.v.Hosts)
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(note, tc.note) {
				t.Errorf("ExpectedHosts = %v (%q), want %v (with %q)", got, note, tc.want, tc.note)
			}
		})
	}
}

// TestPerHostCountsEveryComponent: max_unavailable_per_host counts the
// members of every component on the host, not the candidate's
// component's only; max_unavailable and the per-domain budget stay the
// component's.
func TestPerHostCountsEveryComponent(t *testing.T) {
	s := Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2, MaxUnavailablePerHost: 1, MaxUnavailablePerDomain: 1}
	v := view("api", s, 0, "a1@h1/z1:p", "a2@h2/z2:p")
	v.Members = append(v.Members, Member{Name: "k1", Component: "kv", Host: "h1", Domain: "z1", InFlight: true})
	r := Admit(v, member(v, "a1"), nil)
	if r == nil || r.Predicate != PredPerHost || !strings.Contains(r.Reason, "host h1: 1 of 1 already down: k1 in progress") {
		t.Errorf("a1 with kv's k1 in progress on h1: %v, want a refusal by %s", r, PredPerHost)
	}
	if r := Admit(v, member(v, "a2"), nil); r != nil {
		t.Errorf("a2 on h2: %s", r)
	}
	v.Settings.MaxUnavailablePerHost = 0
	if r := Admit(v, member(v, "a1"), nil); r != nil {
		t.Errorf("a1 without a per-host bound (kv's k1 is another component's, in zone z1 too): %s", r)
	}
}

// unlocked are the hosts of v not locked: a round's candidates.
func unlocked(v *HostView) []Host {
	var out []Host
	for _, h := range v.Hosts {
		if !h.Locked {
			out = append(out, h)
		}
	}
	return out
}

// admitIn asks the host predicates of v, the hosts chosen counted as
// admitted.
func admitIn(v *HostView) func(h Host, chosen []string) *Refusal {
	return func(h Host, chosen []string) *Refusal {
		v.Admitted = map[string]bool{}
		for _, c := range chosen {
			v.Admitted[c] = true
		}
		return AdmitHost(v, h, nil)
	}
}

// TestByDomainChoosesHosts: a hosts stage whose strategy is by-domain
// takes one failure domain's hosts at a time (where the default order
// would mix them), the domain begun until it is done, even while its
// next host is refused; a domain with a member down first, the role's
// last, hosts without a domain after every domain. Begun are the hosts
// of the batches begun before, not in the view.
func TestByDomainChoosesHosts(t *testing.T) {
	for _, tc := range []struct {
		name           string
		v              *HostView
		begun          []string
		size           int
		want, defaults []string
	}{
		{"one domain, as many as fit", hostView(2, 0, "h1/z1", "h2/z2", "h3/z1", "h4/z2"), nil, 2, []string{"h1", "h3"}, []string{"h1", "h2"}},
		{"the domain begun goes on", hostView(1, 0, "h2/z2", "h3/z1"), []string{"h1/z1"}, 1, []string{"h3"}, []string{"h2"}},
		{"the domain begun is done: the next", hostView(1, 0, "h3/z2"), []string{"h1/z1"}, 1, []string{"h3"}, []string{"h3"}},
		{"a refused host of the domain begun waits", hostView(2, 0, "h2/z1:n", "h3/z2"), []string{"h1/z1"}, 1, nil, []string{"h3"}},
		{"a domain with a member down first", hostView(2, 0, "h1/z1", "h2/z2:d", "h3/z2"), nil, 2, []string{"h2", "h3"}, []string{"h2", "h1"}},
		{"the role's domain last", hostView(2, 0, "h1/z1:r", "h2/z1", "h3/z2"), nil, 2, []string{"h3"}, []string{"h2", "h3"}},
		{"hosts without a domain after every domain", hostView(1, 0, "h1", "h2/z1"), nil, 1, []string{"h2"}, []string{"h1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var begun []Host
			for _, b := range tc.begun {
				n, d, _ := strings.Cut(b, "/")
				begun = append(begun, Host{Name: n, Domain: d})
			}
			r := HostRound{Candidates: unlocked(tc.v), Begun: begun, Size: tc.size, Admit: admitIn(tc.v)}
			if got := NextHostsBy(ByDomain, r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("by-domain chose %v, want %v", got, tc.want)
			}
			if got := NextHostsBy("", r); !reflect.DeepEqual(got, tc.defaults) {
				t.Errorf("the default order chose %v, want %v", got, tc.defaults)
			}
		})
	}
	if got := HostChoosers(); !reflect.DeepEqual(got, []string{ByDomain}) {
		t.Errorf("HostChoosers() = %v, want [%s]", got, ByDomain)
	}
}

// TestByDomainExpectedHosts: a plan shows one domain's hosts after the
// other, each cut to the host budget.
func TestByDomainExpectedHosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    *HostView
		want [][]string
		note string
	}{
		{"two at a time, one domain each", hostView(2, 0, "h1/z1", "h2/z2", "h3/z1", "h4/z2"), [][]string{{"h1", "h3"}, {"h2", "h4"}}, "z1 (2), z2 (2)"},
		{"the domain with a member down first", hostView(2, 0, "h1/z1", "h2/z2:d", "h3/z1", "h4/z2"), [][]string{{"h2", "h4"}, {"h1", "h3"}}, "z2 (2), z1 (2)"},
		{"per domain bounds the batch", hostView(2, 1, "h1/z1", "h2/z2", "h3/z1"), [][]string{{"h1"}, {"h3"}, {"h2"}}, "1 host at a time"},
		{"hosts without a domain last", hostView(2, 0, "h1", "h2/z1"), [][]string{{"h2"}, {"h1"}}, "z1 (1), hosts without a domain (1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := ExpectedHostsBy(ByDomain, tc.v.MaxUnavailable, tc.v.MaxUnavailablePerDomain, tc.v.Hosts)
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(note, tc.note) {
				t.Errorf("ExpectedHosts = %v (%q), want %v (with %q)", got, note, tc.want, tc.note)
			}
		})
	}
}
