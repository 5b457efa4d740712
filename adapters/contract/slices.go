package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// RunSliceReader checks ports.SliceReader.
func RunSliceReader(t *testing.T, newHarness NewHarness) {
	t.Run("GetSlice reads the synthesis UUID and every resource in order", func(t *testing.T) {
		h := newHarness(t)
		want := domain.ResourceSlice{
			Namespace:     h.Namespace(),
			Name:          uniqueName("slice"),
			SynthesisUUID: uniqueUUID(),
			Resources: []domain.SliceResource{
				{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings","namespace":"team-a"}}`},
				{Manifest: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"old","namespace":"team-a"}}`, Deleted: true},
				{Manifest: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"team-a"}}`},
			},
		}
		h.CreateSlice(t, want)
		var got domain.ResourceSlice
		h.Eventually(t, func() bool {
			var err error
			got, err = h.SliceReader().GetSlice(t.Context(), want.Namespace, want.Name)
			return err == nil
		})
		assert.Equal(t, want, got)
	})

	t.Run("reading a missing slice is ErrNotFound", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.SliceReader().GetSlice(t.Context(), h.Namespace(), uniqueName("missing"))
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}

// RunTombstoneSink checks ports.TombstoneSink.
func RunTombstoneSink(t *testing.T, newHarness NewHarness) {
	t.Run("PublishTombstones writes the recovery slice owned by the Composition", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		tombstones := sampleTombstones()

		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, tombstones)
		require.NoError(t, err)
		assert.Equal(t, domain.RecoverySliceName(comp.Name, comp.SynthesisUUID()), name)
		assertTombstoneSlice(t, h, comp, name, tombstones)
		assert.Equal(t, comp.UID, h.SliceOwnerUID(t, comp.Namespace, name))
	})

	t.Run("PublishTombstones again for the same synthesis reuses the slice", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		tombstones := sampleTombstones()

		first, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, tombstones)
		require.NoError(t, err)
		second, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, tombstones)
		require.NoError(t, err)
		assert.Equal(t, first, second)
		assertTombstoneSlice(t, h, comp, first, tombstones)

		var ours []string
		for _, s := range h.ListSlices(t, comp.Namespace) {
			if s.SynthesisUUID == comp.SynthesisUUID() {
				ours = append(ours, s.Name)
			}
		}
		assert.Equal(t, []string{first}, ours, "one slice per synthesis")
	})

	t.Run("PublishTombstones never overwrites a slice of another synthesis", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		// Another synthesis whose UUID shares the first 8 characters maps to the same name.
		other := comp.SynthesisUUID()[:8] + uniqueUUID()[8:]
		taken := domain.ResourceSlice{
			Namespace:     comp.Namespace,
			Name:          domain.RecoverySliceName(comp.Name, comp.SynthesisUUID()),
			SynthesisUUID: other,
			Resources:     []domain.SliceResource{{Manifest: sampleTombstones()[0].Manifest(), Deleted: true}},
		}
		h.CreateSlice(t, taken)

		_, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleTombstones())
		require.Error(t, err)
		assert.Equal(t, taken, h.ReadSlice(t, taken.Namespace, taken.Name))
	})
}

func sampleTombstones() []domain.Tombstone {
	return []domain.Tombstone{
		{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-settings",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "2"}}},
		{Entry: domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "web-reader"}},
	}
}

// assertTombstoneSlice checks that the slice holds exactly the tombstones, in order, as deleted manifests.
func assertTombstoneSlice(t testing.TB, h Harness, comp domain.Composition, name string, tombstones []domain.Tombstone) {
	t.Helper()
	got := h.ReadSlice(t, comp.Namespace, name)
	want := domain.ResourceSlice{Namespace: comp.Namespace, Name: name, SynthesisUUID: comp.SynthesisUUID()}
	for _, ts := range tombstones {
		want.Resources = append(want.Resources, domain.SliceResource{Manifest: ts.Manifest(), Deleted: true})
	}
	assert.Equal(t, want, got)
}
