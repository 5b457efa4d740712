package domain

import "fmt"

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
}

// NewHandoff turns a Recovered plan into the content of its recovery slice.
func NewHandoff(plan RecoveryPlan) (Handoff, error) {
	d := plan.Decision
	if d.Outcome != OutcomeRecovered || len(plan.Tombstones) == 0 {
		return Handoff{}, fmt.Errorf("only a Recovered plan with tombstones is handed to Eno, not %s with %d", d.Outcome, len(plan.Tombstones))
	}
	h := Handoff{Decision: d, Resources: make([]SliceResource, len(plan.Tombstones))}
	h.Decision.TombstoneSlice = ""
	for i, t := range plan.Tombstones {
		h.Resources[i] = SliceResource{Manifest: t.Manifest(), Deleted: true}
	}
	return h, nil
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
// current synthesis. It fails when the slice is not this controller's slice for that synthesis.
func HandoffFromSlice(c Composition, s ResourceSlice) (Handoff, error) {
	uuid := c.SynthesisUUID()
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
	return Handoff{Decision: d, Resources: s.Resources}, nil
}
