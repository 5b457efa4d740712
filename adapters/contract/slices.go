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

	t.Run("ListSlices lists every slice with its owner and resources", func(t *testing.T) {
		h := newHarness(t)
		var want []string
		for range 3 {
			s := domain.ResourceSlice{Namespace: h.Namespace(), Name: uniqueName("listed"), SynthesisUUID: uniqueUUID(),
				Resources: []domain.SliceResource{{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"team-a"}}`}}}
			h.CreateSlice(t, s)
			want = append(want, s.Name)
		}
		var got []string
		h.Eventually(t, func() bool {
			all, err := h.SliceReader().ListSlices(t.Context())
			require.NoError(t, err)
			got = got[:0]
			for _, s := range all {
				if s.Namespace == h.Namespace() && slices.Contains(want, s.Name) && len(s.Resources) == 1 {
					got = append(got, s.Name)
				}
			}
			return len(got) == len(want)
		})
		assert.ElementsMatch(t, want, got)
	})
}

// RunTombstoneSink checks ports.TombstoneSink: the steps of the hand-off (design §6.2).
func RunTombstoneSink(t *testing.T, newHarness NewHarness) {
	t.Run("PublishTombstones writes the recovery slice controlled by the Composition", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)

		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		assert.Equal(t, []string{domain.RecoverySliceName(comp.Name, comp.SynthesisUUID())}, names)
		assertRecoverySlices(t, h, comp, names, handoff)
		assert.Equal(t, comp.UID, h.SliceOwnerUID(t, comp.Namespace, names[0]))
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
		assertRecoverySlices(t, h, comp, first, handoff)

		smaller := handoffOf(comp, sampleTombstones()[:1])
		third, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, smaller)
		require.NoError(t, err)
		assert.Equal(t, first, third)
		assertRecoverySlices(t, h, comp, first, smaller)
		assert.Equal(t, first, ourSlices(t, h, comp), "one slice per synthesis")
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

		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)
		assert.Equal(t, []string{domain.RecoverySliceNames(comp.Name, comp.SynthesisUUID())[1]}, names)
		assertRecoverySlices(t, h, comp, names, sampleHandoff(comp))
		stored := h.ReadSlice(t, taken.Namespace, taken.Name)
		stored.ResourceVersion = ""
		assert.Equal(t, taken, stored)
	})

	t.Run("PublishTombstones writes a hand-off over Eno's slice budget into several slices, in order", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := largeHandoff(comp)
		parts, err := handoff.Parts()
		require.NoError(t, err)
		require.Greater(t, len(parts), 2)

		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		assert.Equal(t, domain.RecoverySliceSeriesOf(comp.Name, comp.SynthesisUUID())[0].Names(len(parts)), names)
		assertRecoverySlices(t, h, comp, names, handoff)
		for _, name := range names {
			assert.LessOrEqual(t, manifestBytes(h.ReadSlice(t, comp.Namespace, name)), domain.MaxSliceManifestBytes, name)
		}

		// Again: every slice is reused as it is, without a write.
		versions := sliceVersions(t, h, comp.Namespace, names)
		again, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		assert.Equal(t, names, again)
		assert.Equal(t, versions, sliceVersions(t, h, comp.Namespace, names))
	})

	t.Run("PublishTombstones moves every slice to the whole UUID when a later one's name is taken", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := largeHandoff(comp)
		series := domain.RecoverySliceSeriesOf(comp.Name, comp.SynthesisUUID())
		taken := domain.ResourceSlice{Namespace: comp.Namespace, Name: series[0].Name(1), SynthesisUUID: comp.SynthesisUUID()[:8] + uniqueUUID()[8:],
			Resources: []domain.SliceResource{{Manifest: sampleTombstones()[0].Manifest(), Deleted: true}}}
		h.CreateSlice(t, taken)

		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		parts, err := handoff.Parts()
		require.NoError(t, err)
		assert.Equal(t, series[1].Names(len(parts)), names)
		assertRecoverySlices(t, h, comp, names, handoff)
		assert.Equal(t, taken.SynthesisUUID, h.ReadSlice(t, taken.Namespace, taken.Name).SynthesisUUID)
	})

	t.Run("CommitTombstones appends the slice once", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)

		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, sampleHandoff(comp), names))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, append(slices.Clone(comp.Synthesis.Slices), names...), live.Synthesis.Slices)

		// Idempotent, even from the Composition read before the append.
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, sampleHandoff(comp), names))
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), live, sampleHandoff(comp), names))
		live, err = h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, append(slices.Clone(comp.Synthesis.Slices), names...), live.Synthesis.Slices)

		// Committed: a later publish leaves the slice as the synthesis names it.
		again, err := h.TombstoneSink().PublishTombstones(t.Context(), live, domain.Handoff{Decision: sampleHandoff(comp).Decision, Resources: sampleHandoff(comp).Resources[:1]})
		require.NoError(t, err)
		assert.Equal(t, names, again)
		assertRecoverySlices(t, h, comp, names, sampleHandoff(comp))
	})

	t.Run("a slice sealed for the commit is never rewritten by a publish from a stale read", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h)) // read before the commit: names no recovery slice
		handoff := sampleHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, handoff, names))
		sealed := h.ReadSlice(t, comp.Namespace, names[0])
		require.True(t, sealed.Sealed(), "the commit seals the slice: %v", sealed.Annotations)

		// A writer that planned from the stale read, with another plan: nothing is written. (An
		// adapter that cannot see the commit from the stale read refuses with ErrSynthesisMoved.)
		other := handoffOf(comp, sampleTombstones()[:1])
		if _, err = h.TombstoneSink().PublishTombstones(t.Context(), comp, other); err != nil {
			require.ErrorIs(t, err, ports.ErrSynthesisMoved)
			assert.Contains(t, err.Error(), "never rewritten")
		}
		after := h.ReadSlice(t, comp.Namespace, names[0])
		assert.Equal(t, sealed.ResourceVersion, after.ResourceVersion, "the sealed slice is not written")
		assertRecoverySlices(t, h, comp, names, handoff)

		// The same tombstones are reused as they are.
		again, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		assert.Equal(t, names, again)
		assert.Equal(t, sealed.ResourceVersion, h.ReadSlice(t, comp.Namespace, names[0]).ResourceVersion)
	})

	t.Run("CommitTombstones never names a slice another writer rewrote since the publish", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		// Another writer, from its own plan, rewrites the unsealed slice before this commit.
		_, err = h.TombstoneSink().PublishTombstones(t.Context(), comp, handoffOf(comp, sampleTombstones()[:1]))
		require.NoError(t, err)

		err = h.TombstoneSink().CommitTombstones(t.Context(), comp, handoff, names)
		require.ErrorIs(t, err, ports.ErrSynthesisMoved)
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices, "nothing named")
		assert.False(t, h.ReadSlice(t, comp.Namespace, names[0]).Sealed(), "nothing sealed")
	})

	t.Run("a slice the synthesis names and step 4 created again is sealed, and never rewritten", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, handoff, names))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		h.RemoveSlice(t, comp.Namespace, names[0])
		require.NoError(t, h.TombstoneSink().EnsureTombstones(t.Context(), live, names, handoff))
		again := h.ReadSlice(t, comp.Namespace, names[0])
		require.True(t, again.Sealed(), "created again sealed: %v", again.Annotations)

		if _, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoffOf(comp, sampleTombstones()[:1])); err != nil {
			require.ErrorIs(t, err, ports.ErrSynthesisMoved)
		}
		assert.Equal(t, again.ResourceVersion, h.ReadSlice(t, comp.Namespace, names[0]).ResourceVersion, "never rewritten")
		assertRecoverySlices(t, h, comp, names, handoff)
	})

	t.Run("a slice sealed by a commit that then failed is never rewritten either", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		// A commit that seals and then fails: the memory adapter seals and appends at once, so the
		// slice is sealed here by hand, as the Kubernetes adapter leaves it when its patch fails.
		h.SealSlice(t, comp.Namespace, names[0], comp.ResourceVersion)
		_, err = h.TombstoneSink().PublishTombstones(t.Context(), comp, handoffOf(comp, sampleTombstones()[:1]))
		require.ErrorIs(t, err, ports.ErrSynthesisMoved)
		assertRecoverySlices(t, h, comp, names, handoff)
	})

	t.Run("CommitTombstones appends every slice of a large hand-off, in order", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := largeHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)

		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, handoff, names))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, append(slices.Clone(comp.Synthesis.Slices), names...), live.Synthesis.Slices)
		committed, ok := live.CommittedRecoverySlices()
		require.True(t, ok)
		assert.Equal(t, names, committed)
		// Again, from the read before the append: every slice is named, nothing is written.
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, handoff, names))
		again, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, live.ResourceVersion, again.ResourceVersion)
		assertRecoverySlices(t, h, live, names, handoff)
	})

	t.Run("CommitTombstones adds the whole list to a synthesis that has none", func(t *testing.T) {
		for name, handoffFor := range map[string]func(domain.Composition) domain.Handoff{"one slice": sampleHandoff, "several slices": largeHandoff} {
			t.Run(name, func(t *testing.T) {
				h := newHarness(t)
				c := sampleComposition(h)
				c.Synthesis.Slices = nil // an empty synthesis has no resourceSlices key at all
				comp := h.CreateComposition(t, c)
				names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoffFor(comp))
				require.NoError(t, err)

				require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, handoffFor(comp), names))
				live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
				require.NoError(t, err)
				assert.Equal(t, names, live.Synthesis.Slices)
			})
		}
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
				names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
				require.NoError(t, err)
				syn := *comp.Synthesis
				syn.Slices = slices.Clone(comp.Synthesis.Slices)
				moved, inFlight := tt.change(&syn)
				stored := h.SetSynthesis(t, comp.Ref(), moved, inFlight)

				err = h.TombstoneSink().CommitTombstones(t.Context(), comp, sampleHandoff(comp), names)
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
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, sampleHandoff(comp))
		require.NoError(t, err)
		h.SetAnnotation(t, comp.Ref(), domain.AnnotationReview, "reject:"+comp.SynthesisUUID())

		err = h.TombstoneSink().CommitTombstones(t.Context(), comp, sampleHandoff(comp), names)
		require.ErrorIs(t, err, ports.ErrSynthesisMoved)
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices)
	})

	t.Run("CommitTombstones re-reads every slice and never names one when any is gone or terminating", func(t *testing.T) {
		for _, tt := range []struct {
			name    string
			handoff func(domain.Composition) domain.Handoff
			part    int
			remove  func(t testing.TB, h Harness, namespace, name string)
		}{
			{"gone", sampleHandoff, 0, func(t testing.TB, h Harness, ns, n string) { h.RemoveSlice(t, ns, n) }},
			{"terminating", sampleHandoff, 0, func(t testing.TB, h Harness, ns, n string) { h.MarkSliceDeleting(t, ns, n) }},
			{"a later slice gone", largeHandoff, 1, func(t testing.TB, h Harness, ns, n string) { h.RemoveSlice(t, ns, n) }},
			{"a later slice terminating", largeHandoff, 1, func(t testing.TB, h Harness, ns, n string) { h.MarkSliceDeleting(t, ns, n) }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarness(t)
				comp := h.CreateComposition(t, sampleComposition(h))
				names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, tt.handoff(comp))
				require.NoError(t, err)
				tt.remove(t, h, comp.Namespace, names[tt.part])

				require.Error(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, tt.handoff(comp), names))
				live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
				require.NoError(t, err)
				assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices, "none of them named")
			})
		}
	})

	t.Run("CommitTombstones never names a slice of another Composition", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		name := domain.RecoverySliceNames(comp.Name, comp.SynthesisUUID())[0]
		h.CreateSlice(t, domain.ResourceSlice{Namespace: comp.Namespace, Name: name, SynthesisUUID: comp.SynthesisUUID(),
			Resources: sampleHandoff(comp).Resources})

		require.Error(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, sampleHandoff(comp), []string{name}))
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, comp.Synthesis.Slices, live.Synthesis.Slices)
	})

	t.Run("EnsureTombstones does not count a terminating slice as present", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		h.MarkSliceDeleting(t, comp.Namespace, names[0])
		require.Error(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, names, handoff))
	})

	t.Run("EnsureTombstones creates a slice again that is gone", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := sampleHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		require.NoError(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, names, handoff))
		assertRecoverySlices(t, h, comp, names, handoff)

		h.RemoveSlice(t, comp.Namespace, names[0])
		require.ErrorIs(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, names, domain.Handoff{}), ports.ErrNotFound)
		require.NoError(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, names, handoff))
		assertRecoverySlices(t, h, comp, names, handoff)
		assert.Equal(t, comp.UID, h.SliceOwnerUID(t, comp.Namespace, names[0]))
	})

	t.Run("EnsureTombstones checks every slice and creates each gone one again from its own part", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		handoff := largeHandoff(comp)
		names, err := h.TombstoneSink().PublishTombstones(t.Context(), comp, handoff)
		require.NoError(t, err)
		require.NoError(t, h.TombstoneSink().CommitTombstones(t.Context(), comp, handoff, names))
		gone := names[1:3]
		for _, name := range gone {
			h.RemoveSlice(t, comp.Namespace, name)
		}

		err = h.TombstoneSink().EnsureTombstones(t.Context(), comp, names, domain.Handoff{})
		require.ErrorIs(t, err, ports.ErrNotFound)
		var lost *ports.SlicesLostError
		require.ErrorAs(t, err, &lost)
		assert.Equal(t, gone, lost.Slices, "every gone slice, and only those")

		require.NoError(t, h.TombstoneSink().EnsureTombstones(t.Context(), comp, names, handoff))
		assertRecoverySlices(t, h, comp, names, handoff)
	})

	t.Run("ArmTombstones and DisarmTombstones write the arming annotation, guarded by the resourceVersion", func(t *testing.T) {
		h := newHarness(t)
		comp := h.CreateComposition(t, sampleComposition(h))
		armed, err := h.TombstoneSink().ArmTombstones(t.Context(), comp, "0123456789abcdef")
		require.NoError(t, err)
		assert.Equal(t, "0123456789abcdef", armed.Annotations[domain.AnnotationArmed])
		assert.NotEqual(t, comp.ResourceVersion, armed.ResourceVersion, "the commit tests the armed resourceVersion")
		live, err := h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, armed.ResourceVersion, live.ResourceVersion)
		again, err := h.TombstoneSink().ArmTombstones(t.Context(), armed, "0123456789abcdef")
		require.NoError(t, err)
		assert.Equal(t, armed.ResourceVersion, again.ResourceVersion, "already armed: no write")
		_, err = h.TombstoneSink().ArmTombstones(t.Context(), comp, "fedcba9876543210")
		require.ErrorIs(t, err, ports.ErrConflict, "comp's resourceVersion is stale")

		require.ErrorIs(t, h.TombstoneSink().DisarmTombstones(t.Context(), withAnnotation(comp, domain.AnnotationArmed, "x")), ports.ErrConflict)
		require.NoError(t, h.TombstoneSink().DisarmTombstones(t.Context(), live))
		live, err = h.CompositionGuard().LiveComposition(t.Context(), comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, domain.ArmedOff, live.Annotations[domain.AnnotationArmed])
		require.NoError(t, h.TombstoneSink().DisarmTombstones(t.Context(), live), "not armed: nothing to do")
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
	})
	if err != nil {
		panic(err)
	}
	return h
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
			Annotations: handoff.SliceAnnotations(),
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

// withAnnotation is comp with one more annotation, its map not shared.
func withAnnotation(comp domain.Composition, key, value string) domain.Composition {
	annotations := map[string]string{key: value}
	for k, v := range comp.Annotations {
		annotations[k] = v
	}
	comp.Annotations = annotations
	return comp
}
