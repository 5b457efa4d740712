package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// markedSyntheses remembers, per Composition, the last synthesis whose disabled entries were
// checked against the snapshot: once per synthesis and process.
type markedSyntheses struct {
	mu   sync.Mutex
	seen map[domain.CompositionRef]string
}

func (m *markedSyntheses) checked(ref domain.CompositionRef, uuid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[ref] == uuid
}

func (m *markedSyntheses) done(ref domain.CompositionRef, uuid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[domain.CompositionRef]string{}
	}
	m.seen[ref] = uuid
}

// markDisabledLater runs when recording cannot record comp's current synthesis (not Ready,
// awaiting a decision, or the Composition deleting). When that synthesis disables an
// entry that the snapshot a successor would read records enabled, it marks the snapshot, and a
// successor's recovery keeps the entry as Disabled (design §4, K7). The synthesis's slices are
// read once per synthesis and process; the Secrets only when it disables something; one write
// only when it disables a recorded entry not marked yet.
func (s *Service) markDisabledLater(ctx context.Context, comp domain.Composition) error {
	if comp.Synthesis == nil || comp.Synthesis.UUID == "" || s.marks.checked(comp.Ref(), comp.Synthesis.UUID) {
		return nil
	}
	if d, ok := comp.FinishedDecision(); ok && d.Outcome == domain.OutcomeRecovered {
		return nil // the hand-off's synthesis: its predecessor's snapshot is what it recovered from
	}
	lineage, err := domain.LineageOf(comp)
	if err != nil {
		return nil
	}
	contents, err := s.planner.readSynthesis(ctx, comp)
	var se *domain.SliceError
	if errors.As(err, &se) && (se.Problem == domain.SliceMissing || se.Problem == domain.SliceTerminating) {
		// Eno synthesizes again without it, and that synthesis is checked.
		logr.FromContextOrDiscard(ctx).V(1).Info("not checking what the synthesis disables: a slice is gone", "slice", se.Slice)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the current synthesis for the entries it disables: %w", err)
	}
	if !disablesAny(contents) {
		s.marks.done(comp.Ref(), comp.Synthesis.UUID)
		return nil
	}
	secrets, err := s.deps.Store.ListChunks(ctx, lineage)
	if err != nil {
		return fmt.Errorf("listing inventory secrets of lineage %s to mark what synthesis %s disabled: %w", lineage, comp.Synthesis.UUID, err)
	}
	// The snapshot a successor would read: this Composition's own, chosen as for another UID.
	successor := comp
	successor.UID = ""
	snap, err := domain.ReadSnapshotFor(successor, secrets, s.cfg.Now(), s.cfg.MaxChunks, s.cfg.adoption())
	if err != nil {
		s.marks.done(comp.Ref(), comp.Synthesis.UUID) // no history a successor would read
		return nil
	}
	ids := domain.NewlyDisabled(snap, contents)
	if len(ids) > 0 {
		chunk := snap.Chunks()[0]
		if _, err := s.deps.Store.MarkChunk(ctx, domain.MarkDisabledLater(chunk, snap, ids)); err != nil {
			return fmt.Errorf("marking snapshot %s with the entries synthesis %s disabled: %w", snap.SynthesisUUID(), comp.Synthesis.UUID, err)
		}
		logr.FromContextOrDiscard(ctx).Info("marked the entries a synthesis not yet recorded disabled", "snapshot", snap.SynthesisUUID(),
			"synthesisUUID", comp.Synthesis.UUID, "entries", len(ids))
		s.deps.Events.Normal(comp, "InventoryMarked", fmt.Sprintf("synthesis %s disables %d resource(s) recorded in snapshot %s (%s); recovery keeps them",
			comp.Synthesis.UUID, len(ids), snap.SynthesisUUID(), firstOf(ids, 5)))
	}
	s.marks.done(comp.Ref(), comp.Synthesis.UUID)
	return nil
}

func firstOf(ids []domain.ResourceID, n int) string {
	ts := make([]domain.Tombstone, len(ids))
	for i, id := range ids {
		ts[i] = domain.Tombstone{Entry: domain.Entry{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}}
	}
	return domain.FirstIDs(ts, n)
}

func disablesAny(contents domain.SynthesisContents) bool {
	for _, e := range contents.Inventory().Entries() {
		if e.Disabled() {
			return true
		}
	}
	return false
}

// marksWhenIneligible reports whether recording's refusal leaves a synthesis unrecorded that
// may have disabled entries: not Ready, awaiting its decision, or deleting. A Recovered
// synthesis is the hand-off's: its predecessor's snapshot is what it recovered from.
func marksWhenIneligible(err error) bool {
	var ie *domain.IneligibleError
	if !errors.As(err, &ie) {
		return false
	}
	switch ie.Reason {
	case domain.IneligibleNotReady, domain.IneligibleAwaitsDecision, domain.IneligibleDeleting:
		return true
	}
	return false
}
