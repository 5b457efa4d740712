package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Inventory retention (design §7): which inventory Secrets an operator's prune deletes; the rule is pure.

// PruneReason says why prune selects a Secret.
type PruneReason struct{ name string }

var (
	// PruneLeftoverChunk (a): a chunk at or above the count of a newer complete snapshot of the
	// same Composition name and lineage; that snapshot overwrote the chunks below it.
	PruneLeftoverChunk = PruneReason{"LeftoverChunk"}
	// PruneLineageGone (b): every Secret of a lineage none of whose Compositions exists.
	PruneLineageGone = PruneReason{"LineageGone"}
	// PruneSupersededFormat1 (c): a format-1 chunk, never trusted, of a lineage with a newer complete snapshot.
	PruneSupersededFormat1 = PruneReason{"SupersededFormat1"}
)

func (r PruneReason) String() string { return r.name }

// PresenceKind is what reading one recorded Composition on the control plane found.
type PresenceKind int

const (
	// PresenceUnknown (the zero value): the read failed other than NotFound, or was not made.
	PresenceUnknown PresenceKind = iota
	// PresenceGone: the API server answered NotFound.
	PresenceGone
	// PresenceLiving: it exists, whatever its UID.
	PresenceLiving
)

// Presence is one recorded Composition as the control plane showed it.
type Presence struct {
	Kind        PresenceKind
	Composition Composition // when Living
	Detail      string      // when Unknown: what failed
}

// PruneLineage is what prune knows of one lineage of the downstream cluster.
type PruneLineage struct {
	Lineage Lineage
	// Secrets are every Secret labelled with the lineage, ours or not.
	Secrets []ChunkSecret
	// Recorded is the control plane's answer for each Composition the Secrets name; one missing is Unknown.
	Recorded map[CompositionRef]Presence
	// Claimants are living Compositions whose lineage this is, recorded or not (an override).
	Claimants []Composition
}

// PruneRules are the operator's settings.
type PruneRules struct {
	Now time.Time
	// OlderThan: a gone lineage is pruned only when its newest data write is older.
	OlderThan time.Duration
	MaxChunks int
	// RefuseGone turns (b) off: see PruneGoneAllowed.
	RefuseGone bool
}

// PruneItem is one Secret prune deletes, and why.
type PruneItem struct {
	Secret ChunkSecret
	Reason PruneReason
	Detail string
}

// PrunePlan is the Secrets prune deletes of one lineage, by name, and why it keeps what one might expect deleted.
type PrunePlan struct {
	Lineage  Lineage
	Selected []PruneItem
	Kept     []string
}

// Selects returns the item for the Secret of that name, when the plan deletes it.
func (p PrunePlan) Selects(name string) (PruneItem, bool) {
	i := slices.IndexFunc(p.Selected, func(it PruneItem) bool { return it.Secret.Name == name })
	if i < 0 {
		return PruneItem{}, false
	}
	return p.Selected[i], true
}

// RecordedCompositions names, sorted, whom our Secrets were recorded for; all: every one names one.
func RecordedCompositions(secrets []ChunkSecret) (refs []CompositionRef, all bool) {
	all = true
	for _, s := range secrets {
		switch ref := (CompositionRef{Namespace: s.Annotations[AnnotationCompositionNamespace], Name: s.Annotations[AnnotationCompositionName]}); {
		case !s.Owned():
		case ref.Namespace == "" || ref.Name == "":
			all = false
		default:
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, CompositionRef.Compare)
	return slices.Compact(refs), all
}

// living returns the lineage's living Compositions: the recorded ones found, and the claimants.
func (l PruneLineage) living() []Composition {
	out := slices.Clone(l.Claimants)
	for _, p := range l.Recorded {
		if p.Kind == PresenceLiving {
			out = append(out, p.Composition)
		}
	}
	slices.SortFunc(out, func(a, b Composition) int { return a.Ref().Compare(b.Ref()) })
	return out
}

// PruneGoneAllowed reports whether (b) may run: some lineage of the downstream has a living
// Composition on the control plane given. When none has, the control plane is more likely
// rebuilt or the wrong one than every Composition gone (cli-utils#622).
func PruneGoneAllowed(lineages []PruneLineage) bool {
	return slices.ContainsFunc(lineages, func(l PruneLineage) bool { return len(l.living()) > 0 })
}

// SelectPrune applies the retention rule (design §7) to one lineage, never selecting a Secret not
// ours, a busy lineage's (busyLineage), nor a newest complete snapshot a living one may read.
func SelectPrune(l PruneLineage, r PruneRules) PrunePlan {
	plan := PrunePlan{Lineage: l.Lineage}
	living := l.living()
	if why, busy := busyLineage(living); busy {
		plan.Kept = append(plan.Kept, why)
		return plan
	}
	history := ReadHistory(ours(l.Secrets), r.Now, r.MaxChunks)
	var items []PruneItem
	if len(living) == 0 {
		gone, kept := selectGone(l, r)
		items, plan.Kept = gone, append(plan.Kept, kept...)
	}
	if len(items) == 0 {
		items = append(selectLeftovers(history), selectFormat1(l.Secrets, history, r)...)
	}
	plan.Selected = guarded(items, newestComplete(history, len(living) > 0))
	for i, it := range plan.Selected {
		// What a chunk 0 lists for a person is named, never dropped silently (design §3).
		if us, _ := decodeUnresolved(it.Secret, 0); len(us) > 0 && it.Secret.Annotations[AnnotationChunkIndex] == "0" {
			plan.Selected[i].Detail += fmt.Sprintf("; it lists %d object(s) kept for a person, check them by hand first: %s", len(us),
				joinEach(us, ", ", func(u Unresolved) string { return u.Entry().ID().String() }))
		}
	}
	return plan
}

// guarded keeps, of the items the rules selected, what prune may delete whatever they say: a
// Secret of ours, not of a protected snapshot; once each, by name.
func guarded(items []PruneItem, protected map[string]bool) []PruneItem {
	out := slices.DeleteFunc(slices.Clone(items), func(it PruneItem) bool { return !it.Secret.Owned() || protected[it.Secret.Name] })
	slices.SortStableFunc(out, func(a, b PruneItem) int { return strings.Compare(a.Secret.Name, b.Secret.Name) })
	return slices.CompactFunc(out, func(a, b PruneItem) bool { return a.Secret.Name == b.Secret.Name })
}

// busyLineage says why nothing of the lineage may go: a living one's hand-off is pending or held for review.
func busyLineage(living []Composition) (string, bool) {
	for _, c := range living {
		if state, _ := HandoffStateOf(c, nil); state == HandoffNamed || state == HandoffDecided {
			return fmt.Sprintf("the hand-off of %s is pending: nothing of the lineage is pruned until Eno carries it", c.Ref()), true
		}
		if d, ok := c.Decision(); ok && d.SynthesisUUID == c.SynthesisUUID() && d.Outcome == OutcomeHeldForReview {
			return fmt.Sprintf("the recovery of %s is held for review: nothing of the lineage is pruned until it is approved or rejected", c.Ref()), true
		}
	}
	return "", false
}

// ours keeps the Secrets that are ours: prune reads and deletes nothing else.
func ours(secrets []ChunkSecret) []ChunkSecret {
	return slices.DeleteFunc(slices.Clone(secrets), func(s ChunkSecret) bool { return !s.Owned() })
}

// selectGone is (b): every Secret of ours when each recorded Composition is NotFound and the
// newest data write is older than r.OlderThan; otherwise why the lineage is kept.
func selectGone(l PruneLineage, r PruneRules) ([]PruneItem, []string) {
	secrets := ours(l.Secrets)
	refs, all := RecordedCompositions(secrets)
	switch {
	case len(secrets) == 0:
		return nil, nil
	case !all:
		return nil, []string{"a Secret of the lineage names no Composition, so whether they all are gone is not known: kept"}
	case r.RefuseGone:
		return nil, []string{"no Composition of it exists, but (b) is refused: no lineage of this cluster has a living Composition on the control plane given"}
	}
	for _, ref := range refs {
		if p := l.Recorded[ref]; p.Kind != PresenceGone {
			return nil, []string{fmt.Sprintf("whether Composition %s exists is not known (%s): kept", ref, cmp.Or(p.Detail, "not read"))}
		}
	}
	var newest time.Time
	for _, s := range secrets {
		if s.DataWrittenAt.IsZero() {
			return nil, []string{fmt.Sprintf("Secret %s has no known write time: kept", s.Name)}
		}
		if s.DataWrittenAt.After(newest) {
			newest = s.DataWrittenAt
		}
	}
	if age := r.Now.Sub(newest); age <= r.OlderThan {
		return nil, []string{fmt.Sprintf("no Composition of it exists, but its newest write is %s old, not older than %s: kept", age.Truncate(time.Second), r.OlderThan)}
	}
	detail := fmt.Sprintf("none of its Compositions (%s) exists and its newest write is %s; deleting it ends recoverability of lineage %s",
		joinEach(refs, ", ", CompositionRef.String), newest.UTC().Format(time.RFC3339), l.Lineage)
	items := make([]PruneItem, len(secrets))
	for i, s := range secrets {
		items[i] = PruneItem{Secret: s, Reason: PruneLineageGone, Detail: detail}
	}
	return items, nil
}

// selectLeftovers is (a), PruneLeftoverChunk.
func selectLeftovers(h History) []PruneItem {
	var out []PruneItem
	for _, old := range h.Snapshots {
		if old.Complete {
			continue
		}
		for _, c := range old.Chunks {
			for _, s := range h.Snapshots {
				m := s.Meta
				if s.Complete && m.CompositionName == c.Meta.CompositionName && m.SynthesisTime.After(c.Meta.SynthesisTime) && c.Index >= m.ChunkCount {
					out = append(out, PruneItem{Secret: c.Secret, Reason: PruneLeftoverChunk, Detail: fmt.Sprintf(
						"chunk %d of synthesis %s, left over by the newer complete snapshot %s of %d chunk(s)", c.Index, c.Meta.SynthesisUUID, m.SynthesisUUID, m.ChunkCount)})
					break
				}
			}
		}
	}
	return out
}

// selectFormat1 is (c): format 1 is refused by reading (design §3), so it only makes the lineage unreadable.
func selectFormat1(secrets []ChunkSecret, h History, r PruneRules) []PruneItem {
	var out []PruneItem
	for _, s := range ours(secrets) {
		if s.Annotations[AnnotationFormat] != "1" {
			continue
		}
		// Parsed as format 2 would be: every other check of design §5 step 1 still applies.
		probe := s.Clone()
		probe.Annotations[AnnotationFormat] = FormatVersion
		old, err := parseChunkMetadata(probe, r.Now, r.MaxChunks)
		if err != nil {
			continue
		}
		for _, snap := range h.Snapshots {
			if snap.Complete && snap.Meta.SynthesisTime.After(old.Meta.SynthesisTime) {
				out = append(out, PruneItem{Secret: s, Reason: PruneSupersededFormat1, Detail: fmt.Sprintf(
					"format 1, which reading refuses, superseded by snapshot %s of %s", snap.Meta.SynthesisUUID, snap.Meta.SynthesisTime.UTC().Format(time.RFC3339))})
				break
			}
		}
	}
	return out
}

// newestComplete names, when the lineage has a living Composition, the chunks of its newest
// complete snapshot and of each recorded Composition's: whatever recovery may read is kept.
func newestComplete(h History, living bool) map[string]bool {
	out := map[string]bool{}
	if !living {
		return out
	}
	seen := map[CompositionRef]bool{}
	for _, s := range h.Snapshots { // newest first
		if !s.Complete || seen[s.Meta.RecordedFor()] {
			continue
		}
		seen[s.Meta.RecordedFor()] = true
		for _, c := range s.Chunks {
			out[c.Secret.Name] = true
		}
	}
	return out
}
