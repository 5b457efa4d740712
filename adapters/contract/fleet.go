package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// RunFleetIndex checks ports.FleetIndex: what it answers, and that once it holds a slice it
// holds every slice written before (the hand-off's fence, design §6.3).
func RunFleetIndex(t *testing.T, newHarness NewHarness) {
	cm := func(ns, name string) domain.SliceResource {
		return domain.SliceResource{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"` + ns + `"}}`}
	}
	cmID := func(ns, name string) domain.ResourceID {
		return domain.ResourceID{Kind: "ConfigMap", Namespace: ns, Name: name}
	}

	t.Run("ProducedElsewhere names what another Composition's slices apply, patch or deploy into", func(t *testing.T) {
		h := newHarness(t)
		other := h.CreateComposition(t, sampleComposition(h))
		self := h.CreateComposition(t, sampleComposition(h))
		target := uniqueName("ns")
		patch := domain.SliceResource{Manifest: `{"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"name":"patched","namespace":"` + target + `"},"patch":{"apiVersion":"apps/v1","kind":"Deployment","ops":[]}}`}
		tombstone := cm(target, "tombstoned")
		tombstone.Deleted = true
		theirs := domain.ResourceSlice{Namespace: h.Namespace(), Name: uniqueName("theirs"), SynthesisUUID: uniqueUUID(),
			Resources: []domain.SliceResource{cm(target, "taken"), patch, tombstone}}
		h.CreateOwnedSlice(t, theirs, other)
		own := domain.ResourceSlice{Namespace: h.Namespace(), Name: uniqueName("own"), SynthesisUUID: uniqueUUID(),
			Resources: []domain.SliceResource{cm(target, "own")}}
		h.CreateOwnedSlice(t, own, self)
		require.NoError(t, h.FleetIndex().WaitForSlice(t.Context(), own.Namespace, own.Name))

		ids := []domain.ResourceID{cmID(target, "taken"), cmID(target, "tombstoned"), cmID(target, "own"),
			{Group: "apps", Kind: "Deployment", Namespace: target, Name: "patched"}}
		var got map[domain.ResourceID]string
		h.Eventually(t, func() bool {
			var err error
			got, err = h.FleetIndex().ProducedElsewhere(t.Context(), ids, self.UID)
			return err == nil && len(got) == 2
		})
		at := h.Namespace() + "/" + theirs.Name
		assert.Equal(t, map[domain.ResourceID]string{
			cmID(target, "taken"): at,
			{Group: "apps", Kind: "Deployment", Namespace: target, Name: "patched"}: at,
		}, got)
		got, err := h.FleetIndex().ProducedElsewhere(t.Context(), ids, self.UID, other.UID)
		require.NoError(t, err)
		assert.Empty(t, got, "the excluded owners' slices do not count")

		// A terminating slice still counts: when in doubt, keep. The fence orders the index after it.
		h.MarkSliceDeleting(t, theirs.Namespace, theirs.Name)
		fence := domain.ResourceSlice{Namespace: h.Namespace(), Name: uniqueName("fence"), SynthesisUUID: uniqueUUID(), Resources: []domain.SliceResource{cm(target, "own")}}
		h.CreateOwnedSlice(t, fence, self)
		require.NoError(t, h.FleetIndex().WaitForSlice(t.Context(), fence.Namespace, fence.Name))
		got, err = h.FleetIndex().ProducedElsewhere(t.Context(), ids, self.UID)
		require.NoError(t, err)
		assert.Len(t, got, 2, "a terminating slice of another Composition is evidence too")
	})

	t.Run("once it holds a slice, it holds every slice written before it", func(t *testing.T) {
		h := newHarness(t)
		other := h.CreateComposition(t, sampleComposition(h))
		self := h.CreateComposition(t, sampleComposition(h))
		target := uniqueName("ns")
		for i := range 5 {
			h.CreateOwnedSlice(t, domain.ResourceSlice{Namespace: h.Namespace(), Name: uniqueName("theirs"), SynthesisUUID: uniqueUUID(),
				Resources: []domain.SliceResource{cm(target, string(rune('a'+i)))}}, other)
		}
		fence := domain.ResourceSlice{Namespace: h.Namespace(), Name: uniqueName("fence"), SynthesisUUID: uniqueUUID(), Resources: []domain.SliceResource{cm(target, "own")}}
		h.CreateOwnedSlice(t, fence, self)
		require.NoError(t, h.FleetIndex().WaitForSlice(t.Context(), fence.Namespace, fence.Name))
		ids := []domain.ResourceID{cmID(target, "a"), cmID(target, "b"), cmID(target, "c"), cmID(target, "d"), cmID(target, "e")}
		got, err := h.FleetIndex().ProducedElsewhere(t.Context(), ids, self.UID)
		require.NoError(t, err)
		assert.Len(t, got, len(ids), "no Eventually: the fence is enough")
	})

	t.Run("WaitForSlice is ErrIndexBehind for a slice it never sees", func(t *testing.T) {
		h := newHarness(t)
		err := h.FleetIndex().WaitForSlice(t.Context(), h.Namespace(), uniqueName("never"))
		require.ErrorIs(t, err, ports.ErrIndexBehind)
	})

	t.Run("LineageMembers lists the other Compositions carrying the lineage", func(t *testing.T) {
		h := newHarness(t)
		lineage := uniqueLineage(t)
		override := func() domain.Composition {
			c := sampleComposition(h)
			c.Labels = map[string]string{"example.com/shard": uniqueName("elsewhere")} // any shard counts
			c.Annotations[domain.AnnotationLineageOverride] = lineage.String()
			return c
		}
		self, other := h.CreateComposition(t, override()), h.CreateComposition(t, override())
		h.CreateComposition(t, sampleComposition(h)) // another lineage
		var got []domain.CompositionRef
		h.Eventually(t, func() bool {
			var err error
			got, err = h.FleetIndex().LineageMembers(t.Context(), self.Ref(), lineage)
			return err == nil && len(got) == 1
		})
		assert.Equal(t, []domain.CompositionRef{other.Ref()}, got)
	})

	t.Run("Unsynthesized maps each Composition Eno has not synthesized to its creation", func(t *testing.T) {
		h := newHarness(t)
		synthesized := h.CreateComposition(t, sampleComposition(h))
		first := sampleComposition(h)
		first.Synthesis = nil
		first = h.CreateComposition(t, first)
		var got map[domain.CompositionRef]time.Time
		h.Eventually(t, func() bool {
			var err error
			got, err = h.FleetIndex().Unsynthesized(t.Context())
			_, ok := got[first.Ref()]
			return err == nil && ok
		})
		assert.NotContains(t, got, synthesized.Ref())
		assert.WithinDuration(t, time.Now(), got[first.Ref()], time.Minute, "its creation time")
	})
}
