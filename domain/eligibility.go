package domain

import "fmt"

// LabelMatcher decides whether a Composition's labels are in scope.
type LabelMatcher interface {
	Matches(labels map[string]string) bool
}

type everything struct{}

func (everything) Matches(map[string]string) bool { return true }

// Everything matches all labels.
var Everything LabelMatcher = everything{}

// Scope is the sharding shared with eno-reconciler: a namespace ("" for all) and a label selector.
type Scope struct {
	Namespace string
	Selector  LabelMatcher
}

// Contains reports whether the Composition is in scope.
func (s Scope) Contains(c Composition) bool {
	if s.Namespace != "" && s.Namespace != c.Namespace {
		return false
	}
	return s.Selector == nil || s.Selector.Matches(c.Labels)
}

// IneligibleReason says why a Composition is skipped.
type IneligibleReason struct{ name string }

var (
	IneligibleDisabled       = IneligibleReason{"Disabled"}
	IneligibleOutOfScope     = IneligibleReason{"OutOfScope"}
	IneligibleNotOptedIn     = IneligibleReason{"NotOptedIn"}
	IneligibleDeleting       = IneligibleReason{"Deleting"}
	IneligibleInvalidLineage = IneligibleReason{"InvalidLineage"}
	IneligibleNotSynthesized = IneligibleReason{"NotSynthesized"}
	IneligibleNotReady       = IneligibleReason{"NotReady"}
	IneligibleAwaitsDecision = IneligibleReason{"AwaitingDecision"}
	IneligibleDecided        = IneligibleReason{"AlreadyDecided"}
)

func (r IneligibleReason) String() string { return r.name }

// IneligibleError says why a use case does not act on a Composition.
type IneligibleError struct {
	Reason IneligibleReason
	Detail string
}

func (e *IneligibleError) Error() string {
	if e.Detail == "" {
		return "composition is not eligible: " + e.Reason.name
	}
	return fmt.Sprintf("composition is not eligible: %s: %s", e.Reason.name, e.Detail)
}

// Policy holds the switches that decide eligibility.
type Policy struct {
	Enabled bool
	Scope   Scope
}

// base applies the rules shared by recording and recovery.
func (p Policy) base(c Composition) error {
	switch {
	case !p.Enabled:
		return &IneligibleError{Reason: IneligibleDisabled}
	case !p.Scope.Contains(c):
		return &IneligibleError{Reason: IneligibleOutOfScope}
	case c.Annotations[AnnotationOptIn] != OptInValue:
		return &IneligibleError{Reason: IneligibleNotOptedIn}
	case c.Deleting:
		return &IneligibleError{Reason: IneligibleDeleting}
	}
	if _, err := LineageOf(c); err != nil {
		return &IneligibleError{Reason: IneligibleInvalidLineage, Detail: err.Error()}
	}
	if c.Synthesis == nil || c.Synthesis.UUID == "" || c.Synthesis.Synthesized.IsZero() {
		return &IneligibleError{Reason: IneligibleNotSynthesized}
	}
	return nil
}

// CheckRecovery applies SPEC §6: recovery runs until a finished decision exists for the synthesis.
func (p Policy) CheckRecovery(c Composition) error {
	if err := p.base(c); err != nil {
		return err
	}
	if _, ok := c.FinishedDecision(); ok {
		return &IneligibleError{Reason: IneligibleDecided}
	}
	return nil
}

// CheckRecording applies SPEC §4: the synthesis is Ready and its recovery decision is finished.
func (p Policy) CheckRecording(c Composition) error {
	if err := p.base(c); err != nil {
		return err
	}
	if !c.Synthesis.Ready {
		return &IneligibleError{Reason: IneligibleNotReady}
	}
	if _, ok := c.FinishedDecision(); !ok {
		return &IneligibleError{Reason: IneligibleAwaitsDecision}
	}
	return nil
}

// SameIncarnation reports whether live is still the Composition and synthesis that was read.
func SameIncarnation(read, live Composition) bool {
	return read.UID == live.UID && read.SynthesisUUID() == live.SynthesisUUID()
}
