package domain

import (
	"fmt"
	"slices"
	"time"
)

// Eno's own names used by the hand-off (SPEC §6.2).
const (
	// AnnotationForceResynthesis starts a new synthesis when it names the current one.
	AnnotationForceResynthesis = "eno.azure.io/force-resynthesis"
	// SliceFinalizer is Eno's ResourceSlice finalizer. Eno removes it once the slice is no
	// longer needed; it keeps a recovery slice alive through eno-controller's cleanup race.
	SliceFinalizer = "eno.azure.io/cleanup"
)

// ResynthesisRequested reports whether the force-resynthesis annotation names c's current
// synthesis: step 5 of the hand-off (SPEC §6.2) is done, and step 4 before it.
func (c Composition) ResynthesisRequested() bool {
	return c.Annotations[AnnotationForceResynthesis] == c.SynthesisUUID()
}

// Handoff is what recovery hands to Eno for one synthesis: the tombstones as slice resources,
// and the Recovered decision they came from. The recovery slice carries the decision in its
// AnnotationDecision, so a reconcile that finds the slice already named by the synthesis (after
// the commit point) writes the decision from the slice alone.
type Handoff struct {
	Decision  Decision
	Resources []SliceResource
	// HistoryWritten is the write time of the history the tombstones came from; the pending
	// hand-off's recheck compares objects with it (design §6.2).
	HistoryWritten time.Time
}

// NewHandoff turns a Recovered plan into the content of its recovery slice.
func NewHandoff(plan RecoveryPlan) (Handoff, error) {
	d := plan.Decision
	if d.Outcome != OutcomeRecovered || len(plan.Tombstones) == 0 {
		return Handoff{}, fmt.Errorf("only a Recovered plan with tombstones is handed to Eno, not %s with %d", d.Outcome, len(plan.Tombstones))
	}
	if plan.HistoryWritten.IsZero() {
		return Handoff{}, fmt.Errorf("a Recovered plan names the write time of its history")
	}
	h := Handoff{Decision: d, Resources: make([]SliceResource, len(plan.Tombstones)), HistoryWritten: plan.HistoryWritten.UTC()}
	h.Decision.TombstoneSlice = ""
	for i, t := range plan.Tombstones {
		h.Resources[i] = SliceResource{Manifest: t.Manifest(), Deleted: true}
	}
	return h, nil
}

// SliceAnnotations are the annotations a recovery slice carries for the hand-off: the decision,
// and the write time of the history.
func (h Handoff) SliceAnnotations() map[string]string {
	return map[string]string{
		AnnotationDecision:       h.Decision.Encode(),
		AnnotationHistoryWritten: h.HistoryWritten.UTC().Format(time.RFC3339),
	}
}

// SynthesisUUID is the synthesis the tombstones are handed to.
func (h Handoff) SynthesisUUID() string { return h.Decision.SynthesisUUID }

// DecisionFor is the decision to write once the slice is committed under name.
func (h Handoff) DecisionFor(slice string) Decision {
	d := h.Decision
	d.TombstoneSlice = slice
	d.Tombstones = len(h.Resources)
	return d
}

// CommittedRecoverySlice returns the name of the recovery slice that the Composition's
// current synthesis already names, if any: the commit point of SPEC §6.2 was passed.
func (c Composition) CommittedRecoverySlice() (string, bool) {
	if c.Synthesis == nil || c.Synthesis.UUID == "" {
		return "", false
	}
	for _, name := range RecoverySliceNames(c.Name, c.Synthesis.UUID) {
		if c.NamesSlice(name) {
			return name, true
		}
	}
	return "", false
}

// HandoffFromSlice reads back the hand-off a recovery slice carries for the Composition's
// current synthesis. It fails when the slice is not this controller's slice for that synthesis:
// controlled by another object, stamped for another synthesis, carrying no Recovered decision
// for it, or holding anything but tombstones.
func HandoffFromSlice(c Composition, s ResourceSlice) (Handoff, error) {
	uuid := c.SynthesisUUID()
	if s.ControllerUID != c.UID {
		return Handoff{}, fmt.Errorf("resource slice %s is controlled by %q, not by this composition (UID %s)", s.Name, s.ControllerUID, c.UID)
	}
	if s.SynthesisUUID != uuid {
		return Handoff{}, fmt.Errorf("resource slice %s holds synthesis %q, not %q", s.Name, s.SynthesisUUID, uuid)
	}
	d, err := ParseDecision(s.Annotations[AnnotationDecision])
	if err != nil {
		return Handoff{}, fmt.Errorf("resource slice %s: %w", s.Name, err)
	}
	if d.Outcome != OutcomeRecovered || d.SynthesisUUID != uuid {
		return Handoff{}, fmt.Errorf("resource slice %s carries a %s decision for synthesis %q, not Recovered for %q", s.Name, d.Outcome, d.SynthesisUUID, uuid)
	}
	for i, r := range s.Resources {
		if !r.Deleted {
			return Handoff{}, fmt.Errorf("resource slice %s: resource %d is not a tombstone", s.Name, i)
		}
	}
	written, _ := HistoryWrittenAt(s)
	return Handoff{Decision: d, Resources: s.Resources, HistoryWritten: written}, nil
}

// RecoverySliceInvalidError: the synthesis names a slice under a recovery slice's name that is
// not a valid hand-off of that synthesis. It is never adopted: no decision is written from it,
// and recovery retries with backoff until an operator removes it (design §6.2).
type RecoverySliceInvalidError struct {
	Slice  string
	Detail string
}

func (e *RecoverySliceInvalidError) Error() string {
	return fmt.Sprintf("the current synthesis names resource slice %s under a recovery slice's name, but it is not this controller's hand-off for it (%s); remove it from the synthesis or delete it", e.Slice, e.Detail)
}

// CommitPrecondition is what the commit point of the hand-off requires of the Composition
// (design §6.2 step 2): the object the caller decided from, unchanged. The resourceVersion
// covers every write since that read (a review flipped to reject, a deletion, a lineage change,
// another replica's decision); the synthesis, the absence of one in flight and the slice list
// are tested on their own as well, so that a rejected patch can say which moved.
type CommitPrecondition struct {
	UID             string
	ResourceVersion string
	SynthesisUUID   string
	// Slices is the slice list the append extends; nil when the synthesis has none.
	Slices []string
}

// CommitPreconditionOf is the precondition of appending to read's current synthesis.
func CommitPreconditionOf(read Composition) CommitPrecondition {
	p := CommitPrecondition{UID: read.UID, ResourceVersion: read.ResourceVersion, SynthesisUUID: read.SynthesisUUID()}
	if read.Synthesis != nil {
		p.Slices = read.Synthesis.Slices
	}
	return p
}

// MovedOn says how live fails the precondition, or "" when it holds: live is still the object
// the caller decided from, with no synthesis in flight.
func (p CommitPrecondition) MovedOn(live Composition) string {
	var names []string
	if live.Synthesis != nil {
		names = live.Synthesis.Slices
	}
	switch {
	case live.UID != p.UID:
		return "it was recreated with UID " + live.UID
	case live.SynthesisUUID() != p.SynthesisUUID:
		return "its current synthesis is now " + live.SynthesisUUID()
	case live.InFlightSynthesis != "":
		return "synthesis " + live.InFlightSynthesis + " is in flight"
	case !slices.Equal(names, p.Slices):
		return "its slice list changed"
	case live.ResourceVersion != p.ResourceVersion:
		return fmt.Sprintf("it changed since it was read (resourceVersion %s, read at %s)", live.ResourceVersion, p.ResourceVersion)
	}
	return ""
}

// CheckCommittable says why a recovery slice read live just before the commit point cannot be
// appended: gone slices are the caller's to report; this judges one that was read.
func CheckCommittable(c Composition, s ResourceSlice) error {
	switch {
	case s.Deleting:
		return fmt.Errorf("recovery slice %s is being deleted", s.Name)
	case s.ControllerUID != c.UID:
		return fmt.Errorf("recovery slice %s is controlled by %q, not by composition UID %s", s.Name, s.ControllerUID, c.UID)
	case s.SynthesisUUID != c.SynthesisUUID():
		return fmt.Errorf("recovery slice %s holds synthesis %q, not %q", s.Name, s.SynthesisUUID, c.SynthesisUUID())
	}
	return nil
}
