package app

import (
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// InspectReport is what Inspector.Inspect found: the document `inspect -o json` prints, and
// what its table shows. Fields are added over time, never renamed or removed. Lists are []
// when empty, never null.
type InspectReport struct {
	// Lineage is the lineage inspected: the one asked for, or the Composition's.
	Lineage            string `json:"lineage"`
	InventoryNamespace string `json:"inventoryNamespace"`
	// InspectedAt is the reader's clock used for reading's future-timestamp check.
	InspectedAt time.Time     `json:"inspectedAt"`
	Limits      InspectLimits `json:"limits"`
	// Composition is set when a Composition was inspected.
	Composition *CompositionReport `json:"composition,omitempty"`
	// Snapshots groups the Secrets that pass the per-Secret check by source synthesis UUID, newest first.
	Snapshots []SnapshotReport `json:"snapshots"`
	// RejectedSecrets fail the per-Secret check (each makes the verdict Malformed).
	RejectedSecrets []RejectedSecret `json:"rejectedSecrets"`
	// Verdict is reading's, for the Composition's candidates if one was inspected, else the lineage's.
	Verdict VerdictReport `json:"verdict"`
	// DryRun is set when the control plane was given.
	DryRun *DryRunReport `json:"dryRun,omitempty"`
}

type InspectLimits struct {
	MaxChunkBytes        int     `json:"maxChunkBytes"`
	MaxChunks            int     `json:"maxChunks"`
	MaxTombstoneFraction float64 `json:"maxTombstoneFraction"`
	// AllowCrossNamespaceLineage is the adoption the candidates were chosen with.
	AllowCrossNamespaceLineage bool `json:"allowCrossNamespaceLineage"`
}

type CompositionReport struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	UID           string `json:"uid"`
	SynthesisUUID string `json:"synthesisUUID,omitempty"`
	// LineageSource is "override" (the annotation) or "default" (hash of namespace/name).
	LineageSource string `json:"lineageSource"`
}

type SnapshotReport struct {
	SynthesisUUID        string    `json:"synthesisUUID"`
	SynthesisTimestamp   time.Time `json:"synthesisTimestamp"`
	CompositionNamespace string    `json:"compositionNamespace"`
	CompositionName      string    `json:"compositionName"`
	CompositionUID       string    `json:"compositionUID"`
	// ControlPlane wrote it; "" before control planes were named.
	ControlPlane string `json:"controlPlane,omitempty"`
	// ChunksExpected is the chunk count the chunks claim; ChunksPresent counts distinct valid indexes.
	ChunksExpected int `json:"chunksExpected"`
	ChunksPresent  int `json:"chunksPresent"`
	// Complete: every index 0..count-1 once, and all chunks agree on their metadata.
	Complete      bool `json:"complete"`
	MixedMetadata bool `json:"mixedMetadata"`
	// TotalBytes and LargestChunkBytes are data sizes, compared against limits.maxChunkBytes.
	TotalBytes        int          `json:"totalBytes"`
	LargestChunkBytes int          `json:"largestChunkBytes"`
	Digest            DigestReport `json:"digest"`
	// Entries is the number of inventory entries, when the chunks decoded.
	Entries int `json:"entries"`
	// Role is what choosing the candidates made of it: "selected", "newest" (but the verdict is no
	// selection), "newest-tied", "older", "same-incarnation" (the Composition's own UID),
	// "not-candidate" (another's, while it has its own) or "other-namespace" (adoption is off).
	Role     string        `json:"role"`
	Problems []string      `json:"problems"`
	Chunks   []ChunkReport `json:"chunks"`
	// Unresolved are the objects earlier recoveries kept for a person to resolve (format 3).
	Unresolved []domain.Unresolved `json:"unresolved,omitempty"`
}

type DigestReport struct {
	Claimed string `json:"claimed"`
	// Check is "ok", "mismatch", "undecodable" or "unchecked" (the snapshot is incomplete).
	Check    string `json:"check"`
	Computed string `json:"computed,omitempty"`
}

type ChunkReport struct {
	Secret string `json:"secret"`
	Index  int    `json:"index"`
	Bytes  int    `json:"bytes"`
}

type RejectedSecret struct {
	Secret string `json:"secret"`
	Bytes  int    `json:"bytes"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// VerdictSelected is the verdict's outcome when reading selects a snapshot.
const VerdictSelected = "Selected"

type VerdictReport struct {
	// Outcome is "Selected", "NoInventory", "InventoryInvalid" or "NothingToRecover"
	// (SameIncarnation or OtherNamespace, for a Composition).
	Outcome string `json:"outcome"`
	// Reason is the InventoryInvalid reason (Malformed, MixedMetadata, AmbiguousTimestamp,
	// MissingChunk or DigestMismatch), SameIncarnation or OtherNamespace.
	Reason string `json:"reason,omitempty"`
	Secret string `json:"secret,omitempty"`
	Detail string `json:"detail,omitempty"`
	// The selected snapshot, for Selected; the Composition's own, for SameIncarnation.
	SynthesisUUID      string     `json:"synthesisUUID,omitempty"`
	SynthesisTimestamp *time.Time `json:"synthesisTimestamp,omitempty"`
	CompositionUID     string     `json:"compositionUID,omitempty"`
	Entries            int        `json:"entries,omitempty"`
	Digest             string     `json:"digest,omitempty"`
	// RecordedEntries are the selected snapshot's entries, in inventory order, with inspect --entries.
	RecordedEntries []domain.Entry `json:"recordedEntries,omitempty"`
}

type DryRunReport struct {
	Composition    string `json:"composition,omitempty"`
	CompositionUID string `json:"compositionUID,omitempty"`
	SynthesisUUID  string `json:"synthesisUUID,omitempty"`
	// WouldRun: recovery evaluates this synthesis now; the controller's scope is not known.
	WouldRun     bool   `json:"wouldRun"`
	NotRunReason string `json:"notRunReason,omitempty"`
	NotRunDetail string `json:"notRunDetail,omitempty"`
	// RecordedDecision is the decision annotation already on the Composition.
	RecordedDecision *domain.Decision `json:"recordedDecision,omitempty"`
	// Decision is what recovery would write now, in the annotation's format.
	Decision *domain.Decision `json:"decision,omitempty"`
	// Unavailable says why no decision could be computed.
	Unavailable   string            `json:"unavailable,omitempty"`
	Tombstones    []TombstoneReport `json:"tombstones"`
	HeldForReview []TombstoneReport `json:"heldForReview"`
	// Candidates are the snapshots reading chooses from for this Composition.
	Candidates *CandidatesReport `json:"candidates,omitempty"`
	// Dropped are the tombstones recovery keeps back after reading their objects downstream.
	Dropped []DroppedReport `json:"dropped"`
}

type TombstoneReport struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Manifest is the Eno manifest the ResourceSlice would carry with deleted: true.
	Manifest string `json:"manifest"`
}

// CandidatesReport is the set of snapshots recovery may read from for a Composition.
type CandidatesReport struct {
	// Own: the candidates were recorded for the Composition's own namespace/name; otherwise they
	// are the lineage's of its namespace (a rename), or of every namespace when AcrossNamespaces.
	Own            bool     `json:"own"`
	SynthesisUUIDs []string `json:"synthesisUUIDs"`
	// AcrossNamespaces: adoption across namespaces is allowed (--allow-cross-namespace-lineage).
	AcrossNamespaces bool `json:"acrossNamespaces"`
	// OtherNamespaces hold snapshots that are no candidates only because adoption across
	// namespaces is off; with no candidate at all, the verdict is OtherNamespace.
	OtherNamespaces []string `json:"otherNamespaces"`
}

// DroppedReport is a tombstone the checks at the moment of deletion keep back, and why:
// NotFound, CreatedAfterHistory, Unreadable or UnknownWriteTime.
type DroppedReport struct {
	TombstoneReport
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}
