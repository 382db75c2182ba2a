package window

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, days []string, start, end, zone string) Window {
	t.Helper()
	w, errs := Parse(days, start, end, zone)
	if len(errs) > 0 {
		t.Fatalf("Parse(%v, %q, %q, %q): %v", days, start, end, zone, errs)
	}
	return w
}

func TestAt(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	night := mustParse(t, []string{"mon", "tue", "wed", "thu", "fri"}, "22:00", "04:00", "Europe/Berlin")
	sunday := mustParse(t, []string{"sun"}, "01:00", "04:00", "Europe/Berlin")
	spring := mustParse(t, []string{"sunday"}, "02:30", "05:00", "Europe/Berlin")
	whole := mustParse(t, []string{"sat"}, "00:00", "24:00", "UTC")
	for _, tc := range []struct {
		name  string
		set   Set
		t     time.Time
		open  bool
		until time.Time // the close when open, the next opening when not
	}{
		// 2026-11-23 is a Monday.
		{"no windows: always open", nil, at("2026-11-23 12:00"), true, time.Time{}},
		{"before Monday's opening", Set{night}, at("2026-11-23 21:59"), false, at("2026-11-23 22:00")},
		{"at the opening instant", Set{night}, at("2026-11-23 22:00"), true, at("2026-11-24 04:00")},
		{"past midnight, inside Monday's window", Set{night}, at("2026-11-24 03:59"), true, at("2026-11-24 04:00")},
		{"at the close instant: closed", Set{night}, at("2026-11-24 04:00"), false, at("2026-11-24 22:00")},
		{"Saturday 03:00 is Friday's window", Set{night}, at("2026-11-28 03:00"), true, at("2026-11-28 04:00")},
		{"Saturday noon: next is Monday", Set{night}, at("2026-11-28 12:00"), false, at("2026-11-30 22:00")},
		{"Sunday 23:00 is not a window day", Set{night}, at("2026-11-29 23:00"), false, at("2026-11-30 22:00")},
		{"another zone's instant", Set{night}, time.Date(2026, 11, 23, 21, 30, 0, 0, time.UTC), true, at("2026-11-24 04:00")},
		// DST: Berlin goes 02:00 -> 03:00 on 2026-03-29, 03:00 -> 02:00 on 2026-10-25.
		{"spring: the window 01:00-04:00 is 2h long", Set{sunday}, at("2026-03-29 01:30"), true, time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC)},
		{"spring: a start in the skipped hour opens at 03:30 CEST", Set{spring}, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), false, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},
		{"autumn: the window 01:00-04:00 is 4h long", Set{sunday}, time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC), true, time.Date(2026, 10, 25, 3, 0, 0, 0, time.UTC)},
		{"autumn: opens at 01:00 CEST", Set{sunday}, time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC), false, time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC)},
		{"a whole day to 24:00", Set{whole}, time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC), true, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)},
		{"windows that touch are one", Set{whole, mustParse(t, []string{"sun"}, "00:00", "06:00", "UTC")}, time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), true, time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)},
		{"the nearest of two", Set{night, whole}, at("2026-11-27 12:00"), false, at("2026-11-27 22:00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, until := tc.set.At(tc.t)
			if open != tc.open || !until.Equal(tc.until) {
				t.Errorf("At(%s) = %v, %s; want %v, %s", tc.t, open, until, tc.open, tc.until)
			}
		})
	}
}

func TestParseRefusesNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		days             []string
		start, end, zone string
		field, want      string
	}{
		{nil, "22:00", "04:00", "", "days", "must list the days"},
		{[]string{"mon", "funday"}, "22:00", "04:00", "", "days[1]", `"funday" is not a day`},
		{[]string{"mon"}, "25:00", "04:00", "", "start", "hours 00-23"},
		{[]string{"mon"}, "24:00", "04:00", "", "start", "24:00 only as an end"},
		{[]string{"mon"}, "10pm", "04:00", "", "start", "not a time of day"},
		{[]string{"mon"}, "", "04:00", "", "start", "must be set"},
		{[]string{"mon"}, "22:00", "4", "", "end", "not a time of day"},
		{[]string{"mon"}, "22:00", "22:00", "", "end", "a whole day"},
		{[]string{"mon"}, "22:00", "04:00", "Mars/Olympus", "zone", "not a time zone this build knows"},
		{[]string{"mon"}, "22:00", "04:00", "Local", "zone", "name the zone"},
		{[]string{"mon"}, "22:00", "04:00", "../../etc/passwd", "zone", "not a time zone name"},
	} {
		_, errs := Parse(tc.days, tc.start, tc.end, tc.zone)
		found := false
		for _, e := range errs {
			if e.Field == tc.field && strings.Contains(e.Reason, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("Parse(%v, %q, %q, %q) = %v; want %s: ...%s...", tc.days, tc.start, tc.end, tc.zone, errs, tc.field, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	w := mustParse(t, []string{"tue", "mon"}, "22:00", "04:00", "Europe/Berlin")
	if got, want := w.String(), "mon,tue 22:00-04:00 Europe/Berlin"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := mustParse(t, []string{"daily"}, "00:00", "24:00", "").String(); got != "daily 00:00-24:00 UTC" {
		t.Errorf("String() = %q", got)
	}
}

// FuzzParse: no input panics Parse or At; a window Parse accepts has
// Start != End and an answer from At that is consistent: inside until a
// later instant, or a next opening after t within eight days.
func FuzzParse(f *testing.F) {
	f.Add("mon,tue", "22:00", "04:00", "Europe/Berlin", int64(1795000000))
	f.Add("daily", "00:00", "24:00", "", int64(0))
	f.Add("sun", "02:30", "05:00", "America/New_York", int64(1773500000))
	f.Add("x", "99:99", "-1:00", "../x", int64(-1))
	f.Fuzz(func(t *testing.T, days, start, end, zone string, unix int64) {
		w, errs := Parse(strings.Split(days, ","), start, end, zone)
		if len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Reason == "" {
					t.Fatalf("an error without its field or reason: %+v", e)
				}
			}
			return
		}
		if w.Start == w.End {
			t.Fatalf("accepted a window of no time: %v", w)
		}
		tm := time.Unix(unix%(1<<34), 0)
		open, until := Set{w}.At(tm)
		if !until.After(tm) {
			t.Fatalf("At(%s) = %v, %s: not after t", tm, open, until)
		}
		if !open && until.Sub(tm) > 8*24*time.Hour {
			t.Fatalf("At(%s): next opening %s more than a week ahead", tm, until)
		}
		if open2, _ := (Set{w}).At(until); !open && !open2 {
			t.Fatalf("At(%s) says it opens at %s, where it is closed", tm, until)
		}
	})
}

func TestOpenings(t *testing.T) {
	night := mustParse(t, []string{"mon", "wed"}, "22:00", "04:00", "UTC")
	from := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC) // Tuesday 02:00, inside Monday's
	got := Set{night}.Openings(from, 7*24*time.Hour)
	want := []Opening{
		{from, time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)},
		{time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)},
		{time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)},
	}
	if len(got) != len(want) {
		t.Fatalf("Openings = %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Open.Equal(want[i].Open) || !got[i].Close.Equal(want[i].Close) {
			t.Errorf("opening %d = %v, want %v", i, got[i], want[i])
		}
	}
	if o := (Set{}).Openings(from, time.Hour); len(o) != 1 || !o[0].Close.IsZero() {
		t.Errorf("no windows: %v", o)
	}
}
