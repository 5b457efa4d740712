package k8s

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	sink        *eventSink
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
func StartRecorder(ctx context.Context, controlPlane typedcorev1.EventsGetter, component string) (*Recorder, error) {
	if controlPlane == nil {
		return nil, errors.New("recorder: a kubernetes client for the control plane is required")
	}
	if component == "" {
		component = DefaultEventSource
	}
	sink := newEventSink(controlPlane.Events(""))
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(sink)
	return &Recorder{
		// Events name their object by an ObjectReference, so the recorder needs no scheme of
		// types to resolve one: an empty scheme keeps the API types out of the binary.
		events:      b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: component}),
		broadcaster: b,
		sink:        sink,
	}, nil
}

// Shutdown stops the broadcaster StartRecorder started, ends the write in flight and waits for
// it: once it returns, the recorder sends nothing more. Events not yet written are dropped.
// It does nothing for a recorder from NewRecorder.
func (r *Recorder) Shutdown() {
	if r.broadcaster != nil {
		r.broadcaster.Shutdown()
		r.sink.close()
	}
}

// errRecorderShutDown is what a write after Shutdown returns to the broadcaster.
var errRecorderShutDown = errors.New("the event recorder is shut down")

// eventSink writes events with a context that close cancels, and lets close wait for the write
// in flight: client-go's broadcaster stops without waiting for its writer goroutine, which
// would otherwise go on sending (and logging) after the controller stopped.
type eventSink struct {
	events typedcorev1.EventInterface
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.RWMutex // held for reading by each write, for writing by close
	closed bool
}

var _ record.EventSink = (*eventSink)(nil)

func newEventSink(events typedcorev1.EventInterface) *eventSink {
	ctx, cancel := context.WithCancel(context.Background())
	return &eventSink{events: events, ctx: ctx, cancel: cancel}
}

func (s *eventSink) write(f func(context.Context) (*corev1.Event, error)) (*corev1.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errRecorderShutDown
	}
	return f(s.ctx)
}

func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.write(func(ctx context.Context) (*corev1.Event, error) {
		return s.events.CreateWithEventNamespaceWithContext(ctx, e)
	})
}

func (s *eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.write(func(ctx context.Context) (*corev1.Event, error) {
		return s.events.UpdateWithEventNamespaceWithContext(ctx, e)
	})
}

func (s *eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.write(func(ctx context.Context) (*corev1.Event, error) {
		return s.events.PatchWithEventNamespaceWithContext(ctx, e, data)
	})
}

// close ends the write in flight, waits for it, and refuses every later one.
func (s *eventSink) close() {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
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
