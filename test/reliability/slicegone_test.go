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

// The recovery slice is deleted under the hand-off (design §6.2): before the append, as
// eno-controller's cleanup deletes a slice no synthesis names yet (the commit point re-reads
// it, refuses, and the next pass publishes it again); after it, before the decision; after the
// decision, before step 4. Each time the hand-off still converges: the slice the synthesis
// names holds the same content, and Eno deletes the orphans, and only them.
func TestRecoverySliceDeletedUnderTheHandoff(t *testing.T) {
	for _, before := range []string{memory.OpCommitTombstones, memory.OpWriteDecision, memory.OpEnsureTombstones} {
		t.Run("deleted before "+before, func(t *testing.T) {
			ctx := logr.NewContext(t.Context(), testr.New(t))
			w := newWorld(t, crashChunkBytes, 1.0)
			kept, orphans := names("kept", 3), []string{"orphan-00", "orphan-01"}
			first := w.create(crashRef, true, append(kept, orphans...)...)
			_, err := w.service().Reconcile(ctx, crashRef)
			require.NoError(t, err)
			recreated := w.recreate(crashRef, true, kept...)
			slice := domain.RecoverySliceName(crashRef.Name, recreated.SynthesisUUID())

			deleted := false
			w.cluster.SetBeforeWrite(func(op, _ string) error {
				if op != before || deleted {
					return nil
				}
				deleted = true
				require.NoError(t, w.cluster.DeleteSlice(crashRef.Namespace, slice))
				return nil
			})
			_, err = w.service().Reconcile(ctx, crashRef)
			w.cluster.SetBeforeWrite(nil)
			require.True(t, deleted, "the pass reached %s", before)
			if before == memory.OpCommitTombstones {
				// The slice is re-read just before the commit point: a gone slice is never named,
				// and the next pass publishes it again.
				require.Error(t, err)
				assert.False(t, w.live(crashRef).NamesSlice(slice), "nothing committed")
				_, err = w.service().Reconcile(ctx, crashRef)
			}
			require.NoError(t, err, "the named slice is created again")
			again, err := w.cluster.GetSlice(ctx, crashRef.Namespace, slice)
			require.NoError(t, err)
			assert.Len(t, again.Resources, len(orphans), "the same tombstones")

			w.settle(ctx, w.service(), crashRef)
			assert.Equal(t, cmIDs(crashRef.Namespace, kept...), w.downstream(crashRef.Namespace), "Eno deleted the orphans")
			assert.Empty(t, w.badDeletions())
			live := w.live(crashRef)
			d, ok := live.FinishedDecision()
			require.True(t, ok)
			assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, "Eno's carrying synthesis is decided and recorded")
			assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason)
			assert.Equal(t, first.SynthesisUUID(), d.RecoveredFrom, "the recovery from the old snapshot is on record")
			assert.NotEqual(t, recreated.SynthesisUUID(), live.SynthesisUUID(), "one more synthesis carried the tombstones")
		})
	}
}
