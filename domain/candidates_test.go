package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// recordedBy is a snapshot of entriesN(n) recorded for namespace/name by incarnation uid.
func recordedBy(t testing.TB, namespace, name, uid, synthesis string, at time.Time, n int) []domain.ChunkSecret {
	t.Helper()
	inv := mustInventory(t, entriesN(n))
	m := meta(inv, uid, synthesis, at)
	m.CompositionNamespace, m.CompositionName = namespace, name
	return secretsFor(t, inv, m, 400)
}

func join(sets ...[]domain.ChunkSecret) []domain.ChunkSecret {
	var out []domain.ChunkSecret
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// SPEC §5 step 3: the candidates are the Composition's own snapshots; all of the lineage's
// only when it has none. A candidate with its UID stops with SameIncarnation, before steps 4–5.
func TestReadSnapshotForCandidates(t *testing.T) {
	self := composition() // team-a/web, compUID
	older, newer := synTime.Add(-2*time.Hour), synTime.Add(-time.Hour)
	ownOld := recordedBy(t, "team-a", "web", "uid-pred", "s-own", older, 3)
	sibling := recordedBy(t, "team-a", "east", "uid-east", "s-east", newer, 4)
	otherNS := recordedBy(t, "team-b", "web", "uid-b", "s-b", newer, 2)
	mine := recordedBy(t, "team-a", "web", compUID, "s-mine", older.Add(-time.Hour), 20)
	require.Greater(t, len(mine), 1)
	tests := []struct {
		name    string
		secrets []domain.ChunkSecret
		want    string // the selected snapshot's synthesis
		wantErr error
		reason  domain.InvalidReason
	}{
		{"own predecessor wins over a newer sibling", join(ownOld, sibling), "s-own", nil, domain.InvalidReason{}},
		{"own predecessor wins over the same name in another namespace", join(ownOld, otherNS), "s-own", nil, domain.InvalidReason{}},
		{"no own snapshot: a rename reads the whole lineage", sibling, "s-east", nil, domain.InvalidReason{}},
		{"no own snapshot: the newest of the lineage", join(sibling, recordedBy(t, "team-c", "x", "uid-x", "s-x", older, 2)), "s-east", nil, domain.InvalidReason{}},
		{"a candidate of this incarnation stops", join(ownOld, mine, sibling), "s-mine", domain.ErrSameIncarnation, domain.InvalidReason{}},
		{"ambiguity among own candidates", join(ownOld, recordedBy(t, "team-a", "web", "uid-pred2", "s-own2", older, 2)), "", nil, domain.ReasonAmbiguousTimestamp},
		{"a tie with a non-candidate is no ambiguity", join(ownOld, recordedBy(t, "team-a", "east", "uid-east", "s-east", older, 2)), "s-own", nil, domain.InvalidReason{}},
		{"a corrupt non-candidate still makes the lineage untrusted (step 1)", join(ownOld, corrupt(sibling)), "", nil, domain.ReasonMalformed},
		{"an incomplete non-candidate is ignored (steps 4–5 judge only the selected)", join(ownOld, sibling[:1]), "s-own", nil, domain.InvalidReason{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := domain.ReadSnapshotFor(self, tt.secrets, now, 0)
			switch {
			case tt.reason != domain.InvalidReason{}:
				assert.Equal(t, tt.reason, invalidReason(t, err))
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, tt.want, snap.SynthesisUUID())
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, snap.SynthesisUUID())
			}
		})
	}
	t.Run("SameIncarnation is decided before the own snapshot's chunks are judged", func(t *testing.T) {
		_, err := domain.ReadSnapshotFor(self, mine[1:], now, 0) // chunk 0 missing
		require.ErrorIs(t, err, domain.ErrSameIncarnation)
	})
	t.Run("the lineage-wide read has no candidates of its own", func(t *testing.T) {
		snap, err := domain.ReadSnapshot(join(ownOld, sibling), now, 0)
		require.NoError(t, err)
		assert.Equal(t, "s-east", snap.SynthesisUUID())
	})
}

func corrupt(secrets []domain.ChunkSecret) []domain.ChunkSecret {
	out := append([]domain.ChunkSecret(nil), secrets...)
	c := out[0]
	c.Annotations = map[string]string{}
	for k, v := range secrets[0].Annotations {
		c.Annotations[k] = v
	}
	c.Annotations[domain.AnnotationChunkCount] = "many"
	out[0] = c
	return out
}

func TestSnapshotWriteTime(t *testing.T) {
	secrets := recordedBy(t, "team-a", "web", "uid-pred", "s", synTime, 6)
	require.Greater(t, len(secrets), 1)
	later := historyWritten.Add(3 * time.Second)
	secrets[1].DataWrittenAt = later
	snap, err := domain.ReadSnapshot(secrets, now, 0)
	require.NoError(t, err)
	at, known := snap.WriteTime()
	assert.True(t, known)
	assert.Equal(t, later, at, "the newest chunk write")

	secrets[0].DataWrittenAt = time.Time{}
	snap, err = domain.ReadSnapshot(secrets, now, 0)
	require.NoError(t, err)
	_, known = snap.WriteTime()
	assert.False(t, known, "one chunk of unknown write time makes the snapshot's unknown")
}

// SPEC §6 order of evaluation: for each adjacent pair of rules, a case where both apply shows
// that the earlier one decides.
func TestPlanRecoveryOrderOfEvaluation(t *testing.T) {
	self := composition()
	pred := recordedBy(t, "team-b", "web", "uid-pred", "s-pred", synTime.Add(-time.Hour), 4) // another ref: a rename
	predSnap, err := domain.ReadSnapshotFor(self, pred, now, 0)
	require.NoError(t, err)
	alreadyFrom := func(c *domain.Composition) {
		c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: "earlier", Outcome: domain.OutcomeRecovered, RecoveredFrom: "s-pred"}.Encode()
	}
	allPresentOld := func(ts []domain.Tombstone) map[domain.ResourceID]domain.Observation {
		m := map[domain.ResourceID]domain.Observation{}
		for _, x := range ts {
			m[x.Entry.ID()] = domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour)}
		}
		return m
	}
	tests := []struct {
		name     string
		in       func() domain.RecoveryInput
		want     domain.Outcome
		reason   string
		observed bool
	}{
		{"§5 before SharedLineage: an invalid history is refused even if its source lives", func() domain.RecoveryInput {
			return domain.RecoveryInput{SnapshotErr: &domain.InventoryInvalidError{Reason: domain.ReasonMissingChunk}, SourceAlive: true}
		}, domain.OutcomeInventoryInvalid, domain.ReasonMissingChunk.String(), false},
		{"SharedLineage before AlreadyDecided", func() domain.RecoveryInput {
			c := composition()
			alreadyFrom(&c)
			return domain.RecoveryInput{Composition: c, Snapshot: predSnap, SourceAlive: true}
		}, domain.OutcomeInventoryInvalid, domain.ReasonSharedLineage.String(), false},
		{"AlreadyDecided before the absent entries", func() domain.RecoveryInput {
			c := composition()
			alreadyFrom(&c)
			return domain.RecoveryInput{Composition: c, Snapshot: predSnap, Synthesis: producing(t, 0)}
		}, domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, false},
		{"the absent entries before §6.3: nothing absent needs no downstream read", func() domain.RecoveryInput {
			return domain.RecoveryInput{Snapshot: predSnap, Synthesis: producing(t, 4)}
		}, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, false},
		{"§6.3 before the guard: dropped tombstones do not trip it", func() domain.RecoveryInput {
			in := domain.RecoveryInput{Snapshot: predSnap, Synthesis: producing(t, 0), MaxTombstoneFraction: 0.5}
			obs := allPresentOld(nil)
			for i, e := range entriesN(4) {
				if i < 3 {
					obs[e.ID()] = domain.Observation{State: domain.ObjectAbsent}
				} else {
					obs[e.ID()] = domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour)}
				}
			}
			in.Observed = obs
			return in
		}, domain.OutcomeRecovered, "", true},
		{"the guard before publication", func() domain.RecoveryInput {
			in := domain.RecoveryInput{Snapshot: predSnap, Synthesis: producing(t, 0), MaxTombstoneFraction: 0.5}
			var ts []domain.Tombstone
			for _, e := range entriesN(4) {
				ts = append(ts, domain.Tombstone{Entry: e})
			}
			in.Observed = allPresentOld(ts)
			return in
		}, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in()
			if in.Composition.Synthesis == nil {
				in.Composition = self
			}
			in.Now = now
			if in.MaxTombstoneFraction == 0 {
				in.MaxTombstoneFraction = 1
			}
			p, err := domain.PlanRecovery(in)
			require.NoError(t, err)
			require.True(t, p.Decided(), "decided without downstream reads: %v", p.Verify)
			assert.Equal(t, tt.want, p.Decision.Outcome, p.Decision.Message)
			assert.Equal(t, tt.reason, p.Decision.Reason)
		})
	}
}

func TestPlanRecoverySharedLineage(t *testing.T) {
	self := composition()
	sib := recordedBy(t, "team-a", "east", "uid-east", "s-east", synTime, 4)
	snap, err := domain.ReadSnapshotFor(self, sib, now, 0)
	require.NoError(t, err)
	require.True(t, domain.NeedsSourceCheck(self, snap))

	p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: self, Snapshot: snap, SourceAlive: true, Synthesis: producing(t, 0), MaxTombstoneFraction: 1, Now: now})
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeInventoryInvalid, p.Decision.Outcome)
	assert.Equal(t, "SharedLineage", p.Decision.Reason)
	assert.Empty(t, p.Tombstones)
	assert.Empty(t, p.Decision.RecoveredFrom, "a SharedLineage refusal never blocks a later recovery")

	// The source is gone (a rename): recovery proceeds.
	p = planObserved(t, domain.RecoveryInput{Composition: self, Snapshot: snap, Synthesis: producing(t, 2), MaxTombstoneFraction: 1, Now: now})
	assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
	assert.Len(t, p.Tombstones, 2)

	// The own predecessor needs no live check.
	own := recordedBy(t, "team-a", "web", "uid-pred", "s", synTime, 4)
	snap, err = domain.ReadSnapshotFor(self, own, now, 0)
	require.NoError(t, err)
	assert.False(t, domain.NeedsSourceCheck(self, snap))
	p = planObserved(t, domain.RecoveryInput{Composition: self, Snapshot: snap, SourceAlive: true, Synthesis: producing(t, 2), MaxTombstoneFraction: 1, Now: now})
	assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome, "SourceAlive means nothing for the own predecessor")
}
