package k8s

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

var _ ports.EventRecorder = (*Recorder)(nil)

// DefaultEventSource is the component events are reported from.
const DefaultEventSource = "eno-tombstone-recovery"

// Recorder emits Kubernetes events on Compositions.
type Recorder struct {
	events      record.EventRecorder
	broadcaster record.EventBroadcaster // nil when the caller owns the recorder
}

// NewRecorder emits through a recorder the caller built and owns (eno-reconciler's, say).
func NewRecorder(events record.EventRecorder) (*Recorder, error) {
	if events == nil {
		return nil, errors.New("recorder: an event recorder is required")
	}
	return &Recorder{events: events}, nil
}

// StartRecorder starts an event broadcaster that writes to the events API of controlPlane, the
// cluster that holds the Compositions, as component ("" for DefaultEventSource). It runs until
// Shutdown is called or ctx is cancelled.
func StartRecorder(ctx context.Context, controlPlane kubernetes.Interface, component string) (*Recorder, error) {
	if controlPlane == nil {
		return nil, errors.New("recorder: a kubernetes client for the control plane is required")
	}
	if component == "" {
		component = DefaultEventSource
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: controlPlane.CoreV1().Events("")})
	return &Recorder{
		events:      b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}),
		broadcaster: b,
	}, nil
}

// Shutdown stops the broadcaster StartRecorder started; events not yet written are dropped.
// It does nothing for a recorder from NewRecorder.
func (r *Recorder) Shutdown() {
	if r.broadcaster != nil {
		r.broadcaster.Shutdown()
	}
}

// Event records an event on the Composition.
func (r *Recorder) Event(comp domain.Composition, warning bool, reason, message string) {
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	r.events.Event(compositionReference(comp), eventType, reason, message)
}

func compositionReference(comp domain.Composition) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: enoAPIVersion,
		Kind:       compositionKind,
		Namespace:  comp.Namespace,
		Name:       comp.Name,
		UID:        types.UID(comp.UID),
	}
}
