package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CompositionRef names a Composition.
type CompositionRef struct {
	Namespace string
	Name      string
}

func (r CompositionRef) String() string { return r.Namespace + "/" + r.Name }

// Compare orders references by namespace, then name.
func (r CompositionRef) Compare(o CompositionRef) int {
	return cmp.Or(strings.Compare(r.Namespace, o.Namespace), strings.Compare(r.Name, o.Name))
}

// ParseCompositionRef parses "NAMESPACE/NAME".
func ParseCompositionRef(s string) (CompositionRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	// Names cannot hold '/', so "a/b/c" is a typo, not the Composition "b/c".
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return CompositionRef{}, fmt.Errorf("composition %q must be NAMESPACE/NAME", s)
	}
	return CompositionRef{Namespace: ns, Name: name}, nil
}

// Composition is the part of an Eno Composition this project reads (design §2).
type Composition struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	Labels          map[string]string
	Annotations     map[string]string
	Deleting        bool
	// Synthesis is the current synthesis; nil when there is none.
	Synthesis *Synthesis
	// InFlightSynthesis is the UUID of status.inFlightSynthesis, "" when none is in flight.
	InFlightSynthesis string
	// PreviousSynthesis is status.previousSynthesis (its UUID and slices); nil when there is
	// none. Only the check after a hand-off reads it (design §6.2, "Did Eno do it?").
	PreviousSynthesis *Synthesis
}

// Synthesis is status.currentSynthesis.
type Synthesis struct {
	UUID string
	// Synthesized is zero until the synthesis has finished.
	Synthesized time.Time
	Ready       bool
	Slices      []string
}

// Ref names the Composition.
func (c Composition) Ref() CompositionRef {
	return CompositionRef{Namespace: c.Namespace, Name: c.Name}
}

// SynthesisUUID is the current synthesis UUID, or "".
func (c Composition) SynthesisUUID() string {
	if c.Synthesis == nil {
		return ""
	}
	return c.Synthesis.UUID
}

// Decision returns the recovery decision recorded on the Composition, if any parses.
func (c Composition) Decision() (Decision, bool) {
	d, err := ParseDecision(c.Annotations[AnnotationDecision]) // absent is "", which does not parse
	return d, err == nil
}

// NamesSlice reports whether the current synthesis names the slice in its resourceSlices.
func (c Composition) NamesSlice(name string) bool {
	return c.Synthesis != nil && slices.Contains(c.Synthesis.Slices, name)
}

// FinishedDecision returns the decision for the current synthesis when it is finished.
func (c Composition) FinishedDecision() (Decision, bool) {
	d, ok := c.Decision()
	if !ok || c.Synthesis == nil || d.SynthesisUUID != c.Synthesis.UUID || !d.Outcome.Finished() {
		return Decision{}, false
	}
	return d, true
}
