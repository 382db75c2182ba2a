package config

import "strings"

// applications checks the applications the health query asks about: a
// name each, once; the releases each supports (versions or x-ranges),
// or a call asked with the target, or both.
func (v *validator) applications() {
	c := v.c
	samples := []TemplateData{{Version: "0.0.0"}}
	if len(c.Releases) > 0 {
		samples[0].Version = c.Releases[0].Version
	}
	seen := map[string]int{}
	for i := range c.Applications {
		a := &c.Applications[i]
		rel := index("applications", i)
		line := c.pos.at(rel)
		at := func(key string) int { return c.pos.at(rel+"."+key, line) }
		switch first, dup := seen[a.Name]; {
		case a.Name == "":
			v.add(line, rel+".name", "must be set: the health query lists the application by it")
		case dup:
			v.add(at("name"), rel+".name", "duplicate application %q (also applications[%d])", a.Name, first)
		default:
			seen[a.Name] = i
		}
		if len(a.Supports) == 0 && a.Check == nil {
			v.add(line, rel+".supports", "must be set, or check: which releases the application runs on (versions or x-ranges like 1.38.x), or a call that answers for {{.Version}}")
		}
		for j, p := range a.Supports {
			if !IsVersionPattern(p) {
				v.add(c.pos.at(index(rel+".supports", j), line), index(rel+".supports", j), "%q is not a version (1.2.3) or an x-range (1.2.x, 1.x, *)", p)
			}
		}
		if a.Check != nil {
			v.call(a.Check, rel+".check", at("check"), samples, false)
		}
	}
}

// SupportsText says which releases application a supports, for a
// refusal: "1.37.x, 1.38.x".
func (a *Application) SupportsText() string { return strings.Join(a.Supports, ", ") }

// SupportsRelease reports whether application a's list allows release
// version (true when it lists none: its check alone answers).
func (a *Application) SupportsRelease(version string) bool {
	if len(a.Supports) == 0 {
		return true
	}
	for _, p := range a.Supports {
		if MatchVersion(p, version) {
			return true
		}
	}
	return false
}
