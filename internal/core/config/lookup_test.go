package config

import (
	"path/filepath"
	"reflect"
	"testing"
)

func mustParse(t *testing.T, src string) *Cluster {
	t.Helper()
	c, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestComponentsInOrder(t *testing.T) {
	c := &Cluster{Components: []Component{{Name: "c", Order: 2}, {Name: "b", Order: 1}, {Name: "a", Order: 2}, {Name: "z", Order: -1}}}
	var got []string
	for _, comp := range c.ComponentsInOrder() {
		got = append(got, comp.Name)
	}
	if want := []string{"z", "b", "a", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if c.ComponentsInOrder()[0] != &c.Components[3] {
		t.Error("ComponentsInOrder does not point into the cluster")
	}
}

func TestLookups(t *testing.T) {
	c := mustParse(t, base)
	if got := c.Component("api"); got == nil || got != &c.Components[1] {
		t.Errorf("Component(api) = %p, want %p", got, &c.Components[1])
	}
	if c.Component("nope") != nil || c.Release("3.0.0") != nil || c.Host("h2") != nil {
		t.Error("lookup of a missing name is not nil")
	}
	if got := c.Release("2.0.0"); got == nil || got.Version != "2.0.0" {
		t.Errorf("Release(2.0.0) = %+v", got)
	}
	if got := c.Host("h1"); got == nil || got.Agent != "127.0.0.1:7101" {
		t.Errorf("Host(h1) = %+v", got)
	}
	comp, m := c.MemberOf("api-2")
	if comp != &c.Components[1] || m != &c.Components[1].Members[1] {
		t.Errorf("MemberOf(api-2) = %v, %v", comp, m)
	}
	if comp, m := c.MemberOf("api-9"); comp != nil || m != nil {
		t.Errorf("MemberOf(api-9) = %v, %v", comp, m)
	}
}

func TestArtifactFor(t *testing.T) {
	r := &Release{Artifacts: map[string]Artifact{"*": {Path: "any"}, "kv": {Path: "kv"}}}
	for _, tc := range []struct {
		comp, want string
		ok         bool
	}{{"kv", "kv", true}, {"api", "any", true}} {
		if a, ok := r.ArtifactFor(tc.comp); a.Path != tc.want || ok != tc.ok {
			t.Errorf("ArtifactFor(%s) = %q %v", tc.comp, a.Path, ok)
		}
	}
	if _, ok := (&Release{Artifacts: map[string]Artifact{"kv": {}}}).ArtifactFor("api"); ok {
		t.Error("ArtifactFor without own entry or * found one")
	}
	if _, ok := (&Release{}).ArtifactFor("api"); ok {
		t.Error("ArtifactFor on no artifacts found one")
	}
}

func TestQuorumOf(t *testing.T) {
	for _, tc := range []struct{ quorum, n, want int }{
		{0, 1, 1}, {0, 2, 2}, {0, 3, 2}, {0, 4, 3}, {0, 5, 3}, {2, 5, 2}, {1, 3, 1},
	} {
		if got := (Strategy{Quorum: tc.quorum}).QuorumOf(tc.n); got != tc.want {
			t.Errorf("Quorum %d: QuorumOf(%d) = %d, want %d", tc.quorum, tc.n, got, tc.want)
		}
	}
}

func TestMatchVersion(t *testing.T) {
	for _, tc := range []struct {
		pattern, version string
		want             bool
	}{
		{"*", "1.2.3", true},
		{"*", "", false},
		{"1.x", "1.0.0", true},
		{"1.x", "1.9.9-rc1", true},
		{"1.x", "10.0.0", false},
		{"1.x", "2.0.0", false},
		{"1.0.x", "1.0.7", true},
		{"1.0.x", "1.0.7-rc.1", true},
		{"1.0.x", "1.1.0", false},
		{"1.0.x", "1.00.1", false},
		{"1.0.x", "11.0.1", false},
		{"1.0.0", "1.0.0", true},
		{"1.0.0", "1.0.0-rc1", false},
		{"1.0.0-rc1", "1.0.0-rc1", true},
		{"1.0", "1.0.0", false},
		{"x", "1.0.0", false},
		{"1.x", "garbage", false},
	} {
		if got := MatchVersion(tc.pattern, tc.version); got != tc.want {
			t.Errorf("MatchVersion(%q, %q) = %v, want %v", tc.pattern, tc.version, got, tc.want)
		}
	}
}

func TestIsVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"1.2.3": true, "0.0.0": true, "2.0.0-rc1": true, "2.0.0-rc.1": true, "10.20.30": true,
		"1.2": false, "v1.2.3": false, "01.2.3": false, "1.2.3-": false, "1.2.3+build": false, "": false, "1.2.x": false,
	} {
		if got := IsVersion(v); got != want {
			t.Errorf("IsVersion(%q) = %v", v, got)
		}
	}
	for p, want := range map[string]bool{"*": true, "1.x": true, "1.2.x": true, "1.2.3": true, "1.x.x": false, "x": false, "1.*": false, "": false} {
		if got := IsVersionPattern(p); got != want {
			t.Errorf("IsVersionPattern(%q) = %v", p, got)
		}
	}
}

func TestResolvePath(t *testing.T) {
	for _, tc := range []struct{ file, dir, p, want string }{
		{"", "", "bin/x", "bin/x"},
		{"conf/cluster.yaml", "", "bin/x", "conf/bin/x"},
		{"conf/cluster.yaml", "", "/abs/x", "/abs/x"},
		{"conf/cluster.yaml", "", "", ""},
		{"conf/cluster.yaml", "/srv/conf", "../bin/x", "/srv/bin/x"},
	} {
		c := &Cluster{File: tc.file, dir: tc.dir}
		if got := c.ResolvePath(tc.p); got != filepath.FromSlash(tc.want) {
			t.Errorf("File %q dir %q: ResolvePath(%q) = %q, want %q", tc.file, tc.dir, tc.p, got, tc.want)
		}
	}
}
