package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// A recording carries the unresolved entries of the history it replaces into the new chunk 0,
// and drops each whose object a read finds gone or replaced.
func TestRecordCarriesUnresolvedUntilTheObjectIsGone(t *testing.T) {
	kept := func(n string) domain.Unresolved {
		return domain.Unresolved{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: n, UID: testUID, Reason: "ManagedElsewhere",
			Since: historyWritten, SourceSynthesisUUID: oldSynth}
	}
	for name, tc := range map[string]struct {
		observed domain.Observation
		want     []domain.Unresolved
	}{
		"still there":    {domain.Observation{State: domain.ObjectPresent, UID: testUID}, []domain.Unresolved{kept("x-kept")}},
		"read failed":    {domain.Observation{State: domain.ObjectReadFailed}, []domain.Unresolved{kept("x-kept")}},
		"gone":           {domain.Observation{State: domain.ObjectAbsent}, nil},
		"another object": {domain.Observation{State: domain.ObjectPresent, UID: "another"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			old := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
			old[0] = domain.WithUnresolved(old[0], []domain.Unresolved{kept("x-kept")})
			f.store.ListChunksReturns(old, nil)
			f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
				require.Equal(t, "x-kept", e.Name)
				return tc.observed, nil
			})
			_, err := f.service(t).Record(ctx(t), f.comp)
			require.NoError(t, err)
			var written []domain.ChunkSecret
			for i := range f.store.UpdateChunkCallCount() {
				_, s := f.store.UpdateChunkArgsForCall(i)
				written = append(written, s)
			}
			for i := range f.store.CreateChunkCallCount() {
				_, s := f.store.CreateChunkArgsForCall(i)
				written = append(written, s)
			}
			snap, err := domain.ReadHistory(written, now, 0).Verdict()
			require.NoError(t, err, "the new snapshot reads back, chunk 0 within its limit")
			assert.Equal(t, synthID, snap.SynthesisUUID())
			assert.Equal(t, tc.want, snap.Unresolved())
			for _, s := range written {
				assert.LessOrEqual(t, len(s.Data[domain.SecretDataKey]), chunkLimit)
			}
		})
	}
}

// Chunk 0's inventory leaves room for the unresolved entries: its data stays within the API
// server's limit on a Secret.
func TestRecordLeavesRoomForUnresolved(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxChunkBytes = domain.SecretDataLimit
	big := domain.Unresolved{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "kept", UID: testUID, Reason: "ManagedElsewhere",
		Detail: strings.Repeat("x", domain.SecretDataLimit-600), Since: historyWritten, SourceSynthesisUUID: oldSynth}
	old := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(9))
	old[0] = domain.WithUnresolved(old[0], []domain.Unresolved{big})
	f.store.ListChunksReturns(old, nil)
	res, err := f.service(t).Record(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Greater(t, res.Chunks, 1, "the inventory moved out of chunk 0 to make room")
	for i := range f.store.UpdateChunkCallCount() {
		_, s := f.store.UpdateChunkArgsForCall(i)
		assert.LessOrEqual(t, s.DataSize(), domain.SecretDataLimit, s.Name)
	}
	for i := range f.store.CreateChunkCallCount() {
		_, s := f.store.CreateChunkArgsForCall(i)
		assert.LessOrEqual(t, s.DataSize(), domain.SecretDataLimit, s.Name)
	}
}
