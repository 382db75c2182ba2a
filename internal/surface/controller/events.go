package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sclient "k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	krecord "k8s.io/client-go/tools/record"

	"github.com/ferry-upgrade/ferry/internal/run/store"
)

// eventSource names the controller in the Kubernetes Events it writes.
const eventSource = "ferry-controller"

// Spam and aggregation limits of the Kubernetes Events of one Upgrade.
// client-go's defaults (25 at once, then 1 every 5 minutes; similar
// events merged past 10) would keep almost nothing of an upgrade's
// hundreds of events; past these, Kubernetes drops events, the
// controller's log has them all, and status.eventsHistory says so.
const (
	eventBurst = 500
	eventQPS   = 20
)

// newEventRecorder is an EventRecorder that writes core/v1 Events
// (create, patch: what deploy/controller.yaml grants) through cfg, and
// the function that stops it.
func newEventRecorder(cfg *rest.Config, scheme *runtime.Scheme) (krecord.EventRecorder, func(), error) {
	ec := rest.AddUserAgent(cfg, eventSource)
	// client-go's default 5 requests/s is below an upgrade's pace
	// (hundreds of events a minute): the recorder's queue would grow,
	// and a controller killed would lose it.
	ec.QPS, ec.Burst = eventQPS*2, eventQPS*4
	cs, err := k8sclient.NewForConfig(ec)
	if err != nil {
		return nil, nil, fmt.Errorf("controller: events: %w", err)
	}
	b := krecord.NewBroadcaster(krecord.WithCorrelatorOptions(krecord.CorrelatorOptions{
		BurstSize: eventBurst,
		QPS:       eventQPS,
		// Aggregate only events of the same message: each member's
		// step is its own event.
		KeyFunc: func(e *corev1.Event) (string, string) {
			k := strings.Join([]string{e.Source.Component, e.InvolvedObject.Kind, e.InvolvedObject.Namespace,
				e.InvolvedObject.Name, string(e.InvolvedObject.UID), e.Type, e.Reason, e.Message}, "\x00")
			return k, e.Message
		},
	}))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b.NewRecorder(scheme, corev1.EventSource{Component: eventSource}), b.Shutdown, nil
}

// emit writes the engine's events as Kubernetes Events on the Upgrade:
// failures and warnings as Warning, the rest Normal; the reason is the
// event's kind (Step, State, Effect...).
func emit(rec krecord.EventRecorder, obj *Upgrade, evs []store.Event) {
	if rec == nil || len(evs) == 0 {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: GroupVersion.String(), Kind: "Upgrade",
		Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, ResourceVersion: obj.ResourceVersion}
	for _, ev := range evs {
		typ := corev1.EventTypeNormal
		if ev.Kind == "error" || ev.Kind == "warning" || strings.Contains(ev.Message, "fail") {
			typ = corev1.EventTypeWarning
		}
		msg := ev.Message
		if ev.Member != "" {
			msg = ev.Member + ": " + msg
		}
		rec.Event(ref, typ, reason(ev.Kind), msg)
	}
}

// reason is an event kind as a Kubernetes Event's reason (CamelCase).
func reason(kind string) string { return camelCase(kind, "Event") }

// eventsHistory is what status.eventsHistory says: where the events
// are that the status does not keep.
func eventsHistory(obj *Upgrade) string {
	return fmt.Sprintf("status.events keeps the last %d; every event is also a Kubernetes Event on this Upgrade "+
		"(best effort: kept about an hour by the API server, repeats counted, a killed controller's last ones may be missing): "+
		"kubectl get events -n %s --field-selector involvedObject.kind=Upgrade,involvedObject.name=%s; and a line of the controller's log",
		MaxEvents, obj.Namespace, obj.Name)
}
