package app

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// markDisabledLater runs when recording cannot record comp's current synthesis. When that
// synthesis disables an entry the snapshot a successor would read records enabled, it marks the
// snapshot, and a successor's recovery keeps the entry as Disabled (design §4, disabled later).
// The slices are read once per synthesis and process, the Secrets only when it disables any.
func (s *Service) markDisabledLater(ctx context.Context, comp domain.Composition) error {
	if comp.Synthesis == nil || comp.Synthesis.UUID == "" {
		return nil
	}
	if last, _ := s.marks.Load(comp.Ref()); last == markKey(comp) {
		return nil // once per synthesis and process
	}
	lineage, err := domain.LineageOf(comp)
	if err != nil {
		return nil
	}
	// A hand-off's synthesis is checked too (what it disables may never be recorded), without
	// its recovery slices: they hold only this controller's tombstones, and Eno's cleanup may
	// have taken one.
	own := comp
	syn := *comp.Synthesis
	recovery := comp.NamedRecoverySlices()
	syn.Slices = slices.DeleteFunc(slices.Clone(syn.Slices), func(n string) bool { return slices.Contains(recovery, n) })
	own.Synthesis = &syn
	contents, err := s.planner.readSynthesis(ctx, own)
	var se *domain.SliceError
	if errors.As(err, &se) && (se.Problem == domain.SliceMissing || se.Problem == domain.SliceTerminating) {
		// Eno synthesizes again without it, and that synthesis is checked.
		logr.FromContextOrDiscard(ctx).V(1).Info("not checking what the synthesis disables: a slice is gone", "slice", se.Slice)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the current synthesis for the entries it disables: %w", err)
	}
	if !contents.DisablesAny() {
		s.marks.Store(comp.Ref(), markKey(comp))
		return nil
	}
	secrets, err := s.deps.Store.ListChunks(ctx, lineage)
	if err != nil {
		return fmt.Errorf("listing inventory secrets of lineage %s to mark what synthesis %s disabled: %w", lineage, comp.Synthesis.UUID, err)
	}
	// The snapshot a successor would read: this Composition's own, chosen as for another UID.
	successor := comp
	successor.UID = ""
	mine, err := domain.OwnHistory(secrets, s.cfg.ControlPlane)
	if err != nil { // refused while another control plane's Secret is there: checked again, not done
		logr.FromContextOrDiscard(ctx).V(1).Info("not marking what the synthesis disables yet", "reason", err.Error())
		return nil
	}
	snap, err := domain.ReadSnapshotFor(successor, mine, s.cfg.Now(), s.cfg.MaxChunks, s.cfg.adoption())
	if err != nil {
		s.marks.Store(comp.Ref(), markKey(comp)) // no history a successor would read
		return nil
	}
	ids := domain.NewlyDisabled(snap, contents)
	if len(ids) > 0 {
		ts := make([]domain.Tombstone, len(ids))
		for i, id := range ids {
			ts[i] = domain.Tombstone{Entry: domain.Entry{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}}
		}
		chunk := snap.Chunks()[0]
		if _, err := s.deps.Store.MarkChunk(ctx, domain.MarkDisabledLater(chunk, snap, ids)); err != nil {
			return fmt.Errorf("marking snapshot %s with the entries synthesis %s disabled: %w", snap.SynthesisUUID(), comp.Synthesis.UUID, err)
		}
		logr.FromContextOrDiscard(ctx).Info("marked the entries a synthesis not yet recorded disabled", "snapshot", snap.SynthesisUUID(),
			"synthesisUUID", comp.Synthesis.UUID, "entries", len(ids))
		s.deps.Events.Normal(comp, "InventoryMarked", fmt.Sprintf("synthesis %s disables %d resource(s) recorded in snapshot %s (%s); recovery keeps them",
			comp.Synthesis.UUID, len(ids), snap.SynthesisUUID(), domain.FirstIDs(ts, 5)))
	}
	s.marks.Store(comp.Ref(), markKey(comp))
	return nil
}

// markKey is what one check depends on: the synthesis, and the Composition's own pause, which
// disables every entry and can change without a new synthesis.
func markKey(comp domain.Composition) string {
	return comp.Synthesis.UUID + "/" + comp.Annotations[domain.AnnotationDisableReconciliation]
}

// marksWhenIneligible reports whether recording's refusal leaves a synthesis unrecorded that
// may have disabled entries: not Ready, awaiting its decision, deleting, or the hand-off's
// synthesis, which is never recorded.
func marksWhenIneligible(ie *domain.IneligibleError) bool {
	switch ie.Reason {
	case domain.IneligibleNotReady, domain.IneligibleAwaitsDecision, domain.IneligibleDeleting, domain.IneligibleRecovered:
		return true
	}
	return false
}
