package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

const (
	digestA = "3f6c1e4b8a0d2f9c7e5b1a3d8f0e2c4b6a8d0f1e3c5b7a9d2f4e6c8b0a1d3f5e"
)

// kubeFerry is examples/kubernetes's description with release 2.0.0's
// lines put in after its upgrade_from.
func kubeFerry(t *testing.T, lines string) string {
	t.Helper()
	b, err := os.ReadFile("../../../examples/kubernetes/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const at = "    upgrade_from: [\"1.0.x\"]\n"
	if strings.Count(string(b), at) != 1 {
		t.Fatalf("examples/kubernetes/cluster.yaml has not one %q", at)
	}
	return strings.Replace(string(b), at, at+lines, 1)
}

// TestFerryOnKubernetes: on Kubernetes a release's ferry is the
// controller's image, which says no release of its own, so
// requires_ferry must; a binary is refused.
func TestFerryOnKubernetes(t *testing.T) {
	for _, c := range []struct {
		name, lines, want string
	}{
		{"image", "    requires_ferry: 1.2.0\n    ferry: {image: ghcr.io/ferry-upgrade/ferry:1.2.0, sha256: " + digestA + "}\n", ""},
		{"image without requires_ferry", "    ferry: {image: ghcr.io/ferry-upgrade/ferry:1.2.0, sha256: " + digestA + "}\n",
			"releases[1].ferry.image: needs requires_ferry on release 2.0.0: an image does not say which ferry it is"},
		{"binary", "    requires_ferry: 1.2.0\n    ferry: {path: bin/ferry, sha256: " + digestA + "}\n",
			"releases[1].ferry.path: the kubernetes substrate runs ferry as its controller's image: name ferry.image"},
		{"image pinned twice", "    requires_ferry: 1.2.0\n    ferry: {image: \"r/ferry@sha256:" + digestA + "\", sha256: " + digestA + "}\n",
			"releases[1].ferry.image: \"r/ferry@sha256:" + digestA + "\" is pinned by digest already"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse([]byte(kubeFerry(t, c.lines)), "k.yaml")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
		})
	}
}

// TestReadFerryNeed reads what a release asks of ferry from
// descriptions Parse refuses (a key this build does not know), and
// refuses only what it reads that is wrong.
func TestReadFerryNeed(t *testing.T) {
	img := "    requires_ferry: 99.0.0\n    ferry: {image: ghcr.io/ferry-upgrade/ferry:99.0.0, sha256: " + strings.ToUpper(digestA) + "}\n"
	for _, c := range []struct {
		name, desc, to string
		want           config.FerryNeed
		err            string
	}{
		{"image", "", "2.0.0", config.FerryNeed{Release: "2.0.0"}, ""},
		{"requires and image", img, "2.0.0", config.FerryNeed{Release: "2.0.0", Requires: "99.0.0",
			Ferry: config.Artifact{Image: "ghcr.io/ferry-upgrade/ferry:99.0.0", SHA256: digestA}}, ""},
		{"a key of a newer ferry", img + "    blue_green: {switch: now}\n", "2.0.0", config.FerryNeed{Release: "2.0.0", Requires: "99.0.0",
			Ferry: config.Artifact{Image: "ghcr.io/ferry-upgrade/ferry:99.0.0", SHA256: digestA}}, ""},
		{"another release", img, "1.0.0", config.FerryNeed{Release: "1.0.0"}, ""},
		{"no such release", img, "3.0.0", config.FerryNeed{Release: "3.0.0"}, ""},
		{"requires not a version", "    requires_ferry: newest\n", "2.0.0", config.FerryNeed{}, "requires_ferry \"newest\" is not a version"},
		{"sha256 short", "    requires_ferry: 9.0.0\n    ferry: {image: r/f, sha256: abc}\n", "2.0.0", config.FerryNeed{}, "ferry.sha256 \"abc\" is not 64 hex digits"},
		{"image pinned", "    requires_ferry: 9.0.0\n    ferry: {image: \"r/f@sha256:x\", sha256: " + digestA + "}\n", "2.0.0", config.FerryNeed{}, "is pinned by digest already"},
	} {
		t.Run(c.name, func(t *testing.T) {
			desc := kubeFerry(t, c.desc)
			if c.name == "a key of a newer ferry" {
				if _, err := config.Parse([]byte(desc), "k.yaml"); err == nil {
					t.Fatal("Parse took a key it does not know")
				}
			}
			got, err := config.ReadFerryNeed([]byte(desc), c.to)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want an error saying %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	if got := (config.Artifact{Image: "r/f:1", SHA256: digestA}).PinnedImage(); got != "r/f:1@sha256:"+digestA {
		t.Errorf("PinnedImage: %q", got)
	}
}

// FuzzReadFerryNeed: whatever the description, ReadFerryNeed returns
// (never panics nor hangs), and what it returns without an error is
// what Validate would accept of those keys.
func FuzzReadFerryNeed(f *testing.F) {
	f.Add("releases: [{version: 2.0.0, requires_ferry: 9.0.0, ferry: {image: r/f, sha256: "+digestA+"}}]", "2.0.0")
	f.Add("releases: &a [{version: 2.0.0, ferry: *a}]", "2.0.0")
	f.Add("releases: {version: 2.0.0}", "2.0.0")
	f.Add("- 1\n- 2", "")
	f.Add("releases: [{version: 1.0.0, requires_ferry: [x]}]", "1.0.0")
	f.Fuzz(func(t *testing.T, desc, to string) {
		need, err := config.ReadFerryNeed([]byte(desc), to)
		if err != nil {
			return
		}
		if need.Requires != "" && !config.IsVersion(need.Requires) {
			t.Fatalf("requires_ferry %q taken, not a version", need.Requires)
		}
		if need.Ferry != (config.Artifact{}) && len(need.Ferry.SHA256) != 64 {
			t.Fatalf("ferry %+v taken without a sha256", need.Ferry)
		}
		if strings.Contains(need.Ferry.Image, "@") {
			t.Fatalf("ferry image %q taken pinned", need.Ferry.Image)
		}
	})
}
