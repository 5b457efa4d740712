package memory

import (
	"slices"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Event is one recorded Kubernetes-style event on a Composition.
type Event struct {
	Composition domain.CompositionRef
	Warning     bool
	Reason      string
	Message     string
}

// Event records an event; it never fails, like client-go's recorder.
func (c *Cluster) Event(comp domain.Composition, warning bool, reason, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, Event{Composition: comp.Ref(), Warning: warning, Reason: reason, Message: message})
}

// Events returns every event recorded so far, oldest first.
func (c *Cluster) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}
