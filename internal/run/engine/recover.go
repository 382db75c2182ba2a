package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// hookUndo is one hook call's undo, with the data it is rendered with.
type hookUndo struct {
	what string
	call config.Call
	data config.TemplateData
}

// hookUndos lists the undo of every hook call of the description that
// has one, in the order an upgrade's end would run them: each member's
// pre_stop undos (components in reverse order), then each component's
// pre_phase undos, then the cluster's pre_upgrade undos.
func (e *Engine) hookUndos() []hookUndo {
	var out []hookUndo
	comps := e.c.ComponentsInOrder()
	slices.Reverse(comps)
	for _, comp := range comps {
		for i, c := range comp.Hooks.List("pre_stop") {
			if c.Undo == nil {
				continue
			}
			for _, m := range comp.Members {
				out = append(out, hookUndo{fmt.Sprintf("%s: undo of pre_stop hook %d", m.Name, i+1), *c.Undo, e.callData(m.Name, comp.Name, "")})
			}
		}
	}
	for _, comp := range comps {
		for i, c := range comp.Hooks.List("pre_phase") {
			if c.Undo != nil {
				out = append(out, hookUndo{fmt.Sprintf("component %s: undo of pre_phase hook %d", comp.Name, i+1), *c.Undo, e.callData("", comp.Name, "")})
			}
		}
	}
	for i, c := range e.c.Hooks.List("pre_upgrade") {
		if c.Undo != nil {
			out = append(out, hookUndo{fmt.Sprintf("cluster: undo of pre_upgrade hook %d", i+1), *c.Undo, e.callData("", "", "")})
		}
	}
	return out
}

// UndoHooks is the recovery of an upgrade whose journal is lost (its
// store damaged, with no backup): it runs the undo of every hook call of
// the description that has one (hookUndos), whether or not its change
// was made, since undos are idempotent (a member put back in a load
// balancer it is in stays there). With dryRun it only says what it
// would run. Each call is said through progress; the error names every
// undo that failed.
func (e *Engine) UndoHooks(ctx context.Context, dryRun bool, progress Progress) error {
	say := func(format string, a ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, a...))
		}
	}
	var failed []string
	for _, u := range e.hookUndos() {
		if dryRun {
			say("would run %s", u.what)
			continue
		}
		r := e.prober.Do(ctx, u.call, u.data)
		if !r.OK {
			failed = append(failed, u.what+": "+r.Detail)
			say("%s: FAILED: %s", u.what, r.Detail)
			continue
		}
		say("%s: %s", u.what, r.Detail)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d undo(s) failed (run recover again once their targets answer): %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}
