package reliability_test

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The recovery slice is deleted under the hand-off (design §6.2): before the append, as Eno's
// cleanup deletes a slice no synthesis names yet; after it, before the decision; after the
// decision, before the forced resynthesis. A recovery slice is never written again, and the pass
// that named it decides without reading it back (a resume after a crash refuses a gone slice as
// RecoverySliceLost: app's tests). Each time Eno deletes nothing recovery did not hand it: the
// orphans may remain (a skipped cleanup), what the new synthesis keeps always does.
func TestRecoverySliceDeletedUnderTheHandoff(t *testing.T) {
	for _, before := range []string{memory.OpAppendRecoverySlice, memory.OpWriteDecision, memory.OpRequestResynthesis} {
		t.Run("deleted before "+before, func(t *testing.T) {
			ctx := logr.NewContext(t.Context(), testr.New(t))
			w := newWorld(t, crashChunkBytes, 1.0)
			kept, orphans := names("kept", 3), []string{"orphan-00", "orphan-01"}
			w.create(crashRef, true, append(kept, orphans...)...)
			_, err := w.service().Reconcile(ctx, crashRef)
			require.NoError(t, err)
			recreated := w.recreate(crashRef, true, kept...)
			family := domain.RecoverySliceFamily(crashRef.Name, recreated.SynthesisUUID())

			var slice string
			w.cluster.SetBeforeWrite(func(op, _ string) error {
				if op != before || slice != "" {
					return nil
				}
				recovery := w.recoverySlices()
				require.Len(t, recovery, 1)
				slice = recovery[0].Name
				require.NoError(t, w.cluster.DeleteSlice(crashRef.Namespace, slice))
				return nil
			})
			_, err = w.service().Reconcile(ctx, crashRef)
			w.cluster.SetBeforeWrite(nil)
			require.NotEmpty(t, slice, "the pass reached %s", before)
			require.Contains(t, slice, family)
			require.NoError(t, err)
			require.True(t, w.live(crashRef).NamesSlice(slice))

			_, err = w.service().Reconcile(ctx, crashRef)
			require.NoError(t, err)
			d, decided := w.live(crashRef).FinishedDecision()
			require.True(t, decided)
			assert.Equal(t, domain.OutcomeRecovered, d.Outcome, "the decision stands: the pass never reads its slices back")
			assert.Equal(t, slice, d.TombstoneSlice)
			_, err = w.cluster.GetSlice(ctx, crashRef.Namespace, slice)
			assert.Error(t, err, "a recovery slice is never written again")
			assert.Len(t, w.recoverySlices(), 0)
			did, err := w.enoFollows(crashRef)
			require.NoError(t, err)
			require.True(t, did, "Eno synthesizes again, and skips the missing slice")
			assert.Subset(t, w.downstream(crashRef.Namespace), cmIDs(crashRef.Namespace, kept...), "what the new synthesis keeps stays")
			assert.Subset(t, w.downstream(crashRef.Namespace), cmIDs(crashRef.Namespace, orphans...), "the gone slice's tombstones were not carried: a skipped cleanup")
			assert.Empty(t, w.badDeletions())
		})
	}
}
