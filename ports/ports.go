package ports

import (
	"context"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// CompositionReader reads Compositions on the control plane, possibly from a cache.
//
//counterfeiter:generate . CompositionReader
type CompositionReader interface {
	GetComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error)
}

// CompositionLister lists the Compositions in the controller's scope, possibly from a cache.
//
//counterfeiter:generate . CompositionLister
type CompositionLister interface {
	ListCompositions(ctx context.Context) ([]domain.Composition, error)
}

// LiveReader reads a Composition live from the API server, never from a cache, before every write.
//
//counterfeiter:generate . LiveReader
type LiveReader interface {
	LiveComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error)
}

// SliceReader reads the ResourceSlices of a synthesis.
//
//counterfeiter:generate . SliceReader
type SliceReader interface {
	GetSlice(ctx context.Context, namespace, name string) (domain.ResourceSlice, error)
}

// FleetIndex answers from watches of every ResourceSlice and Composition, of every namespace and
// shard, with no request (design §6.3). It may lag the API server; a watch delivers one
// resource's events in order, so once it holds a slice it has seen every slice written before.
//
//counterfeiter:generate . FleetIndex
type FleetIndex interface {
	// ProducedElsewhere is domain.ProducedElsewhere over every slice the index holds: which of
	// ids a slice of another Composition applies or patches, or deploys into (taken over by another Composition; a cascading tombstone carried).
	ProducedElsewhere(ctx context.Context, ids []domain.ResourceID, excluded ...string) (map[domain.ResourceID]string, error)
	// LineageMembers lists, sorted, the Compositions other than ref that carry lineage (lineage in another shard).
	LineageMembers(ctx context.Context, ref domain.CompositionRef, lineage domain.Lineage) ([]domain.CompositionRef, error)
	// WaitForSlice waits, bounded, until the index holds slice namespace/name; else ErrIndexBehind.
	WaitForSlice(ctx context.Context, namespace, name string) error
	// Unsynthesized maps each Composition Eno has not synthesized yet to its creation time.
	Unsynthesized(ctx context.Context) (map[domain.CompositionRef]time.Time, error)
}

// SnapshotStore holds inventory chunk Secrets in the downstream cluster's inventory namespace; it never deletes.
//
//counterfeiter:generate . SnapshotStore
type SnapshotStore interface {
	// ListChunks lists every Secret carrying the lineage label, live from the API, with the time
	// this controller last wrote each one's data (ChunkSecret.DataWrittenAt, design §6.3).
	ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error)
	// ListCachedChunks lists our Secrets of the lineage from a metadata-only cache that may be
	// stale: no data. Only the recording fast path uses it.
	ListCachedChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error)
	// GetChunk reads the Secret of that name live, whoever wrote it; ErrNotFound when there is
	// none. Recording reads a name CreateChunk found taken, to tell a foreign Secret from a race.
	GetChunk(ctx context.Context, name string) (domain.ChunkSecret, error)
	// CreateChunk creates the Secret; ErrAlreadyExists when the name is taken.
	CreateChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error)
	// UpdateChunk replaces the Secret if its resourceVersion still matches; ErrConflict otherwise.
	UpdateChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error)
	// MarkChunk is UpdateChunk under a field manager of its own (domain.MarkFieldManager), for a
	// write of annotations only: the history's write time, our data writes' time, never moves
	// (domain.AnnotationDisabledLater, design §4, disabled later).
	MarkChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error)
}

// SnapshotLister is the read half of SnapshotStore, for a use case that must not write (inspect).
//
//counterfeiter:generate . SnapshotLister
type SnapshotLister interface {
	// ListChunks lists every Secret carrying the lineage label, live, as SnapshotStore does.
	ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error)
}

// TombstoneSink hands recovered tombstones to Eno in idempotent steps. The use case rechecks the
// Composition live before each call and passes that live object.
//
//counterfeiter:generate . TombstoneSink
type TombstoneSink interface {
	// CreateRecoverySlice creates recovery slice part of h (domain.Handoff.RecoverySlice) in
	// comp's namespace, controlled by comp and carrying Eno's finalizer, and returns its name.
	// It never updates a slice: one that exists under the name is reused when it holds exactly
	// that part for comp (domain.CheckReusable), and is ErrAlreadyExists otherwise.
	CreateRecoverySlice(ctx context.Context, comp domain.Composition, h domain.Handoff, part int) (string, error)
	// AppendRecoverySlice names the slice in comp's current synthesis with one write guarded by
	// domain.CommitPreconditionOf(comp), and returns the Composition as written; ErrSynthesisMoved
	// when it moved on. Each part is named as soon as it is created, so that Eno's cleanup of
	// unnamed slices never takes one, and a named prefix is a whole hand-off.
	AppendRecoverySlice(ctx context.Context, comp domain.Composition, slice string) (domain.Composition, error)
	// ArmTombstones sets domain.AnnotationArmed on comp to digest, guarded by comp's UID and
	// resourceVersion (ErrConflict otherwise), and returns the Composition as written (no write
	// when already armed so). Every tombstone of the hand-off checks for it on Eno's live read.
	ArmTombstones(ctx context.Context, comp domain.Composition, digest string) (domain.Composition, error)
	// DisarmTombstones sets domain.AnnotationArmed on comp to domain.ArmedOff (no write when it
	// is), guarded by its UID and resourceVersion (ErrConflict otherwise): every tombstone of its
	// hand-off stays disabled, wherever Eno holds it, and recovery never arms comp again.
	DisarmTombstones(ctx context.Context, comp domain.Composition) error
	// RequestResynthesis sets Eno's force-resynthesis annotation to comp's current
	// synthesis UUID, with comp.ResourceVersion as precondition (ErrConflict otherwise).
	RequestResynthesis(ctx context.Context, comp domain.Composition) error
}

// DownstreamReader reads downstream objects' metadata, by identity, just before their tombstones are published.
//
//counterfeiter:generate . DownstreamReader
type DownstreamReader interface {
	// ObserveObject reads e's object live. NotFound is ObjectAbsent; Forbidden or a kind the
	// server does not serve is ObjectUnreadable; any other failure is an error, retried.
	ObserveObject(ctx context.Context, e domain.Entry) (domain.Observation, error)
}

// DecisionWriter records a decision with comp.ResourceVersion as a precondition; ErrConflict when it changed since.
//
//counterfeiter:generate . DecisionWriter
type DecisionWriter interface {
	WriteDecision(ctx context.Context, comp domain.Composition, d domain.Decision) error
}

// EventRecorder tells operators what happened to a Composition.
//
//counterfeiter:generate . EventRecorder
type EventRecorder interface {
	// Normal records something that went as expected.
	Normal(comp domain.Composition, reason, message string)
	// Warning records something an operator should look at.
	Warning(comp domain.Composition, reason, message string)
}

// Metrics receives what the use cases measure.
//
//counterfeiter:generate . Metrics
type Metrics interface {
	// ChunkWrite counts one chunk outcome: created, updated, unchanged, conflict, alreadyExists, refused, error.
	ChunkWrite(result string)
	// SnapshotRecorded counts a recording pass that wrote (true) or found the snapshot unchanged (false).
	SnapshotRecorded(written bool)
	// DecisionMade counts a written decision by outcome and reason.
	DecisionMade(outcome domain.Outcome, reason string)
	// Refusal counts a refusal: an InventoryInvalid reason, a slice problem, a foreign Secret, an ineligibility.
	Refusal(reason string)
	// ChunksUsed reports a lineage's snapshot's chunks against --max-chunks, on every recording pass.
	ChunksUsed(lineage domain.Lineage, chunks, maxChunks int)
	// LargestEntry reports a lineage's largest entry, alone in a chunk, against --max-chunk-bytes.
	LargestEntry(lineage domain.Lineage, entryBytes, maxChunkBytes int)
	// ReconcileDone observes one reconcile.
	ReconcileDone(d time.Duration, err error)
	// Panicked counts a panic recovered before the host process: "reconcile", "event-handler" or "start".
	Panicked(where string)
	// TombstoneAlert counts orphans reported to an operator: CascadingKind, HandoffDisarmed, OrphansRemain.
	TombstoneAlert(reason string, n int)
	// CompositionObserved reports what one reconcile found a Composition waiting on; the zero
	// state (deleted, out of scope, ineligible) forgets it, and its lineage's series with the last.
	CompositionObserved(ref domain.CompositionRef, state CompositionState)
}

// CompositionState is what a Composition waits on after a reconcile.
type CompositionState struct {
	// HeldForReview: the current synthesis's recovery is held by the deletion guard.
	HeldForReview bool
	// HandoffPending: the synthesis is decided Recovered and Eno has not carried its tombstones.
	HandoffPending bool
	// RecordingFailing: the last recording pass ended with an error or a refusal.
	RecordingFailing bool
	// Lineage is the Composition's; its per-lineage series go when no Composition has it.
	Lineage domain.Lineage
	// OrphansRemaining is the last "did Eno do it?" count (design §6.2).
	OrphansRemaining int
	// Unresolved counts the entries its snapshot carries for a person (design §3), dismissed ones left out.
	Unresolved int
}
