package app_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// writtenBy stamps secrets as the control plane cp wrote them; "" as written before control
// planes were named.
func writtenBy(cp string, secrets []domain.ChunkSecret) []domain.ChunkSecret {
	for i := range secrets {
		if cp == "" {
			delete(secrets[i].Annotations, domain.AnnotationControlPlane)
			continue
		}
		secrets[i].Annotations[domain.AnnotationControlPlane] = cp
	}
	return secrets
}

// design §3: two control planes share one downstream cluster. Recovery reads only the history
// its own control plane wrote, or one written before control planes were named; a lineage
// another control plane also records is refused, as its Composition cannot be read from here.
func TestRecoverReadsOnlyItsControlPlanesHistory(t *testing.T) {
	rs := resources(9)
	for _, tc := range []struct {
		name    string
		secrets func(t *testing.T) []domain.ChunkSecret
		outcome domain.Outcome
		reason  string
		source  string
	}{
		{"another control plane's only: refused, its Composition may live", func(t *testing.T) []domain.ChunkSecret {
			return writtenBy(otherControlPlane, snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs))
		}, domain.OutcomeInventoryInvalid, domain.ReasonSharedLineage.String(), ""},
		{"its own beside another's older one: refused", func(t *testing.T) []domain.ChunkSecret {
			other := writtenBy(otherControlPlane, snapshotSecrets(t, "uid-b", "99999999", oldTime.Add(-time24h), chunkLimit, resources(12)))
			return append(snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs), other...)
		}, domain.OutcomeInventoryInvalid, domain.ReasonSharedLineage.String(), ""},
		{"unnamed alone: read as its own, held for a person", func(t *testing.T) []domain.ChunkSecret {
			return writtenBy("", snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs))
		}, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, oldSynth},
		{"unnamed next to another's: refused", func(t *testing.T) []domain.ChunkSecret {
			other := writtenBy(otherControlPlane, snapshotSecrets(t, "uid-b", "99999999", oldTime.Add(-time24h), 100000, rs[:1]))
			return append(writtenBy("", snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)), other...)
		}, domain.OutcomeInventoryInvalid, domain.ReasonSharedLineage.String(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:4])
			f.cfg.MaxTombstoneFraction = 1
			f.store.ListChunksReturns(tc.secrets(t), nil)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.NoError(t, err)
			d := writtenDecision(t, f)
			assert.Equal(t, tc.outcome, d.Outcome, d.Message)
			assert.Equal(t, tc.reason, d.Reason)
			assert.Equal(t, tc.source, d.SourceSynthesisUUID)
			if tc.outcome != domain.OutcomeRecovered {
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount(), "nothing handed to Eno")
			}
		})
	}
}

// design §4: recording never overwrites another control plane's Secret, whose Composition it
// cannot read; it adopts one written before control planes were named.
func TestRecordRefusesAnotherControlPlanesSecret(t *testing.T) {
	theirs := func(t *testing.T, cp string) []domain.ChunkSecret {
		return writtenBy(cp, snapshotSecrets(t, "uid-b", oldSynth, oldTime, chunkLimit, resources(9)))
	}
	t.Run("another control plane's: refused, nothing written", func(t *testing.T) {
		f := newFixture(t)
		f.store.ListChunksReturns(theirs(t, otherControlPlane), nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		var lc *app.LineageCollisionError
		require.ErrorAs(t, err, &lc)
		assert.Equal(t, otherControlPlane, lc.OtherControlPlane)
		assert.Contains(t, err.Error(), "control plane "+otherControlPlane)
		assert.Zero(t, f.writes())
		assert.Zero(t, f.live.LiveCompositionCallCount(), "another control plane's Composition is not read on this one")
	})
	t.Run("unnamed: adopted and stamped", func(t *testing.T) {
		f := newFixture(t)
		f.store.ListChunksReturns(theirs(t, ""), nil)
		_, err := f.service(t).Record(ctx(t), f.comp)
		require.NoError(t, err)
		require.Positive(t, f.store.UpdateChunkCallCount())
		_, written := f.store.UpdateChunkArgsForCall(0)
		assert.Equal(t, thisControlPlane, written.Annotations[domain.AnnotationControlPlane])
	})
	t.Run("unnamed, of this synthesis: not rewritten, its write time stays", func(t *testing.T) {
		f := newFixture(t)
		f.store.ListChunksReturns(writtenBy("", snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9))), nil)
		res, err := f.service(t).Record(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 3, res.Reused)
		assert.Zero(t, f.writes())
	})
}

// design §7: prune selects only Secrets its control plane wrote. Another control plane's gone
// lineages are not this one's to judge, nor do they count as this one's living lineages.
func TestPruneNeverSelectsAnotherControlPlanesSecrets(t *testing.T) {
	f, p := newPruneFixture(t)
	secrets := pruneSecrets(t, "live", "gone", "gone2")
	writtenBy(otherControlPlane, secrets[1:2])
	writtenBy("", secrets[2:])
	f.inventory.ListInventoryReturns(secrets, nil)
	report, _, err := p.Plan(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 1, report.Total, "%+v", report.Secrets)
	assert.Equal(t, "gone2-"+domain.DefaultLineage("team-a", "gone2").String()+"-0", report.Secrets[0].Name, "unnamed, with no other control plane in its lineage")
	require.Len(t, report.Kept, 1)
	assert.Equal(t, domain.DefaultLineage("team-a", "gone").String(), report.Kept[0].Lineage)
	assert.Contains(t, report.Kept[0].Why, "another control plane")

	t.Run("unnamed next to another control plane's", func(t *testing.T) {
		f, p := newPruneFixture(t)
		mine := pruneSecrets(t, "live", "gone2")
		other := writtenBy(otherControlPlane, pruneSecrets(t, "gone2"))
		other[0].Name += "-b"
		f.inventory.ListInventoryReturns(append(writtenBy("", mine[1:]), append(other, mine[0])...), nil)
		report, _, err := p.Plan(ctx(t))
		require.NoError(t, err)
		assert.Zero(t, report.Total, "%+v", report.Secrets)
		assert.Empty(t, report.GoneRefused, "this control plane has a living lineage")
	})
}
