package bundle

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// Bounds of the summary: it is read by a person, first.
const (
	summaryTail   = 12 // lines of a failed member's output, per instance
	summaryEvents = 20 // the last events
)

// startLine is the agent's first line of each instance's output.
var startLine = regexp.MustCompile(`starting \S+ version (\S+) \(sha256 [0-9a-f]+\), instance (\d+)`)

// writeSummary says, for a person, what happened and where to look.
func writeSummary(u upgrade.Upgrade, evs []store.Event, failed []failed, tails map[string]memberLogs, replaced map[string][]kept, man *Manifest, d DescriptionInfo, now time.Time) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("ferry troubleshooting bundle of upgrade %s\n", u.ID)
	p("written %s by %s, with ferry %s\n", now.UTC().Format(time.RFC3339), orDash(man.By), man.Ferry)
	p("(README.md says what each file is and what was redacted; manifest.json lists them with their SHA-256)\n\n")

	p("UPGRADE\n")
	p("  release:  %s → %s", u.From, u.To)
	if u.Final != "" {
		p(" (one step of a path to %s)", u.Final)
	}
	p("\n  state:    %s\n", u.State)
	if u.Reason != "" {
		p("  reason:   %s\n", u.Reason)
	}
	end, took := u.Updated, ""
	if !u.Ended.IsZero() {
		end = u.Ended
		took = fmt.Sprintf(", ended %s", u.Ended.UTC().Format(time.RFC3339))
	} else {
		took = ", not ended (last recorded " + u.Updated.UTC().Format(time.RFC3339) + ")"
	}
	p("  began:    %s%s, %s in all\n", u.Created.UTC().Format(time.RFC3339), took, end.Sub(u.Created).Round(time.Millisecond))
	if u.Waiting != "" {
		p("  waiting:  %s\n", u.Waiting)
	}
	if u.Outage != nil {
		p("  OUTAGE:   the substrate does not answer since %s: %s\n", u.Outage.Since.UTC().Format(time.RFC3339), u.Outage.Detail)
	}
	if !u.Finalized.IsZero() {
		p("  finalized %s: no going back\n", u.Finalized.UTC().Format(time.RFC3339))
	}
	steps := map[upgrade.MemberStep]int{}
	for _, m := range u.Members {
		steps[m.Step]++
	}
	var counts []string
	for _, s := range []upgrade.MemberStep{upgrade.StepDone, upgrade.StepFailed, upgrade.StepPending} {
		if steps[s] > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", steps[s], s))
			delete(steps, s)
		}
	}
	for s, n := range steps {
		counts = append(counts, fmt.Sprintf("%d %s", n, s))
	}
	p("  members:  %d (%s)\n", len(u.Members), strings.Join(counts, ", "))
	rb := 0
	for _, bt := range u.Batches {
		if bt.Rollback {
			rb++
		}
	}
	p("  batches:  %d formed, %d of them rolling back\n", len(u.Batches), rb)

	p("\nFAILED MEMBERS\n")
	if len(failed) == 0 {
		p("  none\n")
	}
	for _, f := range failed {
		p("  %s", f.Name)
		if f.Component != "" {
			target, back := f.Target, ""
			if m := u.Members[f.Name]; m != nil && m.Step != upgrade.StepFailed && f.Target == f.From && u.To != f.From {
				// A rollback set its target back: say where it failed.
				target, back = u.To, ", rolled back to "+orDash(f.From)
			}
			p(" (%s, %s → %s%s; now %s)", f.Component, orDash(f.From), orDash(target), back, stepOf(u, f.Name))
		}
		p("\n")
		if f.Why != "" {
			p("    why: %s\n", f.Why)
		}
		if f.Output != "" {
			// The crash loop's event: its exit and its output then.
			head, rest, _ := strings.Cut(f.Output, "\n")
			p("    %s\n", head)
			for _, l := range lastLines(rest, summaryTail) {
				p("      | %s\n", l)
			}
		}
		// The instances the driver replaced (Kubernetes: the pods),
		// whose output it kept before they went: after a rollback, the
		// one that failed.
		for _, k := range replaced[f.Name] {
			lines := lastLines(k.output, summaryTail)
			p("    %s; last %d line(s) (%s):\n", strings.TrimPrefix(k.header, f.Name+": "), len(lines), k.file)
			for _, l := range lines {
				p("      | %s\n", l)
			}
		}
		ml, ok := tails[f.Name]
		if !ok {
			p("    its output was not collected (see NOT COLLECTED)\n")
			continue
		}
		for _, x := range []struct {
			which string
			in    instance
		}{{"previous", ml.previous}, {"current (or last)", ml.current}} {
			if x.in.err != nil {
				if !isNotFound(x.in.err) {
					p("    its %s instance's output: not collected (see NOT COLLECTED)\n", x.which)
				}
				continue
			}
			what := "version not in the lines kept"
			if m := startLine.FindAllStringSubmatch(x.in.text, -1); len(m) > 0 {
				last := m[len(m)-1]
				what = "version " + last[1] + ", instance " + last[2]
			}
			lines := lastLines(x.in.text, summaryTail)
			p("    its %s instance (%s), last %d line(s) (members/%s/):\n", x.which, what, len(lines), unsafeName.ReplaceAllString(f.Name, "_"))
			for _, l := range lines {
				p("      | %s\n", l)
			}
		}
	}

	p("\nUNDOS STILL OWED\n")
	owed := 0
	for _, e := range u.Effects {
		if !e.Owed() && e.State != effect.StateAbandoned {
			continue
		}
		owed++
		detail := e.Detail()
		p("  %s  %s  %s  %s\n", e.ID, e.Scope, strings.ToUpper(string(e.State)), detail)
	}
	if owed == 0 {
		p("  none: every change ferry made outside the members was undone\n")
	}

	p("\nREFUSALS AND OVERRIDES\n")
	for _, r := range u.Refusals {
		p("  now: %s\n", r)
	}
	waits, lastWait := 0, ""
	for _, ev := range evs {
		if ev.Kind == "wait" && strings.Contains(ev.Message, "refused") {
			waits++
			lastWait = ev.Message
		}
	}
	if waits > 0 {
		p("  during the upgrade: %d wait(s) on a refusal; the last: %s\n", waits, lastWait)
	}
	for _, o := range u.Overrides {
		p("  %s (at %s)\n", o.Act(), o.At.UTC().Format(time.RFC3339))
	}
	if len(u.Refusals) == 0 && waits == 0 && len(u.Overrides) == 0 {
		p("  none\n")
	}

	p("\nNOT COLLECTED\n")
	if len(man.NotCollected) == 0 {
		p("  nothing: every part of the bundle was collected\n")
	}
	for _, m := range man.NotCollected {
		p("  - %s: %s\n", m.What, m.Why)
	}

	p("\nDESCRIPTION\n")
	p("  file:     %s\n", orDash(d.File))
	if d.SHA256 != "" {
		p("  sha256:   %s\n", d.SHA256)
	}
	p("  recorded: %s (%s)\n", orDash(d.RecordedSHA256), orDash(d.Note))
	p("  redacted: %d value(s); description/digest.json lists their paths, never their values\n", man.Redacted)
	p("  scrubbed: %d text(s) collected had a secret or a credential's form replaced by %s\n", man.Scrubbed, Redacted)

	n := min(len(evs), summaryEvents)
	p("\nLAST EVENTS (%d of %d; all in upgrade/events.jsonl)\n", n, len(evs))
	for _, ev := range evs[len(evs)-n:] {
		msg, _, cut := strings.Cut(ev.Message, "\n")
		if cut {
			msg += " …"
		}
		p("  %s  %-7s %s\n", ev.Time.UTC().Format("15:04:05.000"), ev.Kind, msg)
	}
	return b.String()
}

func stepOf(u upgrade.Upgrade, n string) string {
	if m := u.Members[n]; m != nil {
		s := string(m.Step)
		if m.Detail != "" {
			s += ": " + m.Detail
		}
		return s
	}
	return "-"
}

// lastLines returns the last n lines of s, without the final newline.
func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortStrings(s []string) { sort.Strings(s) }
