package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// TestRecordTakesARequestOnce: the operator's request (spec.action) is
// taken into the record once, keyed by spec.actionSeq; an edit of the
// rest of the spec (the generation moves on, as when overrides are
// added while paused after a failure) does not make a standing request
// a new one. Keyed by the generation, as before, the "overrides edited"
// case re-fired the resume.
func TestRecordTakesARequestOnce(t *testing.T) {
	for _, c := range []struct {
		name       string
		action     string
		seq        int64
		generation int64
		recorded   upgrade.Intent // the record's intent before
		want       upgrade.Intent
	}{
		{"no request", "", 0, 3, upgrade.Intent{}, upgrade.Intent{}},
		{"a first request", "resume", 1, 2, upgrade.Intent{}, upgrade.Intent{Kind: "resume", Seq: 1}},
		{"overrides edited under it", "resume", 1, 9, upgrade.Intent{Kind: "resume", Seq: 1}, upgrade.Intent{Kind: "resume", Seq: 1}},
		{"a next request", "abort", 2, 10, upgrade.Intent{Kind: "resume", Seq: 1}, upgrade.Intent{Kind: "abort", Seq: 2}},
		{"an older number", "pause", 1, 11, upgrade.Intent{Kind: "abort", Seq: 3}, upgrade.Intent{Kind: "abort", Seq: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := upgrade.Upgrade{ID: "u1", Intent: c.recorded, IntentSeen: c.recorded.Seq}
			b, err := upgrade.Encode(u)
			if err != nil {
				t.Fatal(err)
			}
			obj := &Upgrade{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "ns", Generation: c.generation},
				Spec:   UpgradeSpec{Action: c.action, ActionSeq: c.seq},
				Status: UpgradeStatus{Record: b}}
			got, ok, err := record(obj)
			if err != nil || !ok {
				t.Fatalf("record: %v %v", ok, err)
			}
			if got.Intent.Kind != c.want.Kind || got.Intent.Seq != c.want.Seq {
				t.Errorf("intent %s #%d, want %s #%d", got.Intent.Kind, got.Intent.Seq, c.want.Kind, c.want.Seq)
			}
			if err := setRecord(obj, got); err != nil {
				t.Fatal(err)
			}
			if obj.Status.ObservedActionSeq != int64(c.want.Seq) || obj.Status.ObservedGeneration != c.generation {
				t.Errorf("status observedActionSeq %d observedGeneration %d, want %d and %d",
					obj.Status.ObservedActionSeq, obj.Status.ObservedGeneration, c.want.Seq, c.generation)
			}
		})
	}
}
