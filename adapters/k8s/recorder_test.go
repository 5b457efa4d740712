package k8s

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
	r.Shutdown() // a no-op for a recorder the caller owns

	ref := &corev1.ObjectReference{APIVersion: "eno.azure.io/v1", Kind: "Composition", Namespace: "team-a", Name: "web", UID: "uid-1"}
	assert.Equal(t, []recordedEvent{
		{ref, corev1.EventTypeWarning, "InventoryInvalid", "chunk 1 of 2 is missing"},
		{ref, corev1.EventTypeNormal, "Recovered", "published 3 tombstones"},
	}, capture.events)

	_, err = NewRecorder(nil)
	assert.Error(t, err)
}

// Shutdown ends the event write in flight and waits for it, so that nothing is sent once the
// controller has stopped. The server holds every event write until the test ends.
func TestShutdownEndsTheEventWriteInFlight(t *testing.T) {
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	var inFlight atomic.Int32
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			return rt.RoundTrip(r)
		})
	}})
	require.NoError(t, err)

	recorder, err := StartRecorder(t.Context(), client.CoreV1(), "")
	require.NoError(t, err)
	comp := domain.Composition{Namespace: "team-a", Name: "web", UID: "u"}
	recorder.Warning(comp, "InventoryInvalid", "chunk 1 of 2 is missing")
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the event was never sent")
	}
	recorder.Shutdown()
	assert.Zero(t, inFlight.Load(), "Shutdown returned while the event write was still in flight")
	recorder.Normal(comp, "Recorded", "after the shutdown")
	select {
	case <-arrived:
		t.Fatal("an event was sent after Shutdown")
	case <-time.After(200 * time.Millisecond):
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
