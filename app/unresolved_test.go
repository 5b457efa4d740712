package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
			written := writtenChunks(f)
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

// writtenChunks is every chunk Secret the recording created or updated, in call order.
func writtenChunks(f *fixture) []domain.ChunkSecret {
	var written []domain.ChunkSecret
	for i := range f.store.UpdateChunkCallCount() {
		_, s := f.store.UpdateChunkArgsForCall(i)
		written = append(written, s)
	}
	for i := range f.store.CreateChunkCallCount() {
		_, s := f.store.CreateChunkArgsForCall(i)
		written = append(written, s)
	}
	return written
}

// unresolvedNames lists the written snapshot's unresolved entries as "name reason".
func unresolvedNames(t *testing.T, f *fixture) []string {
	t.Helper()
	us, unreadable := domain.UnresolvedIn(writtenChunks(f), f.comp.Ref())
	require.Empty(t, unreadable)
	var out []string
	for _, u := range us {
		out = append(out, u.Name+" "+u.Reason)
	}
	return out
}

// What a Recovered plan kept for a person reaches, by its recovery slice, the recording of the
// carrying synthesis, which plans nothing itself.
func TestRecordCarriesWhatTheRecoveredPlanKept(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:6])
	f.cfg.MaxTombstoneFraction = 1
	f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		o := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
		if e.Name == "cm-06" {
			o.Writes = append(o.Writes, domain.ObjectWrite{Manager: "argocd", Time: historyWritten.Add(-time.Hour)})
		}
		return o, nil
	})
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	d := writtenDecision(t, f)
	require.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
	require.Equal(t, 2, d.Tombstones, d.Message)
	require.Zero(t, f.writes(), "a Recovered synthesis is never recorded")

	carry(f, rs[:6])
	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, []string{"cm-06 ManagedElsewhere", "cm-07 OrphansRemain", "cm-08 OrphansRemain"}, unresolvedNames(t, f))
	_, state := f.metrics.CompositionObservedArgsForCall(f.metrics.CompositionObservedCallCount() - 1)
	assert.Equal(t, 3, state.Unresolved, "the gauge counts them")
}

// A refused history is overwritten by the next recording: what it names and the synthesis does
// not is carried, unchecked, so nothing it left is forgotten; the fast path counts it again
// after a restart from chunk 0, read live once.
func TestRecordCarriesARefusedHistorysOrphans(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	old := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)
	for _, s := range old {
		s.Annotations[domain.AnnotationDigest] = "sha256:" + strings.Repeat("0", 64)
	}
	f.store.ListChunksReturns(old, nil)
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	d := writtenDecision(t, f)
	require.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome)
	f.comp.Annotations[domain.AnnotationDecision] = d.Encode()
	f.comp.Synthesis.Ready = true // Eno made it Ready: recorded over the refused history
	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, []string{"cm-07 DigestMismatch", "cm-08 DigestMismatch"}, unresolvedNames(t, f))
	_, state := f.metrics.CompositionObservedArgsForCall(f.metrics.CompositionObservedCallCount() - 1)
	assert.Equal(t, 2, state.Unresolved)

	// A restart: the fast path finds the snapshot recorded and reads chunk 0 once to count.
	written := writtenChunks(f)
	f.store.ListCachedChunksReturns(written, nil)
	f.store.GetChunkReturns(written[0], nil)
	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.Equal(t, 1, f.store.GetChunkCallCount())
	_, state = f.metrics.CompositionObservedArgsForCall(f.metrics.CompositionObservedCallCount() - 1)
	assert.Equal(t, 2, state.Unresolved)
}
