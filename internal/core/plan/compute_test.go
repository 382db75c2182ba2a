package plan

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// The strategies the tests plan with, by their registered names.
const (
	typeOneAtATime = config.StrategyType(strategy.OneAtATime)
	typeCanary     = config.StrategyType(strategy.Canary)
)

// The catalog every test cluster has.
func releases() []config.Release {
	art := config.Artifact{Path: "bin/x", SHA256: strings.Repeat("a", 64)}
	return []config.Release{
		{Version: "1.0.0", Artifacts: map[string]config.Artifact{"*": art}},
		{Version: "2.0.0", UpgradeFrom: []string{"1.0.x"}, Artifacts: map[string]config.Artifact{"*": art}},
		// 3.0.0 ships kv only.
		{Version: "3.0.0", UpgradeFrom: []string{"1.x", "2.x"}, Artifacts: map[string]config.Artifact{"kv": art}},
		// 4.0.0 upgrades from nothing.
		{Version: "4.0.0", Artifacts: map[string]config.Artifact{"*": art}},
	}
}

// comp is a component named name with n members name-1 … name-n.
func comp(name string, order int, s config.Strategy, n int) config.Component {
	c := config.Component{Name: name, Order: order, Strategy: s}
	for i := 1; i <= n; i++ {
		c.Members = append(c.Members, config.Member{Name: fmt.Sprintf("%s-%d", name, i), Host: "h1"})
	}
	return c
}

func cluster(comps ...config.Component) *config.Cluster {
	return &config.Cluster{Name: "t", Components: comps, Releases: releases()}
}

var (
	oneAtATime = config.Strategy{Type: typeOneAtATime, MaxUnavailable: 1}
	kv3        = comp("kv", 1, oneAtATime, 3)
)

func canary(maxBatch, maxUnavailable int) config.Strategy {
	return config.Strategy{Type: typeCanary, MaxBatch: maxBatch, MaxUnavailable: maxUnavailable}
}

// world is what is observed: every member of c at version v, then the
// exceptions; down lists the members that are down.
func world(c *config.Cluster, v string, except map[string]string, down ...string) Observed {
	o := Observed{Version: map[string]string{}, Down: map[string]bool{}}
	for _, comp := range c.Components {
		for _, m := range comp.Members {
			o.Version[m.Name] = v
		}
	}
	for m, v := range except {
		o.Version[m] = v
	}
	for _, m := range down {
		o.Down[m] = true
	}
	return o
}

// summary renders a plan one line per phase, as the table tests write
// their expectations:
//
//	kv one-at-a-time mu=1 q=2: [kv-1] [kv-2] | skip kv-3
func summary(p Plan) []string {
	var out []string
	for _, ph := range p.Phases {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s mu=%d", ph.Component, ph.Strategy, ph.MaxUnavailable)
		if ph.Quorum > 0 {
			fmt.Fprintf(&b, " q=%d", ph.Quorum)
		}
		b.WriteString(":")
		for _, bt := range ph.Batches {
			fmt.Fprintf(&b, " [%s]", strings.Join(bt.Members, " "))
		}
		if len(ph.Skipped) > 0 {
			var s []string
			for _, sk := range ph.Skipped {
				s = append(s, sk.Member)
			}
			fmt.Fprintf(&b, " | skip %s", strings.Join(s, " "))
		}
		out = append(out, b.String())
	}
	return out
}

type planCase struct {
	name string
	c    *config.Cluster
	obs  Observed
	to   string

	want     []string          // summary lines
	wantFrom []string          // nil: not checked
	notes    map[string]string // component -> substring of its note ("" : no note)
	err      error             // sentinel
	errText  []string          // substrings of the error
}

// checkPlan is the one assertion of the table tests.
func checkPlan(t *testing.T, tc planCase) {
	t.Helper()
	p, err := Compute(tc.c, tc.obs, tc.to)
	if tc.err != nil {
		if !errors.Is(err, tc.err) {
			t.Fatalf("error = %v, want %v", err, tc.err)
		}
		for _, s := range tc.errText {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
		if !reflect.DeepEqual(p, Plan{}) {
			t.Errorf("plan alongside an error: %+v", p)
		}
		return
	}
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	if p.To != tc.to {
		t.Errorf("To = %q, want %q", p.To, tc.to)
	}
	if got := summary(p); !reflect.DeepEqual(got, tc.want) {
		t.Errorf("plan:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(tc.want, "\n       "))
	}
	if tc.wantFrom != nil && !reflect.DeepEqual(p.From, tc.wantFrom) {
		t.Errorf("From = %q, want %q", p.From, tc.wantFrom)
	}
	for _, ph := range p.Phases {
		want, ok := tc.notes[ph.Component]
		switch {
		case !ok:
		case want == "" && ph.Note != "":
			t.Errorf("%s: note %q, want none", ph.Component, ph.Note)
		case !strings.Contains(ph.Note, want):
			t.Errorf("%s: note %q does not say %q", ph.Component, ph.Note, want)
		}
	}
	checkInvariants(t, tc.c, tc.obs, p)
}

func TestCompute(t *testing.T) {
	kvAPI := cluster(kv3, comp("api", 2, canary(4, 2), 5))
	api := func(s config.Strategy, n int) *config.Cluster { return cluster(comp("api", 1, s, n)) }
	mixed := cluster(kv3, comp("api", 2, canary(2, 2), 5))
	unordered := cluster(comp("lb", 3, oneAtATime, 1), comp("api", 2, oneAtATime, 1),
		comp("mon", 1, oneAtATime, 1), comp("kv", 1, oneAtATime, 1))

	for _, tc := range []planCase{
		{
			name: "one member a batch",
			c:    cluster(kv3), obs: world(cluster(kv3), "1.0.0", nil), to: "2.0.0",
			want:     []string{"kv one-at-a-time mu=1 q=2: [kv-1] [kv-2] [kv-3]"},
			wantFrom: []string{"1.0.0"},
			notes:    map[string]string{"kv": ""},
		},
		{
			name: "one-at-a-time with an explicit quorum",
			c:    cluster(comp("mon", 1, config.Strategy{Type: typeOneAtATime, Quorum: 4}, 5)),
			obs:  world(cluster(comp("mon", 1, oneAtATime, 5)), "1.0.0", nil), to: "2.0.0",
			want: []string{"mon one-at-a-time mu=1 q=4: [mon-1] [mon-2] [mon-3] [mon-4] [mon-5]"},
		},
		{
			name: "a zero strategy is one-at-a-time with max_unavailable 1",
			c:    cluster(comp("kv", 1, config.Strategy{}, 2)),
			obs:  world(cluster(comp("kv", 1, config.Strategy{}, 2)), "1.0.0", nil), to: "2.0.0",
			want: []string{"kv one-at-a-time mu=1 q=2: [kv-1] [kv-2]"},
		},
		{
			name: "components in order, then by name",
			c:    unordered, obs: world(unordered, "1.0.0", nil), to: "2.0.0",
			want: []string{
				"kv one-at-a-time mu=1 q=1: [kv-1]",
				"mon one-at-a-time mu=1 q=1: [mon-1]",
				"api one-at-a-time mu=1 q=1: [api-1]",
				"lb one-at-a-time mu=1 q=1: [lb-1]",
			},
		},
		{
			name: "canary 1, 2, 4 capped by max_batch",
			c:    api(canary(4, 10), 12), obs: world(api(canary(4, 10), 12), "1.0.0", nil), to: "2.0.0",
			want: []string{"api canary mu=10: [api-1] [api-2 api-3] [api-4 api-5 api-6 api-7] [api-8 api-9 api-10 api-11] [api-12]"},
		},
		{
			name: "canary capped by max_unavailable",
			c:    api(canary(8, 2), 6), obs: world(api(canary(8, 2), 6), "1.0.0", nil), to: "2.0.0",
			want: []string{"api canary mu=2: [api-1] [api-2 api-3] [api-4 api-5] [api-6]"},
		},
		{
			name: "canary without max_batch grows to max_unavailable",
			c:    api(canary(0, 3), 6), obs: world(api(canary(0, 3), 6), "1.0.0", nil), to: "2.0.0",
			want: []string{"api canary mu=3: [api-1] [api-2 api-3] [api-4 api-5 api-6]"},
		},
		{
			name: "canary of one member",
			c:    api(canary(4, 4), 1), obs: world(api(canary(4, 4), 1), "1.0.0", nil), to: "2.0.0",
			want: []string{"api canary mu=4: [api-1]"},
		},
		{
			name: "a member down at the target shrinks the batches",
			c:    api(canary(4, 3), 8),
			obs:  world(api(canary(4, 3), 8), "1.0.0", map[string]string{"api-5": "2.0.0"}, "api-5"), to: "2.0.0",
			want:  []string{"api canary mu=3: [api-1] [api-2 api-3] [api-4 api-6] [api-7 api-8] | skip api-5"},
			notes: map[string]string{"api": "api-5 is down (already at 2.0.0): 1 of max_unavailable 3 already used"},
		},
		{
			name: "members down at the target use the whole budget: batches of 1 that wait",
			c:    api(canary(4, 2), 5),
			obs: world(api(canary(4, 2), 5), "1.0.0", map[string]string{"api-2": "2.0.0", "api-4": "2.0.0"},
				"api-2", "api-4"), to: "2.0.0",
			want:  []string{"api canary mu=2: [api-1] [api-3] [api-5] | skip api-2 api-4"},
			notes: map[string]string{"api": "api-2, api-4 are down (already at 2.0.0): 2 of max_unavailable 2 already used; batches of 1, each waits"},
		},
		{
			name: "members down that need the upgrade go first, costing no budget",
			c:    api(canary(4, 2), 5),
			obs:  world(api(canary(4, 2), 5), "1.0.0", map[string]string{"api-4": ""}, "api-3", "api-4"), to: "2.0.0",
			want:  []string{"api canary mu=2: [api-3] [api-4 api-1] [api-2 api-5]"},
			notes: map[string]string{"api": "api-3, api-4 are down: upgraded first"},
		},
		{
			name: "one-at-a-time takes a member that is down first",
			c:    cluster(kv3), obs: world(cluster(kv3), "1.0.0", nil, "kv-2"), to: "2.0.0",
			want:  []string{"kv one-at-a-time mu=1 q=2: [kv-2] [kv-1] [kv-3]"},
			notes: map[string]string{"kv": "kv-2 is down: upgraded first"},
		},
		{
			name: "one-at-a-time with a member down at the target: quorum leaves no room",
			c:    cluster(comp("kv", 1, config.Strategy{Type: typeOneAtATime, MaxUnavailable: 2}, 3)),
			obs: world(cluster(kv3), "1.0.0", map[string]string{"kv-3": "2.0.0"},
				"kv-3"), to: "2.0.0",
			want:  []string{"kv one-at-a-time mu=2 q=2: [kv-1] [kv-2] | skip kv-3"},
			notes: map[string]string{"kv": "stopping a member would leave 1 healthy of quorum 2"},
		},
		{
			name: "one-at-a-time with max_unavailable used up by a member down at the target",
			c:    cluster(kv3), obs: world(cluster(kv3), "1.0.0", map[string]string{"kv-1": "2.0.0"}, "kv-1"), to: "2.0.0",
			want:  []string{"kv one-at-a-time mu=1 q=2: [kv-2] [kv-3] | skip kv-1"},
			notes: map[string]string{"kv": "kv-1 is down (already at 2.0.0): 1 of max_unavailable 1 already used; each member waits"},
		},
		{
			name: "everything already at the target",
			c:    kvAPI, obs: world(kvAPI, "2.0.0", nil), to: "2.0.0",
			want: []string{
				"kv one-at-a-time mu=1 q=2: | skip kv-1 kv-2 kv-3",
				"api canary mu=2: | skip api-1 api-2 api-3 api-4 api-5",
			},
			wantFrom: []string{"2.0.0"},
			notes:    map[string]string{"kv": "", "api": ""},
		},
		{
			name: "resume mid-upgrade: members at the target are skipped",
			c:    mixed,
			obs: world(mixed, "2.0.0", map[string]string{"api-2": "1.0.0", "api-3": "1.0.3", "api-5": "1.0.0"},
				"api-3"), to: "2.0.0",
			want: []string{
				"kv one-at-a-time mu=1 q=2: | skip kv-1 kv-2 kv-3",
				"api canary mu=2: [api-3] [api-2 api-5] | skip api-1 api-4",
			},
			wantFrom: []string{"1.0.0", "1.0.3", "2.0.0"},
		},
		{
			name: "From is in version order and leaves out unknown versions",
			c:    api(canary(1, 1), 4),
			obs: world(api(canary(1, 1), 4), "1.0.10", map[string]string{"api-2": "1.0.9", "api-3": "", "api-4": "2.0.0"},
				"api-3"), to: "2.0.0",
			want:     []string{"api canary mu=1: [api-3] [api-1] [api-2] | skip api-4"},
			wantFrom: []string{"1.0.9", "1.0.10", "2.0.0"},
		},

		// Errors.
		{
			name: "target not in the catalog",
			c:    kvAPI, obs: world(kvAPI, "1.0.0", nil), to: "9.9.9",
			err:     ErrUnknownRelease,
			errText: []string{`"9.9.9" is not in the catalog of cluster t`, "1.0.0, 2.0.0, 3.0.0, 4.0.0"},
		},
		{
			name: "a component without an artifact in the target",
			c:    kvAPI, obs: world(kvAPI, "2.0.0", nil), to: "3.0.0",
			err:     ErrNoArtifact,
			errText: []string{"release 3.0.0 has no artifact for component api"},
		},
		{
			name: "a member on a version the release does not upgrade from",
			c:    kvAPI, obs: world(kvAPI, "1.0.0", map[string]string{"api-2": "0.9.0", "api-4": "0.9.0"}), to: "2.0.0",
			err:     ErrNotUpgradable,
			errText: []string{"api-2, api-4 (component api) run 0.9.0; release 2.0.0 upgrades from [1.0.x]"},
		},
		{
			name: "many members on a bad version are named, the first few",
			c:    api(canary(2, 2), 9), obs: world(api(canary(2, 2), 9), "1.1.0", nil), to: "2.0.0",
			err:     ErrNotUpgradable,
			errText: []string{"api-1, api-2, api-3, api-4, api-5 and 4 more (component api) run 1.1.0"},
		},
		{
			name: "a release that upgrades from nothing",
			c:    cluster(kv3), obs: world(cluster(kv3), "2.0.0", map[string]string{"kv-1": "4.0.0"}), to: "4.0.0",
			err:     ErrNotUpgradable,
			errText: []string{"kv-2, kv-3 (component kv) run 2.0.0; release 4.0.0 upgrades from nothing (its upgrade_from is empty)"},
		},
		{
			name: "a running member that reports no version",
			c:    cluster(kv3), obs: world(cluster(kv3), "1.0.0", map[string]string{"kv-3": ""}), to: "2.0.0",
			err:     ErrNotUpgradable,
			errText: []string{"kv-3 (component kv) is running but reports no version"},
		},
		{
			name: "every problem at once",
			c:    kvAPI, obs: world(kvAPI, "1.0.0", map[string]string{"kv-1": "0.1.0"}), to: "3.0.0",
			err:     ErrNoArtifact,
			errText: []string{"no artifact for component api", "kv-1 (component kv) runs 0.1.0; release 3.0.0 upgrades from [1.x, 2.x]"},
		},
		{
			name: "an unknown strategy",
			c:    cluster(comp("kv", 1, config.Strategy{Type: "big-bang"}, 2)),
			obs:  world(cluster(kv3), "1.0.0", nil), to: "2.0.0",
			err:     ErrUnknownStrategy,
			errText: []string{`component kv has strategy "big-bang"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPlan(t, tc) })
	}
}

// TestComputeErrorsAreEachTheirSentinel checks that a joined error
// still answers errors.Is for each of its reasons.
func TestComputeErrorsAreEachTheirSentinel(t *testing.T) {
	c := cluster(kv3, comp("api", 2, canary(2, 2), 2))
	_, err := Compute(c, world(c, "1.0.0", map[string]string{"kv-1": "0.1.0"}), "3.0.0")
	for _, want := range []error{ErrNoArtifact, ErrNotUpgradable} {
		if !errors.Is(err, want) {
			t.Errorf("%v is not %v", err, want)
		}
	}
	if errors.Is(err, ErrUnknownRelease) {
		t.Errorf("%v is ErrUnknownRelease", err)
	}
}

func TestCompareVersions(t *testing.T) {
	in := []string{"2.0.0", "x", "1.10.0", "1.9.0", "2.0.0-rc1", "1.9.0", "10.0.0", "a"}
	sortVersions(in)
	want := []string{"1.9.0", "1.9.0", "1.10.0", "2.0.0-rc1", "2.0.0", "10.0.0", "a", "x"}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("sorted %q, want %q", in, want)
	}
}

// TestComputeByDomain: a by-domain phase lists one failure domain after
// another (the one with a member down first, members without a domain
// last), each in growing batches, and its note names the domains.
func TestComputeByDomain(t *testing.T) {
	osd := comp("osd", 1, config.Strategy{Type: config.StrategyType(strategy.ByDomain), MaxUnavailable: 2}, 7)
	for i, d := range []string{"rack-1", "rack-2", "rack-1", "rack-2", "rack-1", "rack-3", ""} {
		osd.Members[i].Domain = d
	}
	c := cluster(osd)
	p, err := Compute(c, world(c, "1.0.0", nil, "osd-4"), "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	ph := p.Phases[0]
	var got []string
	for _, b := range ph.Batches {
		got = append(got, strings.Join(b.Members, " "))
	}
	want := []string{"osd-4", "osd-2", "osd-1", "osd-3 osd-5", "osd-6", "osd-7"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batches %q, want %q", got, want)
	}
	if ph.Settings.MaxBatch != 2 {
		t.Errorf("max_batch %d, want the strategy's default, max_unavailable 2", ph.Settings.MaxBatch)
	}
	wantNote := "osd-4 is down: upgraded first, replacing a member that is down costs no availability; one failure domain at a time: domain rack-2 (2), domain rack-1 (3), domain rack-3 (1), members without a domain (1)"
	if ph.Note != wantNote {
		t.Errorf("note %q\nwant %q", ph.Note, wantNote)
	}
}
