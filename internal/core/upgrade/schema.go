package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/core/step"
	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// Schema is the format of the records this build writes. Each change
// of what a record says gets a number and a migration from the one
// before (migrations), so that a newer ferry takes up an upgrade an
// older one began:
//
//	1  (no "schema" key) the records before versioning; a phase's
//	   strategy could be named only by Phase.Strategy, and the machine
//	   fell back to the default strategy when both were empty
//	2  every phase that a strategy moves names it in Settings.Type (a
//	   plan built in code may still name it in Phase.Strategy alone:
//	   strategyOf reads either, and a phase naming none is refused,
//	   never given the default)
const Schema = 2

// migrations[i] turns a record of schema i+1 into one of schema i+2.
var migrations = []func(u *Upgrade) error{
	func(u *Upgrade) error { // 1 → 2
		fill := func(p *plan.Plan) error {
			for i := range p.Phases {
				ph := &p.Phases[i]
				if ph.Hosts != nil || ph.Settings.Type != "" {
					continue
				}
				if ph.Strategy == "" {
					return fmt.Errorf("plan phase %d (%s) names no strategy", i+1, ph.Component)
				}
				ph.Settings.Type = ph.Strategy
			}
			return nil
		}
		if err := fill(&u.Plan); err != nil {
			return err
		}
		if u.Rollback != nil {
			return fill(u.Rollback)
		}
		return nil
	},
}

// ErrRecord is matched (errors.Is) by every refusal of a record this
// build cannot take up: written by a newer ferry, or naming a strategy,
// a step or a state it does not know.
var ErrRecord = errors.New("upgrade: a record this build cannot take up")

// RecordError says what of a record this build does not understand.
type RecordError struct {
	ID     string // the upgrade, when it could be read
	Reason string
}

func (e *RecordError) Error() string {
	id := e.ID
	if id == "" {
		id = "(unknown id)"
	}
	return fmt.Sprintf("upgrade %s: its record %s; this build (record schema %d) will not act on it: run the ferry that wrote it, or a newer one", id, e.Reason, Schema)
}

func (e *RecordError) Is(target error) bool { return target == ErrRecord }

// Encode writes u as a record of the current schema.
func Encode(u Upgrade) ([]byte, error) {
	u.Schema = Schema
	return json.Marshal(u)
}

// Decode reads a record of any schema this build knows, migrated to
// the current one. A record of a newer schema, or one whose state this
// build does not know, is refused with a RecordError.
func Decode(b []byte) (Upgrade, error) {
	var head struct {
		ID     string `json:"id"`
		Schema int    `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Upgrade{}, fmt.Errorf("upgrade record: %w", err)
	}
	from := max(head.Schema, 1)
	if from > Schema {
		return Upgrade{}, &RecordError{ID: head.ID, Reason: fmt.Sprintf("was written by a newer ferry (schema %d)", head.Schema)}
	}
	var u Upgrade
	if err := json.Unmarshal(b, &u); err != nil {
		var state *unknownState
		if errors.As(err, &state) {
			return Upgrade{}, &RecordError{ID: head.ID, Reason: "names " + strings.TrimPrefix(state.Error(), "upgrade: ")}
		}
		return Upgrade{}, fmt.Errorf("upgrade %s: record: %w", head.ID, err)
	}
	for s := from; s < Schema; s++ {
		if err := migrations[s-1](&u); err != nil {
			return Upgrade{}, &RecordError{ID: u.ID, Reason: fmt.Sprintf("of schema %d cannot be migrated to %d: %v", s, s+1, err)}
		}
	}
	u.Schema = Schema
	return u, nil
}

// Understood returns a RecordError naming the first thing record u
// holds that this build does not know (a phase's strategy, a member's
// or a host's step), nil when it knows them all. The engine asks before
// it takes a record up: a step it would guess at could take members
// down that the record's writer would not have.
func Understood(u Upgrade) error {
	var unknown []string
	phases := func(which string, p *plan.Plan) {
		for i, ph := range p.Phases {
			if ph.Hosts != nil {
				continue
			}
			if _, ok := strategy.Lookup(strategyOf(ph)); !ok {
				unknown = append(unknown, fmt.Sprintf("strategy %q (%s phase %d, %s; known: %s)", strategyOf(ph), which, i+1, ph.Component,
					strings.Join(strategy.Names(), ", ")))
			}
		}
	}
	phases("plan", &u.Plan)
	if u.Rollback != nil {
		phases("rollback", u.Rollback)
	}
	names := sortedNames(u.Members)
	for _, n := range names {
		if m := u.Members[n]; m != nil && !step.Known(m.Step) {
			unknown = append(unknown, fmt.Sprintf("step %q (member %s)", m.Step, n))
		}
	}
	for _, n := range sortedNames(u.Hosts) {
		if h := u.Hosts[n]; h != nil && !slices.Contains(hostSteps, h.Step) {
			unknown = append(unknown, fmt.Sprintf("host step %q (host %s)", h.Step, n))
		}
	}
	if u.Plan.Phases != nil {
		for _, st := range []State{u.State, u.ResumeTo, u.Ending} {
			if st.Kind == KindUpgrading || st.Kind == KindUpgraded {
				if !slices.ContainsFunc(u.Plan.Phases, func(ph plan.Phase) bool { return ph.Name() == st.Component }) &&
					(u.Rollback == nil || !slices.ContainsFunc(u.Rollback.Phases, func(ph plan.Phase) bool { return ph.Name() == st.Component })) {
					unknown = append(unknown, fmt.Sprintf("state %q (no phase of its plan is %s's)", st, st.Component))
				}
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return &RecordError{ID: u.ID, Reason: "names what this build does not know: " + strings.Join(unknown, "; ")}
}
