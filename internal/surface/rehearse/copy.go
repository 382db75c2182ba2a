package rehearse

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/rehearsal"
)

// checkpointURL is the address of a checkpoint's call in the copy's
// flow. Nothing listens there: the rehearsal's Caller answers it
// itself, after the stage's checks (.invalid never resolves, RFC 2606).
const checkpointURL = "http://checkpoint.rehearse.invalid/"

// checkpointTimeout bounds a checkpoint's call and its stage: the
// stage's checks (health, then the traffic window) run inside it.
const checkpointTimeout = "10m"

// copyDescription is the description as the rehearsal runs it: each
// component's members in the schedule's order, and release to's flow
// (declared, or the default one written out) with a check stage after each
// stage that moves members (a stage of kind stageCheck), whose call the
// rehearsal answers after the checks of the cluster as that stage left
// it. Everything else is the
// description's own text.
func copyDescription(data []byte, to string, flow []rehearsal.Stage, s rehearsal.Schedule) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("rehearse: the description is not a mapping")
	}
	root := doc.Content[0]
	for _, comp := range seq(value(root, "components")) {
		name := scalar(value(comp, "name"))
		var order []string
		for _, c := range s.Order {
			if c.Name == name {
				order = c.Members
			}
		}
		members := value(comp, "members")
		if members == nil || members.Kind != yaml.SequenceNode || len(order) == 0 {
			continue
		}
		slices.SortStableFunc(members.Content, func(a, b *yaml.Node) int {
			return slices.Index(order, scalar(value(a, "name"))) - slices.Index(order, scalar(value(b, "name")))
		})
	}
	var rel *yaml.Node
	for _, r := range seq(value(root, "releases")) {
		if scalar(value(r, "version")) == to {
			rel = r
		}
	}
	if rel == nil {
		return nil, fmt.Errorf("rehearse: release %s is not in the catalog", to)
	}
	stages := seq(value(rel, "flow"))
	if len(stages) == 0 {
		// No flow: the default one, written out.
		for _, st := range flow {
			n := mapping("stage", st.Kind)
			if st.Kind == config.StagePhase {
				n.Content = append(n.Content, mapping("component", st.Component).Content...)
			}
			stages = append(stages, n)
		}
	}
	if len(stages) != len(flow) {
		return nil, fmt.Errorf("rehearse: release %s's flow has %d stages, the schedule %d", to, len(stages), len(flow))
	}
	var out []*yaml.Node
	for i, st := range stages {
		out = append(out, st)
		for _, cp := range s.Checkpoints {
			if cp.After != i {
				continue
			}
			out = append(out, checkStage(cp))
		}
	}
	flowNode := &yaml.Node{Kind: yaml.SequenceNode, Content: out}
	if v := value(rel, "flow"); v != nil {
		*v = *flowNode
	} else {
		rel.Content = append(rel.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "flow"}, flowNode)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// value is key's value in mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// seq is a sequence node's items, or nil.
func seq(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// mapping is a flow-style mapping of string pairs, each value quoted
// where YAML would read it as anything but text.
func mapping(kv ...string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for i := 0; i+1 < len(kv); i += 2 {
		v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[i+1]}
		if _, err := strconv.ParseFloat(kv[i+1], 64); err == nil {
			v.Style = yaml.DoubleQuotedStyle
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: kv[i]}, v)
	}
	return n
}
