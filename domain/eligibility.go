package domain

import (
	"fmt"
	"slices"
	"strconv"
)

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
	IneligibleDecided        = IneligibleReason{"SynthesisDecided"}
	IneligibleRecovered      = IneligibleReason{"Recovered"}
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

// Ineligible says why neither recording nor recovery may act on c, or nil: the run conditions
// they share, which still hold once a Recovered decision is written.
func (p Policy) Ineligible(c Composition) *IneligibleError {
	switch {
	case !p.Enabled:
		return &IneligibleError{Reason: IneligibleDisabled}
	case !p.Scope.Contains(c):
		return &IneligibleError{Reason: IneligibleOutOfScope}
	case c.Annotations[AnnotationOptIn] != OptInValue:
		ie := &IneligibleError{Reason: IneligibleNotOptedIn}
		if v, set := c.Annotations[AnnotationOptIn]; set {
			ie.Detail = fmt.Sprintf("%s is %s, not %q, the only value that opts in", AnnotationOptIn, truncate(strconv.Quote(v), reviewValueLimit), OptInValue)
		}
		return ie
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

// CheckRecovery is an error unless recovery may act on c and its synthesis still needs a
// decision (design §6); every recheck before a recovery write applies it to the live one.
func (p Policy) CheckRecovery(c Composition) error {
	if ie := p.Ineligible(c); ie != nil {
		return ie
	}
	if _, ok := c.FinishedDecision(); ok {
		return &IneligibleError{Reason: IneligibleDecided}
	}
	return nil
}

// CheckRecording is nil when recording may act on c: its synthesis is Ready, its decision
// finished and not Recovered; Eno's next synthesis, carrying the tombstones, is (design §4, §6.2).
func (p Policy) CheckRecording(c Composition) error {
	if err := p.Ineligible(c); err != nil {
		return err
	}
	if !c.Synthesis.Ready {
		return &IneligibleError{Reason: IneligibleNotReady}
	}
	d, ok := c.FinishedDecision()
	if !ok {
		return &IneligibleError{Reason: IneligibleAwaitsDecision}
	}
	if d.Outcome == OutcomeRecovered {
		return &IneligibleError{Reason: IneligibleRecovered, Detail: "tombstones were handed to Eno; the next synthesis is recorded"}
	}
	return nil
}

// CheckHandoff applies Ineligible before the resynthesis is requested.
func (p Policy) CheckHandoff(c Composition) error {
	if ie := p.Ineligible(c); ie != nil {
		return ie
	}
	return nil
}

// ChangedPlanInput names the first input of a recovery plan that differs between read and
// live, or is "": ChangedRecordingInput's, the review annotation, the decision's recoveredFrom.
// The slices change under one synthesis only when a hand-off is committed to it: a plan read
// before is void whatever its outcome, since Eno may already have deleted what it hands over.
func ChangedPlanInput(read, live Composition) string {
	if why := ChangedRecordingInput(read, live); why != "" {
		return why
	}
	if read.Annotations[AnnotationReview] != live.Annotations[AnnotationReview] {
		return "its review annotation changed"
	}
	if recoveredFromOf(read) != recoveredFromOf(live) {
		return "the recoveredFrom of its decision changed"
	}
	return ""
}

// ChangedRecordingInput names the first input of a recording pass that differs between read
// and live, or is "": the slices (the inventory) and the lineage (which picks the Secrets: a new
// override is never written with the old lineage's). The caller rechecks UID and synthesis.
func ChangedRecordingInput(read, live Composition) string {
	if !slices.Equal(slicesOf(read), slicesOf(live)) {
		return "the slices its synthesis names changed"
	}
	rl, rerr := LineageOf(read)
	ll, lerr := LineageOf(live)
	if (rerr == nil) != (lerr == nil) || rl != ll {
		return "its lineage changed"
	}
	return ""
}

func slicesOf(c Composition) []string {
	if c.Synthesis == nil {
		return nil
	}
	return c.Synthesis.Slices
}

func recoveredFromOf(c Composition) string {
	d, _ := c.Decision()
	return d.RecoveredFrom
}
