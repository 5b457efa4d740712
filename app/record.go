package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

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

// Record saves the inventory of the Composition's current synthesis, or returns an *domain.IneligibleError;
// it aborts with no further writes on the first conflict, foreign Secret, or changed Composition (design §4).
func (s *Service) Record(ctx context.Context, comp domain.Composition) (RecordResult, error) {
	return s.record(withComposition(ctx, comp.Ref()), comp, nil)
}

// record reuses prior, recovery's live reads of this reconcile, when not nil.
func (s *Service) record(ctx context.Context, comp domain.Composition, prior *liveReads) (RecordResult, error) {
	if err := s.policy.CheckRecording(comp); err != nil {
		return RecordResult{}, err
	}
	lineage, _ := domain.LineageOf(comp) // validated by CheckRecording
	res := RecordResult{Lineage: lineage}
	// The fast path: the cache holds this incarnation's snapshot of this synthesis, judged on
	// metadata only. A failed cache read is no answer, and the pass goes on live.
	cached, err := s.deps.Store.ListCachedChunks(ctx, lineage)
	if meta, ok := domain.RecordedByMetadata(cached, comp, s.cfg.Now(), s.cfg.MaxChunks); err == nil && ok {
		s.deps.Metrics.SnapshotRecorded(false)
		s.deps.Metrics.ChunksUsed(lineage, meta.ChunkCount, s.cfg.MaxChunks)
		s.refreshOrphans(ctx, comp)
		s.refreshUnresolved(ctx, comp, cached)
		res.Unchanged, res.Chunks, res.Digest = true, meta.ChunkCount, meta.Digest
		return res, nil
	}

	// The first synthesis after a hand-off is recorded only once Ready: check Eno did its part.
	carried := s.verifyCarried(ctx, comp)

	inv, chunks, err := s.splitInventory(ctx, comp, lineage, prior)
	if err != nil {
		return res, fmt.Errorf("recording: %w", err)
	}
	res.Chunks, res.Digest = len(chunks), inv.Digest()
	// The lineage's Secrets by name: listed live, or prior's list when recovery made it.
	var existing []domain.ChunkSecret
	if prior != nil {
		existing = prior.secrets
	} else if existing, err = s.deps.Store.ListChunks(ctx, lineage); err != nil {
		return res, fmt.Errorf("recording: listing inventory secrets: %w", err)
	}
	byName := make(map[string]domain.ChunkSecret, len(existing))
	for _, e := range existing {
		byName[e.Name] = e
	}
	unresolved := s.unresolved(ctx, comp, byName, inv, prior, carried)
	if len(unresolved) > 0 {
		// Chunk 0 carries them too, within the API server's limit on a Secret's data: every chunk
		// leaves room for them, so the layout is stable.
		data, _ := domain.EncodeUnresolved(unresolved)
		if chunks, err = domain.SplitInventory(inv, min(s.cfg.MaxChunkBytes, domain.SecretDataLimit-len(data)), s.cfg.MaxChunks); err != nil {
			s.refuse(comp, "InventoryTooLarge", err)
			return res, fmt.Errorf("recording: %w", err)
		}
		res.Chunks = len(chunks)
	}
	meta := domain.SnapshotMeta{Lineage: lineage, CompositionNamespace: comp.Namespace, CompositionName: comp.Name, CompositionUID: comp.UID,
		SynthesisUUID: comp.Synthesis.UUID, SynthesisTime: comp.Synthesis.Synthesized, ChunkCount: len(chunks), Digest: inv.Digest(), ControlPlane: s.cfg.ControlPlane}
	desired := make([]domain.ChunkSecret, len(chunks))
	for i, c := range chunks {
		desired[i] = domain.DesiredChunkSecret(s.cfg.InventoryNamespace, meta, c)
	}
	desired[0] = domain.WithUnresolved(desired[0], unresolved)
	occupants := occupantCheck{svc: s, comp: comp, gone: map[domain.CompositionRef]bool{}}
	for _, want := range desired {
		// A foreign Secret, or another living Composition's history, at any target name stops
		// the pass before the first write.
		if cur, ok := byName[want.Name]; ok {
			if err := occupants.check(ctx, cur); err != nil {
				return res, fmt.Errorf("recording: %w", err)
			}
		}
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("lineage", lineage.String(), "synthesisUUID", comp.SynthesisUUID())
	if res, err = s.writeChunks(ctx, log, comp, desired, byName, occupants, res); err != nil {
		return res, err
	}
	s.kept.set(comp.Ref(), len(unresolved))
	s.deps.Metrics.SnapshotRecorded(res.Created+res.Updated > 0)
	s.deps.Metrics.ChunksUsed(lineage, len(chunks), s.cfg.MaxChunks)
	if res.Created+res.Updated > 0 {
		log.Info("recorded inventory snapshot", "chunks", res.Chunks, "created", res.Created, "updated", res.Updated, "entries", inv.Len())
		s.deps.Events.Normal(comp, "InventoryRecorded",
			fmt.Sprintf("recorded %d resources in %d chunk(s) of lineage %s (%d written, %d unchanged)", inv.Len(), res.Chunks, lineage, res.Created+res.Updated, res.Reused))
	}
	return res, nil
}

// splitInventory builds the current synthesis's inventory (from prior's slices if not nil) and
// splits it; an unusable slice or one over the limits is refused, its size metrics reported.
func (s *Service) splitInventory(ctx context.Context, comp domain.Composition, lineage domain.Lineage, prior *liveReads) (domain.Inventory, []domain.Chunk, error) {
	var contents domain.SynthesisContents
	var err error
	if prior != nil {
		contents = prior.contents
	} else if contents, err = s.planner.readSynthesis(ctx, comp); err != nil {
		s.refuse(comp, "Slice"+problemOf(err), err)
		return domain.Inventory{}, nil, err
	}
	inv := contents.Inventory()
	s.deps.Metrics.LargestEntry(lineage, inv.LargestEntryBytes(), s.cfg.MaxChunkBytes)
	chunks, err := domain.SplitInventory(inv, s.cfg.MaxChunkBytes, s.cfg.MaxChunks)
	if err != nil {
		var tooMany *domain.TooManyChunksError
		if errors.As(err, &tooMany) {
			s.deps.Metrics.ChunksUsed(lineage, tooMany.Chunks, s.cfg.MaxChunks)
		}
		s.refuse(comp, "InventoryTooLarge", err)
		return domain.Inventory{}, nil, err
	}
	return inv, chunks, nil
}

// unresolved is what the new snapshot carries for a person (design §3): the replaced history's
// (or, refused, what it names that inv does not), what this reconcile's recovery and the carried
// hand-off kept or Eno left, less each object a read finds gone or replaced; a failed read keeps it.
func (s *Service) unresolved(ctx context.Context, comp domain.Composition, byName map[string]domain.ChunkSecret, inv domain.Inventory, prior *liveReads, carried []domain.Unresolved) []domain.Unresolved {
	log := logr.FromContextOrDiscard(ctx)
	old, unreadable := domain.UnresolvedIn(slices.Collect(maps.Values(byName)), comp.Ref())
	if len(unreadable) > 0 {
		log.Info("the unresolved entries of a history cannot be read and are not carried", "secrets", unreadable)
	}
	var fresh []domain.Unresolved
	if prior != nil {
		fresh = prior.unresolved
	}
	refused, unreadable, omitted := domain.UnresolvedOfRefused(comp, slices.Collect(maps.Values(byName)), inv, s.cfg.Now().UTC().Truncate(time.Second))
	if len(unreadable) > 0 || omitted > 0 {
		log.Info("orphans of a refused history are not carried: its data cannot be read, or they are past the bound", "secrets", unreadable, "omitted", omitted)
	}
	carried = append(carried, refused...)
	merged := domain.MergeUnresolved(old, slices.Concat(fresh, carried))
	tombstones := make([]domain.Tombstone, len(merged))
	for i, u := range merged {
		tombstones[i] = domain.Tombstone{Entry: u.Entry()}
	}
	observed, err := s.planner.observe(ctx, tombstones)
	if err != nil {
		log.Info("could not read the objects kept for a person; every one stays listed", "error", err.Error())
		return merged
	}
	var out []domain.Unresolved
	for _, u := range merged {
		if domain.StillUnresolved(u, observed[u.Entry().ID()]) {
			out = append(out, u)
		}
	}
	return out
}

// writeChunks writes, in index order, each chunk that differs, each after a live recheck; the first failure aborts.
func (s *Service) writeChunks(ctx context.Context, log logr.Logger, comp domain.Composition, desired []domain.ChunkSecret, byName map[string]domain.ChunkSecret, occupants occupantCheck, res RecordResult) (RecordResult, error) {
	var err error
	for i, want := range desired {
		cur, exists := byName[want.Name]
		if exists && cur.MatchesDesired(want) {
			res.Reused++
			s.deps.Metrics.ChunkWrite("unchanged")
			continue
		}
		// Recording's eligibility, and the inputs the inventory and the Secret names came from.
		if _, err := s.recheck(ctx, comp, stillHolds(comp, s.policy.CheckRecording, domain.ChangedRecordingInput)); err != nil {
			return res, fmt.Errorf("recording: chunk %d: %w", i, err)
		}
		if exists {
			_, err = s.deps.Store.UpdateChunk(ctx, cur.MergeDesired(want))
		} else {
			_, err = s.deps.Store.CreateChunk(ctx, want)
		}
		if err != nil {
			// The name is taken by a Secret the lineage list did not show: read it, and refuse
			// it as any listed one would be. Ours (a race) aborts the pass like a conflict.
			if !exists && errors.Is(err, ports.ErrAlreadyExists) {
				if refusal := occupants.taken(ctx, want.Name); refusal != nil {
					return res, fmt.Errorf("recording: writing chunk %d (%s): %w", i, want.Name, refusal)
				}
			}
			s.deps.Metrics.ChunkWrite(writeResult(err))
			return res, fmt.Errorf("recording: writing chunk %d (%s): %w", i, want.Name, err)
		}
		if exists {
			res.Updated++
			s.deps.Metrics.ChunkWrite("updated")
		} else {
			res.Created++
			s.deps.Metrics.ChunkWrite("created")
		}
		log.V(1).Info("wrote inventory chunk", "chunk", i, "secret", want.Name, "bytes", want.DataSize())
	}
	return res, nil
}

// occupantCheck decides whether a Secret at one of comp's chunk names may be replaced: a
// foreign one never (ForeignSecret); ours recorded for another Composition only once it is
// NotFound, and in another namespace only with adoption across namespaces (LineageCollision).
type occupantCheck struct {
	svc  *Service
	comp domain.Composition
	// gone holds the other Compositions found NotFound in this pass.
	gone map[domain.CompositionRef]bool
}

// check returns a refusal (already counted and announced) or a lookup error (no decision).
func (o *occupantCheck) check(ctx context.Context, cur domain.ChunkSecret) error {
	s := o.svc
	if !cur.Owned() {
		s.deps.Metrics.ChunkWrite("refused")
		err := &ForeignSecretError{Namespace: cur.Namespace, Name: cur.Name}
		s.refuse(o.comp, "ForeignSecret", err)
		return err
	}
	other, ok := cur.RecordedForAnother(o.comp.Ref())
	if by := cur.WrittenBy(); by != "" && by != s.cfg.ControlPlane {
		// Another control plane's history: whether its Composition lives cannot be read here.
		return o.collide(cur, domain.CompositionRef{Namespace: cur.Annotations[domain.AnnotationCompositionNamespace], Name: cur.Annotations[domain.AnnotationCompositionName]}, false, by)
	}
	if !ok || o.gone[other] {
		return nil
	}
	if !s.cfg.adoption().Permits(o.comp.Ref(), other) {
		// Another namespace's history, whether its Composition exists or not.
		return o.collide(cur, other, true, "")
	}
	_, err := s.deps.Live.LiveComposition(ctx, other)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		logr.FromContextOrDiscard(ctx).V(1).Info("replacing the history of a composition that no longer exists",
			"secret", cur.Name, "recordedFor", other.String())
		o.gone[other] = true
		return nil
	case err != nil:
		return fmt.Errorf("reading composition %s, which secret %s/%s was recorded for: %w", other, cur.Namespace, cur.Name, err)
	}
	return o.collide(cur, other, false, "")
}

// collide refuses cur, recorded for other, as LineageCollision (counted and announced).
func (o *occupantCheck) collide(cur domain.ChunkSecret, other domain.CompositionRef, otherNamespace bool, otherControlPlane string) error {
	o.svc.deps.Metrics.ChunkWrite("refused")
	lc := &LineageCollisionError{Namespace: cur.Namespace, Name: cur.Name, Other: other, Lineage: cur.Labels[domain.LabelLineage],
		OtherNamespace: otherNamespace, OtherControlPlane: otherControlPlane}
	o.svc.refuse(o.comp, "LineageCollision", lc)
	return lc
}

// taken returns check's refusal of the Secret at a name CreateChunk found taken; nil when ours to replace, or
// unreadable: the pass then aborts as on any AlreadyExists and the next one lists the Secret.
func (o *occupantCheck) taken(ctx context.Context, name string) error {
	cur, err := o.svc.deps.Store.GetChunk(ctx, name)
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("could not read the secret at a taken chunk name", "secret", name, "error", err.Error())
		return nil
	}
	err = o.check(ctx, cur)
	var foreign *ForeignSecretError
	var collision *LineageCollisionError
	if errors.As(err, &foreign) || errors.As(err, &collision) {
		return err
	}
	return nil
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
	s.deps.Events.Warning(comp, reason, err.Error())
}
