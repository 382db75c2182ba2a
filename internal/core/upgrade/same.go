package upgrade

import (
	"bytes"
	"reflect"
	"slices"

	"github.com/ferry-upgrade/ferry/internal/core/effect"
	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// Same reports whether records a and b say the same thing, their times
// Updated and Alive left out: the engine writes a record when it
// changed, and otherwise only at its heartbeat. It compares field by
// field (TestSameSeesEveryField changes each field in turn), members
// and batches the two records share (the machine copies only what it
// changes) by identity first, so that two records of ten thousand
// members cost a pass over the map, not an encoding of both. Times are
// compared as instants, but for those of a member, a hook run, a
// stage or an intent, compared with their struct by == (a monotonic
// reading or a zone that differs there only costs a write). A nil list
// and an empty one are the same.
func Same(a, b Upgrade) bool {
	return a.Schema == b.Schema && a.ID == b.ID && a.From == b.From && a.To == b.To && a.State == b.State &&
		samePlan(&a.Plan, &b.Plan) && a.Phase == b.Phase && sameBatches(a.Batches, b.Batches) &&
		a.PhaseHooks == b.PhaseHooks && a.UpgradeHooks == b.UpgradeHooks && slices.Equal(a.PrunedBackups, b.PrunedBackups) && a.Downtime == b.Downtime && samePtr(a.Hook, b.Hook) &&
		a.GateSince.Equal(b.GateSince) && a.WaitSince.Equal(b.WaitSince) && a.WaitRefused == b.WaitRefused && a.Boundary.Equal(b.Boundary) &&
		sameMembers(a, b) && sameHosts(a.Hosts, b.Hosts) && a.Waiting == b.Waiting && slices.Equal(a.Refusals, b.Refusals) &&
		a.Reason == b.Reason && samePlan(a.Rollback, b.Rollback) && a.Intent == b.Intent && a.IntentSeen == b.IntentSeen &&
		slices.Equal(a.Overrides, b.Overrides) && a.Pausing == b.Pausing && a.ResumeTo == b.ResumeTo &&
		a.Resumed.Equal(b.Resumed) && a.Ending == b.Ending && a.Final == b.Final && a.Pin == b.Pin &&
		a.Finalized.Equal(b.Finalized) && a.NoReturn == b.NoReturn && a.NoReturnHost == b.NoReturnHost && a.Stage == b.Stage &&
		a.Description == b.Description && sameEffects(a.Effects, b.Effects) && a.EffectSeq == b.EffectSeq &&
		a.ActionSeq == b.ActionSeq && samePtr(a.Outage, b.Outage) && samePtr(a.Held, b.Held) && samePtr(a.Ferry, b.Ferry) && a.Bound == b.Bound &&
		a.Created.Equal(b.Created) && a.Ended.Equal(b.Ended)
}

// sameMembers compares two records' members: the same map, or the
// same names with each member the same pointer or an equal value; for
// b made from a by the machine, the members it copied only.
func sameMembers(a, b Upgrade) bool {
	if len(a.Members) != len(b.Members) {
		return false
	}
	if len(a.Members) == 0 || sameMap(a.Members, b.Members) {
		return true
	}
	if b.from != nil && sameMap(b.from, a.Members) {
		for _, n := range b.changed {
			if !samePtr(a.Members[n], b.Members[n]) {
				return false
			}
		}
		return true
	}
	for n, ma := range a.Members {
		mb, ok := b.Members[n]
		if !ok || !samePtr(ma, mb) {
			return false
		}
	}
	return true
}

// sameHosts compares two records' hosts (a hosts stage's): few, each
// copied with the record.
func sameHosts(a, b map[string]*HostMove) bool {
	if len(a) != len(b) {
		return false
	}
	for n, ha := range a {
		if hb, ok := b[n]; !ok || !samePtr(ha, hb) {
			return false
		}
	}
	return true
}

// sameMap reports whether a and b are one map (a record whose members
// the machine did not touch shares its predecessor's).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// samePtr compares what two pointers point at (nil only with nil).
func samePtr[T comparable](a, b *T) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return *a == *b
}

func sameBatches(a, b []Batch) bool {
	return slices.EqualFunc(a, b, func(x, y Batch) bool {
		return x.Phase == y.Phase && x.Component == y.Component && x.Rollback == y.Rollback && x.Rollout == y.Rollout &&
			x.Number == y.Number && sameStrings(x.Members, y.Members) && x.Size == y.Size && x.Why == y.Why &&
			x.Began.Equal(y.Began) && x.Ended.Equal(y.Ended) && x.Waited == y.Waited && x.Outcome == y.Outcome && x.Bound == y.Bound &&
			sameStrings(x.Hosts, y.Hosts) && slices.Equal(x.Before, y.Before)
	})
}

// sameStrings is slices.Equal, at once for one backing array.
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || slices.Equal(a, b)
}

func sameEffects(a, b effect.Journal) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true // one journal, shared
	}
	return slices.EqualFunc(a, b, func(x, y effect.Effect) bool {
		return x.ID == y.ID && x.Key == y.Key && x.Scope == y.Scope && x.What == y.What && x.UndoWhat == y.UndoWhat &&
			samePtr(x.Undo.Hook, y.Undo.Hook) && x.Undo.Unlock == y.Undo.Unlock && bytes.Equal(x.Undo.Driver, y.Undo.Driver) && x.State == y.State &&
			x.Opened.Equal(y.Opened) && x.Undoing.Equal(y.Undoing) && x.Tries == y.Tries && x.LastTry.Equal(y.LastTry) &&
			x.Error == y.Error && x.Abandoned == y.Abandoned && x.Acting == y.Acting
	})
}

// samePlan compares two plans (nil only with nil). A plan is computed
// once and never edited, so records share it and the comparison is
// one of identity (reflect.DeepEqual's first look) in practice.
func samePlan(a, b *plan.Plan) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(*a, *b)
}

// Touched lists, in order, the members whose records differ between a
// and b, those in b alone included: what the machine changed, so that
// the engine looks at those only (their events, what is in flight).
// For b made from a by the machine (Step, Finished, Impacted, Record)
// it costs nothing when no member changed and the changed members'
// count otherwise; for any other two records, a pass over b's members.
func Touched(a, b Upgrade) []string {
	if sameMap(a.Members, b.Members) {
		return nil
	}
	var out []string
	if b.from != nil && sameMap(b.from, a.Members) {
		for _, n := range b.changed {
			if !samePtr(a.Members[n], b.Members[n]) {
				out = append(out, n)
			}
		}
	} else {
		for n, mb := range b.Members {
			if !samePtr(a.Members[n], mb) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}
