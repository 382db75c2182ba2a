package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// FerryNeed is what a release asks of the ferry that upgrades a
// cluster to it: the oldest ferry that understands it (requires_ferry)
// and the ferry build to put in place first (ferry).
type FerryNeed struct {
	Release  string
	Requires string
	Ferry    Artifact
}

// ReadFerryNeed reads release to's requires_ferry and ferry from a
// description, and nothing else of it: a release that requires a newer
// ferry may use keys this build does not know, which Parse refuses,
// and a ferry too old for it must still tell that it is, and which
// ferry to put in place (the Kubernetes controller's own Deployment).
// Unknown keys are ignored; the keys read are checked as Validate
// checks them (a version, 64 hex digits, an image not pinned twice).
// A description with no release to is no error: the need is empty, and
// Parse says what is wrong.
func ReadFerryNeed(data []byte, to string) (FerryNeed, error) {
	need := FerryNeed{Release: to}
	if len(data) > MaxFileSize {
		return need, fmt.Errorf("the description is larger than %d bytes", MaxFileSize)
	}
	root, err := parseYAML(data)
	if err != nil || root == nil {
		return need, err
	}
	body := deref(root)
	if body.Kind == yaml.DocumentNode && len(body.Content) > 0 {
		body = deref(body.Content[0])
	}
	rels := deref(mapValue(body, "releases"))
	if rels == nil || rels.Kind != yaml.SequenceNode {
		return need, nil
	}
	for _, rn := range rels.Content {
		rn = deref(rn)
		if scalar(mapValue(rn, "version")) != to || to == "" {
			continue
		}
		need.Requires = scalar(mapValue(rn, "requires_ferry"))
		if f := deref(mapValue(rn, "ferry")); f != nil {
			need.Ferry = Artifact{Path: scalar(mapValue(f, "path")), Image: scalar(mapValue(f, "image")),
				SHA256: strings.ToLower(scalar(mapValue(f, "sha256"))), Signature: scalar(mapValue(f, "signature"))}
		}
		line := rn.Line
		switch a := need.Ferry; {
		case need.Requires != "" && !IsVersion(need.Requires):
			return need, fmt.Errorf("line %d: release %s: requires_ferry %q is not a version", line, to, truncate(need.Requires, 70))
		case a != (Artifact{}) && !sha256RE.MatchString(a.SHA256):
			return need, fmt.Errorf("line %d: release %s: ferry.sha256 %q is not 64 hex digits", line, to, truncate(a.SHA256, 70))
		case strings.Contains(a.Image, "@"):
			return need, fmt.Errorf("line %d: release %s: ferry.image %q is pinned by digest already: write it without, its digest in sha256", line, to, truncate(a.Image, 100))
		}
		return need, nil
	}
	return need, nil
}

// PinnedImage is the image pinned to its digest (name@sha256:…), as
// ferry runs it.
func (a Artifact) PinnedImage() string {
	if a.Image == "" {
		return ""
	}
	return a.Image + "@sha256:" + strings.ToLower(a.SHA256)
}

// deref follows one alias: the lenient reader reads a fixed depth of
// nodes, so an alias costs one step, never an expansion.
func deref(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		return n.Alias
	}
	return n
}

// mapValue is the value of key in mapping n, nil if n is no mapping or
// has no such key.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := deref(n.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalar is n's value when it is a scalar, else "".
func scalar(n *yaml.Node) string {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
