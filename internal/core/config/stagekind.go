package config

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// A flow stage kind that makes calls for the whole cluster (a release's
// action, a checkpoint, a notification) is registered by name, the way
// strategies, extra steps and substrates are: the file that defines it
// calls RegisterStageKind from its init, and nothing else in the tree
// names it. Validation takes its keys and its own checks from here, the
// engine its calls (Release.StageCalls), and the state machine walks it
// generically: its state is STATE-NAME, its calls are made until they
// pass, then its gate until it passes, at the migrations' interval,
// within its deadline; it may be the point of no return like any stage.
// The action (flowaction.go) is one.
//
// The stages the machine walks itself (expand, the phases, rollouts,
// hosts stages, migrate, finalize, contract: they move members, the pin
// or the release's migrations) are built in (builtinStageKinds).

// StageKind is one registered kind of flow stage.
type StageKind struct {
	// Name is the value of a stage's stage: key.
	Name string
	// State is the word of the upgrade's state while a stage of this
	// kind runs; the state is written STATE-NAME with the stage's name
	// (action-networking), in records, events and the API, so it must
	// not change once records carry it.
	State string
	// Doc says what a stage of the kind does, in a sentence.
	Doc string
	// Takes lists the keys of a flow stage the kind reads beyond stage,
	// name and point_of_no_return (component, calls, gate, deadline…);
	// any other key written is refused by name.
	Takes []string
	// Check reports what is wrong with a stage of the kind beyond its
	// keys and its name (checked already: set, a name, not used twice by
	// stages of the kind), through n (n.Add("calls", …)); nil if nothing.
	Check func(n Node, st *FlowStage)
	// Calls are the calls a stage of the kind makes, and the component
	// whose running member (.Any) they are made against: its calls
	// first (gate false), made until they pass, then its gate (gate
	// true), made until it passes. None: nothing (more) to do.
	Calls func(st *FlowStage, gate bool) (component string, calls []Call)

	// file is the source file that registered the kind (set by
	// RegisterStageKind): the one place that may name it.
	file string
}

// File is the source file that registered the kind: the one file that
// may spell its name and its state (the tests of package config and
// internal/testenv/extension hold the tree to that).
func (k StageKind) File() string { return k.file }

// builtinStageKinds are the kinds the machine walks itself, in the
// order a reader meets them.
var builtinStageKinds = []string{StageExpand, StagePhase, StageRollout, StageMigrate, StageFinalize, StageContract, StageHosts}

var stageKinds struct {
	sync.RWMutex
	byName map[string]StageKind
}

// RegisterStageKind makes a kind of flow stage known by name. A name or
// state registered twice, a built-in name, a state that begins another
// registered one's (their STATE-NAME words could not be told apart), or
// a kind without Calls is a programming error and panics at init.
func RegisterStageKind(k StageKind) {
	stageKinds.Lock()
	defer stageKinds.Unlock()
	if stageKinds.byName == nil {
		stageKinds.byName = map[string]StageKind{}
	}
	if k.Name == "" || k.State == "" || k.Calls == nil || !isIdent(k.Name) || !isIdent(k.State) {
		panic(fmt.Sprintf("config: stage kind %q registered without a name, a state or its calls", k.Name))
	}
	if _, dup := stageKinds.byName[k.Name]; dup || slices.Contains(builtinStageKinds, k.Name) {
		panic("config: stage kind " + k.Name + " registered twice")
	}
	for _, o := range stageKinds.byName {
		if o.State == k.State || strings.HasPrefix(o.State, k.State+"-") || strings.HasPrefix(k.State, o.State+"-") {
			panic(fmt.Sprintf("config: stage kinds %s and %s have states %q and %q, which cannot be told apart", o.Name, k.Name, o.State, k.State))
		}
	}
	if _, file, _, ok := runtime.Caller(1); ok {
		k.file = file
	}
	stageKinds.byName[k.Name] = k
}

// LookupStageKind returns the registered stage kind name (not a
// built-in one).
func LookupStageKind(name string) (StageKind, bool) {
	stageKinds.RLock()
	defer stageKinds.RUnlock()
	k, ok := stageKinds.byName[name]
	return k, ok
}

// StageKindOfState returns the registered stage kind whose state word
// is state.
func StageKindOfState(state string) (StageKind, bool) {
	stageKinds.RLock()
	defer stageKinds.RUnlock()
	for _, k := range stageKinds.byName {
		if k.State == state {
			return k, true
		}
	}
	return StageKind{}, false
}

// StageKinds lists the kinds of stage a flow may list: the built-in
// ones, then the registered ones, sorted.
func StageKinds() []string {
	stageKinds.RLock()
	defer stageKinds.RUnlock()
	return append(slices.Clone(builtinStageKinds), sortedKeys(stageKinds.byName)...)
}

// FlowStage returns the stage of kind kind named name of release r's
// flow, or nil.
func (r *Release) FlowStage(kind, name string) *FlowStage {
	for i := range r.Flow {
		if r.Flow[i].Stage == kind && r.Flow[i].Name == name {
			return &r.Flow[i]
		}
	}
	return nil
}

// registeredStage checks stage st of a flow, of registered kind k: its
// keys, its name (its state's second word, unique among the kind's
// stages: named records where it stands), then the kind's own rules.
func (v *validator) registeredStage(k StageKind, st *FlowStage, n Node, named map[string]string) {
	for _, key := range flowStageKeys(st) {
		if key != "name" && !slices.Contains(k.Takes, key) {
			n.Add(key, "the %s stage takes no %s", st.Stage, key)
		}
	}
	switch {
	case st.Name == "":
		n.AddAt("", "name", "must be set: a stage of kind %s is named (its state is %s-NAME)", st.Stage, k.State)
	case !isIdent(st.Name):
		n.Add("name", "%q is not a name: letters, digits, _ and -, starting with a letter", st.Name)
	default:
		key := k.Name + "\x00" + st.Name
		if first, dup := named[key]; dup {
			n.Add("name", "a second %s %s (also %s)", st.Stage, st.Name, first)
		} else {
			named[key] = n.Path("")
		}
	}
	if k.Check != nil {
		k.Check(n, st)
	}
}

// flowStageKeys are the keys of stage st that are written, beside
// stage and point_of_no_return.
func flowStageKeys(st *FlowStage) []string {
	var out []string
	for _, k := range []struct {
		key string
		set bool
	}{
		{"component", st.Component != ""}, {"components", len(st.Components) > 0}, {"name", st.Name != ""},
		{"calls", len(st.Calls) > 0}, {"gate", st.Gate != nil}, {"deadline", st.Deadline != 0},
		{"max_unavailable", !st.MaxUnavailable.IsZero()}, {"max_unavailable_per_domain", st.MaxUnavailablePerDomain != 0},
		{"strategy", st.Strategy != ""}, {"hosts", len(st.Hosts) > 0}, {"host_labels", len(st.HostLabels) > 0},
	} {
		if k.set {
			out = append(out, k.key)
		}
	}
	return out
}

// StageComponent checks that key rel of the stage names a component
// and returns it (nil, reported, if it does not): the component whose
// running member (.Any) the stage's calls are made against.
func (n Node) StageComponent(rel, name string) *Component {
	comp := n.v.c.Component(name)
	if comp == nil {
		n.Add(rel, "must name the component whose running member (.Any) the stage's calls are made against%s", knownList(componentNames(n.v.c)))
	}
	return comp
}

// StageCall checks call c, at key rel of the stage, as a call made once
// for the cluster against a running member of comp (nil: its
// templates are not rendered).
func (n Node) StageCall(rel string, c *Call, comp *Component) {
	var samples []TemplateData
	if comp != nil {
		samples = n.v.clusterSample(comp)
	}
	n.v.call(c, n.Path(rel), n.Line(rel), samples, true)
}

// StageDeadline checks a stage's deadline, at key rel: a migration
// stage's range.
func (n Node) StageDeadline(rel string, d Duration) {
	n.v.within(n.Line(rel), n.Path(rel), d, migrateDeadlineRange)
}
