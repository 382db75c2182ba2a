package strategy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestExpected(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		n    int
		want []int
	}{
		{"one-at-a-time", Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1}, 3, []int{1, 1, 1}},
		{"canary doubles to max_batch", Settings{Type: Canary, MaxUnavailable: 4, MaxBatch: 4}, 12, []int{1, 2, 4, 4, 1}},
		{"canary max_batch 1", Settings{Type: Canary, MaxUnavailable: 1, MaxBatch: 1}, 3, []int{1, 1, 1}},
		{"canary of 4, max 2", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2}, 4, []int{1, 2, 1}},
		{"nothing to move", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := Lookup(tc.s.Type)
			if got := sizes(st.Expected(tc.s, members(tc.n))); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Expected = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCanaryNext: the adaptive canary doubles after clean batches up to
// max_batch, halves (down to 1) after strained ones, keeps otherwise.
func TestCanaryNext(t *testing.T) {
	s := Settings{Type: Canary, MaxUnavailable: 8, MaxBatch: 8}
	clean := func(n int) Outcome { return Outcome{Size: n, Clean: true} }
	strained := func(n int) Outcome { return Outcome{Size: n, Strained: true, Why: "1 retry"} }
	plain := func(n int) Outcome { return Outcome{Size: n} }
	for _, tc := range []struct {
		name string
		done []Outcome
		want int
		why  string
	}{
		{"first batch", nil, 1, "canary"},
		{"after a clean 1", []Outcome{clean(1)}, 2, "doubled from 1"},
		{"after a clean 4", []Outcome{clean(1), clean(2), clean(4)}, 8, "doubled from 4"},
		{"capped at max_batch", []Outcome{clean(8)}, 8, "max_batch"},
		{"halved after strain", []Outcome{clean(1), clean(2), clean(4), strained(8)}, 4, "halved from 8: the last batch was strained (1 retry)"},
		{"never below 1", []Outcome{strained(1)}, 1, "halved from 1"},
		{"kept when neither", []Outcome{clean(1), plain(2)}, 2, "kept at 2"},
		{"grows again after a clean one", []Outcome{strained(4), clean(2)}, 4, "doubled from 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := canarySize(s, tc.done)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("Next = %d (%q), want %d (with %q)", got, why, tc.want, tc.why)
			}
		})
	}
	// max_batch lower than a doubled size caps it.
	if got, _ := canarySize(Settings{Type: Canary, MaxUnavailable: 3, MaxBatch: 3}, []Outcome{clean(2)}); got != 3 {
		t.Errorf("Next after a clean 2 with max_batch 3 = %d, want 3", got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     Settings
		n     int
		field string // "" for no problem
		msg   string
	}{
		{"canary ok", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2}, 4, "", ""},
		{"one-at-a-time ok", Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1}, 3, "", ""},
		{"unknown type", Settings{Type: "rolling", MaxUnavailable: 1, MaxBatch: 1}, 3, "type", "unknown strategy \"rolling\"; known: active-standby, by-domain, canary, offline, one-at-a-time"},
		{"max_unavailable 0", Settings{Type: Canary, MaxUnavailable: 0, MaxBatch: 1}, 3, "max_unavailable", "must be at least 1"},
		{"max_unavailable above members", Settings{Type: Canary, MaxUnavailable: 5, MaxBatch: 1}, 3, "max_unavailable", "more than the 3 members"},
		{"max_batch 0", Settings{Type: Canary, MaxUnavailable: 1, MaxBatch: 0}, 3, "max_batch", "at least 1"},
		{"max_batch above budget", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 3}, 4, "max_batch", "could never move"},
		{"per-host negative", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2, MaxUnavailablePerHost: -1}, 4, "max_unavailable_per_host", "not be negative"},
		{"per-domain above budget", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2, MaxUnavailablePerDomain: 3}, 4, "max_unavailable_per_domain", "never bind"},
		{"quorum on canary", Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2, Quorum: 2}, 4, "quorum", "one-at-a-time only"},
		{"quorum too large", Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1, Quorum: 3}, 3, "quorum", "leaves no member free"},
		{"majority of 2 blocks", Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1}, 2, "-", "no member can ever stop"},
		{"max_batch on one-at-a-time", Settings{Type: OneAtATime, MaxUnavailable: 2, MaxBatch: 2}, 3, "max_batch", "canary only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, Validate(tc.s, members(tc.n)), tc.field, tc.msg)
		})
	}
}

// wantProblem fails unless ps has a problem of field ("" for none
// wanted, "-" for the settings as a whole) whose reason contains msg.
func wantProblem(t *testing.T, ps []Problem, field, msg string) {
	t.Helper()
	if field == "" {
		if len(ps) > 0 {
			t.Fatalf("problems %v, want none", ps)
		}
		return
	}
	for _, p := range ps {
		if (p.Field == field || field == "-" && p.Field == "") && strings.Contains(p.Reason, msg) {
			return
		}
	}
	t.Errorf("problems %v, want %s: %q", ps, field, msg)
}

// members are n members m1 … mn, healthy, without a domain.
func members(n int) []Member {
	var out []Member
	for i := range n {
		out = append(out, Member{Name: fmt.Sprintf("m%d", i+1), Healthy: true})
	}
	return out
}

// sizes are the sizes of batches (nil for none).
func sizes(batches [][]string, _ string) []int {
	var out []int
	for _, b := range batches {
		out = append(out, len(b))
	}
	return out
}

// cluster builds a view of component c's members: each spec is
// name[@host][/domain] followed by flags: d (down), f (in flight),
// u (unknown), r (holds the role), p (pending).
func view(comp string, s Settings, quorum int, specs ...string) *View {
	v := &View{Component: comp, Settings: s, Quorum: quorum, RoleName: "leader", Admitted: map[string]bool{}}
	for _, sp := range specs {
		name, flags, _ := strings.Cut(sp, ":")
		m := Member{Component: comp, Healthy: true}
		if n, d, ok := strings.Cut(name, "/"); ok {
			name, m.Domain = n, d
		}
		if n, h, ok := strings.Cut(name, "@"); ok {
			name, m.Host = n, h
		}
		m.Name = name
		for _, f := range flags {
			switch f {
			case 'd':
				m.Healthy = false
			case 'f':
				m.InFlight = true
			case 'u':
				m.Unknown = true
			case 'r':
				m.Role = true
			case 'p':
				m.Pending = true
			}
		}
		v.Members = append(v.Members, m)
	}
	return v
}

func member(v *View, name string) Member {
	for _, m := range v.Members {
		if m.Name == name {
			return m
		}
	}
	panic(name)
}

// TestPredicates: each predicate alone, refusing and admitting.
func TestPredicates(t *testing.T) {
	canary2 := Settings{Type: Canary, MaxUnavailable: 2, MaxBatch: 2}
	perDom := Settings{Type: Canary, MaxUnavailable: 3, MaxBatch: 3, MaxUnavailablePerDomain: 1}
	perHost := Settings{Type: Canary, MaxUnavailable: 3, MaxBatch: 3, MaxUnavailablePerHost: 1}
	one := Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1}
	for _, tc := range []struct {
		name      string
		v         *View
		candidate string
		admitted  []string
		pred      string // "" for admitted
		reason    string
	}{
		{"budget free", view("api", canary2, 0, "a1:p", "a2:p", "a3:p"), "a1", nil, "", ""},
		{"budget counts down members", view("api", canary2, 0, "a1:p", "a2:d", "a3:f"), "a1", nil, PredMaxUnavailable, "2 of 2 already down: a2 down, a3 in progress"},
		{"budget counts the round's admissions", view("api", canary2, 0, "a1:p", "a2:p", "a3:p"), "a3", []string{"a1", "a2"}, PredMaxUnavailable, "a1 admitted, a2 admitted"},
		{"a down candidate costs nothing", view("api", canary2, 0, "a1:pd", "a2:d", "a3:f"), "a1", nil, "", ""},
		{"per domain", view("api", perDom, 0, "a1/zone-a:p", "a2/zone-b:f", "a3/zone-b:p"), "a3", nil, PredPerDomain, "zone-b: 1 of 1 already down: a2 in progress"},
		{"per domain other zone free", view("api", perDom, 0, "a1/zone-a:p", "a2/zone-b:f", "a3/zone-b:p"), "a1", nil, "", ""},
		{"per host", view("api", perHost, 0, "a1@h1:p", "a2@h1:d", "a3@h2:p"), "a1", nil, PredPerHost, "host h1: 1 of 1 already down: a2 down"},
		{"quorum kept", view("kv", one, 2, "k1:p", "k2", "k3"), "k1", nil, "", ""},
		{"quorum refused", view("kv", Settings{Type: OneAtATime, MaxUnavailable: 2, MaxBatch: 1}, 2, "k1:p", "k2:d", "k3"), "k1", nil, PredQuorum, "leave 1 healthy of quorum 2: k2 down"},
		{"role last", view("kv", one, 2, "k1:pr", "k2:p", "k3:p"), "k1", nil, PredRoleLast, "it holds leader: it goes after k2, k3"},
		{"role last when alone", view("kv", one, 2, "k1:pr", "k2", "k3"), "k1", nil, "", ""},
		{"substrate", view("api", canary2, 0, "a1:p", "a2:u"), "a1", nil, PredSubstrate, "does not answer for a2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.admitted {
				tc.v.Admitted[a] = true
			}
			r := Admit(tc.v, member(tc.v, tc.candidate), nil)
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
}

func TestGatePredicate(t *testing.T) {
	v := view("api", Settings{Type: Canary, MaxUnavailable: 1, MaxBatch: 1}, 0, "a1:p")
	v.Gates = []Gate{{Component: "kv", Healthy: true, Fresh: false}}
	if r := Admit(v, member(v, "a1"), nil); r == nil || r.Predicate != PredGate || !strings.Contains(r.Reason, "not checked since the last batch") {
		t.Errorf("stale gate: %v", r)
	}
	v.Gates = []Gate{{Component: "kv", Healthy: false, Fresh: true, Detail: "quorum = false"}}
	if r := Admit(v, member(v, "a1"), nil); r == nil || r.Reason != "cluster gate kv red: quorum = false" {
		t.Errorf("red gate: %v", r)
	}
	// Checked again when the member stops, the gate no longer applies.
	v.Stopping = true
	if r := Admit(v, member(v, "a1"), nil); r != nil {
		t.Errorf("at stop: %v", r)
	}
}

// TestOKToStopPredicate: the system's own answer, asked per candidate:
// no answer yet refuses ("asking the system"), a no refuses with the
// system's words, a yes admits; a member already down and a component
// without an ok_to_stop call are not asked; it applies again at the
// stop (after the drain) and is overridden by name for one member.
func TestOKToStopPredicate(t *testing.T) {
	one := Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1}
	yes := Answer{Answered: true, Yes: true, Words: "GET http://k1/admin/ok-to-stop: 200 OK"}
	no := Answer{Answered: true, Words: `409 Conflict: {"reason":"held: shard 7 rebalancing"}`}
	for _, tc := range []struct {
		name     string
		ask      bool
		flags    string
		answer   Answer
		stopping bool
		off      bool
		reason   string // "" for admitted
	}{
		{"not asked yet", true, "p", Answer{}, false, false, AskingTheSystem},
		{"the system says no", true, "p", no, false, false, `the system says no: 409 Conflict: {"reason":"held: shard 7 rebalancing"}`},
		{"the system says no without words", true, "p", Answer{Answered: true}, false, false, "the system says no: -"},
		{"the system says yes", true, "p", yes, false, false, ""},
		{"no call described", false, "p", Answer{}, false, false, ""},
		{"a member already down is not asked", true, "pd", Answer{}, false, false, ""},
		{"asked again at the stop", true, "p", Answer{}, true, false, AskingTheSystem},
		{"a no at the stop", true, "p", no, true, false, "the system says no"},
		{"overridden for the member", true, "p", no, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view("kv", one, 0, "k1:"+tc.flags, "k2", "k3")
			v.AskSystem, v.Stopping = tc.ask, tc.stopping
			c := member(v, "k1")
			c.System = tc.answer
			var off func(p, m string) bool
			if tc.off {
				off = func(p, m string) bool { return p == PredOKToStop && m == "k1" }
			}
			r := Admit(v, c, off)
			switch {
			case tc.reason == "" && r != nil:
				t.Errorf("refused: %s", r)
			case tc.reason != "" && r == nil:
				t.Errorf("admitted, want a refusal by %s", PredOKToStop)
			case tc.reason != "" && (r.Predicate != PredOKToStop || !strings.Contains(r.Reason, tc.reason)):
				t.Errorf("refusal %s, want %s with %q", r, PredOKToStop, tc.reason)
			}
		})
	}
	// Ferry's own counting is asked first: a candidate over the budget
	// is refused by it, and the system is not asked about it.
	v := view("kv", one, 0, "k1:p", "k2:f", "k3")
	v.AskSystem = true
	if r := Admit(v, member(v, "k1"), nil); r == nil || r.Predicate != PredMaxUnavailable {
		t.Errorf("over the budget: %v, want max_unavailable", r)
	}
	if !Known(PredOKToStop) {
		t.Error("ok_to_stop is not a known predicate: it could not be overridden by name")
	}
}

// TestOverride: switching off one predicate for one member lets it go
// while every other predicate still holds.
func TestOverride(t *testing.T) {
	v := view("kv", Settings{Type: OneAtATime, MaxUnavailable: 2, MaxBatch: 1}, 2, "k1:p", "k2:d", "k3:p")
	off := func(p, m string) bool { return p == PredQuorum && m == "k1" }
	if r := Admit(v, member(v, "k1"), off); r != nil {
		t.Errorf("k1 with quorum off: %s", r)
	}
	if r := Admit(v, member(v, "k3"), off); r == nil || r.Predicate != PredQuorum {
		t.Errorf("k3 (not overridden): %v", r)
	}
	// The budget still holds for k1.
	v.Members[1].InFlight = true
	v.Admitted["k3"] = true
	if r := Admit(v, member(v, "k1"), off); r == nil || r.Predicate != PredMaxUnavailable {
		t.Errorf("k1 over budget with quorum off: %v", r)
	}
}

// TestOffline: offline's own rules, its expected batch (every member)
// and its reason for downtime, which the other strategies do not have.
func TestOffline(t *testing.T) {
	st, _ := Lookup(Offline)
	if ps := Validate(Settings{Type: Offline, MaxUnavailable: 1, MaxBatch: 1}, members(1)); len(ps) != 0 {
		t.Errorf("one member: %v", ps)
	}
	if ps := Validate(Settings{Type: Offline, MaxUnavailable: 1, MaxBatch: 1}, members(3)); len(ps) != 1 || ps[0].Field != "max_unavailable" || !strings.Contains(ps[0].Reason, "set max_unavailable: 3") {
		t.Errorf("three members, max_unavailable 1: %v", ps)
	}
	if ps := Validate(Settings{Type: Offline, MaxUnavailable: 1, MaxBatch: 1, Quorum: 1}, members(1)); len(ps) != 1 || ps[0].Field != "quorum" {
		t.Errorf("a quorum: %v", ps)
	}
	if got := sizes(st.Expected(st.Defaults(Settings{Type: Offline, MaxUnavailable: 3}), members(3))); !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("expected batches %v, want [3]", got)
	}
	if d := Downtime(Offline, Settings{}, members(1)); !strings.Contains(d, "its one member (m1) goes down") {
		t.Errorf("downtime of one member: %q", d)
	}
	if d := Downtime(Offline, Settings{}, members(2)); !strings.Contains(d, "its 2 members (m1, m2) go down at once") {
		t.Errorf("downtime of two members: %q", d)
	}
	for _, n := range Names() {
		if d := Downtime(n, Settings{}, members(3)); (d != "") != (n == Offline) {
			t.Errorf("strategy %s: downtime %q", n, d)
		}
	}
	if got := TakingDowntime(); !reflect.DeepEqual(got, []string{Offline}) {
		t.Errorf("TakingDowntime() = %v", got)
	}
}
