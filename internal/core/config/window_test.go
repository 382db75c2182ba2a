package config

import (
	"testing"
	"time"
)

// TestWindowsValidated: each window's problem at its line, named by its
// field's path.
func TestWindowsValidated(t *testing.T) {
	const policy = "policy: {on_failure: rollback}\n"
	runTable(t, []tcase{
		{"window day", []edit{{policy, "policy:\n  windows:\n    - {days: [mon, funday], start: \"22:00\", end: \"04:00\"}\n"}},
			[]string{`t.yaml:34: policy.windows[0].days[1]: "funday" is not a day: write mon, tue, wed, thu, fri, sat, sun or daily`}},
		{"window start and zone", []edit{{policy, "policy:\n  windows:\n    - days: [sat]\n      start: \"25:00\"\n      end: \"04:00\"\n      zone: Mars/Base\n"}},
			[]string{`t.yaml:35: policy.windows[0].start: "25:00" is not a time of day: hours 00-23, minutes 00-59 (24:00 only as an end)`,
				`t.yaml:37: policy.windows[0].zone: "Mars/Base" is not a time zone this build knows (an IANA name like Europe/Berlin, America/New_York or UTC)`}},
		{"window of no time", []edit{{policy, "policy:\n  windows:\n    - {days: [daily], start: \"22:00\", end: \"22:00\"}\n"}},
			[]string{`t.yaml:34: policy.windows[0].end: "22:00" is the window's start: a window of no time, or of a whole day? write start: "00:00" and end: "24:00" for a whole day`}},
		{"window days missing", []edit{{policy, "policy:\n  windows:\n    - {start: \"22:00\", end: \"04:00\"}\n"}},
			[]string{`t.yaml:34: policy.windows[0].days: must list the days the window opens on (mon, tue, wed, thu, fri, sat, sun, or daily)`}},
	})
}

func TestWindowsRead(t *testing.T) {
	src := edited(t, edit{"policy: {on_failure: rollback}\n", "policy:\n  windows:\n    - {days: [mon, tue], start: \"22:00\", end: \"04:00\", zone: Europe/Berlin}\n"})
	c, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Policy.MaintenanceWindows()
	if got := ws.String(); got != "mon,tue 22:00-04:00 Europe/Berlin" {
		t.Fatalf("windows %q", got)
	}
	// Tuesday 2026-11-24 02:00 in Berlin is 01:00 UTC: inside Monday's.
	if open, until := ws.At(time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)); !open || !until.Equal(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)) {
		t.Fatalf("At = %v, %s", open, until)
	}
}
