// Package window is the maintenance windows of a policy: the weekly
// times, in a time zone, in which ferry may take members down. It is
// pure: a window is read from its words once (Parse), and the question
// "is t inside a window, and if not when does the next one open" is a
// function of t alone (Set.At), so that the upgrade state machine, fed
// the time, stays level-triggered.
//
// A window opens on each of its days at start, local time, and closes
// at end, the same day or, when end is not after start, the next day
// (22:00 to 04:00 crosses midnight). Times are wall-clock times in the
// window's zone: a window across a change to or from daylight saving
// time is an hour shorter or longer in real time, and a start that
// falls in the hour skipped in spring opens at the first instant after
// it (time.Date's reading of a wall time that does not exist).
package window

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	// The zones are embedded: a container image without
	// /usr/share/zoneinfo (distroless, scratch) still knows
	// Europe/Berlin. time.LoadLocation reads the system's first.
	_ "time/tzdata"
)

// Window is one weekly maintenance window.
type Window struct {
	// Days are the weekdays on which the window opens, by time.Weekday.
	Days [7]bool
	// Start and End are minutes since local midnight; End may be 24*60
	// (midnight at the end of the day). End <= Start crosses midnight.
	Start, End int
	Zone       *time.Location
}

// Set is the windows of a policy: none means always open.
type Set []Window

// dayNames are the days as a description writes them, by time.Weekday.
var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// FieldError is a problem with one field of a window, named as the
// description writes it (days, start, end, zone).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Parse reads a window from the description's words: days (mon..sun,
// or "daily"), start and end as HH:MM (end may be 24:00), zone as an
// IANA name ("" is UTC). Every problem is returned, each naming its
// field.
func Parse(days []string, start, end, zone string) (Window, []*FieldError) {
	var w Window
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if len(days) == 0 {
		bad("days", "must list the days the window opens on (mon, tue, wed, thu, fri, sat, sun, or daily)")
	}
	for i, d := range days {
		name := strings.ToLower(strings.TrimSpace(d))
		if name == "daily" {
			w.Days = [7]bool{true, true, true, true, true, true, true}
			continue
		}
		if n := dayIndex(name); n >= 0 {
			w.Days[n] = true
			continue
		}
		bad(fmt.Sprintf("days[%d]", i), "%q is not a day: write mon, tue, wed, thu, fri, sat, sun or daily", truncate(d))
	}
	var err error
	if w.Start, err = clock(start, false); err != nil {
		bad("start", "%v", err)
	}
	if w.End, err = clock(end, true); err != nil {
		bad("end", "%v", err)
	}
	if w.Start == w.End && len(errs) == 0 {
		bad("end", "%q is the window's start: a window of no time, or of a whole day? write start: \"00:00\" and end: \"24:00\" for a whole day", end)
	}
	w.Zone = time.UTC
	if zone != "" {
		loc, lerr := time.LoadLocation(zone)
		switch {
		case strings.ContainsAny(zone, " \\") || strings.HasPrefix(zone, "/") || strings.Contains(zone, ".."):
			bad("zone", "%q is not a time zone name (like Europe/Berlin or UTC)", truncate(zone))
		case zone == "Local":
			bad("zone", "\"Local\" is whichever zone the machine ferry runs on has: name the zone (like Europe/Berlin or UTC)")
		case lerr != nil:
			bad("zone", "%q is not a time zone this build knows (an IANA name like Europe/Berlin, America/New_York or UTC)", truncate(zone))
		default:
			w.Zone = loc
		}
	}
	return w, errs
}

// dayIndex is the weekday a day's name (mon or monday) stands for, or -1.
func dayIndex(name string) int {
	for i, n := range dayNames {
		if name == n || name == n+dayTail[i] {
			return i
		}
	}
	return -1
}

// dayTail completes the days' short names: "mon"+"day".
var dayTail = [7]string{"day", "day", "sday", "nesday", "rsday", "day", "urday"}

// clock reads "HH:MM" as minutes since midnight; 24:00 only as an end.
func clock(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, herr := strconv.Atoi(h)
	mm, merr := strconv.Atoi(m)
	switch {
	case s == "":
		return 0, fmt.Errorf("must be set, as HH:MM (like \"22:00\")")
	case !ok || herr != nil || merr != nil || len(h) < 1 || len(h) > 2 || len(m) != 2:
		return 0, fmt.Errorf("%q is not a time of day: write HH:MM (like \"22:00\")", truncate(s))
	case hh == 24 && mm == 0 && end:
		return 24 * 60, nil
	case hh < 0 || hh > 23 || mm < 0 || mm > 59:
		return 0, fmt.Errorf("%q is not a time of day: hours 00-23, minutes 00-59 (24:00 only as an end)", truncate(s))
	}
	return hh*60 + mm, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// span is the window's opening on the local day of day: its open and
// close instants.
func (w Window) span(day time.Time) (open, close time.Time) {
	y, mo, d := day.Date()
	open = time.Date(y, mo, d, 0, w.Start, 0, 0, w.Zone)
	endDay := d
	if w.End <= w.Start {
		endDay++
	}
	close = time.Date(y, mo, endDay, 0, w.End, 0, 0, w.Zone)
	return open, close
}

// at says whether t is inside w and until when (its close), or else
// when w next opens after t.
func (w Window) at(t time.Time) (inside bool, until time.Time) {
	local := t.In(w.Zone)
	y, mo, d := local.Date()
	var next time.Time
	// The day before (a window across midnight) to a week ahead.
	for i := -1; i <= 7; i++ {
		day := time.Date(y, mo, d+i, 12, 0, 0, 0, w.Zone)
		if !w.Days[day.Weekday()] {
			continue
		}
		open, close := w.span(day)
		if !close.After(open) {
			continue // all of it in the hour skipped in spring
		}
		if !t.Before(open) && t.Before(close) {
			return true, close
		}
		if open.After(t) && (next.IsZero() || open.Before(next)) {
			next = open
		}
	}
	return false, next
}

// At says whether t is inside one of the windows and, if so, until
// when the windows stay open without a break (windows that overlap or
// touch are one); if not, when the next one opens. No windows: always
// open, until zero.
func (s Set) At(t time.Time) (open bool, until time.Time) {
	if len(s) == 0 {
		return true, time.Time{}
	}
	var next time.Time
	for _, w := range s {
		in, u := w.at(t)
		if in {
			// Follow windows that open before this one closes.
			for range 8 * len(s) {
				ext := false
				for _, x := range s {
					if xin, xu := x.at(u); xin && xu.After(u) {
						u, ext = xu, true
					}
				}
				if !ext {
					break
				}
			}
			return true, u
		}
		if !u.IsZero() && (next.IsZero() || u.Before(next)) {
			next = u
		}
	}
	return false, next
}

// String writes the window as a description would: "mon,tue 22:00-04:00 Europe/Berlin".
func (w Window) String() string {
	var days []string
	for i, on := range w.Days {
		if on {
			days = append(days, dayNames[i])
		}
	}
	if !slices.Contains(w.Days[:], false) {
		days = []string{"daily"}
	}
	zone := "UTC"
	if w.Zone != nil {
		zone = w.Zone.String()
	}
	return fmt.Sprintf("%s %s-%s %s", strings.Join(days, ","), hhmm(w.Start), hhmm(w.End), zone)
}

// String lists the windows, "; " between them.
func (s Set) String() string {
	parts := make([]string, len(s))
	for i, w := range s {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}

func hhmm(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// Opening is one time the windows are open without a break.
type Opening struct{ Open, Close time.Time }

// Openings lists the times the windows are open from t (the one open
// at t, from t) until horizon after t, in order. No windows: one
// opening without an end (Close zero).
func (s Set) Openings(t time.Time, horizon time.Duration) []Opening {
	if len(s) == 0 {
		return []Opening{{Open: t}}
	}
	var out []Opening
	end := t.Add(horizon)
	for at := t; at.Before(end); {
		open, until := s.At(at)
		if until.IsZero() {
			break
		}
		if open {
			out = append(out, Opening{Open: at, Close: until})
		}
		at = until
	}
	return out
}
