package k8s

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

type recordedEvent struct {
	object                     runtime.Object
	eventType, reason, message string
}

// capturingRecorder keeps what it is given, object included.
type capturingRecorder struct{ events []recordedEvent }

var _ record.EventRecorder = (*capturingRecorder)(nil)

func (c *capturingRecorder) Event(object runtime.Object, eventType, reason, message string) {
	c.events = append(c.events, recordedEvent{object, eventType, reason, message})
}

func (c *capturingRecorder) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	c.Event(object, eventType, reason, fmt.Sprintf(format, args...))
}

func (c *capturingRecorder) AnnotatedEventf(object runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	c.Eventf(object, eventType, reason, format, args...)
}

func TestRecorderEventOnComposition(t *testing.T) {
	capture := &capturingRecorder{}
	r, err := NewRecorder(capture)
	require.NoError(t, err)
	comp := domain.Composition{Namespace: "team-a", Name: "web", UID: "uid-1"}

	r.Warning(comp, "InventoryInvalid", "chunk 1 of 2 is missing")
	r.Normal(comp, "Recovered", "published 3 tombstones")

	ref := &corev1.ObjectReference{APIVersion: "eno.azure.io/v1", Kind: "Composition", Namespace: "team-a", Name: "web", UID: "uid-1"}
	assert.Equal(t, []recordedEvent{
		{ref, corev1.EventTypeWarning, "InventoryInvalid", "chunk 1 of 2 is missing"},
		{ref, corev1.EventTypeNormal, "Recovered", "published 3 tombstones"},
	}, capture.events)

	_, err = NewRecorder(nil)
	assert.Error(t, err)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
