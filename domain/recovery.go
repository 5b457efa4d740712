package domain

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Tombstone asks Eno to delete a resource the previous incarnation deployed.
type Tombstone struct {
	Entry Entry
	// UID is the object's UID as read just before the hand-off; its precondition names it.
	UID string
}

type tombstoneMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type tombstoneManifest struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   tombstoneMeta `json:"metadata"`
}

// tombstoneJSON is the manifest of a tombstone of e carrying annotations.
func tombstoneJSON(e Entry, annotations map[string]string) ([]byte, error) {
	return json.Marshal(tombstoneManifest{APIVersion: e.APIVersion(), Kind: e.Kind,
		Metadata: tombstoneMeta{Name: e.Name, Namespace: e.Namespace, Labels: e.Labels, Annotations: annotations}})
}

// Manifest is the Eno manifest JSON that ResourceSlices carry with deleted: true.
func (t Tombstone) Manifest() string {
	b, err := tombstoneJSON(t.Entry, t.Entry.Annotations)
	if err != nil {
		panic(fmt.Sprintf("encoding tombstone: %v", err))
	}
	return string(b)
}

// reviewOf is the verb of the review annotation when it names c's current synthesis; "" when it
// names another, or is of neither form (IgnoredReviewOf says which).
func reviewOf(c Composition) string {
	verb, uuid, ok := parseReview(c.Annotations[AnnotationReview])
	if !ok || c.SynthesisUUID() == "" || uuid != c.SynthesisUUID() {
		return ""
	}
	return verb
}

const (
	reviewApprove = "approve:"
	reviewReject  = "reject:"
)

// parseReview splits "approve:<uuid>" or "reject:<uuid>"; anything else is not a review.
func parseReview(v string) (verb, uuid string, ok bool) {
	for _, verb := range []string{reviewApprove, reviewReject} {
		if uuid, found := strings.CutPrefix(v, verb); found && uuid != "" {
			return verb, uuid, true
		}
	}
	return "", "", false
}

// ReviewValue is the review annotation, approve:<uuid> or reject:<uuid>, answering the recovery
// held for c's current synthesis; it refuses when none is held, or a review already answers it.
func ReviewValue(c Composition, approve bool) (string, error) {
	d, ok := c.Decision()
	current := c.SynthesisUUID()
	switch {
	case !ok:
		return "", fmt.Errorf("composition %s has no recovery held for review: it has no recovery decision", c.Ref())
	case d.SynthesisUUID != current:
		return "", fmt.Errorf("composition %s has moved on: its decision (%s) is for synthesis %s, its current synthesis is %s; recovery decides for that one anew",
			c.Ref(), d.Outcome, d.SynthesisUUID, cmp.Or(current, "none"))
	case d.Outcome != OutcomeHeldForReview:
		return "", fmt.Errorf("composition %s has no recovery held for review: synthesis %s was decided %s", c.Ref(), current, strings.TrimSpace(d.Outcome.String()+" "+d.Reason))
	case reviewOf(c) != "":
		return "", fmt.Errorf("composition %s: synthesis %s is already reviewed (%s=%s)", c.Ref(), current, AnnotationReview, c.Annotations[AnnotationReview])
	}
	if approve {
		return reviewApprove + current, nil
	}
	return reviewReject + current, nil
}

// IgnoredReview is a review annotation that answers nothing for the current synthesis: it names
// another synthesis (Stale), or is neither approve:<uuid> nor reject:<uuid>.
type IgnoredReview struct {
	// Value is the annotation as found.
	Value string
	// Stale: the value names another synthesis, NamedSynthesis.
	Stale          bool
	NamedSynthesis string
	// Current is the synthesis the value should name.
	Current string
}

// IgnoredReviewOf reports a review annotation set and ignored for a current synthesis.
func IgnoredReviewOf(c Composition) (IgnoredReview, bool) {
	v, set := c.Annotations[AnnotationReview]
	current := c.SynthesisUUID()
	if !set || current == "" {
		return IgnoredReview{}, false
	}
	_, uuid, ok := parseReview(v)
	if ok && uuid == current {
		return IgnoredReview{}, false
	}
	return IgnoredReview{Value: v, Stale: ok, NamedSynthesis: uuid, Current: current}, true
}

// reviewValueLimit bounds how much of an operator's value a message quotes.
const reviewValueLimit = 80

// Message says what was found and the values that would answer, for an Event.
func (r IgnoredReview) Message() string {
	v := r.Value
	if len(v) > reviewValueLimit {
		v = v[:reviewValueLimit] + "…"
	}
	want := fmt.Sprintf("set it to %q or %q", reviewApprove+r.Current, reviewReject+r.Current)
	if r.Stale {
		return fmt.Sprintf("%s is %q, which names synthesis %s, not the current one (%s), and is ignored; %s",
			AnnotationReview, v, r.NamedSynthesis, r.Current, want)
	}
	return fmt.Sprintf("%s is %q, neither approve:<synthesisUUID> nor reject:<synthesisUUID>, and is ignored; %s",
		AnnotationReview, v, want)
}

// RecoveryInput is everything a recovery decision depends on.
type RecoveryInput struct {
	Composition Composition
	// Snapshot is the selected snapshot when SnapshotErr is nil, and the own-UID candidate's
	// metadata when it is ErrSameIncarnation.
	Snapshot Snapshot
	// SnapshotErr is ErrNoInventory, an *OtherNamespaceError, ErrSameIncarnation, an
	// *InventoryInvalidError, or nil (ReadSnapshotFor's verdict).
	SnapshotErr error
	// LiveOwners are the Compositions of SharedLineageOwners that a live read found to exist
	// without a deletionTimestamp, or was forbidden to read (design §6, SharedLineage).
	LiveOwners []LiveOwner
	// LineageMembers are the other Compositions known to carry this lineage, recorded or not.
	LineageMembers []CompositionRef
	Synthesis      SynthesisContents
	// Observed is what a read of each object of RecoveryPlan.Verify found downstream; nil until
	// the objects were read (design §6.3).
	Observed             map[ResourceID]Observation
	MaxTombstoneFraction float64
	// EnoManagers are Eno's field managers; any other manager of an object keeps it (§6.3).
	EnoManagers EnoManagers
	// ResourceFilter keeps what no eno-reconciler in use would load; nil loads everything.
	ResourceFilter ResourceFilter
	// Unsynthesized are the fleet's Compositions Eno has not synthesized yet, by creation time;
	// the hand-off waits FirstSynthesisWait for them, then is held for review (design §6.3).
	Unsynthesized      map[CompositionRef]time.Time
	FirstSynthesisWait time.Duration
	Now                time.Time
}

// RecoveryPlan is a decision and its tombstones; with Verify set, read those and plan again with them Observed.
type RecoveryPlan struct {
	Decision   Decision
	Tombstones []Tombstone
	Held       []Tombstone
	Dropped    []DroppedTombstone
	Verify     []Tombstone
	// HistoryWritten is the write time of the selected history, when the checks used it.
	HistoryWritten time.Time
	// SourceUID is the UID of the incarnation that recorded the history: its slices, until the
	// garbage collector takes them, are no evidence that another Composition produces anything.
	SourceUID string
	// EnoManagers are the field managers the tombstones' preconditions accept.
	EnoManagers EnoManagers
}

// Decided reports whether the plan decides, rather than asking for downstream reads first.
func (p RecoveryPlan) Decided() bool { return !p.Decision.Outcome.IsZero() }

// SharedLineageOwners are whom recovery reads live before it decides for c from snap: all a
// Secret of the lineage was recorded for, whatever its namespace, and members, which carry the
// lineage (a copied override) even before they record; never c itself.
func SharedLineageOwners(c Composition, snap Snapshot, members ...CompositionRef) []CompositionRef {
	var out []CompositionRef
	for _, ref := range append(slices.Clone(snap.owners), members...) {
		if ref != c.Ref() && !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out
}

// LineageMembers lists the Compositions of all that carry lineage, other than c.
func LineageMembers(c Composition, lineage Lineage, all []Composition) []CompositionRef {
	var out []CompositionRef
	for _, o := range all {
		if l, err := LineageOf(o); err == nil && l == lineage && o.Ref() != c.Ref() {
			out = append(out, o.Ref())
		}
	}
	slices.SortFunc(out, CompositionRef.Compare)
	return out
}

// LiveOwner is another Composition of the lineage that exists: a live read found it, not
// deleting (any UID), or was refused it (Forbidden): a namespace-scoped grant must not let
// recovery delete what a Composition it cannot see still manages.
type LiveOwner struct {
	Ref CompositionRef
	// Forbidden: the read was refused, and the Composition counts as existing.
	Forbidden bool
}

func (o LiveOwner) String() string {
	if o.Forbidden {
		return o.Ref.String() + " (could not be read: forbidden, so it counts as existing)"
	}
	return o.Ref.String() + " (exists)"
}

// sharedWith returns the live owners that are Compositions of the lineage other than c.
func sharedWith(c Composition, snap Snapshot, members []CompositionRef, live []LiveOwner) []LiveOwner {
	others := SharedLineageOwners(c, snap, members...)
	return slices.DeleteFunc(slices.Clone(live), func(o LiveOwner) bool { return !slices.Contains(others, o.Ref) })
}

// PlanRecovery decides recovery for a synthesis from what was read; it reads and writes nothing.
func PlanRecovery(in RecoveryInput) (RecoveryPlan, error) {
	c := in.Composition
	if c.Synthesis == nil {
		return RecoveryPlan{}, fmt.Errorf("composition %s has no current synthesis", c.Ref())
	}
	plan, err := planRecovery(in)
	if err != nil || !plan.Decided() {
		return plan, err
	}
	plan.Decision.RecoveredFrom = recoveredFrom(c, plan.Decision)
	return plan, nil
}

// recoveredFrom is d's source when it records one, else what the decision it replaces carried.
func recoveredFrom(c Composition, d Decision) string {
	if d.SetsRecoveredFrom() {
		return d.SourceSynthesisUUID
	}
	if prev, ok := c.Decision(); ok {
		return prev.RecoveredFrom
	}
	return ""
}

// planRecovery: the first to decide of reading, SharedLineage, AlreadyDecided, absent entries, deletion checks, guard.
func planRecovery(in RecoveryInput) (RecoveryPlan, error) {
	c := in.Composition
	d := Decision{SynthesisUUID: c.Synthesis.UUID, DecidedAt: in.Now.UTC().Truncate(time.Second)}
	snap := in.Snapshot
	if in.SnapshotErr != nil {
		return planFromSnapshotErr(d, snap, in.SnapshotErr)
	}
	ts := snap.meta.SynthesisTime
	d.SourceSynthesisUUID = snap.meta.SynthesisUUID
	d.SourceSynthesisTimestamp = &ts
	// SameIncarnation is ReadSnapshotFor's, decided there only: a snapshot chosen
	// from another reader's candidates, or from the whole lineage, is no input here.
	if snap.readFor == nil || *snap.readFor != c.UID {
		return RecoveryPlan{}, fmt.Errorf("composition %s: the snapshot was not read for this incarnation; recovery decides from ReadSnapshotFor's verdict", c.Ref())
	}
	if shared := sharedWith(c, snap, in.LineageMembers, in.LiveOwners); len(shared) > 0 {
		d.Outcome, d.Reason = OutcomeInventoryInvalid, ReasonSharedLineage.String()
		d.Message = fmt.Sprintf("the lineage's history is shared with composition %s: a lineage a living Composition shares is not ours to clean; give each Composition its own lineage (%s); no tombstones are generated",
			joinEach(shared, ", ", LiveOwner.String), AnnotationLineageOverride)
		return RecoveryPlan{Decision: d}, nil
	}
	if prev, ok := c.Decision(); ok && prev.RecoveredFrom != "" && prev.RecoveredFrom == snap.meta.SynthesisUUID {
		d.Outcome, d.Reason = OutcomeNothingToRecover, ReasonAlreadyDecided
		d.Message = fmt.Sprintf("recovery from snapshot %s was already decided for this incarnation (synthesis %s); Eno's own synthesis diff owns cleanup since",
			snap.meta.SynthesisUUID, prev.SynthesisUUID)
		return RecoveryPlan{Decision: d}, nil
	}
	var absent []Tombstone
	for i, e := range snap.inventory.entries {
		if !in.Synthesis.Covers(e.ID()) {
			absent = append(absent, Tombstone{Entry: snap.inventory.entry(i)})
		}
	}
	total := snap.inventory.Len()
	if len(absent) == 0 {
		d.Outcome, d.Reason = OutcomeNothingToRecover, ReasonNoOrphans
		d.Message = fmt.Sprintf("none of the %d resources of the previous incarnation is orphaned: each is produced, patched or already tombstoned", total)
		return RecoveryPlan{Decision: d}, nil
	}
	toVerify, disabled := SplitDisabled(absent)
	toVerify, disabledLater := SplitDisabledLater(snap, toVerify)
	disabled = append(disabled, disabledLater...)
	if in.Observed == nil && len(toVerify) > 0 {
		return RecoveryPlan{Verify: toVerify}, nil
	}
	if err := ReadOutage(in.Observed); err != nil {
		return RecoveryPlan{}, err
	}
	writeTime, known := snap.WriteTime()
	verified, dropped := VerifyTombstones(toVerify, in.Observed, in.EnoManagers, writeTime, known)
	verified, cascaded := splitCascading(verified)
	verified, untaken, err := splitUntaken(verified, in, writeTime)
	if err != nil {
		return RecoveryPlan{}, err
	}
	dropped = append(append(append(disabled, dropped...), cascaded...), untaken...)
	summary := DroppedSummary(dropped)
	if len(cascaded) > 0 {
		summary += "; never handed to Eno, delete after looking: " + joinEach(cascaded, "; ", func(t DroppedTombstone) string { return KubectlDelete(t.Tombstone.Entry.ID()) })
	}
	withDrops := func(msg string) string {
		if summary == "" {
			return msg
		}
		return msg + "; " + summary
	}
	if len(verified) == 0 {
		d.Outcome, d.Reason = OutcomeNothingToRecover, ReasonNoOrphans
		if slices.ContainsFunc(dropped, func(dt DroppedTombstone) bool { return !dt.Reason.verifiable() }) {
			d.Reason = ReasonUnverified
		}
		d.Message = withDrops(fmt.Sprintf("%d of %d resources of the previous incarnation are absent from the synthesis, but none can be handed to Eno", len(absent), total))
		return RecoveryPlan{Decision: d, Dropped: dropped}, nil
	}
	d.Tombstones = len(verified)
	plan := RecoveryPlan{Decision: d, Dropped: dropped, HistoryWritten: writeTime, SourceUID: in.Snapshot.CompositionUID(), EnoManagers: in.EnoManagers}
	// A snapshot naming no control plane may be another's that has not recorded since (design §3).
	// What the filter and cascading kinds keep would be deleted as well, by a person's command or
	// another reconciler: the guard counts it, or dropping some would pass a plan under the fraction.
	waiting, overdue := AwaitFirstSyntheses(c.Ref(), in.Unsynthesized, in.Now, in.FirstSynthesisWait)
	guarded := snap.meta.ControlPlane == "" || overDeletionGuard(len(verified)+len(cascaded)+len(untaken), total, in.MaxTombstoneFraction)
	if guarded || len(overdue) > 0 {
		plan = planOverTheGuard(plan, in, verified, total, withDrops, guarded, overdue)
	} else {
		plan.Decision.Outcome = OutcomeRecovered
		plan.Decision.Message = withDrops(fmt.Sprintf("%d of %d resources of the previous incarnation are orphaned: %s", len(verified), total, FirstIDs(verified, 5)))
		plan.Tombstones = verified
	}
	if len(plan.Tombstones) > 0 && len(waiting) > 0 {
		return RecoveryPlan{}, &FirstSynthesisPendingError{Compositions: waiting}
	}
	return plan, nil
}

// planFromSnapshotErr decides when reading selected no snapshot (design §5).
func planFromSnapshotErr(d Decision, snap Snapshot, snapErr error) (RecoveryPlan, error) {
	var invalid *InventoryInvalidError
	var other *OtherNamespaceError
	switch {
	case errors.Is(snapErr, ErrNoInventory):
		d.Outcome = OutcomeNoInventory
		d.Message = "no inventory snapshot exists for this lineage; nothing to recover"
	case errors.As(snapErr, &other):
		d.Outcome, d.Reason = OutcomeNothingToRecover, ReasonOtherNamespace
		d.Message = other.Error() + "; no tombstones are generated"
	case errors.Is(snapErr, ErrSameIncarnation):
		ts := snap.meta.SynthesisTime
		d.SourceSynthesisUUID, d.SourceSynthesisTimestamp = snap.meta.SynthesisUUID, &ts
		d.Outcome, d.Reason = OutcomeNothingToRecover, ReasonSameIncarnation
		d.Message = "snapshot comes from this same composition incarnation; Eno's own synthesis diff owns cleanup"
	case errors.As(snapErr, &invalid):
		d.Outcome = OutcomeInventoryInvalid
		d.Reason = invalid.Reason.String()
		d.Message = invalid.Error() + "; no tombstones are generated from untrusted history"
	default:
		return RecoveryPlan{}, fmt.Errorf("reading snapshot: %w", snapErr)
	}
	return RecoveryPlan{Decision: d}, nil
}

// planOverTheGuard decides over the deletion guard: approved, rejected, else held (design §6.1).
func planOverTheGuard(plan RecoveryPlan, in RecoveryInput, verified []Tombstone, total int, withDrops func(string) string, guarded bool, overdue []CompositionRef) RecoveryPlan {
	c := in.Composition
	switch review := reviewOf(c); {
	case review == reviewApprove && len(overdue) == 0: // an approval never passes a Composition Eno has not synthesized
		plan.Decision.Outcome, plan.Decision.Reason = OutcomeRecovered, ReasonApproved
		plan.Decision.Message = withDrops(fmt.Sprintf("%d of %d resources tombstoned after approval: %s", len(verified), total, FirstIDs(verified, 5)))
		plan.Tombstones = verified
		return plan
	case review == reviewReject:
		plan.Decision.Outcome, plan.Decision.Reason, plan.Decision.Tombstones = OutcomeNothingToRecover, ReasonRejected, 0
		plan.Decision.Message = withDrops(fmt.Sprintf("operator rejected %d tombstones held for review", len(verified)))
		return plan
	}
	plan.Decision.Outcome, plan.Decision.Reason = OutcomeHeldForReview, ReasonOverDeletionGuard
	guard := fmt.Sprintf("over the guard of %g", in.MaxTombstoneFraction)
	switch {
	case in.Snapshot.meta.ControlPlane == "":
		guard = "and the history names no control plane (written before they were named): it may be another control plane's, so a person decides"
	case in.MaxTombstoneFraction == 0:
		guard = "and the guard of 0 holds every recovery for review"
	}
	if len(overdue) > 0 {
		first := fmt.Sprintf("held: Eno has not synthesized composition %s within %s of its creation, and could delete what a first synthesis produces before it does", refList(overdue), in.FirstSynthesisWait)
		if plan.Decision.Reason, guard = ReasonFirstSynthesisPending, first+"; also "+strings.TrimPrefix(guard, "and "); !guarded {
			guard = first
		}
	}
	next := fmt.Sprintf("set %s to approve:%s or reject:%s", AnnotationReview, c.Synthesis.UUID, c.Synthesis.UUID)
	if len(overdue) > 0 {
		next = fmt.Sprintf("fix or delete it and the hold lifts itself (approve: does not pass it), or set %s to reject:%s", AnnotationReview, c.Synthesis.UUID)
	}
	plan.Decision.Message = withDrops(fmt.Sprintf("%d of %d resources would be deleted, %s; %s", len(verified), total, guard, next))
	plan.Held = verified
	return plan
}

// overDeletionGuard reports whether tombstones/total is strictly greater than fraction.
// Dividing keeps the boundary exact (57/100 == 0.57, while 0.57*100 < 57 in float64),
// and a NaN fraction holds everything rather than nothing.
func overDeletionGuard(tombstones, total int, fraction float64) bool {
	return !(float64(tombstones)/float64(total) <= fraction)
}

// FirstIDs lists the identities of the first n tombstones, for events and messages.
func FirstIDs(ts []Tombstone, n int) string {
	s := joinEach(ts[:min(n, len(ts))], ", ", func(t Tombstone) string { return t.Entry.ID().String() })
	if len(ts) > n {
		s += fmt.Sprintf(", and %d more", len(ts)-n)
	}
	return s
}

// joinEach joins f of each of xs with sep.
func joinEach[T any](xs []T, sep string, f func(T) string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return strings.Join(out, sep)
}
