package config

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ComponentsInOrder returns the components in the order they are
// upgraded: by Order, then by name. The pointers are into c.
func (c *Cluster) ComponentsInOrder() []*Component {
	out := make([]*Component, len(c.Components))
	for i := range c.Components {
		out[i] = &c.Components[i]
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Component returns the component with that name, or nil.
func (c *Cluster) Component(name string) *Component {
	for i := range c.Components {
		if c.Components[i].Name == name {
			return &c.Components[i]
		}
	}
	return nil
}

// Release returns the release with exactly that version, or nil.
func (c *Cluster) Release(version string) *Release {
	for i := range c.Releases {
		if c.Releases[i].Version == version {
			return &c.Releases[i]
		}
	}
	return nil
}

// Host returns the host with that name, or nil.
func (c *Cluster) Host(name string) *Host {
	for i := range c.Hosts {
		if c.Hosts[i].Name == name {
			return &c.Hosts[i]
		}
	}
	return nil
}

// hostIndex maps each host's name to it, the first of a duplicate
// name winning, as Host does.
func (c *Cluster) hostIndex() map[string]*Host {
	m := make(map[string]*Host, len(c.Hosts))
	for i := range c.Hosts {
		if _, dup := m[c.Hosts[i].Name]; !dup {
			m[c.Hosts[i].Name] = &c.Hosts[i]
		}
	}
	return m
}

// MemberOf returns the member with that name and its component, or
// nil, nil. Member names are unique across a valid cluster.
func (c *Cluster) MemberOf(name string) (*Component, *Member) {
	for i := range c.Components {
		comp := &c.Components[i]
		for j := range comp.Members {
			if comp.Members[j].Name == name {
				return comp, &comp.Members[j]
			}
		}
	}
	return nil, nil
}

// AnyComponent is the artifacts key that serves every component
// without an entry of its own.
const AnyComponent = "*"

// ArtifactFor returns the component's artifact in this release: its
// own entry, else the "*" entry.
func (r *Release) ArtifactFor(component string) (Artifact, bool) {
	if a, ok := r.Artifacts[component]; ok {
		return a, true
	}
	a, ok := r.Artifacts[AnyComponent]
	return a, ok
}

// SigningKeyOf is the public key release r's artifacts are signed with
// (its own signing_key, else the description's; empty when its loads
// are not signed), as written.
func (c *Cluster) SigningKeyOf(r *Release) string {
	if r.SigningKey != "" {
		return r.SigningKey
	}
	return c.SigningKey
}

// QuorumOf returns how many of n members must stay healthy while one
// is stopped: Quorum, or a majority (n/2+1) when Quorum is 0.
func (s Strategy) QuorumOf(n int) int {
	if s.Quorum == 0 {
		return n/2 + 1
	}
	return s.Quorum
}

// ResolvePath returns p, a path written in the description (artifact
// paths, token files), relative to the directory of the description
// file when it is relative. Empty stays empty.
func (c *Cluster) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	dir := c.dir
	if dir == "" {
		dir = filepath.Dir(c.File) // "." when File is empty
	}
	return filepath.Join(dir, p)
}

var (
	versionRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z][0-9A-Za-z.-]*)?$`)
	rangeRE   = regexp.MustCompile(`^(\*|(0|[1-9][0-9]*)\.x|(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.x)$`)
)

// IsVersion reports whether v looks like MAJOR.MINOR.PATCH with an
// optional -suffix (1.2.3, 2.0.0-rc1).
func IsVersion(v string) bool { return versionRE.MatchString(v) }

// IsVersionPattern reports whether p is a version or an x-range that
// MatchVersion understands: 1.2.3, 1.2.x, 1.x, *.
func IsVersionPattern(p string) bool { return IsVersion(p) || rangeRE.MatchString(p) }

// MatchVersion reports whether version is in pattern: "*" matches any
// version (and whatever else a member reports running, so that a
// release may take over from anything), "1.x" any 1.*.*, "1.0.x" any 1.0.*, suffixed ones included
// (1.0.x matches 1.0.3-rc1); any other pattern matches only itself.
func MatchVersion(pattern, version string) bool {
	switch {
	case pattern == "*" || pattern == version:
		return version != ""
	case !rangeRE.MatchString(pattern) || !IsVersion(version):
		// (A version whose suffix ends in .x, 1.0.0-rc.x, is no range.)
		return false
	}
	return strings.HasPrefix(version, strings.TrimSuffix(pattern, "x"))
}

// CompareVersions orders two versions by semantic versioning: -1 if
// a < b, 0 if equal, +1 if a > b. A version with a -suffix comes before
// the same version without one (2.0.0-rc1 < 2.0.0); suffixes compare
// as strings. Anything that is not a version sorts first, as strings.
func CompareVersions(a, b string) int {
	pa, oka := splitVersion(a)
	pb, okb := splitVersion(b)
	switch {
	case !oka || !okb:
		if oka != okb {
			if oka {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	}
	for i := 0; i < 3; i++ {
		if c := compareNumbers(pa.nums[i], pb.nums[i]); c != 0 {
			return c
		}
	}
	switch {
	case pa.pre == pb.pre:
		return 0
	case pa.pre == "":
		return 1
	case pb.pre == "":
		return -1
	}
	return strings.Compare(pa.pre, pb.pre)
}

// versionParts are a version's three numbers, as written (any
// length: a number too large for an int still orders right), and its
// suffix.
type versionParts struct {
	nums [3]string
	pre  string
}

func splitVersion(v string) (versionParts, bool) {
	var p versionParts
	if !IsVersion(v) {
		return p, false
	}
	core, pre, _ := strings.Cut(v, "-")
	p.pre = pre
	copy(p.nums[:], strings.SplitN(core, ".", 3))
	return p, true
}

// compareNumbers orders two decimal numbers without leading zeros
// (IsVersion allows none) of any length: the longer is the larger.
func compareNumbers(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// NeedsArtifact reports whether the component runs an artifact of each
// release: a NodePool's version is its nodes' kubelet version, upgraded
// by its workload's upgrade command, not an image.
func (comp *Component) NeedsArtifact() bool {
	return comp.Workload == nil || comp.Workload.Kind != KindNodePool
}

// AdoptOf returns how member m of comp is found when ferry did not
// start it: its own adopt, else its component's; nil if neither says.
func (comp *Component) AdoptOf(m *Member) *Adopt {
	if m != nil && m.Adopt != nil {
		return m.Adopt
	}
	return comp.Adopt
}
