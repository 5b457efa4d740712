package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A synthesis that is not Ready, so not recorded, and disables an entry the snapshot records
// enabled marks the snapshot: one write, once per synthesis (design §4, disabled later).
func TestReconcileMarksWhatAnUnrecordedSynthesisDisabled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disables bool
	}{{"it disables cm-05", true}, {"it disables nothing", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rs := resources(9)
			f.setSynthesis(synthID, rs)
			if tc.disables {
				f.slices[0].Resources[5].Manifest = strings.Replace(f.slices[0].Resources[5].Manifest, `"annotations":{`,
					`"annotations":{"`+domain.AnnotationDisableReconciliation+`":"true",`, 1)
			}
			sl := f.slices[0]
			f.reader.GetSliceCalls(func(context.Context, string, string) (domain.ResourceSlice, error) { return sl, nil })
			f.comp = composition(uid, synthID, f.slices, true)
			f.comp.Synthesis.Ready = false
			f.store.ListChunksReturns(snapshotSecrets(t, uid, oldSynth, oldTime, chunkLimit, rs), nil)
			f.store.MarkChunkCalls(func(_ context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) { return s, nil })
			svc := f.service(t)

			res, err := svc.Reconcile(ctx(t), f.comp.Ref())
			require.NoError(t, err)
			require.NotNil(t, res.Skipped)
			assert.Equal(t, domain.IneligibleNotReady, res.Skipped.Reason)
			reads := f.reader.GetSliceCallCount()
			assert.Equal(t, 1, reads, "the synthesis is read for what it disables")
			assert.Zero(t, f.store.UpdateChunkCallCount()+f.store.CreateChunkCallCount(), "nothing is recorded")
			if !tc.disables {
				assert.Zero(t, f.store.ListChunksCallCount(), "nothing disabled: the Secrets are not even listed")
				assert.Zero(t, f.store.MarkChunkCallCount())
			} else {
				require.Equal(t, 1, f.store.MarkChunkCallCount())
				_, marked := f.store.MarkChunkArgsForCall(0)
				assert.JSONEq(t, `{"snapshot":"`+oldSynth+`","ids":[{"kind":"ConfigMap","namespace":"team-a","name":"cm-05"}]}`,
					marked.Annotations[domain.AnnotationDisabledLater])
				assert.Equal(t, "100", marked.ResourceVersion, "the write is guarded by the version listed")
				assert.Equal(t, 1, f.events.Count())
			}

			_, err = svc.Reconcile(ctx(t), f.comp.Ref())
			require.NoError(t, err)
			assert.Equal(t, reads, f.reader.GetSliceCallCount(), "once per synthesis")
			assert.LessOrEqual(t, f.store.MarkChunkCallCount(), 1)
		})
	}
}

// While OwnHistory refuses the lineage (another control plane's Secret in it), the check is not
// done: a later reconcile checks again, and marks once the refusal is gone (design §3, §4).
func TestDisabledLaterRetriesARefusedHistory(t *testing.T) {
	f := newFixture(t)
	rs := resources(9)
	f.setSynthesis(synthID, rs)
	f.slices[0].Resources[5].Manifest = strings.Replace(f.slices[0].Resources[5].Manifest, `"annotations":{`,
		`"annotations":{"`+domain.AnnotationDisableReconciliation+`":"true",`, 1)
	sl := f.slices[0]
	f.reader.GetSliceCalls(func(context.Context, string, string) (domain.ResourceSlice, error) { return sl, nil })
	f.comp = composition(uid, synthID, f.slices, true)
	f.comp.Synthesis.Ready = false
	own := snapshotSecrets(t, uid, oldSynth, oldTime, chunkLimit, rs)
	other := writtenBy(otherControlPlane, snapshotSecrets(t, "uid-b", "99999999", oldTime, chunkLimit, rs[:1]))
	other[0].Name += "-b"
	f.store.ListChunksReturns(append(own, other...), nil)
	f.store.MarkChunkCalls(func(_ context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) { return s, nil })
	svc := f.service(t)

	for i := 1; i <= 2; i++ {
		_, err := svc.Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, i, f.store.ListChunksCallCount(), "refused: checked again on the next reconcile")
		assert.Zero(t, f.store.MarkChunkCallCount())
	}
	f.store.ListChunksReturns(own, nil)
	_, err := svc.Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, 1, f.store.MarkChunkCallCount(), "marked once the refusal is gone")
}
