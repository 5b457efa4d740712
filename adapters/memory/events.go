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

// Normal records a Normal event; it never fails, like client-go's recorder.
func (c *Cluster) Normal(comp domain.Composition, reason, message string) {
	c.recordEvent(comp, false, reason, message)
}

// Warning records a Warning event; it never fails, like client-go's recorder.
func (c *Cluster) Warning(comp domain.Composition, reason, message string) {
	c.recordEvent(comp, true, reason, message)
}

func (c *Cluster) recordEvent(comp domain.Composition, warning bool, reason, message string) {
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
