package domain

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Eno's own names used by the hand-off (design §6.2).
const (
	// AnnotationForceResynthesis starts a new synthesis when it names the current one.
	AnnotationForceResynthesis = "eno.azure.io/force-resynthesis"
	// SliceFinalizer is Eno's; it keeps a recovery slice alive through eno-controller's cleanup race.
	SliceFinalizer = "eno.azure.io/cleanup"
)

// ResynthesisRequested reports whether force-resynthesis names c's current synthesis: done.
func (c Composition) ResynthesisRequested() bool {
	return c.Annotations[AnnotationForceResynthesis] == c.SynthesisUUID()
}

// MaxSliceManifestBytes is Eno's own slice budget (the executor's maxSliceJsonBytes, the sum of
// a slice's manifests' lengths): each create stays well under the API server's request limit.
const MaxSliceManifestBytes = 512 << 10

// Handoff is what recovery hands to Eno for one synthesis: the tombstones, cut into recovery
// slices (Parts), and the Recovered decision, which every slice carries so that a reconcile
// past the commit point writes the decision from the slices alone.
type Handoff struct {
	Decision Decision
	// Resources are every tombstone of the hand-off, in canonical order, across its slices.
	Resources []SliceResource
	// HistoryWritten is its history's write time, which each tombstone's precondition pins.
	HistoryWritten time.Time
	// SourceUID is the recorded incarnation's UID (RecoveryPlan.SourceUID); empty when unknown.
	SourceUID string
	// Digest names the hand-off and its slices; the Composition's AnnotationArmed carries it
	// while the tombstones may act. Read back from the tombstones' preconditions.
	Digest string
	// Kept is what the plan kept for a person (UnresolvedOf), as far as AnnotationKept holds it:
	// part 0 carries it to the recording of the carrying synthesis (design §3).
	Kept []Unresolved
}

// NewHandoff turns a Recovered plan into its recovery slices' content; a tombstone over a slice's budget is an error.
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
	h.Kept = fitUnresolved(UnresolvedOf(plan), maxKeptBytes)
	h.Digest = handoffDigest(d.SynthesisUUID, h.HistoryWritten, plan.Tombstones)
	for i, t := range plan.Tombstones {
		m, err := selfCheckingManifest(t, plan.EnoManagers, h.HistoryWritten, h.Digest)
		if err != nil {
			return Handoff{}, err
		}
		h.Resources[i] = SliceResource{Manifest: m, Deleted: true}
	}
	if _, err := h.Parts(); err != nil {
		return Handoff{}, err
	}
	return h, nil
}

// Parts are the tombstones of each recovery slice of the hand-off, in part order, cut in order
// into slices of at most MaxSliceManifestBytes. The cut depends on the tombstones alone, so a
// retry publishes the same slices. A hand-off without tombstones has no slice and is an error.
func (h Handoff) Parts() ([][]SliceResource, error) {
	if len(h.Resources) == 0 {
		return nil, fmt.Errorf("the hand-off holds no tombstones")
	}
	var parts [][]SliceResource
	from, used := 0, 0
	for i, r := range h.Resources {
		size := len(r.Manifest)
		if size > MaxSliceManifestBytes {
			what := fmt.Sprintf("resource %d", i)
			if e, _, err := ParseTombstone(r); err == nil {
				what = e.ID().String()
			}
			return nil, fmt.Errorf("the tombstone of %s is %d bytes of manifest JSON, over the %d a recovery slice holds (Eno's slice budget); nothing was handed to Eno", what, size, MaxSliceManifestBytes)
		}
		if used+size > MaxSliceManifestBytes {
			parts = append(parts, h.Resources[from:i:i])
			from, used = i, 0
		}
		used += size
	}
	parts = append(parts, h.Resources[from:len(h.Resources):len(h.Resources)])
	if len(parts) > maxParts {
		return nil, fmt.Errorf("the hand-off needs %d recovery slices, over the %d a name has room for", len(parts), maxParts)
	}
	return parts, nil
}

// maxParts is how many recovery slices one hand-off may have: maxPartDigits digits.
const maxParts = 9999

// AnnotationRecoveryPart is a recovery slice's "<part>/<parts>": a resuming pass knows which parts were never named.
const AnnotationRecoveryPart = "eno.azure.io/tombstone-recovery-part"

// SliceAnnotations are recovery slice part of parts' annotations: decision, history write time, place, source UID.
func (h Handoff) SliceAnnotations(part, parts int) map[string]string {
	a := map[string]string{
		AnnotationDecision:       h.Decision.Encode(),
		AnnotationHistoryWritten: h.HistoryWritten.UTC().Format(time.RFC3339),
		AnnotationRecoveryPart:   fmt.Sprintf("%d/%d", part, parts),
	}
	if h.SourceUID != "" {
		a[AnnotationSourceUID] = h.SourceUID
	}
	if part == 0 && len(h.Kept) > 0 {
		data, _ := EncodeUnresolved(h.Kept)
		a[AnnotationKept] = string(data)
	}
	return a
}

// AnnotationSourceUID, on a recovery slice, is the UID of the incarnation whose history the
// tombstones came from: the watch does not count its slices as another Composition's.
const AnnotationSourceUID = "eno.azure.io/tombstone-recovery-source-uid"

// SynthesisUUID is the synthesis the tombstones are handed to.
func (h Handoff) SynthesisUUID() string { return h.Decision.SynthesisUUID }

// DecisionFor is the decision to write once the slices, the first named first, are committed.
func (h Handoff) DecisionFor(first string) Decision {
	d := h.Decision
	d.TombstoneSlice, d.Tombstones = first, len(h.Resources)
	return d
}

// SliceName is the name of recovery slice part of the hand-off for comp.
func (h Handoff) SliceName(comp Composition, part int) string {
	return RecoverySliceName(comp.Name, h.SynthesisUUID(), h.Digest, part)
}

// NamedRecoverySlices are the current synthesis's recovery slices in part order: each is named once created.
func (c Composition) NamedRecoverySlices() []string {
	if c.Synthesis == nil || c.Synthesis.UUID == "" {
		return nil
	}
	return recoverySlicesIn(c.Name, c.Synthesis.UUID, c.Synthesis.Slices)
}

// recoverySlicesIn are the names of the synthesis's recovery slice family among names, in order.
func recoverySlicesIn(compName, synthesisUUID string, names []string) []string {
	var out []string
	for _, n := range names {
		if inRecoveryFamily(compName, synthesisUUID, n) {
			out = append(out, n)
		}
	}
	return out
}

// HandoffFromSlice reads back a recovery slice's hand-off for c's current synthesis: none when
// another object controls it, or it is for another synthesis, or holds other than tombstones.
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
	written, _ := time.Parse(time.RFC3339, s.Annotations[AnnotationHistoryWritten]) // a report: each tombstone's precondition carries its own
	return Handoff{Decision: d, Resources: s.Resources, HistoryWritten: written, SourceUID: s.Annotations[AnnotationSourceUID], Digest: digest}, nil
}

// sameDigest is the hand-off digest that r's precondition names, which must be digest unless
// that is still empty. A tombstone without this controller's precondition (a plain tombstone
// named, by a stale writer) is no hand-off of ours: Eno would delete its object unchecked.
func sameDigest(digest string, r SliceResource) (string, error) {
	m, err := readManifest([]byte(r.Manifest))
	if err != nil {
		return "", err
	}
	_, d, ok := readSelfCheck(m.Annotations)
	switch {
	case !ok:
		return "", fmt.Errorf("it carries no precondition of this controller, so Eno would delete its object unchecked")
	case digest != "" && d != digest:
		return "", fmt.Errorf("its precondition names hand-off %s, another tombstone %s", d, digest)
	}
	return d, nil
}

// HandoffFromSlices reads back the hand-off of c's current synthesis's recovery slices, in part
// order; a slice no valid hand-off (HandoffFromSlice) is a *RecoverySliceInvalidError naming it.
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
			h.Kept, _ = KeptIn(parts[:1]) // a report: one that does not read invalidates nothing
		}
		if p.Digest != "" && h.Digest != "" && p.Digest != h.Digest {
			return Handoff{}, &RecoverySliceInvalidError{Slice: s.Name, Detail: "its tombstones name hand-off " + p.Digest + ", the first slice's " + h.Digest}
		}
		h.Digest = cmp.Or(h.Digest, p.Digest)
		h.Resources = append(h.Resources, p.Resources...)
	}
	return h, nil
}

// RecoverySliceInvalidError: the synthesis names, under a recovery slice's name, no valid
// hand-off of it. Never adopted: recovery retries with backoff until an operator removes it.
type RecoverySliceInvalidError struct {
	Slice  string
	Detail string
}

func (e *RecoverySliceInvalidError) Error() string {
	return fmt.Sprintf("the current synthesis names resource slice %s under a recovery slice's name, but it is not this controller's hand-off for it (%s); any eno-reconciler restart reloads the synthesis and acts on its tombstones, so before one: pause the composition (%s: \"true\"), then remove the slice from the synthesis and delete it", e.Slice, e.Detail, AnnotationDisableReconciliation)
}

// CommitPrecondition is what the hand-off's commit point requires: the Composition decided from,
// unchanged. The resourceVersion covers every write since (a review, a deletion, a lineage, a
// decision); synthesis, in-flight and slices are tested too, so a rejection can say which moved.
type CommitPrecondition struct {
	UID             string
	ResourceVersion string
	SynthesisUUID   string
	// Slices is the slice list the append extends; nil when the synthesis has none.
	Slices []string
}

// CommitPreconditionOf is the precondition of appending to read's current synthesis.
func CommitPreconditionOf(read Composition) CommitPrecondition {
	return CommitPrecondition{UID: read.UID, ResourceVersion: read.ResourceVersion, SynthesisUUID: read.SynthesisUUID(), Slices: slicesOf(read)}
}

// MovedOn says how live fails the precondition, or "" when it holds: live is still the object
// the caller decided from, with no synthesis in flight.
func (p CommitPrecondition) MovedOn(live Composition) string {
	switch {
	case live.UID != p.UID:
		return "it was recreated with UID " + live.UID
	case live.SynthesisUUID() != p.SynthesisUUID:
		return "its current synthesis is now " + live.SynthesisUUID()
	case live.InFlightSynthesis != "":
		return "synthesis " + live.InFlightSynthesis + " is in flight"
	case !slices.Equal(slicesOf(live), p.Slices):
		return "its slice list changed"
	case live.ResourceVersion != p.ResourceVersion:
		return fmt.Sprintf("it changed since it was read (resourceVersion %s, read at %s)", live.ResourceVersion, p.ResourceVersion)
	}
	return ""
}

// CheckReusable says why the slice found under want's name cannot stand for want, or is nil: never
// updated, one is reused only when comp's, for its synthesis, not terminating, and exactly want.
func CheckReusable(comp Composition, existing, want ResourceSlice) error {
	switch {
	case existing.Deleting:
		return fmt.Errorf("recovery slice %s is being deleted", existing.Name)
	case existing.ControllerUID != comp.UID:
		return fmt.Errorf("recovery slice %s is controlled by %q, not by composition UID %s", existing.Name, existing.ControllerUID, comp.UID)
	case existing.SynthesisUUID != want.SynthesisUUID:
		return fmt.Errorf("recovery slice %s holds synthesis %q, not %q", existing.Name, existing.SynthesisUUID, want.SynthesisUUID)
	case !slices.Equal(existing.Resources, want.Resources):
		return fmt.Errorf("recovery slice %s holds %d resources other than the %d of this hand-off", existing.Name, len(existing.Resources), len(want.Resources))
	}
	for k, v := range want.Annotations {
		if k == AnnotationDecision && sameDecisionBut(existing.Annotations[k], v) || k == AnnotationKept {
			continue // the same plan made again: only its decidedAt differs; what it kept is a report
		}
		if existing.Annotations[k] != v {
			return fmt.Errorf("recovery slice %s has %s=%q, not %q", existing.Name, k, existing.Annotations[k], v)
		}
	}
	return nil
}

// sameDecisionBut reports whether two encoded decisions differ in their decidedAt at most.
func sameDecisionBut(a, b string) bool {
	da, erra := ParseDecision(a)
	db, errb := ParseDecision(b)
	return erra == nil && errb == nil && da.SameAs(db)
}

// RecoverySlice is recovery slice part of the hand-off as it is created, never updated, for comp.
func (h Handoff) RecoverySlice(comp Composition, part int) (ResourceSlice, error) {
	parts, err := h.Parts()
	if err != nil {
		return ResourceSlice{}, err
	}
	if part < 0 || part >= len(parts) {
		return ResourceSlice{}, fmt.Errorf("the hand-off has %d recovery slices, not a part %d", len(parts), part)
	}
	return ResourceSlice{
		Namespace:     comp.Namespace,
		Name:          h.SliceName(comp, part),
		SynthesisUUID: h.SynthesisUUID(),
		Annotations:   h.SliceAnnotations(part, len(parts)),
		ControllerUID: comp.UID,
		Resources:     parts[part],
	}, nil
}

// PartsOf reads a recovery slice's AnnotationRecoveryPart: how many parts its hand-off has.
func PartsOf(s ResourceSlice) (parts int, ok bool) {
	var part int
	if _, err := fmt.Sscanf(s.Annotations[AnnotationRecoveryPart], "%d/%d", &part, &parts); err != nil || part < 0 || part >= parts {
		return 0, false
	}
	return parts, true
}

// HandoffState is where a Composition's hand-off stands, which app's advance switches on.
type HandoffState int

const (
	// HandoffNone: nothing is handed off, pending or carried; recording may run.
	HandoffNone HandoffState = iota
	// HandoffLeftAlone: recovery may not act on it (the IneligibleError says why) and nothing
	// armed needs disarming: a deleting or paused one's precondition sees it; out of scope, its shard's.
	HandoffLeftAlone
	// HandoffAbandoned: it left recovery (opted out, recovery disabled, an unusable lineage) while
	// armed; nothing watches the hand-off any more, so it is disarmed for good (ArmedOff).
	HandoffAbandoned
	// HandoffUnplanned: the synthesis needs a decision and names no recovery slice: plan, then arm,
	// name and decide, or decide alone. An armed one naming nothing (stopped after arming) is too.
	HandoffUnplanned
	// HandoffNamed: recovery slices named, not decided yet: finished from them, never replanned.
	HandoffNamed
	// HandoffDecided: decided Recovered; watched, and Eno is asked for a synthesis carrying it.
	HandoffDecided
	// HandoffCarried: the previous synthesis carried a hand-off and the current one is not Ready:
	// a tombstone may wait behind an earlier readiness group, so the hand-off is still watched.
	HandoffCarried
	// HandoffDone: armed, and a synthesis naming no recovery slice is Ready: Eno acted on every
	// tombstone; one it skipped is reloaded after the watch ends, so it is disarmed (ArmedDone).
	HandoffDone
)

// HandoffStateOf reads where c's hand-off stands (design §6.2), with the recovery slices the state
// concerns: the named, decided or carried ones. ineligible is why recovery leaves c alone, or nil.
func HandoffStateOf(c Composition, ineligible *IneligibleError) (HandoffState, []string) {
	if ineligible != nil {
		switch ineligible.Reason {
		case IneligibleNotOptedIn, IneligibleDisabled, IneligibleInvalidLineage:
			if c.Armed() {
				return HandoffAbandoned, nil
			}
		}
		return HandoffLeftAlone, nil
	}
	d, decided := c.FinishedDecision()
	switch {
	case !decided && len(c.NamedRecoverySlices()) > 0:
		return HandoffNamed, c.NamedRecoverySlices()
	case !decided:
		return HandoffUnplanned, nil
	case c.Armed() && c.Synthesis.Ready && len(c.NamedRecoverySlices()) == 0:
		return HandoffDone, nil
	case d.Outcome == OutcomeRecovered && d.TombstoneSlice != "":
		// Every slice the synthesis names when the first is the decided one, else that one
		// alone, so that a slice no longer named is still looked at.
		if names := c.NamedRecoverySlices(); len(names) > 0 && names[0] == d.TombstoneSlice {
			return HandoffDecided, names
		}
		return HandoffDecided, []string{d.TombstoneSlice}
	case !c.Synthesis.Ready && len(CarriedRecoverySlices(c)) > 0:
		return HandoffCarried, CarriedRecoverySlices(c)
	}
	return HandoffNone, nil
}

// Unsynthesized: Eno has yet to synthesize c (its scheduler's initial synthesis); never when c is deleting.
func (c Composition) Unsynthesized() bool {
	return !c.Deleting && (c.Synthesis == nil || c.Synthesis.Synthesized.IsZero())
}

// AwaitFirstSyntheses splits the unsynthesized Compositions but self into those a hand-off waits
// for and those unsynthesized for wait since their creation (design §6.3, first syntheses).
func AwaitFirstSyntheses(self CompositionRef, unsynthesized map[CompositionRef]time.Time, now time.Time, wait time.Duration) (waiting, overdue []CompositionRef) {
	for ref, created := range unsynthesized {
		switch {
		case ref == self:
		case now.Sub(created) < wait:
			waiting = append(waiting, ref)
		default:
			overdue = append(overdue, ref)
		}
	}
	slices.SortFunc(waiting, CompositionRef.Compare)
	slices.SortFunc(overdue, CompositionRef.Compare)
	return waiting, overdue
}

// FirstSynthesisPendingError: a hand-off waits for the first synthesis of these Compositions.
type FirstSynthesisPendingError struct{ Compositions []CompositionRef }

func (e *FirstSynthesisPendingError) Error() string {
	return fmt.Sprintf("waiting for Eno's first synthesis of composition %s before handing tombstones over: Eno could delete what it produces first", refList(e.Compositions))
}

// refList names the first five refs.
func refList(refs []CompositionRef) string {
	if len(refs) > 5 {
		return fmt.Sprintf("%v and %d more", refs[:5], len(refs)-5)
	}
	return fmt.Sprint(refs)
}
