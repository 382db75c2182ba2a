package upgrade

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestFinishedAllIsFinishedInTurn: outcomes folded together make the
// record Finished makes of them one after the other, and the record
// they were folded into is left as it was.
func TestFinishedAllIsFinishedInTurn(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	u := Upgrade{ID: "u", ActionSeq: 3, Members: map[string]*Member{
		"a": {Name: "a", Step: StepStarting, Acting: 1, Since: t0},
		"b": {Name: "b", Step: StepStopping, Acting: 2, Since: t0},
		"c": {Name: "c", Step: StepStarting, Acting: 3, Since: t0},
		"d": {Name: "d", Step: StepPending},
	}}
	outs := []Outcome{
		{Action: Action{Seq: 1, Kind: ActStart, Member: "a", Version: "2"}, Took: time.Second},
		{Action: Action{Seq: 2, Kind: ActStop, Member: "b"}, Took: 2 * time.Second},
		{Action: Action{Seq: 3, Kind: ActStart, Member: "c", Version: "2"}, Err: errors.New("refused"), Took: time.Second},
		{Action: Action{Seq: 9, Kind: ActStart, Member: "d", Version: "2"}, Took: time.Second}, // awaited by no step
	}
	now := t0.Add(3 * time.Second)
	want := u
	for _, o := range outs {
		want = Finished(want, o.Action, o.Err, o.Took, now)
	}
	got := FinishedAll(u, outs, now)
	if !reflect.DeepEqual(got.Members, want.Members) || got.Updated != want.Updated {
		t.Errorf("FinishedAll:\n%+v\nin turn:\n%+v", got.Members, want.Members)
	}
	if m := got.Members["b"]; m.StopTook != 2*time.Second || !m.Stopped.Equal(t0.Add(time.Second)) {
		t.Errorf("b's stop: took %s, began %s", m.StopTook, m.Stopped)
	}
	if u.Members["a"].Acting != 1 || u.Members["a"].StartDone != (time.Time{}) {
		t.Errorf("the record folded into changed: %+v", u.Members["a"])
	}
	if got := slices.Sorted(slices.Values(Touched(u, got))); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("touched %v, want a, b, c", got)
	}
}
