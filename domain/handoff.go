package domain

import (
	"fmt"
	"slices"
	"time"
)

// Eno's own names used by the hand-off (design §6.2).
const (
	// AnnotationForceResynthesis starts a new synthesis when it names the current one.
	AnnotationForceResynthesis = "eno.azure.io/force-resynthesis"
	// SliceFinalizer is Eno's ResourceSlice finalizer. Eno removes it once the slice is no
	// longer needed; it keeps a recovery slice alive through eno-controller's cleanup race.
	SliceFinalizer = "eno.azure.io/cleanup"
)

// ResynthesisRequested reports whether the force-resynthesis annotation names c's current
// synthesis: step 5 of the hand-off is done, and step 4 before it (design §6.2).
func (c Composition) ResynthesisRequested() bool {
	return c.Annotations[AnnotationForceResynthesis] == c.SynthesisUUID()
}

// MaxSliceManifestBytes is Eno's own slice budget, the executor's maxSliceJsonBytes: the most
// manifest JSON one recovery slice holds, measured as Eno measures a slice, the sum of its
// manifests' lengths. It keeps each create well under the API server's request limit however
// many tombstones a recovery hands over (design §6.2 step 1).
const MaxSliceManifestBytes = 512 << 10

// Handoff is what recovery hands to Eno for one synthesis: the tombstones as slice resources,
// cut into recovery slices (Parts), and the Recovered decision they came from. Every recovery
// slice carries the decision in its AnnotationDecision, so a reconcile that finds the slices
// already named by the synthesis (after the commit point) writes the decision from them alone.
type Handoff struct {
	Decision Decision
	// Resources are every tombstone of the hand-off, in canonical order, across its slices.
	Resources []SliceResource
	// HistoryWritten is the write time of the history the tombstones came from; the pending
	// hand-off's recheck compares objects with it (design §6.2).
	HistoryWritten time.Time
	// SourceUID is the recorded incarnation's UID (RecoveryPlan.SourceUID); empty when unknown.
	SourceUID string
	// Digest names the hand-off; the Composition's AnnotationArmed carries it while the
	// tombstones may act. Read back from the tombstones' preconditions; empty when every one
	// was withdrawn.
	Digest string
	// partLens is how many of Resources each recovery slice holds: the cut by the budget for a
	// planned hand-off, the slices' own for one read back (a withdrawal changes a manifest's
	// size, so cutting again could move a tombstone to another slice). Nil cuts by the budget.
	partLens []int
}

// NewHandoff turns a Recovered plan into the content of its recovery slices. A tombstone larger
// than a whole slice's budget is a *TombstoneTooLargeError: nothing can be handed over.
func NewHandoff(plan RecoveryPlan) (Handoff, error) {
	d := plan.Decision
	if d.Outcome != OutcomeRecovered || len(plan.Tombstones) == 0 {
		return Handoff{}, fmt.Errorf("only a Recovered plan with tombstones is handed to Eno, not %s with %d", d.Outcome, len(plan.Tombstones))
	}
	if plan.HistoryWritten.IsZero() {
		return Handoff{}, fmt.Errorf("a Recovered plan names the write time of its history")
	}
	h := Handoff{Decision: d, Resources: make([]SliceResource, len(plan.Tombstones)), HistoryWritten: plan.HistoryWritten.UTC(), SourceUID: plan.SourceUID}
	h.Decision.TombstoneSlice = ""
	h.Digest = handoffDigest(d.SynthesisUUID, h.HistoryWritten, plan.Tombstones)
	for i, t := range plan.Tombstones {
		m, err := selfCheckingManifest(t, h.HistoryWritten, h.Digest)
		if err != nil {
			return Handoff{}, err
		}
		h.Resources[i] = SliceResource{Manifest: m, Deleted: true}
	}
	lens, err := cutRecoverySlices(h.Resources)
	if err != nil {
		return Handoff{}, err
	}
	h.partLens = lens
	return h, nil
}

// Parts are the tombstones of each recovery slice of the hand-off, in part order. A hand-off
// built by hand (not by NewHandoff or HandoffFromSlices) is cut by the budget here; one without
// tombstones has no slice to publish and is an error.
func (h Handoff) Parts() ([][]SliceResource, error) {
	if len(h.Resources) == 0 {
		return nil, fmt.Errorf("the hand-off holds no tombstones")
	}
	lens := h.partLens
	if lens == nil {
		var err error
		if lens, err = cutRecoverySlices(h.Resources); err != nil {
			return nil, err
		}
	}
	parts := make([][]SliceResource, len(lens))
	from := 0
	for i, n := range lens {
		if from+n > len(h.Resources) {
			break
		}
		parts[i] = h.Resources[from : from+n : from+n]
		from += n
	}
	if from != len(h.Resources) {
		return nil, fmt.Errorf("the hand-off's %d recovery slices do not hold its %d tombstones exactly", len(lens), len(h.Resources))
	}
	return parts, nil
}

// PartsFor are h's parts to create again the recovery slices named slices, one each, or nil when
// h is empty: the content is unknown (design §6.2 step 4).
func (h Handoff) PartsFor(slices []string) ([][]SliceResource, error) {
	if h.SynthesisUUID() == "" {
		return nil, nil
	}
	parts, err := h.Parts()
	if err == nil && len(parts) != len(slices) {
		err = fmt.Errorf("the hand-off has %d recovery slices, not the %d named", len(parts), len(slices))
	}
	return parts, err
}

// cutRecoverySlices cuts rs in order into recovery slices, each holding as many resources as fit
// in MaxSliceManifestBytes of manifest JSON, and returns how many each holds. The cut depends on
// rs alone, so a retry publishes the same slices (design §6.2 step 1).
func cutRecoverySlices(rs []SliceResource) ([]int, error) {
	var lens []int
	used := 0
	for i, r := range rs {
		size := len(r.Manifest)
		if size > MaxSliceManifestBytes {
			return nil, &TombstoneTooLargeError{Tombstone: describeResource(r, i), Bytes: size, Limit: MaxSliceManifestBytes}
		}
		if len(lens) == 0 || used+size > MaxSliceManifestBytes {
			lens = append(lens, 0)
			used = 0
		}
		lens[len(lens)-1]++
		used += size
	}
	return lens, nil
}

// describeResource names a slice resource in an error: its identity when it reads as a
// tombstone, else its position.
func describeResource(r SliceResource, i int) string {
	if e, _, err := ParseTombstone(r); err == nil {
		return e.ID().String()
	}
	return fmt.Sprintf("resource %d", i)
}

// TombstoneTooLargeError: one tombstone's manifest alone is larger than a recovery slice may
// hold (Eno's slice budget), so no cut hands it to Eno. Nothing is written.
type TombstoneTooLargeError struct {
	Tombstone string
	Bytes     int
	Limit     int
}

func (e *TombstoneTooLargeError) Error() string {
	return fmt.Sprintf("the tombstone of %s is %d bytes of manifest JSON, over the %d a recovery slice holds (Eno's slice budget); nothing was handed to Eno", e.Tombstone, e.Bytes, e.Limit)
}

// SliceAnnotations are the annotations every recovery slice of the hand-off carries: the
// decision, and the write time of the history.
func (h Handoff) SliceAnnotations() map[string]string {
	a := map[string]string{
		AnnotationDecision:       h.Decision.Encode(),
		AnnotationHistoryWritten: h.HistoryWritten.UTC().Format(time.RFC3339),
	}
	if h.SourceUID != "" {
		a[AnnotationSourceUID] = h.SourceUID
	}
	return a
}

// AnnotationSourceUID, on a recovery slice, is the UID of the incarnation whose history the
// tombstones came from: the watch does not count its slices as another Composition's.
const AnnotationSourceUID = "eno.azure.io/tombstone-recovery-source-uid"

// SynthesisUUID is the synthesis the tombstones are handed to.
func (h Handoff) SynthesisUUID() string { return h.Decision.SynthesisUUID }

// DecisionFor is the decision to write once the recovery slices are committed, the first under
// name first: it names that slice and counts every tombstone.
func (h Handoff) DecisionFor(first string) Decision {
	d := h.Decision
	d.TombstoneSlice = first
	d.Tombstones = len(h.Resources)
	return d
}

// CommittedRecoverySlices returns the names of the recovery slices that the Composition's
// current synthesis already names, in part order: the commit point was passed. The first slice
// decides the series; the further ones count while the synthesis names them, since the commit
// appends them all in one patch (design §6.2).
func (c Composition) CommittedRecoverySlices() ([]string, bool) {
	if c.Synthesis == nil || c.Synthesis.UUID == "" {
		return nil, false
	}
	for _, series := range RecoverySliceSeriesOf(c.Name, c.Synthesis.UUID) {
		var names []string
		for part := 0; c.NamesSlice(series.Name(part)); part++ {
			names = append(names, series.Name(part))
		}
		if len(names) > 0 {
			return names, true
		}
	}
	return nil, false
}

// DecidedRecoverySlices are the recovery slices of d, a Recovered decision of the Composition's
// current synthesis: every one the synthesis names when the first is d.TombstoneSlice, else
// d.TombstoneSlice alone, so that a slice no longer named is still looked at.
func (c Composition) DecidedRecoverySlices(d Decision) []string {
	if names, ok := c.CommittedRecoverySlices(); ok && names[0] == d.TombstoneSlice {
		return names
	}
	if d.TombstoneSlice == "" {
		return nil
	}
	return []string{d.TombstoneSlice}
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
	digest := ""
	for i, r := range s.Resources {
		if !r.Deleted {
			return Handoff{}, fmt.Errorf("resource slice %s: resource %d is not a tombstone", s.Name, i)
		}
		if digest, err = sameDigest(digest, r); err != nil {
			return Handoff{}, fmt.Errorf("resource slice %s: resource %d: %w", s.Name, i, err)
		}
	}
	written, _ := HistoryWrittenAt(s)
	return Handoff{Decision: d, Resources: s.Resources, HistoryWritten: written, SourceUID: s.Annotations[AnnotationSourceUID], Digest: digest, partLens: []int{len(s.Resources)}}, nil
}

// sameDigest is the hand-off digest that r's precondition names, which must be digest unless
// that is still empty; a withdrawn tombstone names none and keeps digest.
func sameDigest(digest string, r SliceResource) (string, error) {
	m, err := readManifest([]byte(r.Manifest))
	if err != nil {
		return "", err
	}
	_, d, ok := readSelfCheck(m.Annotations)
	switch {
	case !ok:
		return digest, nil
	case digest != "" && d != digest:
		return "", fmt.Errorf("its precondition names hand-off %s, another tombstone %s", d, digest)
	}
	return d, nil
}

// HandoffFromSlices reads back the hand-off that the recovery slices of the Composition's
// current synthesis carry, given in part order: every slice's tombstones, each slice keeping its
// own, and the decision and history write time of the first. A slice that is not a valid
// hand-off of that synthesis (HandoffFromSlice) is a *RecoverySliceInvalidError naming it.
func HandoffFromSlices(c Composition, parts []ResourceSlice) (Handoff, error) {
	if len(parts) == 0 {
		return Handoff{}, fmt.Errorf("a hand-off is read back from at least one recovery slice")
	}
	var h Handoff
	for i, s := range parts {
		p, err := HandoffFromSlice(c, s)
		if err != nil {
			return Handoff{}, &RecoverySliceInvalidError{Slice: s.Name, Detail: err.Error()}
		}
		if i == 0 {
			h = Handoff{Decision: p.Decision, HistoryWritten: p.HistoryWritten, SourceUID: p.SourceUID, Digest: p.Digest}
		}
		if p.Digest != "" && h.Digest != "" && p.Digest != h.Digest {
			return Handoff{}, &RecoverySliceInvalidError{Slice: s.Name, Detail: "its tombstones name hand-off " + p.Digest + ", the first slice's " + h.Digest}
		}
		if h.Digest == "" {
			h.Digest = p.Digest
		}
		h.Resources = append(h.Resources, p.Resources...)
		h.partLens = append(h.partLens, len(p.Resources))
	}
	return h, nil
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

// CommitPrecondition is what the commit point of the hand-off requires of the Composition: the
// object the caller decided from, unchanged. The resourceVersion covers every write since that
// read (a review flipped to reject, a deletion, a lineage change, another replica's decision);
// the synthesis, the absence of one in flight and the slice list are tested on their own as
// well, so that a rejected patch can say which moved (design §6.2 step 2).
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

// AnnotationRecoverySealed is set on each recovery slice just before the commit point, to the
// Composition resourceVersion the commit patch tests. From then on a commit may name the slice at
// any moment, so publishing never rewrites it: a writer whose view of the Composition is stale (a
// paused replica, a second writer) could otherwise put back into a committed slice a tombstone
// that a fresher plan dropped or that the pending recheck withdrew. Only a withdrawal, which
// can only disarm, still writes a sealed slice (design §6.2).
const AnnotationRecoverySealed = "eno.azure.io/tombstone-recovery-sealed"

// CheckHolds says why the recovery slice read live does not hold exactly part, the tombstones a
// commit is about to name, or is nil: another writer may have rewritten it since this pass
// published it, and a commit never names content it did not plan.
func CheckHolds(s ResourceSlice, part []SliceResource) error {
	if slices.Equal(s.Resources, part) {
		return nil
	}
	return fmt.Errorf("recovery slice %s holds %d resources other than the %d this pass planned (another writer rewrote it, or a withdrawal since)",
		s.Name, len(s.Resources), len(part))
}

// Sealed reports whether the recovery slice was sealed for a commit.
func (s ResourceSlice) Sealed() bool {
	_, ok := s.Annotations[AnnotationRecoverySealed]
	return ok
}

// RefuseRewrite says why a recovery slice that differs from the plan must not be rewritten to
// it, or is nil when it may be: a sealed slice is never rewritten (AnnotationRecoverySealed).
func RefuseRewrite(s ResourceSlice) error {
	if !s.Sealed() {
		return nil
	}
	return fmt.Errorf("recovery slice %s was sealed for a commit (composition resourceVersion %s) and differs from this plan; "+
		"a sealed slice is never rewritten: a later synthesis is handed off afresh, or an operator deletes the slice",
		s.Name, s.Annotations[AnnotationRecoverySealed])
}
