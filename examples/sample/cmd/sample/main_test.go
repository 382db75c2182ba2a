package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunFlags(t *testing.T) {
	cases := []struct {
		args  []string
		fault string
		code  int
		out   string // substring of stdout
		err   string // substring of stderr
	}{
		{args: []string{"kv", "--version"}, code: 0, out: "dev\n"},
		{args: []string{"api", "--version"}, code: 0, out: "dev\n"},
		{args: []string{"lb", "--version"}, code: 0, out: "dev\n"},
		{args: []string{"--version"}, code: 0, out: "dev\n"},
		{args: nil, code: 2, err: "usage: sample kv|api|lb"},
		{args: []string{"db"}, code: 2, err: `unknown subcommand "db"`},
		{args: []string{"kv", "--id", "kv-1", "--data", "x", "--peers", "kv-1=a"}, code: 2, err: "bad --peers"},
		{args: []string{"kv", "--id", "kv-9", "--data", "x", "--peers", "kv-1=a=b"}, code: 2, err: "not in peers"},
		{args: []string{"api", "--name", "api-1"}, code: 2, err: "at least one kv address"},
		{args: []string{"lb", "--backend", "api-1"}, code: 2, err: "bad --backend"},
		{args: []string{"kv", "--nope"}, code: 2, err: "flag provided but not defined"},
		{args: []string{"kv", "--id", "kv-1"}, fault: "exit-at-start", code: 1, err: "exiting at start"},
		{args: []string{"api", "--name", "a"}, fault: "exit-at-start", code: 1, err: "exiting at start"},
		{args: []string{"api", "--name", "a"}, fault: "bogus", code: 1, err: "unknown fault"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " ")+" "+tc.fault, func(t *testing.T) {
			fault = tc.fault
			defer func() { fault = "" }()
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
				t.Fatalf("run(%q) = %d\nstdout: %s\nstderr: %s", tc.args, code, out.String(), errb.String())
			}
		})
	}
}
