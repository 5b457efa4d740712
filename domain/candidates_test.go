package domain_test

import (
	"errors"
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

// design §5 step 3: the candidates are the Composition's own snapshots; only when it has none,
// those of its namespace (a rename), or of every namespace when adoption across namespaces is
// allowed. A lineage with snapshots but no candidate is OtherNamespace. A candidate with its UID
// stops with SameIncarnation, before steps 4–5.
func TestReadSnapshotForCandidates(t *testing.T) {
	self := composition() // team-a/web, compUID
	older, newer := synTime.Add(-2*time.Hour), synTime.Add(-time.Hour)
	ownOld := recordedBy(t, "team-a", "web", "uid-pred", "s-own", older, 3)
	sibling := recordedBy(t, "team-a", "east", "uid-east", "s-east", newer, 4)
	otherNS := recordedBy(t, "team-b", "web", "uid-b", "s-b", newer, 2)
	mine := recordedBy(t, "team-a", "web", compUID, "s-mine", older.Add(-time.Hour), 20)
	require.Greater(t, len(mine), 1)
	within, across := domain.AdoptWithinNamespace, domain.AdoptAcrossNamespaces
	tests := []struct {
		name     string
		secrets  []domain.ChunkSecret
		adoption domain.Adoption
		want     string // the selected snapshot's synthesis
		wantErr  error
		reason   domain.InvalidReason
		// namespaces are OtherNamespace's, when the verdict is that.
		namespaces []string
	}{
		{"own predecessor wins over a newer sibling", join(ownOld, sibling), within, "s-own", nil, domain.InvalidReason{}, nil},
		{"own predecessor wins over the same name in another namespace", join(ownOld, otherNS), within, "s-own", nil, domain.InvalidReason{}, nil},
		{"own predecessor wins over another namespace's, adoption allowed", join(ownOld, otherNS), across, "s-own", nil, domain.InvalidReason{}, nil},
		{"no own snapshot: a rename reads its namespace", sibling, within, "s-east", nil, domain.InvalidReason{}, nil},
		{"no own snapshot: another namespace's newer snapshot is no candidate", join(recordedBy(t, "team-a", "east", "uid-east", "s-east-old", older, 2), otherNS), within, "s-east-old", nil, domain.InvalidReason{}, nil},
		{"no own snapshot, adoption allowed: the newest of every namespace", join(recordedBy(t, "team-a", "east", "uid-east", "s-east-old", older, 2), otherNS), across, "s-b", nil, domain.InvalidReason{}, nil},
		{"only another namespace's history: OtherNamespace", otherNS, within, "", &domain.OtherNamespaceError{}, domain.InvalidReason{}, []string{"team-b"}},
		{"only other namespaces' history: OtherNamespace names each", join(otherNS, recordedBy(t, "team-c", "x", "uid-x", "s-x", older, 2)), within, "", &domain.OtherNamespaceError{}, domain.InvalidReason{}, []string{"team-b", "team-c"}},
		{"only another namespace's history, adoption allowed: adopted", otherNS, across, "s-b", nil, domain.InvalidReason{}, nil},
		{"another namespace's snapshot of this UID is no candidate: OtherNamespace, not SameIncarnation", recordedBy(t, "team-b", "web", compUID, "s-b-mine", older, 2), within, "", &domain.OtherNamespaceError{}, domain.InvalidReason{}, []string{"team-b"}},
		{"…and with adoption allowed, SameIncarnation", recordedBy(t, "team-b", "web", compUID, "s-b-mine", older, 2), across, "s-b-mine", domain.ErrSameIncarnation, domain.InvalidReason{}, nil},
		{"a corrupt Secret of another namespace: Malformed before OtherNamespace (step 1)", corrupt(otherNS), within, "", nil, domain.ReasonMalformed, nil},
		{"a tie with another namespace's snapshot is no ambiguity", join(sibling, recordedBy(t, "team-b", "x", "uid-x", "s-x", newer, 2)), within, "s-east", nil, domain.InvalidReason{}, nil},
		{"…but it is when adoption is allowed", join(sibling, recordedBy(t, "team-b", "x", "uid-x", "s-x", newer, 2)), across, "", nil, domain.ReasonAmbiguousTimestamp, nil},
		{"a candidate of this incarnation stops", join(ownOld, mine, sibling), within, "s-mine", domain.ErrSameIncarnation, domain.InvalidReason{}, nil},
		{"ambiguity among own candidates", join(ownOld, recordedBy(t, "team-a", "web", "uid-pred2", "s-own2", older, 2)), within, "", nil, domain.ReasonAmbiguousTimestamp, nil},
		{"a tie with a non-candidate is no ambiguity", join(ownOld, recordedBy(t, "team-a", "east", "uid-east", "s-east", older, 2)), within, "s-own", nil, domain.InvalidReason{}, nil},
		{"a corrupt non-candidate still makes the lineage untrusted (step 1)", join(ownOld, corrupt(sibling)), within, "", nil, domain.ReasonMalformed, nil},
		{"an incomplete non-candidate is ignored (steps 4–5 judge only the selected)", join(ownOld, sibling[:1]), within, "s-own", nil, domain.InvalidReason{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := domain.ReadSnapshotFor(self, tt.secrets, now, 0, tt.adoption)
			var other *domain.OtherNamespaceError
			switch {
			case tt.reason != domain.InvalidReason{}:
				assert.Equal(t, tt.reason, invalidReason(t, err))
			case tt.namespaces != nil:
				require.ErrorAs(t, err, &other)
				assert.Equal(t, tt.namespaces, other.Namespaces)
				assert.Empty(t, snap.SynthesisUUID(), "OtherNamespace selects nothing")
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, tt.want, snap.SynthesisUUID())
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, snap.SynthesisUUID())
			}
			if tt.namespaces == nil {
				assert.False(t, errors.As(err, &other), "not OtherNamespace: %v", err)
			}
		})
	}
	t.Run("SameIncarnation is decided before the own snapshot's chunks are judged", func(t *testing.T) {
		_, err := domain.ReadSnapshotFor(self, mine[1:], now, 0, domain.AdoptWithinNamespace) // chunk 0 missing
		require.ErrorIs(t, err, domain.ErrSameIncarnation)
	})
	t.Run("OtherNamespace is decided before another namespace's chunks are judged", func(t *testing.T) {
		big := recordedBy(t, "team-b", "web", "uid-b", "s-b", newer, 20)
		require.Greater(t, len(big), 1)
		_, err := domain.ReadSnapshotFor(self, big[1:], now, 0, domain.AdoptWithinNamespace) // chunk 0 missing
		var other *domain.OtherNamespaceError
		require.ErrorAs(t, err, &other)
	})
	t.Run("the lineage-wide read has no candidates of its own", func(t *testing.T) {
		snap, err := domain.ReadHistory(join(ownOld, sibling), now, 0).Verdict()
		require.NoError(t, err)
		assert.Equal(t, "s-east", snap.SynthesisUUID())
	})
}

// design §6 SharedLineage reads every other Composition a Secret of the lineage was recorded for,
// candidate or not, whatever its namespace; never the reader itself.
func TestSharedLineageOwners(t *testing.T) {
	self := composition() // team-a/web
	older, newer := synTime.Add(-2*time.Hour), synTime.Add(-time.Hour)
	ownOld := recordedBy(t, "team-a", "web", "uid-pred", "s-own", older, 3)
	successor := recordedBy(t, "team-a", "web-v2", "uid-v2", "s-v2", newer, 2)
	otherNS := recordedBy(t, "team-b", "api", "uid-b", "s-b", newer, 2)
	ref := func(ns, name string) domain.CompositionRef { return domain.CompositionRef{Namespace: ns, Name: name} }
	tests := []struct {
		name    string
		secrets []domain.ChunkSecret
		want    []domain.CompositionRef
	}{
		{"only its own history: no read", ownOld, nil},
		{"a renamed successor's snapshot, not a candidate, is read", join(ownOld, successor), []domain.CompositionRef{ref("team-a", "web-v2")}},
		{"another namespace's, not a candidate, is read", join(ownOld, otherNS), []domain.CompositionRef{ref("team-b", "api")}},
		{"each owner once, sorted", join(otherNS, successor, ownOld, recordedBy(t, "team-a", "web-v2", "uid-v2", "s-v2-old", older, 2)),
			[]domain.CompositionRef{ref("team-a", "web-v2"), ref("team-b", "api")}},
		{"a rename's predecessor", successor, []domain.CompositionRef{ref("team-a", "web-v2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := domain.ReadSnapshotFor(self, tt.secrets, now, 0, domain.AdoptWithinNamespace)
			require.NoError(t, err)
			assert.Equal(t, tt.want, domain.SharedLineageOwners(self, snap))
		})
	}
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
	snap, err := domain.ReadHistory(secrets, now, 0).Verdict()
	require.NoError(t, err)
	at, known := snap.WriteTime()
	assert.True(t, known)
	assert.Equal(t, later, at, "the newest chunk write")

	secrets[0].DataWrittenAt = time.Time{}
	snap, err = domain.ReadHistory(secrets, now, 0).Verdict()
	require.NoError(t, err)
	_, known = snap.WriteTime()
	assert.False(t, known, "one chunk of unknown write time makes the snapshot's unknown")
}

// design §6 order of evaluation: for each adjacent pair of rules, a case where both apply shows
// that the earlier one decides.
func TestPlanRecoveryOrderOfEvaluation(t *testing.T) {
	self := composition()
	pred := recordedBy(t, "team-a", "web-old", "uid-pred", "s-pred", synTime.Add(-time.Hour), 4) // another ref: a rename
	predAlive := []domain.LiveOwner{{Ref: domain.CompositionRef{Namespace: "team-a", Name: "web-old"}}}
	predSnap, err := domain.ReadSnapshotFor(self, pred, now, 0, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	alreadyFrom := func(c *domain.Composition) {
		c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: "earlier", Outcome: domain.OutcomeRecovered, RecoveredFrom: "s-pred"}.Encode()
	}
	allPresentOld := func(ts []domain.Tombstone) map[domain.ResourceID]domain.Observation {
		m := map[domain.ResourceID]domain.Observation{}
		for _, x := range ts {
			m[x.Entry.ID()] = domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
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
		{"design §5 before SharedLineage: an invalid history is refused even if its source lives", func() domain.RecoveryInput {
			return domain.RecoveryInput{SnapshotErr: &domain.InventoryInvalidError{Reason: domain.ReasonMissingChunk}, LiveOwners: predAlive}
		}, domain.OutcomeInventoryInvalid, domain.ReasonMissingChunk.String(), false},
		{"design §5 step 3 before SharedLineage: another namespace's history is OtherNamespace even if its owner lives", func() domain.RecoveryInput {
			return domain.RecoveryInput{SnapshotErr: &domain.OtherNamespaceError{Namespaces: []string{"team-b"}}, LiveOwners: predAlive}
		}, domain.OutcomeNothingToRecover, domain.ReasonOtherNamespace, false},
		{"SharedLineage before AlreadyDecided", func() domain.RecoveryInput {
			c := composition()
			alreadyFrom(&c)
			return domain.RecoveryInput{Composition: c, Snapshot: predSnap, LiveOwners: predAlive}
		}, domain.OutcomeInventoryInvalid, domain.ReasonSharedLineage.String(), false},
		{"AlreadyDecided before the absent entries", func() domain.RecoveryInput {
			c := composition()
			alreadyFrom(&c)
			return domain.RecoveryInput{Composition: c, Snapshot: predSnap, Synthesis: producing(t, 0)}
		}, domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, false},
		{"the absent entries before design §6.3: nothing absent needs no downstream read", func() domain.RecoveryInput {
			return domain.RecoveryInput{Snapshot: predSnap, Synthesis: producing(t, 4)}
		}, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, false},
		{"design §6.3 before the guard: dropped tombstones do not trip it", func() domain.RecoveryInput {
			in := domain.RecoveryInput{Snapshot: predSnap, Synthesis: producing(t, 0), MaxTombstoneFraction: 0.5}
			obs := allPresentOld(nil)
			for i, e := range entriesN(4) {
				if i < 3 {
					obs[e.ID()] = domain.Observation{State: domain.ObjectAbsent}
				} else {
					obs[e.ID()] = domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
				}
			}
			in.Observed = obs
			return in
		}, domain.OutcomeRecovered, "", true},
		{"the guard before publication", func() domain.RecoveryInput {
			in := domain.RecoveryInput{Snapshot: predSnap, Synthesis: producing(t, 0), MaxTombstoneFraction: 0.5}
			var ts []domain.Tombstone
			for _, e := range entriesN(4) {
				ts = append(ts, domain.Tombstone{Entry: e, UID: testUID})
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

// design §6 SharedLineage: any other Composition of the lineage that lives (or could not be read)
// refuses the history, whichever snapshot was selected.
func TestPlanRecoverySharedLineage(t *testing.T) {
	self := composition() // team-a/web
	older, newer := synTime.Add(-2*time.Hour), synTime.Add(-time.Hour)
	ref := func(ns, name string) domain.CompositionRef { return domain.CompositionRef{Namespace: ns, Name: name} }
	sibling := recordedBy(t, "team-a", "east", "uid-east", "s-east", synTime, 4)
	ownStale := recordedBy(t, "team-a", "web", "uid-pred", "s-own", older, 4)
	successor := recordedBy(t, "team-a", "web-v2", "uid-v2", "s-v2", newer, 2)
	otherNS := recordedBy(t, "team-b", "api", "uid-b", "s-b", newer, 2)
	tests := []struct {
		name     string
		secrets  []domain.ChunkSecret
		live     []domain.LiveOwner
		selected string
		shared   bool
		mentions []string
	}{
		{"the selected snapshot's recorder lives: SharedLineage", sibling, []domain.LiveOwner{{Ref: ref("team-a", "east")}}, "s-east", true,
			[]string{"team-a/east (exists)", "give each Composition its own lineage"}},
		{"…or could not be read: it counts as existing", sibling, []domain.LiveOwner{{Ref: ref("team-a", "east"), Forbidden: true}}, "s-east", true,
			[]string{"team-a/east (could not be read: forbidden"}},
		{"the recorder is gone (a rename): recovered", sibling, nil, "s-east", false, nil},
		{"the old name re-created while its renamed successor lives: its own stale snapshot is refused", join(ownStale, successor),
			[]domain.LiveOwner{{Ref: ref("team-a", "web-v2")}}, "s-own", true, []string{"team-a/web-v2 (exists)"}},
		{"another namespace's owner lives, not a candidate: refused", join(ownStale, otherNS),
			[]domain.LiveOwner{{Ref: ref("team-b", "api"), Forbidden: true}}, "s-own", true, []string{"team-b/api (could not be read"}},
		{"every living owner is named", join(ownStale, successor, otherNS),
			[]domain.LiveOwner{{Ref: ref("team-a", "web-v2")}, {Ref: ref("team-b", "api"), Forbidden: true}}, "s-own", true,
			[]string{"team-a/web-v2 (exists), team-b/api (could not be read"}},
		{"the reader itself lives, and counts for nothing", ownStale, []domain.LiveOwner{{Ref: self.Ref()}}, "s-own", false, nil},
		{"a live Composition that recorded nothing of the lineage counts for nothing", ownStale, []domain.LiveOwner{{Ref: ref("team-a", "east")}}, "s-own", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := domain.ReadSnapshotFor(self, tt.secrets, now, 0, domain.AdoptWithinNamespace)
			require.NoError(t, err)
			require.Equal(t, tt.selected, snap.SynthesisUUID())
			p := planObserved(t, domain.RecoveryInput{Composition: self, Snapshot: snap, LiveOwners: tt.live, Synthesis: producing(t, 1), MaxTombstoneFraction: 1, Now: now})
			if !tt.shared {
				assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome, p.Decision.Message)
				return
			}
			assert.Equal(t, domain.OutcomeInventoryInvalid, p.Decision.Outcome)
			assert.Equal(t, "SharedLineage", p.Decision.Reason)
			assert.Empty(t, p.Tombstones)
			assert.Empty(t, p.Verify, "decided before any downstream read")
			assert.Empty(t, p.Decision.RecoveredFrom, "a SharedLineage refusal never blocks a later recovery")
			for _, m := range tt.mentions {
				assert.Contains(t, p.Decision.Message, m)
			}
		})
	}
}

// design §5 step 3, OtherNamespace: finished, no tombstones, the namespaces named, and no
// recoveredFrom of its own: it carries the one it replaces.
func TestPlanRecoveryOtherNamespace(t *testing.T) {
	self := composition()
	self.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: "earlier", Outcome: domain.OutcomeRecovered, RecoveredFrom: "s-earlier"}.Encode()
	_, snapErr := domain.ReadSnapshotFor(self, join(recordedBy(t, "team-b", "web", "uid-b", "s-b", synTime, 4), recordedBy(t, "team-c", "web", "uid-c", "s-c", synTime, 4)), now, 0, domain.AdoptWithinNamespace)
	p, err := domain.PlanRecovery(domain.RecoveryInput{Composition: self, SnapshotErr: snapErr, Synthesis: producing(t, 0), MaxTombstoneFraction: 1, Now: now})
	require.NoError(t, err)
	d := p.Decision
	assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
	assert.Equal(t, domain.ReasonOtherNamespace, d.Reason)
	assert.True(t, d.Outcome.Finished())
	assert.Contains(t, d.Message, "team-b, team-c")
	assert.Empty(t, p.Tombstones)
	assert.Empty(t, p.Verify)
	assert.Empty(t, d.SourceSynthesisUUID, "no snapshot was selected")
	assert.False(t, d.SetsRecoveredFrom())
	assert.Equal(t, "s-earlier", d.RecoveredFrom, "OtherNamespace carries the recoveredFrom it replaces")
}

func TestLineageMembers(t *testing.T) {
	self := composition()
	lineage, err := domain.LineageOf(self)
	require.NoError(t, err)
	same := composition()
	same.Name = "web-copy"
	same.Annotations = map[string]string{domain.AnnotationLineageOverride: lineage.String()}
	other := composition()
	other.Name = "api"
	bad := composition()
	bad.Name = "bad"
	bad.Annotations = map[string]string{domain.AnnotationLineageOverride: "Not A Label"}
	// Another namespace, another shard (its labels match no selector of ours): a member too (lineage across shards).
	elsewhere := composition()
	elsewhere.Namespace, elsewhere.Name = "team-z", "web-copy"
	elsewhere.Labels = map[string]string{"shard": "other"}
	elsewhere.Annotations = map[string]string{domain.AnnotationLineageOverride: lineage.String()}
	got := domain.LineageMembers(self, lineage, []domain.Composition{self, other, bad, same, elsewhere})
	assert.Equal(t, []domain.CompositionRef{same.Ref(), elsewhere.Ref()}, got)
	snap, err := readFor(t, goldenEntries(), oldCompUID)
	require.NoError(t, err)
	assert.Contains(t, domain.SharedLineageOwners(self, snap, got...), same.Ref(), "a member counts as an owner")
}

// Each other Composition of the lineage is named once, however many Secrets and snapshots it
// recorded: one live read each.
func TestLineageOwnersAreDistinct(t *testing.T) {
	older := synTime.Add(-3 * time.Hour)
	secrets := join(
		recordedBy(t, "team-a", "web", "uid-pred", "s-own", older, 3),
		recordedBy(t, "team-a", "east", "uid-east", "s-east-1", older.Add(time.Minute), 20),
		recordedBy(t, "team-a", "east", "uid-east", "s-east-2", older.Add(2*time.Minute), 20),
	)
	snap, err := domain.ReadSnapshotFor(composition(), secrets, now, 0, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	assert.Equal(t, []domain.CompositionRef{{Namespace: "team-a", Name: "east"}}, domain.SharedLineageOwners(composition(), snap))
}
