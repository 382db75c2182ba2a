package config

import (
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// addedSteps checks that comp describes what the steps its strategy
// may add before a batch need (strategy.Adds; package step's extra
// steps): the hook list each runs, the role it is about. Nothing
// names a strategy or a step here: both registries answer.
func (v *validator) addedSteps(comp *Component, path string, line int) {
	v.stepLists(comp, strings.TrimSuffix(path, ".strategy"))
	typ := string(comp.Strategy.Type)
	for _, name := range strategy.Adds(typ) {
		x, ok := step.ExtraOf(step.Name(name))
		if !ok {
			v.add(line, path+".type", "%s adds the step %q, which this build does not have (it has: %s)", typ, name, strings.Join(step.ExtraNames(), ", "))
			continue
		}
		if x.Hooks != "" && len(comp.Hooks.List(x.Hooks)) == 0 {
			v.add(line, path+".type", "%s adds the step %s, which %s: describe hooks.%s for %s", typ, name, x.Doc, x.Hooks, comp.Name)
		}
		if x.NeedsRole && comp.Role == nil {
			v.add(line, path+".type", "%s adds the step %s, which %s: describe the role of %s (role: {name, check}: the check that passes on the member holding it)", typ, name, x.Doc, comp.Name)
		}
	}
}

// stepLists refuses a hook list of hooks.steps that no extra step of
// this build runs: it would never be made.
func (v *validator) stepLists(comp *Component, cpath string) {
	for _, name := range sortedKeys(comp.Hooks.Steps) {
		var own []string
		runs := false
		for _, n := range step.ExtraNames() {
			if x, _ := step.ExtraOf(step.Name(n)); strings.HasPrefix(x.Hooks, StepHooks) {
				own = append(own, strings.TrimPrefix(x.Hooks, StepHooks))
				runs = runs || x.Hooks == StepHooks+name
			}
		}
		if !runs {
			rel := "hooks." + StepHooks + name
			v.add(comp.pos.at(rel, comp.pos.at("hooks", 0)), cpath+"."+rel, "no step of this build runs it: it would never be made%s", knownList(own))
		}
	}
}
