package config

import (
	"slices"
	"strings"
)

// flow checks a release's flow: each stage known and complete, every
// component upgraded by exactly one phase, the migrations' stages once
// each where their calls need them, no member moved to the release
// after the pin moved (a phase after a rollout or finalize), and at
// most one point of no return, not after finalize.
func (v *validator) flow(r *Release, path string, at func(string) int) {
	if len(r.Flow) == 0 {
		return
	}
	fpath := path + ".flow"
	phaseAt := map[string]int{}       // component -> index of its (first) phase or hosts stage
	lastAt := map[string]int{}        // component -> index of its last phase or hosts stage
	byPhase := map[string]bool{}      // component moved by a phase stage (whole)
	moved := map[string]int{}         // member of a hosts stage -> the stage's index
	rolloutAt := map[string]int{}     // component -> index of its rollout
	onceAt := map[string]int{}        // expand, migrate, finalize, contract -> index
	named := map[string]string{}      // a registered kind's stage name -> its path
	hostsNamed := map[string]string{} // hosts stage name -> its path
	noReturn, lastPhase, pinMoved := -1, -1, -1
	for i := range r.Flow {
		st := &r.Flow[i]
		spath := index(fpath, i)
		rel := index("flow", i)
		line := at(rel)
		sat := func(key string) int { return at(rel + "." + key) }
		// Keys a stage of this kind does not take are named, not ignored.
		unused := func(takes ...string) {
			for _, key := range flowStageKeys(st) {
				if !slices.Contains(takes, key) {
					v.add(sat(key), spath+"."+key, "the %s stage takes no %s", st.Stage, key)
				}
			}
		}
		if st.State != "" && !isIdent(st.State) {
			v.add(sat("state"), spath+".state", "%q is not a state's name: letters, digits, _ and -, starting with a letter", st.State)
		}
		if st.PointOfNoReturn {
			if noReturn >= 0 {
				v.add(sat("point_of_no_return"), spath+".point_of_no_return", "a second point of no return (also %s): an upgrade has one", index(fpath, noReturn))
			} else {
				noReturn = i
			}
		}
		switch st.Stage {
		case StageExpand, StageMigrate, StageFinalize, StageContract:
			if first, dup := onceAt[st.Stage]; dup {
				v.add(sat("stage"), spath+".stage", "%s is listed twice (also %s)", st.Stage, index(fpath, first))
			} else {
				onceAt[st.Stage] = i
			}
			unused()
			if st.Stage == StageFinalize && pinMoved < 0 {
				pinMoved = i
			}
		case StagePhase:
			unused("component", "name", "take", "hosts", "host_labels", "max_unavailable")
			if st.IsPart() {
				v.phasePart(st, spath, sat, at, rel, hostsNamed)
			}
			switch {
			case st.Component == "":
				v.add(line, spath+".component", "a phase must name its component%s", knownList(componentNames(v.c)))
			case v.c.Component(st.Component) == nil:
				v.add(sat("component"), spath+".component", "no component %q%s", st.Component, knownList(componentNames(v.c)))
			default:
				if first, dup := phaseAt[st.Component]; dup {
					// A component may span phases that each move a part
					// of it (named: parts checks how they divide it).
					if !st.IsPart() || !r.Flow[first].IsPart() || !byPhase[st.Component] {
						v.add(sat("component"), spath+".component", "component %s has a second phase (also %s): a component is upgraded once, or in parts, each phase named with the part it takes (take:, hosts: or host_labels:)", st.Component, index(fpath, first))
						byPhase[st.Component] = true // said once: not again as members no hosts stage moves
						continue
					}
				} else {
					phaseAt[st.Component] = i
				}
				lastAt[st.Component], byPhase[st.Component] = i, true
				lastPhase = i
				if pinMoved >= 0 {
					v.add(sat("component"), spath+".component", "the phase of %s comes after %s (%s), which moved the pin to %s: members of %s still on the release before would run with a pin they cannot honour; put every phase before it",
						st.Component, r.Flow[pinMoved].Stage, index(fpath, pinMoved), r.Version, st.Component)
				}
			}
		case StageRollout:
			unused("components")
			if len(st.Components) == 0 {
				v.add(line, spath+".components", "a rollout must list the components it restarts, in order%s", knownList(componentNames(v.c)))
			}
			for j, name := range st.Components {
				cpath := index(spath+".components", j)
				cline := at(index(rel+".components", j))
				switch first, dup := rolloutAt[name]; {
				case v.c.Component(name) == nil:
					v.add(cline, cpath, "no component %q%s", name, knownList(componentNames(v.c)))
				case dup:
					v.add(cline, cpath, "component %s is rolled out twice (also %s)", name, index(fpath, first))
				default:
					rolloutAt[name] = i
					if _, ok := phaseAt[name]; !ok {
						v.add(cline, cpath, "component %s is rolled out before its phase: a rollout restarts members on the release they already run, so its phase comes first", name)
					}
				}
			}
			if pinMoved < 0 {
				pinMoved = i
			}
		case StageHosts:
			unused("components", "name", "deadline", "max_unavailable", "max_unavailable_per_domain", "strategy", "hosts", "host_labels")
			for j, name := range st.Components {
				cpath := index(spath+".components", j)
				cline := at(index(rel+".components", j))
				// A component may span hosts stages (each moves the
				// members on its hosts: stagesCover checks each is
				// moved once), never a phase and a hosts stage.
				switch first, dup := phaseAt[name]; {
				case v.c.Component(name) == nil:
					v.add(cline, cpath, "no component %q%s", name, knownList(componentNames(v.c)))
				case dup && (byPhase[name] || slices.Contains(st.Components[:j], name)):
					v.add(cline, cpath, "component %s has a second phase (also %s): a component is upgraded once", name, index(fpath, first))
				default:
					if !dup {
						phaseAt[name] = i
					}
					lastAt[name] = i
					lastPhase = i
					if pinMoved >= 0 {
						v.add(cline, cpath, "the hosts stage upgrades %s after %s (%s), which moved the pin to %s: members still on the release before would run with a pin they cannot honour; put it before",
							name, r.Flow[pinMoved].Stage, index(fpath, pinMoved), r.Version)
					}
				}
			}
			v.hostsStage(st, spath, sat, at, rel, hostsNamed)
			v.stageMoves(st, i, fpath, sat, moved, byPhase)
		case "":
			v.add(line, spath+".stage", "must be set: one of %s", strings.Join(StageKinds(), ", "))
		default:
			k, ok := LookupStageKind(st.Stage)
			if !ok {
				v.add(sat("stage"), spath+".stage", "unknown stage %q; known: %s", st.Stage, strings.Join(StageKinds(), ", "))
				continue
			}
			v.registeredStage(k, st, Node{v: v, path: spath, pos: &r.pos, line: line, under: rel}, named)
		}
	}
	for _, comp := range v.c.ComponentsInOrder() {
		if _, ok := phaseAt[comp.Name]; !ok {
			v.add(at("flow"), fpath, "component %s has no phase: a flow upgrades every component once ({stage: phase, component: %s})", comp.Name, comp.Name)
		}
	}
	v.stagesCover(fpath, at, moved, byPhase, lastAt)
	v.phaseParts(r, fpath, at)
	m := &r.Migrations
	for _, s := range []struct {
		name  string
		calls []Call
	}{{StageExpand, m.Expand}, {StageMigrate, m.Migrate}, {StageFinalize, m.Finalize}, {StageContract, m.Contract}} {
		if _, ok := onceAt[s.name]; len(s.calls) > 0 && !ok {
			v.add(at("migrations."+s.name), path+".migrations."+s.name, "the flow has no %s stage: these calls would never be made; add {stage: %s}", s.name, s.name)
		}
	}
	order := func(before, after string, why string) {
		b, okb := onceAt[before]
		a, oka := onceAt[after]
		if okb && oka && a < b {
			v.add(at(index("flow", a)), index(fpath, a), "%s comes before %s (%s): %s", after, before, index(fpath, b), why)
		}
	}
	order(StageMigrate, StageFinalize, "finalize moves the pin once the data is migrated")
	order(StageFinalize, StageContract, "contract drops what only the release before needed, once there is no going back")
	if e, ok := onceAt[StageExpand]; ok {
		for _, name := range sortedKeys(phaseAt) {
			if p := phaseAt[name]; p < e {
				v.add(at(index("flow", e)), index(fpath, e), "expand comes after the phase of %s (%s): expand runs before any member runs the release", name, index(fpath, p))
				break
			}
		}
	}
	// Migrate runs the release's own code against the data through the
	// migrations' component: its members must run the release first.
	// Other components may follow (Glance's API nodes are restarted
	// after the online data migration); without a component named,
	// every member must.
	if mi, ok := onceAt[StageMigrate]; ok {
		comp := r.Migrations.Component
		if p, named := lastAt[comp]; comp != "" && named && p > mi {
			v.add(at(index("flow", mi)), index(fpath, mi), "migrate comes before the phase of %s (%s): migrate runs once the members of its component (migrations.component: %s) run the release", comp, index(fpath, p), comp)
		} else if comp == "" && lastPhase > mi {
			v.add(at(index("flow", mi)), index(fpath, mi), "migrate comes before the phase of %s (%s): migrate runs once every member runs the release", r.Flow[lastPhase].Component, index(fpath, lastPhase))
		}
	}
	if f, ok := onceAt[StageFinalize]; ok && noReturn > f {
		v.add(at(index("flow", noReturn)+".point_of_no_return"), index(fpath, noReturn)+".point_of_no_return",
			"the point of no return comes after finalize (%s), which is one already: finalize moves the pin, which nothing undoes", index(fpath, f))
	}
}
