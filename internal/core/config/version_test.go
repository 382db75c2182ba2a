package config

import (
	"strings"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0},
		{"1.0.0", "1.0.1", -1},
		{"1.10.0", "1.9.9", 1},
		{"2.0.0", "10.0.0", -1},
		{"2.0.0-rc1", "2.0.0", -1},
		{"2.0.0", "2.0.0-rc1", 1},
		{"2.0.0-bad.exit", "2.0.0-bad.never", -1},
		{"1.0.0", "not-a-version", 1},
		{"x", "y", -1},
	}
	for _, tc := range cases {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDowngradeOnlyWithinAPatchLine(t *testing.T) {
	base := `cluster: c
hosts: [{name: h, agent: "127.0.0.1:1"}]
components:
  - name: kv
    order: 1
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members: [{name: kv-1, host: h, address: "127.0.0.1:2"}]
    run: {args: [kv]}
releases:
  - {version: 1.0.0, artifacts: {"*": {path: a, sha256: "` + sixtyFour + `"}}}
  - {version: 1.1.0, artifacts: {"*": {path: a, sha256: "` + sixtyFour + `"}}}
  - version: 1.1.1
    downgrade_to: [DOWN]
    artifacts: {"*": {path: a, sha256: "` + sixtyFour + `"}}
`
	for _, tc := range []struct {
		down, problem string
	}{
		{"1.1.0", ""},
		{"1.1.x", ""},
		{"1.0.0", `releases[2].downgrade_to[0]: "1.0.0" is not a patch release of 1.1.1's line 1.1`},
		{"1.x", `"1.x" is not a patch release`},
	} {
		_, err := Parse([]byte(replace(base, "DOWN", tc.down)), "c.yaml")
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("downgrade_to %s: unexpected %v", tc.down, err)
		case tc.problem != "" && (err == nil || !contains1(err.Error(), tc.problem)):
			t.Errorf("downgrade_to %s: err = %v, want %q", tc.down, err, tc.problem)
		}
	}
}

const sixtyFour = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func replace(s, old, new string) string { return strings.ReplaceAll(s, old, new) }

func contains1(s, sub string) bool { return strings.Contains(s, sub) }

func TestMigrationsValidated(t *testing.T) {
	desc := `cluster: c
hosts: [{name: h, agent: "127.0.0.1:1"}]
components:
  - name: kv
    order: 1
    strategy: {type: canary, max_batch: 1, max_unavailable: 1}
    members: [{name: kv-1, host: h, address: "127.0.0.1:2"}]
    run: {args: [kv]}
releases:
  - version: 2.0.0
    artifacts: {"*": {path: a, sha256: "` + sixtyFour + `"}}
    migrations:
      component: COMP
      migrate: [{http: "http://{{.Any}}/admin/migrate", method: POST, json: {path: done, equals: true}}]
      finalize: [{http: "http://{{.Any}}/admin/compat?level=2", method: POST}]
policy: {finalize: FIN}
`
	c, err := Parse([]byte(replace(replace(desc, "COMP", "kv"), "FIN", "manual")), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := c.Release("2.0.0").Migrations
	if len(m.Migrate) != 1 || m.Deadline.D() != DefaultMigrateDeadline || m.Migrate[0].Timeout == 0 || c.Policy.Finalize != "manual" {
		t.Fatalf("migrations %+v, finalize %q", m, c.Policy.Finalize)
	}
	_, err = Parse([]byte(replace(replace(desc, "COMP", "db"), "FIN", "later")), "c.yaml")
	for _, want := range []string{`c.yaml:13: releases[0].migrations.component: must name the component`, `policy.finalize: unknown policy "later"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}
