package config

import (
	"testing"
	"time"
)

// TestOKToStopRules: a component's ok_to_stop is a call about one
// member (its templates see the candidate), checked like any call, with
// file and line; it has no undo (it changes nothing) and takes a
// check's timeout when none is written.
func TestOKToStopRules(t *testing.T) {
	const at = "    hooks:\n      pre_stop"
	okToStop := func(call string) []edit { return []edit{{at, "    ok_to_stop: " + call + "\n" + at}} }
	runTable(t, []tcase{
		{"an http call about the member", okToStop(`{http: "http://{{.Address}}/admin/ok-to-stop?id={{.Name}}&raft={{.Vars.raft}}"}`), nil},
		{"an exec call", okToStop(`{exec: [ceph, osd, ok-to-stop, "{{.Name}}"], pattern: "safe to stop"}`), nil},
		{"a field the member does not have", okToStop(`{http: "http://{{.Adress}}/admin/ok-to-stop"}`),
			[]string{`t.yaml:17: components[0].ok_to_stop.http: template: no field Adress (there are .Name, .Component, .Host, .Address, .Version, .Any, .Pin, .To, .Backup, .Vars, .Members, .PID)`}},
		{"no kind of call", okToStop(`{timeout: 1s}`),
			[]string{"t.yaml:17: components[0].ok_to_stop: needs one of http, tcp or exec"}},
		{"an undo", okToStop(`{http: "http://{{.Address}}/ok", undo: {http: "http://{{.Address}}/not-ok"}}`),
			[]string{"t.yaml:17: components[0].ok_to_stop.undo: undo applies only to the hooks that change something for a while: pre_upgrade, pre_phase, pre_stop"}},
		{"a timeout too short", okToStop(`{http: "http://{{.Address}}/ok", timeout: 1ms}`),
			[]string{"t.yaml:17: components[0].ok_to_stop.timeout: 1ms is not from 10ms to 1h: how long one call may take; write one in that range, or leave it out for the default 2s"}},
	})
	c, err := Parse([]byte(edited(t, okToStop(`{http: "http://{{.Address}}/admin/ok-to-stop"}`)...)), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Components[0].OKToStop.Timeout.D(); got != 2*time.Second {
		t.Errorf("ok_to_stop's timeout by default: %s, want a check's 2s", got)
	}
}
