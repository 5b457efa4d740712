package contract

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// RunCompositions checks ports.CompositionReader, ports.LiveReader and ports.DecisionWriter.
func RunCompositions(t *testing.T, newHarness NewHarness) {
	t.Run("LiveComposition reads every field the domain uses, and GetComposition catches up", func(t *testing.T) {
		h := newHarness(t)
		want := h.CreateComposition(t, sampleComposition(h))
		assert.NotEmpty(t, want.UID)
		assert.NotEmpty(t, want.ResourceVersion)

		got, err := h.LiveReader().LiveComposition(t.Context(), want.Ref())
		require.NoError(t, err)
		assertComposition(t, want, got)
		h.Eventually(t, func() bool {
			got, err := h.CompositionReader().GetComposition(t.Context(), want.Ref())
			return err == nil && got.ResourceVersion == want.ResourceVersion
		})
		got, err = h.CompositionReader().GetComposition(t.Context(), want.Ref())
		require.NoError(t, err)
		assertComposition(t, want, got)
	})

	t.Run("ListCompositions eventually lists a created Composition", func(t *testing.T) {
		h := newHarness(t)
		want := h.CreateComposition(t, sampleComposition(h))
		h.Eventually(t, func() bool {
			all, err := h.CompositionLister().ListCompositions(t.Context())
			if err != nil {
				return false
			}
			for _, c := range all {
				if c.Ref() == want.Ref() && c.UID == want.UID {
					return true
				}
			}
			return false
		})
	})

	t.Run("reading a missing Composition is ErrNotFound", func(t *testing.T) {
		h := newHarness(t)
		ref := domain.CompositionRef{Namespace: h.Namespace(), Name: uniqueName("missing")}
		_, err := h.LiveReader().LiveComposition(t.Context(), ref)
		require.ErrorIs(t, err, ports.ErrNotFound)
		_, err = h.CompositionReader().GetComposition(t.Context(), ref)
		require.ErrorIs(t, err, ports.ErrNotFound)
	})

	t.Run("WriteDecision at the current resourceVersion sets the annotation and keeps the others", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		d := sampleDecision(comp)
		require.NoError(t, h.DecisionWriter().WriteDecision(t.Context(), comp, d))

		got, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, d.Encode(), got.Annotations[domain.AnnotationDecision])
		assert.NotEqual(t, comp.ResourceVersion, got.ResourceVersion)
		assert.Equal(t, comp.UID, got.UID)
		assert.Equal(t, domain.OptInValue, got.Annotations[domain.AnnotationOptIn])
		parsed, ok := got.Decision()
		require.True(t, ok, "the written decision must parse")
		assert.True(t, parsed.SameAs(d))
	})

	t.Run("WriteDecision at a stale resourceVersion is ErrConflict and changes nothing", func(t *testing.T) {
		h := newHarness(t)
		stale := h.CreateComposition(t, sampleComposition(h))
		first := sampleDecision(stale)
		require.NoError(t, h.DecisionWriter().WriteDecision(t.Context(), stale, first))
		current, err := h.LiveReader().LiveComposition(t.Context(), stale.Ref())
		require.NoError(t, err)

		second := first
		second.Outcome, second.Reason = domain.OutcomeNothingToRecover, domain.ReasonNoOrphans
		err = h.DecisionWriter().WriteDecision(t.Context(), stale, second)
		require.ErrorIs(t, err, ports.ErrConflict)

		got, err := h.LiveReader().LiveComposition(t.Context(), stale.Ref())
		require.NoError(t, err)
		assert.Equal(t, current.ResourceVersion, got.ResourceVersion)
		assert.Equal(t, first.Encode(), got.Annotations[domain.AnnotationDecision])
	})

	t.Run("WriteDecision on a missing Composition is ErrNotFound", func(t *testing.T) {
		h := newHarness(t)
		comp := sampleComposition(h)
		comp.UID, comp.ResourceVersion = uniqueUUID(), "1"
		err := h.DecisionWriter().WriteDecision(t.Context(), comp, sampleDecision(comp))
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}

// sampleComposition is an opted-in Composition with a finished synthesis, under a fresh name.
func sampleComposition(h Harness) domain.Composition {
	name := uniqueName("comp")
	return domain.Composition{
		Namespace:   h.Namespace(),
		Name:        name,
		Labels:      map[string]string{"example.com/shard": "a"},
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis: &domain.Synthesis{
			UUID:        uniqueUUID(),
			Synthesized: time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC),
			Ready:       true,
			Slices:      []string{name + "-slice-0", name + "-slice-1"},
		},
	}
}

func sampleDecision(c domain.Composition) domain.Decision {
	return domain.Decision{
		SynthesisUUID: c.SynthesisUUID(),
		Outcome:       domain.OutcomeNoInventory,
		Message:       "no inventory snapshot exists for this lineage; nothing to recover",
		DecidedAt:     time.Date(2025, 3, 14, 15, 10, 0, 0, time.UTC),
	}
}

// assertComposition compares the fields the domain reads; nil and empty maps are equal.
func assertComposition(t testing.TB, want, got domain.Composition) {
	t.Helper()
	assert.Equal(t, want.Ref(), got.Ref())
	assert.Equal(t, want.UID, got.UID)
	assert.Equal(t, want.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, want.Deleting, got.Deleting)
	assert.True(t, maps.Equal(want.Labels, got.Labels), "labels: want %v, got %v", want.Labels, got.Labels)
	assert.True(t, maps.Equal(want.Annotations, got.Annotations), "annotations: want %v, got %v", want.Annotations, got.Annotations)
	if want.Synthesis == nil {
		assert.Nil(t, got.Synthesis)
		return
	}
	require.NotNil(t, got.Synthesis, "current synthesis")
	assert.Equal(t, want.Synthesis.UUID, got.Synthesis.UUID)
	assert.True(t, want.Synthesis.Synthesized.Equal(got.Synthesis.Synthesized), "synthesized: want %s, got %s", want.Synthesis.Synthesized, got.Synthesis.Synthesized)
	assert.Equal(t, want.Synthesis.Ready, got.Synthesis.Ready)
	assert.Equal(t, want.Synthesis.Slices, got.Synthesis.Slices)
}
