package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// RecordResult says what one recording pass did.
type RecordResult struct {
	Lineage domain.Lineage
	// Unchanged: the fast path found the snapshot complete; nothing was read or written.
	Unchanged bool
	Chunks    int
	Created   int
	Updated   int
	Reused    int
	Digest    string
}

// Record saves the inventory of the Composition's current synthesis (SPEC §4). It returns an
// *domain.IneligibleError when the Composition is not eligible, and aborts with no further
// writes on the first conflict, foreign Secret, or changed Composition.
func (s *Service) Record(ctx context.Context, comp domain.Composition) (RecordResult, error) {
	return s.record(withComposition(ctx, comp.Ref()), comp, nil)
}

// record reuses prior, recovery's live reads of this reconcile, when it is not nil.
func (s *Service) record(ctx context.Context, comp domain.Composition, prior *liveReads) (RecordResult, error) {
	if err := s.policy.CheckRecording(comp); err != nil {
		return RecordResult{}, err
	}
	lineage, _ := domain.LineageOf(comp) // validated by CheckRecording
	log := logr.FromContextOrDiscard(ctx).WithValues("lineage", lineage.String(), "synthesisUUID", comp.SynthesisUUID())
	res := RecordResult{Lineage: lineage}

	// Fast path: the cache already holds this incarnation's snapshot of this synthesis.
	if cached, err := s.deps.Store.ListCachedChunks(ctx, lineage); err == nil {
		if snap, err := domain.ReadSnapshot(cached, s.cfg.Now(), s.cfg.MaxChunks); err == nil && domain.SnapshotMatches(snap, comp) {
			s.deps.Metrics.SnapshotRecorded(false)
			res.Unchanged, res.Chunks, res.Digest = true, snap.Meta().ChunkCount, snap.Meta().Digest
			return res, nil
		}
	}

	var contents domain.SynthesisContents
	if prior != nil {
		contents = prior.contents
	} else {
		c, err := s.readSynthesis(ctx, comp)
		if err != nil {
			s.refuse(comp, "Slice"+problemOf(err), err)
			return res, fmt.Errorf("recording %s: %w", comp.Ref(), err)
		}
		contents = c
	}
	inv := contents.Inventory()
	chunks, err := domain.SplitInventory(inv, s.cfg.MaxChunkBytes, s.cfg.MaxChunks)
	if err != nil {
		s.refuse(comp, "InventoryTooLarge", err)
		return res, fmt.Errorf("recording %s: %w", comp.Ref(), err)
	}
	meta := domain.SnapshotMeta{
		Lineage:              lineage,
		CompositionNamespace: comp.Namespace,
		CompositionName:      comp.Name,
		CompositionUID:       comp.UID,
		SynthesisUUID:        comp.Synthesis.UUID,
		SynthesisTime:        comp.Synthesis.Synthesized,
		ChunkCount:           len(chunks),
		Digest:               inv.Digest(),
	}
	res.Chunks, res.Digest = len(chunks), inv.Digest()

	var existing []domain.ChunkSecret
	if prior != nil {
		existing = prior.secrets
	} else if existing, err = s.deps.Store.ListChunks(ctx, lineage); err != nil {
		return res, fmt.Errorf("recording %s: listing inventory secrets: %w", comp.Ref(), err)
	}
	byName := make(map[string]domain.ChunkSecret, len(existing))
	for _, e := range existing {
		byName[e.Name] = e
	}
	desired := make([]domain.ChunkSecret, len(chunks))
	largest := 0
	for i, c := range chunks {
		desired[i] = domain.DesiredChunkSecret(s.cfg.InventoryNamespace, meta, c)
		largest = max(largest, c.Size())
		// A foreign Secret at any target name stops the pass before the first write.
		if cur, ok := byName[desired[i].Name]; ok && !cur.Owned() {
			s.deps.Metrics.ChunkWrite("refused")
			err := &ForeignSecretError{Namespace: cur.Namespace, Name: cur.Name}
			s.refuse(comp, "ForeignSecret", err)
			return res, fmt.Errorf("recording %s: %w", comp.Ref(), err)
		}
	}

	for i, want := range desired {
		cur, exists := byName[want.Name]
		if exists && cur.MatchesDesired(want) {
			res.Reused++
			s.deps.Metrics.ChunkWrite("unchanged")
			continue
		}
		if _, err := s.recheck(ctx, comp, s.policy.CheckRecording); err != nil {
			return res, fmt.Errorf("recording %s chunk %d: %w", comp.Ref(), i, err)
		}
		if exists {
			_, err = s.deps.Store.UpdateChunk(ctx, cur.MergeDesired(want))
		} else {
			_, err = s.deps.Store.CreateChunk(ctx, want)
		}
		if err != nil {
			s.deps.Metrics.ChunkWrite(writeResult(err))
			return res, fmt.Errorf("recording %s: writing chunk %d (%s): %w", comp.Ref(), i, want.Name, err)
		}
		if exists {
			res.Updated++
			s.deps.Metrics.ChunkWrite("updated")
		} else {
			res.Created++
			s.deps.Metrics.ChunkWrite("created")
		}
		log.V(1).Info("wrote inventory chunk", "chunk", i, "secret", want.Name, "bytes", chunks[i].Size())
	}
	s.deps.Metrics.SnapshotRecorded(res.Created+res.Updated > 0)
	s.deps.Metrics.ChunkHeadroom(lineage, largest, s.cfg.MaxChunkBytes)
	if res.Created+res.Updated > 0 {
		log.Info("recorded inventory snapshot", "chunks", res.Chunks, "created", res.Created, "updated", res.Updated, "entries", inv.Len())
		s.deps.Events.Event(comp, false, "InventoryRecorded",
			fmt.Sprintf("recorded %d resources in %d chunk(s) of lineage %s (%d written, %d unchanged)", inv.Len(), res.Chunks, lineage, res.Created+res.Updated, res.Reused))
	}
	return res, nil
}

func writeResult(err error) string {
	switch {
	case errors.Is(err, ports.ErrConflict):
		return "conflict"
	case errors.Is(err, ports.ErrAlreadyExists):
		return "alreadyExists"
	}
	return "error"
}

func problemOf(err error) string {
	var se *domain.SliceError
	if errors.As(err, &se) {
		return se.Problem.String()
	}
	return "Unreadable"
}

// refuse tells operators why nothing was written.
func (s *Service) refuse(comp domain.Composition, reason string, err error) {
	s.deps.Metrics.Refusal(reason)
	s.deps.Events.Event(comp, true, reason, err.Error())
}
