package strategy

import (
	"reflect"
	"strings"
	"testing"
)

// round is a round of component c's members (the view's specs, see
// view): the pending ones are the candidates, in the order given; done
// lists the batches done as "a1 a2=clean" (clean, strained or plain);
// admission is the real predicates over the view.
func round(v *View, done ...string) Round {
	r := Round{Settings: v.Settings}
	for _, m := range v.Members {
		if m.Pending {
			r.Candidates = append(r.Candidates, m)
		}
	}
	for _, d := range done {
		ns, how, _ := strings.Cut(d, "=")
		var b Done
		for _, n := range strings.Fields(ns) {
			b.Members = append(b.Members, member(v, n))
		}
		b.Outcome = Outcome{Size: len(b.Members), Clean: how == "clean", Strained: how == "strained"}
		if b.Outcome.Strained {
			b.Outcome.Why = "a retry"
		}
		r.Done = append(r.Done, b)
	}
	r.Admit = func(c Member, chosen []string) *Refusal {
		v.Admitted = map[string]bool{}
		for _, n := range chosen {
			v.Admitted[n] = true
		}
		return Admit(v, member(v, c.Name), nil)
	}
	return r
}

// TestNext: each strategy's choice of the next batch, from candidates
// as admission sees them, the batches done and the real predicates.
func TestNext(t *testing.T) {
	one := Settings{Type: OneAtATime, MaxUnavailable: 1, MaxBatch: 1}
	can := Settings{Type: Canary, MaxUnavailable: 4, MaxBatch: 4}
	canHost := Settings{Type: Canary, MaxUnavailable: 4, MaxBatch: 4, MaxUnavailablePerHost: 1}
	dom := Settings{Type: ByDomain, MaxUnavailable: 4, MaxBatch: 4}
	domHost := Settings{Type: ByDomain, MaxUnavailable: 4, MaxBatch: 4, MaxUnavailablePerHost: 1}
	as := Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 1}
	as2 := Settings{Type: ActiveStandby, MaxUnavailable: 2, MaxBatch: 2}
	off1 := Settings{Type: Offline, MaxUnavailable: 1, MaxBatch: 1}
	off3 := Settings{Type: Offline, MaxUnavailable: 3, MaxBatch: 3}
	three := []string{"a1/zone-a:p", "a2/zone-a:p", "a3/zone-a:p", "b1/zone-b:p", "b2/zone-b:p", "c1/zone-c:p"}
	for _, tc := range []struct {
		name string
		v    *View
		done []string
		want []string
		size int
		why  string
	}{
		// one-at-a-time
		{"one-at-a-time: plan order", view("kv", one, 2, "k1:p", "k2:p", "k3:p"), nil, []string{"k1"}, 1, "one at a time"},
		{"one-at-a-time: a member down first", view("kv", one, 2, "k1:p", "k2:pd", "k3:p"), nil, []string{"k2"}, 1, ""},
		{"one-at-a-time: the leader last", view("kv", one, 2, "k1:pr", "k2:p", "k3:p"), nil, []string{"k2"}, 1, ""},
		{"one-at-a-time: the leader when it is the last", view("kv", one, 2, "k1:pr", "k2", "k3"), []string{"k2=clean"}, []string{"k1"}, 1, ""},
		{"one-at-a-time: quorum refuses everyone", view("kv", Settings{Type: OneAtATime, MaxUnavailable: 2, MaxBatch: 1}, 2, "k1:p", "k2:d", "k3:p"), nil, nil, 1, ""},

		// canary
		{"canary: one member first", view("api", can, 0, "a1:p", "a2:p", "a3:p"), nil, []string{"a1"}, 1, "the canary"},
		{"canary: doubled after a clean batch, down first", view("api", can, 0, "a1", "a2:p", "a3:p", "a4:pd"), []string{"a1=clean"}, []string{"a4", "a2"}, 2, "doubled from 1"},
		{"canary: halved after a strained batch", view("api", can, 0, "a1", "a2", "a3:p", "a4:p", "a5:p"), []string{"a1=clean", "a2 a3=strained"}, []string{"a3"}, 1, "halved from 2"},
		{"canary: a refused member is passed over", view("api", canHost, 0, "a1@h1", "a2@h1:p", "a3@h1:p", "a4@h2:p"), []string{"a1=clean"}, []string{"a2", "a4"}, 2, ""},

		// by-domain
		{"by-domain: the first domain's first member", view("osd", dom, 0, three...), nil, []string{"a1"}, 1, "domain zone-a: one member first"},
		{"by-domain: the domain with a member down first", view("osd", dom, 0, "a1/zone-a:p", "a2/zone-a:p", "b1/zone-b:p", "b2/zone-b:pd"), nil, []string{"b2"}, 1, "domain zone-b: one member first, the domain with a member down goes first"},
		{"by-domain: the domain holding the role last", view("osd", dom, 0, "a1/zone-a:pr", "a2/zone-a:p", "b1/zone-b:p", "b2/zone-b:p"), nil, []string{"b1"}, 1, "domain zone-b"},
		{"by-domain: members without a domain after every domain", view("osd", dom, 0, "x1:p", "x2:p", "a1/zone-a:p"), nil, []string{"a1"}, 1, "domain zone-a"},
		{"by-domain: members without a domain when no domain is left", view("osd", dom, 0, "x1:p", "x2:p", "a1/zone-a"), []string{"a1=clean"}, []string{"x1"}, 1, "members without a domain: one member first, after every domain"},
		{"by-domain: the domain in progress grows", view("osd", dom, 0, "a1/zone-a", "a2/zone-a:p", "a3/zone-a:p", "b1/zone-b:pd", "b2/zone-b:p", "c1/zone-c:p"), []string{"a1=clean"}, []string{"a2", "a3"}, 2, "domain zone-a: doubled from 1"},
		{"by-domain: never past the domain's last member", view("osd", dom, 0, "a1/zone-a", "a2/zone-a", "a3/zone-a", "a4/zone-a:p", "b1/zone-b:p", "b2/zone-b:p"), []string{"a1=clean", "a2 a3=clean"}, []string{"a4"}, 4, "doubled from 2"},
		{"by-domain: halved within the domain after a strained batch", view("osd", dom, 0, "a1/zone-a", "a2/zone-a", "a3/zone-a", "a4/zone-a:p", "a5/zone-a:p"), []string{"a1=clean", "a2 a3=strained"}, []string{"a4"}, 1, "halved from 2"},
		{"by-domain: the next domain starts again at one", view("osd", dom, 0, "a1/zone-a", "a2/zone-a", "a3/zone-a", "b1/zone-b:p", "b2/zone-b:p", "c1/zone-c:p"), []string{"a1=clean", "a2 a3=clean"}, []string{"b1"}, 1, "domain zone-b: one member first"},
		{"by-domain: a domain with only its role holder left yields", view("osd", dom, 0, "a1/zone-a", "a2/zone-a:pr", "b1/zone-b:p", "b2/zone-b:p"), []string{"a1=clean"}, []string{"b1"}, 1, "domain zone-b"},
		{"by-domain: the role holder once every other member moved", view("osd", dom, 0, "a1/zone-a", "a2/zone-a:pr", "b1/zone-b", "b2/zone-b"), []string{"a1=clean", "b1=clean", "b2=clean"}, []string{"a2"}, 1, "domain zone-a: one member first"},
		{"by-domain: refused in its domain, it waits rather than start another", view("osd", domHost, 0, "a1@h1/zone-a", "a2@h1/zone-a:p", "x@h1/zone-c:d", "b1@h2/zone-b:p"), []string{"a1=clean"}, nil, 2, "domain zone-a"},

		// active-standby
		{"active-standby: the standby first", view("ctl", as, 0, "c1:pr", "c2:p"), nil, []string{"c2"}, 1, "the standbys first"},
		{"active-standby: the standbys first, max_batch at a time, down first", view("ctl", as2, 0, "c1:pr", "c2:p", "c3:p", "c4:pd"), nil, []string{"c4", "c2"}, 2, "the standbys first, 2 at a time"},
		{"active-standby: the active last, after a switchover", view("ctl", as, 0, "c1:pr", "c2"), []string{"c2=clean"}, []string{"c1"}, 1, "once the role is switched over"},

		// offline
		{"offline: its one member", view("kv", off1, 0, "k1:pr"), nil, []string{"k1"}, 1, "every member at once (offline: downtime accepted)"},
		{"offline: every member of a host at once, the leader too", view("kv", off3, 0, "k1@h1:p", "k2@h1:pr", "k3@h1:pd"), nil, []string{"k3", "k1", "k2"}, 3, "every member at once"},
		{"offline: a budget written lower holds the rest", view("kv", Settings{Type: Offline, MaxUnavailable: 2, MaxBatch: 2}, 0, "k1:p", "k2:p", "k3:p"), nil, []string{"k1", "k2"}, 3, ""},
		{"active-standby: a standby left waits the active", view("ctl", as, 0, "c1:pr", "c2", "c3:p"), []string{"c2=clean"}, []string{"c3"}, 1, "the standbys first"},
		{"active-standby: the role moved by itself: no switchover", view("ctl", as, 0, "c1:p", "c2:r"), []string{"c2=clean"}, []string{"c1"}, 1, "the standbys first"},
		{"active-standby: no member holds the role: the healthy wait", view("ctl", as, 0, "c1:p", "c2:p"), nil, nil, 1, "no member holds the role"},
		{"active-standby: no member holds the role: a member down may go", view("ctl", as, 0, "c1:p", "c2:pd"), nil, []string{"c2"}, 1, "only members down may go"},
		{"active-standby: a refused standby waits, the active does not jump ahead", view("ctl", Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 1}, 0, "c1:pr", "c2:p", "c3:d"), nil, nil, 1, "the standbys first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := Lookup(tc.v.Settings.Type)
			if !ok {
				t.Fatalf("strategy %q not registered", tc.v.Settings.Type)
			}
			c := st.Next(round(tc.v, tc.done...))
			if !reflect.DeepEqual(c.Members, tc.want) || c.Size != tc.size || !strings.Contains(c.Why, tc.why) {
				t.Errorf("Next = %v (size %d: %q), want %v (size %d, with %q)", c.Members, c.Size, c.Why, tc.want, tc.size, tc.why)
			}
			// Only the batch of the member holding the role has a step
			// before it: the switchover.
			holds := len(c.Members) == 1 && member(tc.v, c.Members[0]).Role
			if wantBefore := holds && tc.v.Settings.Type == ActiveStandby; wantBefore != reflect.DeepEqual(c.Before, []string{switchingOver}) || !wantBefore && len(c.Before) > 0 {
				t.Errorf("Before = %v for %v", c.Before, c.Members)
			}
		})
	}
}

// TestActiveStandbyPlan: its validation, defaults and the batches a
// plan expects (the last alone: the active, whoever it is at run time).
func TestActiveStandbyPlan(t *testing.T) {
	st, _ := Lookup(ActiveStandby)
	if d := st.Defaults(Settings{Type: ActiveStandby, MaxUnavailable: 2}); d.MaxBatch != 1 {
		t.Errorf("default max_batch %d, want 1: one standby at a time", d.MaxBatch)
	}
	if q := st.Quorum(Settings{}, 2); q != 0 {
		t.Errorf("quorum %d, want none", q)
	}
	if got := Adds(ActiveStandby); !reflect.DeepEqual(got, []string{switchingOver}) {
		t.Errorf("Adds = %v", got)
	}
	if got := Adds(Canary); got != nil {
		t.Errorf("canary adds %v", got)
	}
	for _, tc := range []struct {
		s    Settings
		n    int
		want [][]string
	}{
		{Settings{MaxBatch: 1}, 2, [][]string{{"m1"}, {"m2"}}},
		{Settings{MaxBatch: 2}, 4, [][]string{{"m1", "m2"}, {"m3"}, {"m4"}}},
		{Settings{MaxBatch: 2}, 3, [][]string{{"m1", "m2"}, {"m3"}}},
	} {
		got, note := st.Expected(tc.s, members(tc.n))
		if !reflect.DeepEqual(got, tc.want) || !strings.Contains(note, "goes last, alone, after a switchover") {
			t.Errorf("Expected(%+v, %d) = %v, %q; want %v", tc.s, tc.n, got, note, tc.want)
		}
	}
	for _, tc := range []struct {
		name    string
		s       Settings
		members []Member
		field   string
		msg     string
	}{
		{"a pair", Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 1}, members(2), "", ""},
		{"found at run time", Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 1}, nil, "", ""},
		{"one member", Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 1}, members(1), "-", "needs at least 2"},
		{"quorum", Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 1, Quorum: 1}, members(2), "quorum", "one-at-a-time only"},
		{"max_batch above budget", Settings{Type: ActiveStandby, MaxUnavailable: 1, MaxBatch: 2}, members(3), "max_batch", "could never move"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblem(t, Validate(tc.s, tc.members), tc.field, tc.msg) })
	}
}

// TestDefaultOrder: down first, the role holder last, the plan's order
// otherwise; the input is left as it was.
func TestDefaultOrder(t *testing.T) {
	v := view("kv", Settings{}, 0, "k1:r", "k2", "k3:d", "k4", "k5:dr")
	in := append([]Member(nil), v.Members...)
	if got := nameList(DefaultOrder(v.Members)); !reflect.DeepEqual(got, []string{"k3", "k5", "k2", "k4", "k1"}) {
		t.Errorf("DefaultOrder = %v", got)
	}
	if !reflect.DeepEqual(in, v.Members) {
		t.Errorf("DefaultOrder changed its input")
	}
}

// TestExpectedByDomain: the plan shows one domain after another, the
// domain with a member down first, members without a domain last, each
// domain in growing batches; with no domain known, one group.
func TestExpectedByDomain(t *testing.T) {
	s := Settings{Type: ByDomain, MaxUnavailable: 2, MaxBatch: 2}
	st, _ := Lookup(ByDomain)
	v := view("osd", s, 0, "a1/zone-a", "b1/zone-b", "a2/zone-a", "c1/zone-c", "b2/zone-b:d", "x1", "a3/zone-a", "a4/zone-a")
	got, note := st.Expected(s, v.Members)
	want := [][]string{{"b2"}, {"b1"}, {"a1"}, {"a2", "a3"}, {"a4"}, {"c1"}, {"x1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Expected = %v, want %v", got, want)
	}
	if wantNote := "one failure domain at a time: domain zone-b (2), domain zone-a (4), domain zone-c (1), members without a domain (1)"; note != wantNote {
		t.Errorf("note %q, want %q", note, wantNote)
	}
	got, note = st.Expected(s, members(4))
	if !reflect.DeepEqual(got, [][]string{{"m1"}, {"m2", "m3"}, {"m4"}}) || !strings.Contains(note, "no member's failure domain is known") {
		t.Errorf("without domains: %v, %q", got, note)
	}
	if got, note := st.Expected(s, nil); got != nil || note != "" {
		t.Errorf("nothing to move: %v, %q", got, note)
	}
}

// TestByDomainValidate: by-domain's own rules, beyond the shared ones.
func TestByDomainValidate(t *testing.T) {
	zoned := view("osd", Settings{}, 0, "a1/zone-a", "a2", "b1/zone-b").Members
	for _, tc := range []struct {
		name    string
		s       Settings
		members []Member
		field   string // "" for none, "-" for the settings as a whole
		msg     string
	}{
		{"ok", Settings{Type: ByDomain, MaxUnavailable: 2, MaxBatch: 2}, zoned, "", ""},
		{"members found at run time", Settings{Type: ByDomain, MaxUnavailable: 2, MaxBatch: 2}, nil, "", ""},
		{"no member has a domain", Settings{Type: ByDomain, MaxUnavailable: 2, MaxBatch: 2}, members(3), "-", "none of the 3 members has a domain"},
		{"quorum", Settings{Type: ByDomain, MaxUnavailable: 2, MaxBatch: 2, Quorum: 2}, zoned, "quorum", "one-at-a-time only"},
		{"max_batch above budget", Settings{Type: ByDomain, MaxUnavailable: 1, MaxBatch: 2}, zoned, "max_batch", "could never move"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, Validate(tc.s, tc.members), tc.field, tc.msg)
		})
	}
}

// TestDefaults: each strategy's own defaults fill zero fields only.
func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want int
	}{
		{Settings{Type: OneAtATime, MaxUnavailable: 3}, 1},
		{Settings{Type: Canary, MaxUnavailable: 3}, 3},
		{Settings{Type: Canary}, 1},
		{Settings{Type: ByDomain, MaxUnavailable: 4}, 4},
		{Settings{Type: ByDomain, MaxUnavailable: 4, MaxBatch: 2}, 2},
		{Settings{Type: ActiveStandby, MaxUnavailable: 2}, 1},
	} {
		st, _ := Lookup(tc.s.Type)
		if got := st.Defaults(tc.s); got.MaxBatch != tc.want || got.MaxUnavailable != tc.s.MaxUnavailable {
			t.Errorf("%+v: Defaults = %+v, want max_batch %d", tc.s, got, tc.want)
		}
	}
}
