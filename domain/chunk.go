package domain

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Chunk is one slice of a canonical inventory, stored as one Secret.
type Chunk struct {
	index int
	count int
	data  []byte
}

func (c Chunk) Index() int   { return c.index }
func (c Chunk) Data() []byte { return c.data }

// EntryTooLargeError reports an entry that alone exceeds the chunk limit.
type EntryTooLargeError struct {
	ID    ResourceID
	Bytes int
	Limit int
}

func (e *EntryTooLargeError) Error() string {
	return fmt.Sprintf("inventory entry %s needs %d bytes, over the chunk limit of %d; nothing was written", e.ID, e.Bytes, e.Limit)
}

// TooManyChunksError reports an inventory that needs more chunks than the cap allows.
type TooManyChunksError struct {
	Chunks int
	Limit  int
}

func (e *TooManyChunksError) Error() string {
	return fmt.Sprintf("inventory needs %d chunks, over the cap of %d; raise --max-chunks or shrink the composition; nothing was written", e.Chunks, e.Limit)
}

// SplitInventory splits the inventory greedily into byte-identical chunks of at most maxBytes
// (lowered to SecretDataLimit); maxChunks <= 0 means DefaultMaxChunks.
func SplitInventory(inv Inventory, maxBytes, maxChunks int) ([]Chunk, error) {
	if maxBytes < 2 {
		return nil, fmt.Errorf("chunk limit %d is too small", maxBytes)
	}
	// A bigger chunk would be refused by the API server and rejected by reading.
	maxBytes = min(maxBytes, SecretDataLimit)
	// The reader applies the same cap; "no cap" would let us write what it refuses.
	maxChunks = effectiveMaxChunks(maxChunks)
	// Chunk k holds entries bounds[k] to bounds[k+1]-1. Entries a to b-1 take
	// starts[b]-starts[a]-1 bytes with their commas, plus 2 for the brackets.
	n, starts := len(inv.entries), inv.starts
	bounds := []int{0}
	for i := range n {
		if size := inv.entryChunkBytes(i); size > maxBytes {
			return nil, &EntryTooLargeError{ID: inv.entries[i].ID(), Bytes: size, Limit: maxBytes}
		}
		if first := bounds[len(bounds)-1]; i > first && 1+starts[i+1]-starts[first] > maxBytes {
			bounds = append(bounds, i)
		}
	}
	bounds = append(bounds, n)
	count := len(bounds) - 1
	if count > maxChunks {
		return nil, &TooManyChunksError{Chunks: count, Limit: maxChunks}
	}
	chunks := make([]Chunk, count)
	for k := range chunks {
		data := []byte("[]")
		if a, b := bounds[k], bounds[k+1]; b > a {
			// Its own copy: a chunk's data ends up in a Secret that callers may change.
			data = slices.Concat([]byte("["), inv.canonical[starts[a]:starts[b]-1], []byte("]"))
		}
		chunks[k] = Chunk{index: k, count: count, data: data}
	}
	return chunks, nil
}

// entryChunkBytes is the size of a chunk holding entry i alone: the entry and its brackets.
func (inv Inventory) entryChunkBytes(i int) int { return 1 + inv.starts[i+1] - inv.starts[i] }

// LargestEntryBytes is the size of a chunk holding the largest entry alone, 0 when empty: an
// entry over the chunk limit cannot be recorded (EntryTooLargeError), however many chunks.
func (inv Inventory) LargestEntryBytes() int {
	largest := 0
	for i := range inv.entries {
		largest = max(largest, inv.entryChunkBytes(i))
	}
	return largest
}

func effectiveMaxChunks(n int) int { return cmp.Or(max(n, 0), DefaultMaxChunks) }

// ChunkName is "<comp-name>-<lineage>-<index>", cut to 253 characters (design §3).
func ChunkName(compName string, lineage Lineage, index int) string {
	suffix := "-" + lineage.String() + "-" + strconv.Itoa(index)
	if len(compName)+len(suffix) > maxObjectName {
		compName = strings.TrimRight(compName[:maxObjectName-len(suffix)], "-.")
	}
	return compName + suffix
}

const (
	recoveryInfix = "-recovery-"
	// maxPartDigits bounds the part number a name has room for.
	maxPartDigits = 4
)

// RecoverySliceFamily is the prefix every recovery slice of the synthesis is named under,
// "<comp-name>-recovery-<first 8 of synthesis UUID>", then "-<hand-off digest>-<part>". The
// comp-name part is cut so that every name of the family has it and at most 253 characters (§6.2).
func RecoverySliceFamily(compName, synthesisUUID string) string {
	id := synthesisUUID[:min(8, len(synthesisUUID))]
	room := maxObjectName - len(recoveryInfix) - len(id) - 1 - digestLen - 1 - maxPartDigits
	if len(compName) > room {
		compName = strings.TrimRight(compName[:room], "-.")
	}
	return compName + recoveryInfix + id
}

// RecoverySliceName names part of hand-off digest: immutable content under a name of its own.
func RecoverySliceName(compName, synthesisUUID, digest string, part int) string {
	return RecoverySliceFamily(compName, synthesisUUID) + "-" + digest + "-" + strconv.Itoa(part)
}

// inRecoveryFamily reports whether name is of the synthesis's recovery slice family: the
// family itself, or the family and a dash. Any such name is a recovery slice's, valid or not.
func inRecoveryFamily(compName, synthesisUUID, name string) bool {
	family := RecoverySliceFamily(compName, synthesisUUID)
	return name == family || strings.HasPrefix(name, family+"-")
}

// ChunkSecret is the storage view of one inventory Secret, free of Kubernetes types.
type ChunkSecret struct {
	Namespace       string
	Name            string
	Type            string
	Labels          map[string]string
	Annotations     map[string]string
	Data            map[string][]byte
	ResourceVersion string
	// UID is the API server's; only reads fill it. Prune deletes with it as a precondition.
	UID string
	// DataWrittenAt: when we last wrote the data (DataWrittenByUs), zero when unknown; reads only.
	DataWrittenAt time.Time
}

// Owned reports whether the Secret is ours: the managed-by label and our type.
func (s ChunkSecret) Owned() bool {
	return s.Labels[LabelManagedBy] == ManagedByValue && s.Type == SecretType
}

// RecordedForAnother returns the Composition a Secret at one of c's chunk names was recorded for
// when its annotations name another (one name in two namespaces sharing a lineage, or names that
// collide after the 253-character cut); naming none is no other. Owned is asked apart (§4).
func (s ChunkSecret) RecordedForAnother(c CompositionRef) (CompositionRef, bool) {
	ref := CompositionRef{Namespace: s.Annotations[AnnotationCompositionNamespace], Name: s.Annotations[AnnotationCompositionName]}
	if ref.Namespace == "" || ref.Name == "" || ref == c {
		return CompositionRef{}, false
	}
	return ref, true
}

// DataSize is the sum of all data values, the quantity the API server limits.
func (s ChunkSecret) DataSize() int {
	n := 0
	for _, v := range s.Data {
		n += len(v)
	}
	return n
}

// Clone returns a deep copy.
func (s ChunkSecret) Clone() ChunkSecret {
	out := s
	out.Labels = maps.Clone(s.Labels)
	out.Annotations = maps.Clone(s.Annotations)
	out.Data = make(map[string][]byte, len(s.Data))
	for k, v := range s.Data {
		out.Data[k] = bytes.Clone(v)
	}
	return out
}

// SnapshotMeta is what every chunk of one snapshot carries.
type SnapshotMeta struct {
	Lineage              Lineage
	CompositionNamespace string
	CompositionName      string
	CompositionUID       string
	SynthesisUUID        string
	SynthesisTime        time.Time
	ChunkCount           int
	Digest               string
	// ControlPlane wrote the snapshot; "" for a Secret written before control planes were named.
	ControlPlane string
}

// RecordedFor names the Composition the snapshot was recorded for.
func (m SnapshotMeta) RecordedFor() CompositionRef {
	return CompositionRef{Namespace: m.CompositionNamespace, Name: m.CompositionName}
}

// DesiredChunkSecret is the Secret that stores chunk c of a snapshot.
func DesiredChunkSecret(namespace string, meta SnapshotMeta, c Chunk) ChunkSecret {
	return ChunkSecret{
		Namespace: namespace,
		Name:      ChunkName(meta.CompositionName, meta.Lineage, c.index),
		Type:      SecretType,
		Labels: map[string]string{
			LabelManagedBy: ManagedByValue,
			LabelLineage:   meta.Lineage.String(),
		},
		Annotations: map[string]string{
			AnnotationCompositionNamespace: meta.CompositionNamespace,
			AnnotationCompositionName:      meta.CompositionName,
			AnnotationCompositionUID:       meta.CompositionUID,
			AnnotationSourceSynthesisUUID:  meta.SynthesisUUID,
			AnnotationSourceSynthesisTime:  meta.SynthesisTime.UTC().Format(time.RFC3339),
			AnnotationChunkIndex:           strconv.Itoa(c.index),
			AnnotationChunkCount:           strconv.Itoa(c.count),
			AnnotationDigest:               meta.Digest,
			AnnotationFormat:               FormatVersion,
			AnnotationControlPlane:         meta.ControlPlane,
		},
		Data: map[string][]byte{SecretDataKey: c.data},
	}
}

// MatchesDesired reports whether s already holds desired's type, data, labels and annotations,
// but for a writer s does not name: rewriting it would move the history's write time (§3, §6.3).
func (s ChunkSecret) MatchesDesired(desired ChunkSecret) bool {
	if s.Type != desired.Type || !maps.EqualFunc(s.Data, desired.Data, bytes.Equal) {
		return false
	}
	for k, v := range desired.Labels {
		if got, ok := s.Labels[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range desired.Annotations {
		if got, ok := s.Annotations[k]; (!ok || got != v) && (k != AnnotationControlPlane || s.WrittenBy() != "") {
			return false
		}
	}
	return true
}

// MergeDesired returns s updated to desired, keeping others' labels, annotations and version.
func (s ChunkSecret) MergeDesired(desired ChunkSecret) ChunkSecret {
	out := s
	out.Type, out.Data = desired.Type, desired.Clone().Data
	out.Labels, out.Annotations = merged(s.Labels, desired.Labels), merged(s.Annotations, desired.Annotations)
	return out
}

// merged is a new map of m's entries and add's, add's winning.
func merged(m, add map[string]string) map[string]string {
	out := make(map[string]string, len(m)+len(add))
	maps.Copy(out, m)
	maps.Copy(out, add)
	return out
}
