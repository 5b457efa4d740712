package contract

import (
	"fmt"
	"slices"
	"testing"
	"time"

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
		assert.NotEmpty(t, got.ResourceVersion)
		got.ResourceVersion = ""
		assert.Equal(t, want, got)
	})

	t.Run("reading a missing slice is ErrNotFound", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.SliceReader().GetSlice(t.Context(), h.Namespace(), uniqueName("missing"))
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}

// RunTombstoneSink checks ports.TombstoneSink: the hand-off steps of SPEC §6.2.
func RunTombstoneSink(t *testing.T, newHarness NewHarness) {
	t.Run("PublishTombstones writes the recovery slice controlled by the Composition", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)

		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		assert.Equal(t, domain.RecoverySliceName(comp.Name, comp.SynthesisUUID()), name)
		assertRecoverySlice(t, h, comp, name, handoff)
		assert.Equal(t, comp.UID, h.SliceOwnerUID(t, comp.Namespace, name))
	})

	t.Run("PublishTombstones again reuses the slice, and rewrites it to a new plan before the commit", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)

		first, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		second, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		assert.Equal(t, first, second)
		assertRecoverySlice(t, h, comp, first, handoff)

		smaller := handoffOf(comp, sampleTombstones()[:1])
		third, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, smaller)
		require.NoError(t, err)
		assert.Equal(t, first, third)
		assertRecoverySlice(t, h, comp, first, smaller)

		var ours []string
		for _, s := range h.ListSlices(t, comp.Namespace) {
			if s.SynthesisUUID == comp.SynthesisUUID() {
				ours = append(ours, s.Name)
			}
		}
		assert.Equal(t, []string{first}, ours, "one slice per synthesis")
	})

	t.Run("PublishTombstones falls back to the whole UUID and never overwrites another synthesis's slice", func(t *testing.T) {
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

		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)
		assert.Equal(t, domain.RecoverySliceNames(comp.Name, comp.SynthesisUUID())[1], name)
		assertRecoverySlice(t, h, comp, name, sampleHandoff(comp))
		stored := h.ReadSlice(t, taken.Namespace, taken.Name)
		stored.ResourceVersion = ""
		assert.Equal(t, taken, stored)
	})

	t.Run("CommitTombstones appends the slice once", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)

		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, name))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, append(comp.Synthesis.Slices, name), live.Synthesis.Slices)

		// Idempotent, even from the Composition read before the append.
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, name))
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), live, name))
		live, err = h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, append(comp.Synthesis.Slices, name), live.Synthesis.Slices)

		// Committed: a later publish leaves the slice as the synthesis names it.
		again, err := h.TombstoneSink().PublishTombstones(t.Context(), live, domain.Handoff{Decision: sampleHandoff(comp).Decision, Resources: sampleHandoff(comp).Resources[:1]})
		require.NoError(t, err)
		assert.Equal(t, name, again)
		assertRecoverySlice(t, h, comp, name, sampleHandoff(comp))
	})

	t.Run("CommitTombstones adds the whole list to a synthesis that has none", func(t *testing.T) {
		h := newHarness(t)
		c := sampleComposition(h)
		c.Synthesis.Slices = nil // an empty synthesis has no resourceSlices key at all
		comp := h.CreateComposition(t, c)
		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)

		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, name))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, []string{name}, live.Synthesis.Slices)
	})

	t.Run("CommitTombstones refuses once the Composition moved on", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			change func(s *domain.Synthesis) (*domain.Synthesis, string)
		}{
			{"a new synthesis", func(s *domain.Synthesis) (*domain.Synthesis, string) { s.UUID = uniqueUUID(); return s, "" }},
			{"a synthesis in flight", func(s *domain.Synthesis) (*domain.Synthesis, string) { return s, uniqueUUID() }},
			{"another slice appended", func(s *domain.Synthesis) (*domain.Synthesis, string) {
				s.Slices = append(s.Slices, "someone-else")
				return s, ""
			}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarness(t)
				comp := h.CreateComposition(t, sampleComposition(h))
				name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
				require.NoError(t, err)
				syn := *comp.Synthesis
				syn.Slices = slices.Clone(comp.Synthesis.Slices)
				moved, inFlight := tt.change(&syn)
				stored := h.SetSynthesis(t, comp.Ref(), moved, inFlight)

				err = h.TombstoneSink().CommitTombstones(t.Context(), comp, name)
				require.ErrorIs(t, err, ports.ErrSynthesisMoved)
				live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
				require.NoError(t, err)
				assert.Equal(t, stored.Synthesis.Slices, live.Synthesis.Slices)
			})
		}
	})

	t.Run("CommitTombstones refuses once anyone changed the Composition since the read", func(t *testing.T) {
		// A review flipped to reject, another replica's decision, a lineage change: whatever
		// the write, the resourceVersion the caller decided from no longer holds.
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)
		h.SetAnnotation(t, comp.Ref(), domain.AnnotationReview, "reject:"+comp.SynthesisUUID())

		err = h.TombstoneSink().CommitTombstones(t.Context(), comp, name)
		require.ErrorIs(t, err, ports.ErrSynthesisMoved)
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices)
	})

	t.Run("CommitTombstones re-reads the slice and never names one that is gone or terminating", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			remove func(t testing.TB, h Harness, namespace, name string)
		}{
			{"gone", func(t testing.TB, h Harness, ns, n string) { h.RemoveSlice(t, ns, n) }},
			{"terminating", func(t testing.TB, h Harness, ns, n string) { h.MarkSliceDeleting(t, ns, n) }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarness(t)
				comp := h.CreateComposition(t, sampleComposition(h))
				name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
				require.NoError(t, err)
				tt.remove(t, h, comp.Namespace, name)

				require.Error(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, name))
				live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
				require.NoError(t, err)
				assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices)
			})
		}
	})

	t.Run("CommitTombstones never names a slice of another Composition", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		name := domain.RecoverySliceNames(comp.Name, comp.SynthesisUUID())[0]
		h.CreateSlice(t, domain.ResourceSlice{Namespace: comp.Namespace, Name: name, SynthesisUUID: comp.SynthesisUUID(),
			Resources: sampleHandoff(comp).Resources})

		require.Error(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, name))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices)
	})

	t.Run("EnsureTombstones does not count a terminating slice as present", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		h.MarkSliceDeleting(t, comp.Namespace, name)
		require.Error(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, name, handoff))
	})

	t.Run("EnsureTombstones creates a slice again that is gone", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		name, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		require.NoError(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, name, handoff))
		assertRecoverySlice(t, h, comp, name, handoff)

		h.RemoveSlice(t, comp.Namespace, name)
		require.ErrorIs(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, name, domain.Handoff{}), ports.ErrNotFound)
		require.NoError(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, name, handoff))
		assertRecoverySlice(t, h, comp, name, handoff)
		assert.Equal(t, comp.UID, h.SliceOwnerUID(t, comp.Namespace, name))
	})

	t.Run("RequestResynthesis names the current synthesis, guarded by the resourceVersion", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		require.NoError(t, h.TombstoneSink().RequestResynthesis(t.Context(), comp))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.SynthesisUUID(), live.Annotations[domain.AnnotationForceResynthesis])

		// comp's resourceVersion is stale now.
		require.ErrorIs(t, h.TombstoneSink().RequestResynthesis(t.Context(), comp), ports.ErrConflict)
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

// sampleHandoff is a Recovered plan's hand-off for comp's current synthesis: one slice.
func sampleHandoff(comp domain.Composition) domain.Handoff {
	return handoffOf(comp, sampleTombstones())
}

// handoffOf is the Recovered hand-off of tombstones for comp's current synthesis.
func handoffOf(comp domain.Composition, tombstones []domain.Tombstone) domain.Handoff {
	ts := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	h, err := domain.NewHandoff(domain.RecoveryPlan{
		Decision: domain.Decision{SynthesisUUID: comp.SynthesisUUID(), Outcome: domain.OutcomeRecovered,
			Message: fmt.Sprintf("%d of %d resources of the previous incarnation are orphaned", len(tombstones), len(tombstones)+3), SourceSynthesisUUID: "source-uuid",
			SourceSynthesisTimestamp: &ts, Tombstones: len(tombstones), RecoveredFrom: "source-uuid",
			DecidedAt: time.Date(2025, 3, 14, 15, 10, 0, 0, time.UTC)},
		Tombstones:     tombstones,
		HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		panic(err)
	}
	return h
}

// assertRecoverySlice checks that the slice holds exactly the hand-off: its tombstones in
// order, as deleted manifests, and the decision they came from.
func assertRecoverySlice(t testing.TB, h Harness, comp domain.Composition, name string, handoff domain.Handoff) {
	t.Helper()
	got := h.ReadSlice(t, comp.Namespace, name)
	assert.Equal(t, domain.ResourceSlice{
		Namespace: comp.Namespace, Name: name, SynthesisUUID: comp.SynthesisUUID(), ControllerUID: comp.UID,
		Annotations: handoff.SliceAnnotations(),
		Resources:   handoff.Resources,
	}, withoutForeignAnnotations(got))
	back, err := domain.HandoffFromSlice(comp, got)
	require.NoError(t, err)
	assert.Equal(t, handoff, back)
}

// withoutForeignAnnotations keeps only the annotation this controller sets on its slices.
func withoutForeignAnnotations(s domain.ResourceSlice) domain.ResourceSlice {
	kept := map[string]string{}
	for _, k := range []string{domain.AnnotationDecision, domain.AnnotationHistoryWritten} {
		if v, ok := s.Annotations[k]; ok {
			kept[k] = v
		}
	}
	if len(kept) > 0 {
		s.Annotations = kept
	}
	s.ResourceVersion = "" // the adapter's own, compared by content instead
	return s
}
