package contract

import (
	"fmt"
	"slices"
	"strings"
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

// RunTombstoneSink checks ports.TombstoneSink: the steps of the hand-off.
func RunTombstoneSink(t *testing.T, newHarness NewHarness) {
	t.Run("CreateRecoverySlice writes the slice controlled by the Composition, named from the hand-off's digest", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)

		names := createAll(t, h, comp, handoff)
		assert.Equal(t, []string{domain.RecoverySliceName(comp.Name, comp.SynthesisUUID(), handoff.Digest, 0)}, names)
		assertRecoverySlices(t, h, comp, names, handoff)
		assert.Equal(t, comp.UID, h.SliceOwnerUID(t, comp.Namespace, names[0]))
		kept, err := domain.KeptIn([]domain.ResourceSlice{h.ReadSlice(t, comp.Namespace, names[0])})
		require.NoError(t, err)
		require.Len(t, kept, 1, "what the plan kept for a person is read back")
		assert.Equal(t, "ConfigMap/team-a/kept-by-hand", kept[0].Entry().ID().String())
	})

	t.Run("CreateRecoverySlice again reuses the slice without a write, and another plan gets another name", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		first := createAll(t, h, comp, handoff)
		versions := sliceVersions(t, h, comp.Namespace, first)
		assert.Equal(t, first, createAll(t, h, comp, handoff))
		assert.Equal(t, versions, sliceVersions(t, h, comp.Namespace, first), "never updated")

		smaller := handoffOf(comp, sampleTombstones()[:1])
		other := createAll(t, h, comp, smaller)
		assert.NotEqual(t, first, other)
		assertRecoverySlices(t, h, comp, first, handoff)
		assertRecoverySlices(t, h, comp, other, smaller)
	})

	t.Run("CreateRecoverySlice never updates a slice that holds anything else under its name", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			change func(s *domain.ResourceSlice)
			owned  bool
		}{
			{"other tombstones", func(s *domain.ResourceSlice) { s.Resources = s.Resources[:1] }, true},
			{"another synthesis", func(s *domain.ResourceSlice) { s.SynthesisUUID = uniqueUUID() }, true},
			{"another decision", func(s *domain.ResourceSlice) { s.Annotations[domain.AnnotationDecision] = "{}" }, true},
			{"no controller (another writer's)", func(*domain.ResourceSlice) {}, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarness(t)
				comp := h.CreateComposition(t, sampleComposition(h))
				handoff := sampleHandoff(comp)
				taken, err := handoff.RecoverySlice(comp, 0)
				require.NoError(t, err)
				taken.ControllerUID = ""
				tt.change(&taken)
				if tt.owned {
					h.CreateOwnedSlice(t, taken, comp)
				} else {
					h.CreateSlice(t, taken)
				}
				before := h.ReadSlice(t, taken.Namespace, taken.Name)

				_, err = h.TombstoneSink().CreateRecoverySlice(t.Context(), comp, handoff, 0)
				require.ErrorIs(t, err, ports.ErrAlreadyExists)
				assert.Equal(t, before, h.ReadSlice(t, taken.Namespace, taken.Name), "left as it was")
			})
		}
	})

	t.Run("CreateRecoverySlice never reuses a slice that is being deleted", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		names := createAll(t, h, comp, handoff)
		h.MarkSliceDeleting(t, comp.Namespace, names[0])
		_, err := h.TombstoneSink().CreateRecoverySlice(t.Context(), comp, handoff, 0)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
	})

	t.Run("CreateRecoverySlice writes a hand-off over Eno's slice budget into several slices", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := largeHandoff(comp)
		parts, err := handoff.Parts()
		require.NoError(t, err)
		require.Greater(t, len(parts), 2)

		names := createAll(t, h, comp, handoff)
		for i, name := range names {
			assert.Equal(t, domain.RecoverySliceName(comp.Name, comp.SynthesisUUID(), handoff.Digest, i), name)
			assert.LessOrEqual(t, manifestBytes(h.ReadSlice(t, comp.Namespace, name)), domain.MaxSliceManifestBytes, name)
		}
		assertRecoverySlices(t, h, comp, names, handoff)
	})

	t.Run("AppendRecoverySlice names the slice once and returns the Composition as written", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := largeHandoff(comp)
		names := createAll(t, h, comp, handoff)

		named := comp
		for _, name := range names {
			var err error
			named, err = h.TombstoneSink().AppendRecoverySlice(t.Context(), named, name)
			require.NoError(t, err)
		}
		live, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, live.ResourceVersion, named.ResourceVersion)
		assert.Equal(t, append(slices.Clone(comp.Synthesis.Slices), names...), live.Synthesis.Slices)
		assert.Equal(t, names, live.NamedRecoverySlices())
		// Again, from the object as written: named already, nothing is written.
		again, err := h.TombstoneSink().AppendRecoverySlice(t.Context(), named, names[0])
		require.NoError(t, err)
		assert.Equal(t, named.ResourceVersion, again.ResourceVersion)
	})

	t.Run("AppendRecoverySlice adds the list to a synthesis that has none", func(t *testing.T) {
		h := newHarness(t)
		c := sampleComposition(h)
		c.Synthesis.Slices = nil // an empty synthesis has no resourceSlices key at all
		comp := h.CreateComposition(t, c)
		names := createAll(t, h, comp, sampleHandoff(comp))

		_, err := h.TombstoneSink().AppendRecoverySlice(t.Context(), comp, names[0])
		require.NoError(t, err)
		live, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, names, live.Synthesis.Slices)
	})

	t.Run("AppendRecoverySlice refuses once the Composition moved on", func(t *testing.T) {
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
				names := createAll(t, h, comp, sampleHandoff(comp))
				syn := *comp.Synthesis
				syn.Slices = slices.Clone(comp.Synthesis.Slices)
				moved, inFlight := tt.change(&syn)
				stored := h.SetSynthesis(t, comp.Ref(), moved, inFlight)

				_, err := h.TombstoneSink().AppendRecoverySlice(t.Context(), comp, names[0])
				require.ErrorIs(t, err, ports.ErrSynthesisMoved)
				live, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
				require.NoError(t, err)
				assert.Equal(t, stored.Synthesis.Slices, live.Synthesis.Slices)
			})
		}
	})

	t.Run("AppendRecoverySlice refuses once anyone changed the Composition since the read", func(t *testing.T) {
		// A review flipped to reject, another replica's decision, a disarm: whatever the write,
		// the resourceVersion the caller decided from no longer holds.
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		names := createAll(t, h, comp, sampleHandoff(comp))
		h.SetAnnotation(t, comp.Ref(), domain.AnnotationReview, "reject:"+comp.SynthesisUUID())

		_, err := h.TombstoneSink().AppendRecoverySlice(t.Context(), comp, names[0])
		require.ErrorIs(t, err, ports.ErrSynthesisMoved)
		live, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices)
	})

	t.Run("ArmTombstones and DisarmTombstones write the arming annotation, guarded by the resourceVersion", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		armed, err := h.TombstoneSink().ArmTombstones(t.Context(), comp, "0123456789abcdef")
		require.NoError(t, err)
		assert.Equal(t, "0123456789abcdef", armed.Annotations[domain.AnnotationArmed])
		assert.NotEqual(t, comp.ResourceVersion, armed.ResourceVersion, "the commit tests the armed resourceVersion")
		live, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, armed.ResourceVersion, live.ResourceVersion)
		again, err := h.TombstoneSink().ArmTombstones(t.Context(), armed, "0123456789abcdef")
		require.NoError(t, err)
		assert.Equal(t, armed.ResourceVersion, again.ResourceVersion, "already armed: no write")
		_, err = h.TombstoneSink().ArmTombstones(t.Context(), comp, "fedcba9876543210")
		require.ErrorIs(t, err, ports.ErrConflict, "comp's resourceVersion is stale")

		require.ErrorIs(t, h.TombstoneSink().DisarmTombstones(t.Context(), withAnnotation(comp, domain.AnnotationArmed, "x")), ports.ErrConflict)
		require.NoError(t, h.TombstoneSink().DisarmTombstones(t.Context(), live))
		live, err = h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, domain.ArmedOff, live.Annotations[domain.AnnotationArmed])
		require.NoError(t, h.TombstoneSink().DisarmTombstones(t.Context(), live), "not armed: nothing to do")
	})
	t.Run("RequestResynthesis names the current synthesis, guarded by the resourceVersion", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		require.NoError(t, h.TombstoneSink().RequestResynthesis(t.Context(), comp))
		live, err := h.LiveReader().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.SynthesisUUID(), live.Annotations[domain.AnnotationForceResynthesis])

		// comp's resourceVersion is stale now.
		require.ErrorIs(t, h.TombstoneSink().RequestResynthesis(t.Context(), comp), ports.ErrConflict)
	})
}

// testUID is the UID recovery saw of every object the suite hands over as a tombstone.
const testUID = "0f1e2d3c-0000-4000-8000-000000000001"

func sampleTombstones() []domain.Tombstone {
	return []domain.Tombstone{
		{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "web-settings",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "2"}}, UID: testUID},
		{Entry: domain.Entry{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "web-reader"}, UID: testUID},
	}
}

// sampleHandoff is a Recovered plan's hand-off for comp's current synthesis: one slice.
func sampleHandoff(comp domain.Composition) domain.Handoff {
	return handoffOf(comp, sampleTombstones())
}

// largeHandoffTombstones is how many tombstones largeHandoff holds, each of about a fifth of
// Eno's slice budget: four recovery slices.
const largeHandoffTombstones = 16

// largeHandoff is a hand-off over Eno's slice budget: its tombstones carry a large annotation,
// so that few of them fill a recovery slice.
func largeHandoff(comp domain.Composition) domain.Handoff {
	ts := make([]domain.Tombstone, largeHandoffTombstones)
	for i := range ts {
		ts[i] = domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: fmt.Sprintf("large-%02d", i),
			Annotations: map[string]string{"example.com/padding": strings.Repeat("x", domain.MaxSliceManifestBytes/5)}}, UID: testUID}
	}
	return handoffOf(comp, ts)
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
		// Kept for a person: part 0 lists it (domain.AnnotationKept) for the next recording.
		Dropped: []domain.DroppedTombstone{{Tombstone: domain.Tombstone{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "kept-by-hand"}, UID: testUID},
			Reason: domain.DropManagedElsewhere, Detail: `field manager "argocd" manages it`}},
	})
	if err != nil {
		panic(err)
	}
	return h
}

// createAll creates every recovery slice of the hand-off, in part order, and returns their names.
func createAll(t testing.TB, h Harness, comp domain.Composition, handoff domain.Handoff) []string {
	t.Helper()
	parts, err := handoff.Parts()
	require.NoError(t, err)
	names := make([]string, len(parts))
	for i := range parts {
		names[i], err = h.TombstoneSink().CreateRecoverySlice(t.Context(), comp, handoff, i)
		require.NoError(t, err)
	}
	return names
}

// assertRecoverySlices checks that the named slices hold exactly the hand-off, one part each in
// order: its tombstones as deleted manifests, and the decision they came from on every one.
func assertRecoverySlices(t testing.TB, h Harness, comp domain.Composition, names []string, handoff domain.Handoff) {
	t.Helper()
	parts, err := handoff.Parts()
	require.NoError(t, err)
	require.Len(t, names, len(parts))
	read := make([]domain.ResourceSlice, len(names))
	for i, name := range names {
		read[i] = h.ReadSlice(t, comp.Namespace, name)
		assert.Equal(t, domain.ResourceSlice{
			Namespace: comp.Namespace, Name: name, SynthesisUUID: comp.SynthesisUUID(), ControllerUID: comp.UID,
			Annotations: handoff.SliceAnnotations(i, len(parts)),
			Resources:   parts[i],
		}, withoutForeignAnnotations(read[i]))
	}
	back, err := domain.HandoffFromSlices(comp, read)
	require.NoError(t, err)
	assert.Equal(t, handoff, back)
}

// ourSlices are the names of the slices stamped with comp's current synthesis.
func ourSlices(t testing.TB, h Harness, comp domain.Composition) []string {
	var ours []string
	for _, s := range h.ListSlices(t, comp.Namespace) {
		if s.SynthesisUUID == comp.SynthesisUUID() {
			ours = append(ours, s.Name)
		}
	}
	return ours
}

// sliceVersions are the resourceVersions of the named slices.
func sliceVersions(t testing.TB, h Harness, namespace string, names []string) []string {
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = h.ReadSlice(t, namespace, name).ResourceVersion
	}
	return out
}

// manifestBytes measures a slice as Eno's executor does: the sum of its manifests' lengths.
func manifestBytes(s domain.ResourceSlice) int {
	n := 0
	for _, r := range s.Resources {
		n += len(r.Manifest)
	}
	return n
}

// withoutForeignAnnotations keeps only the annotation this controller sets on its slices.
func withoutForeignAnnotations(s domain.ResourceSlice) domain.ResourceSlice {
	kept := map[string]string{}
	for _, k := range []string{domain.AnnotationDecision, domain.AnnotationHistoryWritten, domain.AnnotationRecoveryPart, domain.AnnotationKept} {
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

// withAnnotation is comp with one more annotation, its map not shared.
func withAnnotation(comp domain.Composition, key, value string) domain.Composition {
	annotations := map[string]string{key: value}
	for k, v := range comp.Annotations {
		annotations[k] = v
	}
	comp.Annotations = annotations
	return comp
}
