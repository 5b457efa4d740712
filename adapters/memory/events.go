package memory

import (
	"slices"
	"sync"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Event is one recorded Kubernetes-style event on a Composition.
type Event struct {
	Composition domain.CompositionRef
	Warning     bool
	Reason      string
	Message     string
}

// EventLog is ports.EventRecorder in memory: it keeps every event. A Cluster is one; the zero
// value is ready to use.
type EventLog struct {
	mu     sync.Mutex
	events []Event
}

// Normal records a Normal event; it never fails, like client-go's recorder.
func (l *EventLog) Normal(comp domain.Composition, reason, message string) {
	l.record(comp, false, reason, message)
}

// Warning records a Warning event; it never fails, like client-go's recorder.
func (l *EventLog) Warning(comp domain.Composition, reason, message string) {
	l.record(comp, true, reason, message)
}

func (l *EventLog) record(comp domain.Composition, warning bool, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, Event{Composition: comp.Ref(), Warning: warning, Reason: reason, Message: message})
}

// Events returns every event recorded so far, oldest first.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}
