package config

import (
	"fmt"
	"strings"
	"testing"
)

// largeDescription is an honest description of n members without a
// single anchor: the api component's members spread over n/10 hosts
// (each agent's certificate pinned), each with its own address and a
// var. The nodes it is written with
// are bounded by its size, not by MaxNodes (which bounds what aliases
// expand to).
func largeDescription(n int) []byte {
	var b strings.Builder
	hosts := max(1, n/10)
	b.WriteString("cluster: large\nhosts:\n")
	for h := range hosts {
		fmt.Fprintf(&b, "  - {name: host-%d, agent: \"10.%d.%d.%d:7101\", tls: {fingerprint: \"sha256:%s\"}}\n", h, h>>16&255, h>>8&255, h&255, hexA)
	}
	b.WriteString(`components:
  - name: api
    order: 1
    strategy: {type: canary, max_batch: 64, max_unavailable: 100}
    run: {args: [api, --name, "{{.Name}}", --http, "{{.Address}}", --zone, "{{.Vars.zone}}"]}
    health:
      member: {http: "http://{{.Address}}/ready", interval: 1s}
    members:
`)
	for i := range n {
		h := i % hosts
		fmt.Fprintf(&b, "      - {name: api-%d, host: host-%d, address: \"10.%d.%d.%d:%d\", vars: {zone: z%d}}\n",
			i, h, h>>16&255, h>>8&255, h&255, 8000+i/hosts, i%3)
	}
	b.WriteString(`releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/api-1, sha256: ` + hexA + `}}
  - version: 2.0.0
    upgrade_from: [1.0.x]
    artifacts: {"*": {path: bin/api-2, sha256: ` + hexB + `}}
`)
	return []byte(b.String())
}

// TestLargeDescription is defect 5 of issue #14: 20,000 members
// written out were refused as if they were an alias bomb ("expands to
// more than 100000 nodes"). How long it takes is
// BenchmarkParseLarge's to say.
func TestLargeDescription(t *testing.T) {
	data := largeDescription(20_000)
	c, err := Parse(data, "large.yaml")
	if err != nil {
		t.Fatalf("a 20,000-member description (%d bytes) is refused: %.2000v", len(data), err)
	}
	if got := len(c.Component("api").Members); got != 20_000 {
		t.Errorf("%d members, want 20000", got)
	}
	// The same members, their addresses now one alias bomb away: the
	// budget still refuses what aliases expand to.
	bomb := strings.Replace(string(data), "cluster: large\n", "cluster: large\nx-a: &a [a, a, a, a, a, a, a, a, a, a]\nx-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nx-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nx-d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\nx-e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n", 1)
	bomb = strings.Replace(bomb, "{http: \"http://{{.Address}}/ready\", interval: 1s}", "{http: \"http://{{.Address}}/ready\", interval: 1s, json: {path: p, equals: [*e, *e, *e]}}", 1)
	_, err = Parse([]byte(bomb), "large.yaml")
	if err == nil || !strings.Contains(err.Error(), "the aliases expand to more than 100000 nodes (an alias bomb?)") {
		t.Errorf("an alias bomb in a large description: %.500v", err)
	}
}

// BenchmarkParseLarge parses the 20,000-member description (about
// 2 MB): issue #14 asks for well under a few seconds.
func BenchmarkParseLarge(b *testing.B) {
	data := largeDescription(20_000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "large.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
