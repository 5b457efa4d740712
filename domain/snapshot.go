package domain

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// InvalidReason says why reading rejected a lineage's history (design §5).
type InvalidReason struct{ name string }

var (
	ReasonMalformed          = InvalidReason{"Malformed"}
	ReasonMixedMetadata      = InvalidReason{"MixedMetadata"}
	ReasonAmbiguousTimestamp = InvalidReason{"AmbiguousTimestamp"}
	ReasonMissingChunk       = InvalidReason{"MissingChunk"}
	ReasonDigestMismatch     = InvalidReason{"DigestMismatch"}
	// ReasonSharedLineage is not found by reading Secrets: the selected snapshot belongs to a
	// living sibling Composition (design §6).
	ReasonSharedLineage = InvalidReason{"SharedLineage"}
)

func (r InvalidReason) String() string { return r.name }

// ErrNoInventory means no Secret carries the lineage label.
var ErrNoInventory = errors.New("no inventory snapshot exists for this lineage")

// InventoryInvalidError refuses a lineage's history that cannot be trusted.
type InventoryInvalidError struct {
	Reason InvalidReason
	Secret string // the Secret that showed the problem, when one did
	Detail string
}

func (e *InventoryInvalidError) Error() string {
	if e.Secret != "" {
		return fmt.Sprintf("inventory invalid (%s): secret %s: %s", e.Reason, e.Secret, e.Detail)
	}
	return fmt.Sprintf("inventory invalid (%s): %s", e.Reason, e.Detail)
}

// InvalidReasonOf returns the reason when err is an InventoryInvalidError.
func InvalidReasonOf(err error) (InvalidReason, bool) {
	var inv *InventoryInvalidError
	if errors.As(err, &inv) {
		return inv.Reason, true
	}
	return InvalidReason{}, false
}

// Snapshot is a complete, consistent inventory read back from its chunks.
type Snapshot struct {
	meta      SnapshotMeta
	chunks    []ChunkSecret // ordered by index
	inventory Inventory
	// readFor is the UID of the reader it was chosen for (ReadSnapshotFor), nil lineage-wide.
	readFor *string
	// owners are the Compositions a well-formed Secret of the lineage was recorded for, sorted:
	// the selected snapshot's and every other's, candidate or not, whatever its namespace.
	owners []CompositionRef
}

func (s Snapshot) Meta() SnapshotMeta     { return s.meta }
func (s Snapshot) Inventory() Inventory   { return s.inventory }
func (s Snapshot) Chunks() []ChunkSecret  { return slices.Clone(s.chunks) }
func (s Snapshot) SynthesisUUID() string  { return s.meta.SynthesisUUID }
func (s Snapshot) CompositionUID() string { return s.meta.CompositionUID }

// Unresolved lists what earlier recoveries kept for a person to resolve (format 3, chunk 0).
func (s Snapshot) Unresolved() []Unresolved {
	if len(s.chunks) == 0 {
		return nil
	}
	us, _ := decodeUnresolved(s.chunks[0], 0) // checked by ParseStoredChunk
	return us
}

// WriteTime is its chunks' newest data write, by the downstream API server's clock; unknown if any is (§6.3).
func (s Snapshot) WriteTime() (time.Time, bool) {
	var newest time.Time
	for _, c := range s.chunks {
		if c.DataWrittenAt.IsZero() {
			return time.Time{}, false
		}
		if c.DataWrittenAt.After(newest) {
			newest = c.DataWrittenAt
		}
	}
	return newest, len(s.chunks) > 0
}

// StoredChunk is one Secret whose snapshot annotations parsed.
type StoredChunk struct {
	Secret ChunkSecret
	Meta   SnapshotMeta
	Index  int
}

var digestPattern = lazyRegexp(`^sha256:[0-9a-f]{64}$`)

// ParseStoredChunk reads one well-formed Secret's snapshot; maxChunks <= 0 is DefaultMaxChunks.
func ParseStoredChunk(s ChunkSecret, now time.Time, maxChunks int) (StoredChunk, error) {
	sc, err := parseChunkMetadata(s, now, maxChunks)
	if err != nil {
		return sc, err
	}
	bad := func(format string, args ...any) (StoredChunk, error) { return malformed(s, format, args...) }
	if size := s.DataSize(); size > SecretDataLimit {
		return bad("data holds %d bytes, over the %d-byte limit", size, SecretDataLimit)
	}
	if _, ok := s.Data[SecretDataKey]; !ok {
		return bad("data key %s is missing", SecretDataKey)
	}
	if _, err := decodeUnresolved(s, sc.Index); err != nil {
		return bad("%v", err)
	}
	return sc, nil
}

func malformed(s ChunkSecret, format string, args ...any) (StoredChunk, error) {
	return StoredChunk{}, &InventoryInvalidError{Reason: ReasonMalformed, Secret: s.Name, Detail: fmt.Sprintf(format, args...)}
}

// parseChunkMetadata applies the checks that read the Secret's type, labels and annotations only.
func parseChunkMetadata(s ChunkSecret, now time.Time, maxChunks int) (StoredChunk, error) {
	bad := func(format string, args ...any) (StoredChunk, error) { return malformed(s, format, args...) }
	if !s.Owned() {
		return bad("not managed by %s or not of type %s; refusing to trust or touch it", ManagedByValue, SecretType)
	}
	a := s.Annotations
	for _, k := range []string{AnnotationCompositionNamespace, AnnotationCompositionName, AnnotationCompositionUID,
		AnnotationSourceSynthesisUUID, AnnotationSourceSynthesisTime, AnnotationChunkIndex, AnnotationChunkCount,
		AnnotationDigest, AnnotationFormat} {
		if a[k] == "" {
			return bad("annotation %s is missing", k)
		}
	}
	switch f := a[AnnotationFormat]; {
	case f == "1":
		return bad("inventory format 1 does not record which resources had reconciliation disabled, so it is not trusted; the next recording replaces it with format %s", FormatVersion)
	case f != FormatVersion && f != FormatUnresolved:
		return bad("inventory format %q is neither %q nor %q", truncate(f, 32), FormatVersion, FormatUnresolved)
	}
	lineage, err := NewLineage(s.Labels[LabelLineage])
	if err != nil {
		return bad("lineage label: %v", err)
	}
	ts, err := time.Parse(time.RFC3339, a[AnnotationSourceSynthesisTime])
	if err != nil {
		return bad("source timestamp %q is not RFC 3339", truncate(a[AnnotationSourceSynthesisTime], 64))
	}
	if ts.Sub(now) > MaxClockSkew*time.Second {
		return bad("source timestamp %s is more than 5 minutes in the future", ts.UTC().Format(time.RFC3339))
	}
	count, err := canonicalInt(a[AnnotationChunkCount])
	if err != nil || count < 1 {
		return bad("chunk count %q is not a positive integer", truncate(a[AnnotationChunkCount], 32))
	}
	if maxChunks = effectiveMaxChunks(maxChunks); count > maxChunks {
		return bad("chunk count %d is above the cap of %d", count, maxChunks)
	}
	index, err := canonicalInt(a[AnnotationChunkIndex])
	if err != nil || index < 0 {
		return bad("chunk index %q is not a non-negative integer", truncate(a[AnnotationChunkIndex], 32))
	}
	if !digestPattern().MatchString(a[AnnotationDigest]) {
		return bad("digest %q is not sha256:<64 hex>", truncate(a[AnnotationDigest], 80))
	}
	return StoredChunk{
		Secret: s,
		Index:  index,
		Meta: SnapshotMeta{
			Lineage:              lineage,
			CompositionNamespace: a[AnnotationCompositionNamespace],
			CompositionName:      a[AnnotationCompositionName],
			CompositionUID:       a[AnnotationCompositionUID],
			SynthesisUUID:        a[AnnotationSourceSynthesisUUID],
			SynthesisTime:        ts.UTC(),
			ChunkCount:           count,
			Digest:               a[AnnotationDigest],
			ControlPlane:         a[AnnotationControlPlane],
		},
	}, nil
}

// ErrSameIncarnation: a candidate carries the reader's own UID, so Eno's synthesis diff owns
// cleanup. ReadSnapshotFor returns it with that candidate's metadata only, its chunks unjudged.
var ErrSameIncarnation = errors.New("a snapshot of this composition incarnation exists")

// ReadSnapshotFor reads the lineage's history for c (design §5): every Secret is judged (steps
// 1–2); of the candidates (candidatesFor) none is an *OtherNamespaceError, one with c's UID
// ErrSameIncarnation; the newest is selected, a tie is AmbiguousTimestamp, and only it is judged
// by steps 4–5. The first decisive finding is the verdict. maxChunks <= 0 means DefaultMaxChunks.
func ReadSnapshotFor(c Composition, secrets []ChunkSecret, now time.Time, maxChunks int, adoption Adoption) (Snapshot, error) {
	r := reader{now: now, maxChunks: maxChunks, self: &c, adoption: adoption}
	r.read(secrets)
	return r.verdict.derive(r.findings)
}

// SnapshotMatches reports whether snap is c's incarnation's and synthesis's: the fast path.
func SnapshotMatches(snap Snapshot, c Composition) bool {
	return c.Synthesis != nil && snap.meta.CompositionUID == c.UID && snap.meta.SynthesisUUID == c.Synthesis.UUID &&
		snap.meta.CompositionNamespace == c.Namespace && snap.meta.CompositionName == c.Name
}

// canonicalInt parses a decimal integer only in the form this package writes (strconv.Itoa):
// "+2" or "02" is not a chunk number we wrote, so it is Malformed, not silently accepted.
func canonicalInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err == nil && strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a canonical decimal integer", s)
	}
	return n, err
}

// RecordedByMetadata reports whether secrets hold a complete, consistent snapshot of c's current
// synthesis, for the recording fast path: every Secret ours and well formed, the chunks of this
// incarnation and synthesis agreeing on their metadata and holding 0..count-1 each once. No
// data is read, so a cache may hold metadata only (design §4, §5 step 1).
func RecordedByMetadata(secrets []ChunkSecret, c Composition, now time.Time, maxChunks int) (SnapshotMeta, bool) {
	if c.Synthesis == nil || len(secrets) == 0 {
		return SnapshotMeta{}, false
	}
	var meta SnapshotMeta
	seen := map[int]bool{}
	for _, s := range secrets {
		sc, err := parseChunkMetadata(s, now, maxChunks)
		if err != nil {
			return SnapshotMeta{}, false
		}
		m := sc.Meta
		if m.CompositionUID != c.UID || m.SynthesisUUID != c.Synthesis.UUID {
			continue // another snapshot of the lineage
		}
		if len(seen) == 0 {
			meta = m
		} else if m != meta {
			return SnapshotMeta{}, false
		}
		if seen[sc.Index] || sc.Index >= m.ChunkCount {
			return SnapshotMeta{}, false
		}
		seen[sc.Index] = true
	}
	if len(seen) == 0 || len(seen) != meta.ChunkCount || meta.RecordedFor() != c.Ref() {
		return SnapshotMeta{}, false
	}
	return meta, true
}
