package contract

import (
	"testing"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Harness binds the suite to one adapter. The ports are the code under test; the other
// methods are back doors that act as another client of the same storage would, and fail t
// when they cannot.
type Harness interface {
	// InventoryNamespace is the existing downstream namespace Store is bound to.
	InventoryNamespace() string
	// Store is the SnapshotStore under test.
	Store() ports.SnapshotStore
	// PutForeignSecret writes s as another client would, bypassing Store: it is created if
	// absent, else replaced whatever its resourceVersion. It returns the Secret as stored.
	PutForeignSecret(t testing.TB, s domain.ChunkSecret) domain.ChunkSecret

	// Namespace is an existing control-plane namespace for Compositions and ResourceSlices.
	Namespace() string
	CompositionReader() ports.CompositionReader
	LiveReader() ports.LiveReader
	CompositionLister() ports.CompositionLister
	DecisionWriter() ports.DecisionWriter
	// CreateComposition creates c (metadata, and status.currentSynthesis when c.Synthesis
	// is set) and returns it as stored, with its UID and latest resourceVersion.
	CreateComposition(t testing.TB, c domain.Composition) domain.Composition

	SliceReader() ports.SliceReader
	// FleetIndex is the index under test; it may lag the API server.
	FleetIndex() ports.FleetIndex
	TombstoneSink() ports.TombstoneSink
	// CreateSlice creates s as Eno's synthesizer would, without an owner.
	CreateSlice(t testing.TB, s domain.ResourceSlice)
	// CreateOwnedSlice creates s with its annotations, controlled by owner, as another writer
	// under the Composition's name could.
	CreateOwnedSlice(t testing.TB, s domain.ResourceSlice, owner domain.Composition)
	// ReadSlice reads a slice live, bypassing the ports; it fails t when the slice is absent.
	ReadSlice(t testing.TB, namespace, name string) domain.ResourceSlice
	// ListSlices lists a namespace's slices live.
	ListSlices(t testing.TB, namespace string) []domain.ResourceSlice
	// SliceOwnerUID is the UID of the Composition controlling the slice, "" when none does.
	SliceOwnerUID(t testing.TB, namespace, name string) string
	// RemoveSlice makes the slice gone at once, as Eno's cleanup does once it released its
	// finalizer; it fails t when the slice is absent.
	RemoveSlice(t testing.TB, namespace, name string)
	// SetSynthesis replaces the Composition's status as Eno would (a new synthesis, or one in
	// flight) and returns the Composition as stored.
	SetSynthesis(t testing.TB, ref domain.CompositionRef, s *domain.Synthesis, inFlight string) domain.Composition
	// SetAnnotation sets one annotation of the Composition as another client would (an
	// operator's review, another replica's decision) and returns it as stored.
	SetAnnotation(t testing.TB, ref domain.CompositionRef, key, value string) domain.Composition
	// MarkSliceDeleting deletes the slice while a finalizer holds it, so that it is terminating.
	MarkSliceDeleting(t testing.TB, namespace, name string)

	// Eventually fails t unless cond turns true within the adapter's cache lag.
	// An adapter without caches checks cond once.
	Eventually(t testing.TB, cond func() bool)
}

// NewHarness returns a Harness for one case; it may share a server with other cases.
type NewHarness func(t *testing.T) Harness

// Run runs every contract case.
func Run(t *testing.T, newHarness NewHarness) {
	t.Run("SnapshotStore", func(t *testing.T) { RunSnapshotStore(t, newHarness) })
	t.Run("Compositions", func(t *testing.T) { RunCompositions(t, newHarness) })
	t.Run("SliceReader", func(t *testing.T) { RunSliceReader(t, newHarness) })
	t.Run("TombstoneSink", func(t *testing.T) { RunTombstoneSink(t, newHarness) })
	t.Run("FleetIndex", func(t *testing.T) { RunFleetIndex(t, newHarness) })
}
