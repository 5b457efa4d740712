package k8s

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// DefaultEventSource is the component events are reported from.
const DefaultEventSource = "eno-tombstone-recovery"

// Recorder emits Kubernetes events on Compositions.
type Recorder struct {
	events record.EventRecorder
}

// NewRecorder emits through a recorder the caller built and owns (a controller-runtime
// manager's GetEventRecorderFor, say).
func NewRecorder(events record.EventRecorder) (*Recorder, error) {
	if events == nil {
		return nil, errors.New("recorder: an event recorder is required")
	}
	return &Recorder{events: events}, nil
}

// Normal records a Normal event on the Composition.
func (r *Recorder) Normal(comp domain.Composition, reason, message string) {
	r.events.Event(compositionReference(comp), corev1.EventTypeNormal, reason, message)
}

// Warning records a Warning event on the Composition.
func (r *Recorder) Warning(comp domain.Composition, reason, message string) {
	r.events.Event(compositionReference(comp), corev1.EventTypeWarning, reason, message)
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
