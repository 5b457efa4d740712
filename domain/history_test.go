package domain_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// edited returns a copy of secrets with fn applied to the i-th (annotations and data copied).
func edited(secrets []domain.ChunkSecret, i int, fn func(*domain.ChunkSecret)) []domain.ChunkSecret {
	out := slices.Clone(secrets)
	c := out[i].Clone()
	fn(&c)
	out[i] = c
	return out
}

func firstDecisive(h domain.History) (domain.Finding, bool) {
	for _, f := range h.Findings {
		if f.Decisive {
			return f, true
		}
	}
	return domain.Finding{}, false
}

// assertSameVerdict: ReadHistoryFor's verdict, derived from its findings, is ReadSnapshotFor's;
// for a reader and without one, the verdict is the first decisive finding.
func assertSameVerdict(t *testing.T, self *domain.Composition, secrets []domain.ChunkSecret) domain.History {
	t.Helper()
	return assertSameVerdictUnder(t, self, secrets, domain.AdoptWithinNamespace)
}

// assertSameVerdictUnder is assertSameVerdict for a reader under adoption.
func assertSameVerdictUnder(t *testing.T, self *domain.Composition, secrets []domain.ChunkSecret, adoption domain.Adoption) domain.History {
	t.Helper()
	var h domain.History
	var snap domain.Snapshot
	var err error
	if self == nil {
		h = domain.ReadHistory(secrets, now, 0)
		snap, err = h.Verdict()
	} else {
		h = domain.ReadHistoryFor(*self, secrets, now, 0, adoption)
		snap, err = domain.ReadSnapshotFor(*self, secrets, now, 0, adoption)
	}
	hSnap, hErr := h.Verdict()
	assert.Equal(t, err, hErr)
	assert.Equal(t, snap.Meta(), hSnap.Meta())
	assert.Equal(t, snap.Inventory().Digest(), hSnap.Inventory().Digest())
	assert.Equal(t, snap.Chunks(), hSnap.Chunks())
	if f, ok := firstDecisive(h); ok {
		assert.Equal(t, f.Err(), err, "the verdict is the first decisive finding")
	}
	return h
}

// For each design §5 reason the finding and the verdict agree: same reason, Secret and detail.
func TestHistoryFindingsAndVerdictAgree(t *testing.T) {
	golden := goldenSecrets(t) // 2 chunks of oldSynUUID for team-a/web
	self := composition()
	other := recordedBy(t, "team-a", "web", "uid-other", "s-other", synTime.Add(-time.Hour), 2)
	three, _ := snapshotAt(t, 6, "uid-0", "syn-a", synTime, 150)
	require.Len(t, three, 3)
	tests := []struct {
		name    string
		self    *domain.Composition
		secrets []domain.ChunkSecret
		step    int
		reason  domain.InvalidReason
		secret  string
		detail  string
	}{
		{"step 1: not ours", nil, edited(golden, 1, func(s *domain.ChunkSecret) { s.Type = "Opaque" }), 1, domain.ReasonMalformed, golden[1].Name,
			"not managed by eno-tombstone-recovery or not of type eno.azure.io/inventory-snapshot; refusing to trust or touch it"},
		{"step 1: future timestamp", nil, edited(golden, 0, func(s *domain.ChunkSecret) {
			s.Annotations[domain.AnnotationSourceSynthesisTime] = now.Add(time.Hour).Format(time.RFC3339)
		}), 1, domain.ReasonMalformed, golden[0].Name, "source timestamp 2025-06-01T13:00:00Z is more than 5 minutes in the future"},
		{"step 2: mixed metadata", nil, edited(golden, 1, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "3" }),
			2, domain.ReasonMixedMetadata, golden[1].Name, "disagrees with " + golden[0].Name + " on chunk count (2 vs 3)"},
		{"step 3: ambiguous timestamp", nil, slices.Concat(golden, other), 3, domain.ReasonAmbiguousTimestamp, "",
			"more than one snapshot has the newest source timestamp 2025-06-01T10:00:00Z"},
		{"step 3: ambiguity among own candidates", &self, slices.Concat(golden, other), 3, domain.ReasonAmbiguousTimestamp, "",
			"more than one snapshot has the newest source timestamp 2025-06-01T10:00:00Z"},
		{"step 4: gap", nil, []domain.ChunkSecret{three[0], three[2]}, 4, domain.ReasonMissingChunk, "", "chunk 1 of 3 for synthesis syn-a is missing"},
		{"step 4: repeated index", nil, slices.Concat(three, edited(three, 2, func(s *domain.ChunkSecret) {
			s.Name += "-copy"
			s.Annotations[domain.AnnotationChunkIndex] = "1"
		})[2:]), 4, domain.ReasonMissingChunk, three[2].Name + "-copy", "index 1 is also held by " + three[1].Name},
		{"step 4: index out of range", nil, edited(three, 2, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkIndex] = "7" }),
			4, domain.ReasonMissingChunk, three[2].Name, "index 7 is out of range for 3 chunks"},
		{"step 5: undecodable", nil, edited(golden, 1, func(s *domain.ChunkSecret) { s.Data[domain.SecretDataKey] = []byte("[{]") }),
			5, domain.ReasonMalformed, golden[1].Name, "decoding inventory chunk: invalid character ']' looking for beginning of object key string"},
		{"step 5: digest mismatch", nil, edited(edited(golden, 0, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationDigest] = mustInventory(t, nil).Digest() }),
			1, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationDigest] = mustInventory(t, nil).Digest() }),
			5, domain.ReasonDigestMismatch, "", "entries hash to " + goldenDigest + ", the chunks claim " + mustInventory(t, nil).Digest()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := assertSameVerdict(t, tt.self, tt.secrets)
			f, ok := firstDecisive(h)
			require.True(t, ok)
			assert.Equal(t, tt.step, f.Step)
			assert.Equal(t, tt.reason, f.Reason)
			assert.Equal(t, tt.secret, f.Secret)
			assert.Equal(t, tt.detail, f.Detail)
			_, err := h.Verdict()
			assert.Equal(t, &domain.InventoryInvalidError{Reason: tt.reason, Secret: tt.secret, Detail: tt.detail}, err)
		})
	}

	t.Run("no Secret: NoInventory, no finding", func(t *testing.T) {
		h := assertSameVerdict(t, nil, nil)
		assert.Empty(t, h.Findings)
		_, err := h.Verdict()
		assert.ErrorIs(t, err, domain.ErrNoInventory)
	})
	t.Run("a candidate of this incarnation: SameIncarnation, before its chunks are judged", func(t *testing.T) {
		mine := recordedBy(t, "team-a", "web", compUID, "s-mine", synTime, 20)
		h := assertSameVerdict(t, &self, slices.Concat(golden, mine[1:]))
		snap, err := h.Verdict()
		require.ErrorIs(t, err, domain.ErrSameIncarnation)
		assert.Equal(t, "s-mine", snap.SynthesisUUID())
		_, decisive := firstDecisive(h)
		assert.False(t, decisive, "its missing chunk 0 is information, not the verdict")
		require.Len(t, h.Snapshots, 2)
		assert.Equal(t, domain.RoleSameIncarnation, h.Snapshots[0].Role)
		assert.Equal(t, domain.RoleOlder, h.Snapshots[1].Role)
	})
	t.Run("a valid history: selected, no finding", func(t *testing.T) {
		h := assertSameVerdict(t, &self, golden)
		assert.Empty(t, h.Findings)
		snap, err := h.Verdict()
		require.NoError(t, err)
		assert.Equal(t, goldenDigest, snap.Inventory().Digest())
	})
}

// ReadHistory lists every problem, where the verdict names the first.
func TestHistoryListsEveryFinding(t *testing.T) {
	three, _ := snapshotAt(t, 6, "uid-0", "syn-new", synTime, 150)
	older, _ := snapshotAt(t, 5, "uid-0", "syn-old", synTime.Add(-time.Hour), 200)
	require.Len(t, three, 3)
	foreign := edited(older, 0, func(s *domain.ChunkSecret) { s.Name = "zz-foreign"; s.Labels[domain.LabelManagedBy] = "helm" })[0]
	undecodable := edited(older, 1, func(s *domain.ChunkSecret) { s.Data[domain.SecretDataKey] = []byte("{") })
	secrets := slices.Concat([]domain.ChunkSecret{three[2], foreign}, undecodable)

	h := assertSameVerdict(t, nil, secrets)
	_, err := h.Verdict()
	assert.Equal(t, domain.ReasonMalformed, invalidReason(t, err), "step 1 comes first")
	require.Len(t, h.Rejected(), 1)
	assert.Equal(t, "zz-foreign", h.Rejected()[0].Secret)

	require.Len(t, h.Snapshots, 2)
	newest, old := h.Snapshots[0], h.Snapshots[1]
	assert.Equal(t, "syn-new", newest.Meta.SynthesisUUID)
	assert.Equal(t, domain.RoleNewest, newest.Role, "newest, but the verdict is no selection")
	assert.False(t, newest.Complete)
	assert.Equal(t, 1, newest.Present)
	assert.Equal(t, domain.DigestUnchecked, newest.Digest)
	require.Len(t, newest.Findings, 1)
	gap := newest.Findings[0]
	assert.Equal(t, []int{0, 1}, gap.Missing)
	assert.Equal(t, 2, gap.MissingCount)
	assert.True(t, gap.Decisive, "steps 4–5 of the selected snapshot decide")

	assert.Equal(t, domain.RoleOlder, old.Role)
	assert.True(t, old.Complete)
	assert.Equal(t, domain.DigestUndecodable, old.Digest)
	require.Len(t, old.Findings, 1)
	assert.Equal(t, 5, old.Findings[0].Step)
	assert.False(t, old.Findings[0].Decisive, "another snapshot's steps 4–5 are information")
	assert.Equal(t, []string{"syn-new", "syn-old"}, h.Candidates)

	t.Run("a gap lists its first ten indexes", func(t *testing.T) {
		lone := edited(three, 0, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "40" })[:1]
		h := domain.ReadHistory(lone, now, 0)
		require.Len(t, h.Snapshots, 1)
		f := h.Snapshots[0].Findings[0]
		assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, f.Missing)
		assert.Equal(t, 39, f.MissingCount)
	})
	t.Run("a complete snapshot with every digest", func(t *testing.T) {
		h := domain.ReadHistory(three, now, 0)
		require.Len(t, h.Snapshots, 1)
		s := h.Snapshots[0]
		assert.Equal(t, domain.RoleSelected, s.Role)
		assert.True(t, s.Complete)
		assert.Equal(t, domain.DigestOK, s.Digest)
		assert.Equal(t, s.Meta.Digest, s.Computed)
		assert.Equal(t, 6, s.Entries)
		assert.Equal(t, 3, s.Present)
		for i, c := range s.Chunks {
			assert.Equal(t, i, c.Index, "chunks by index")
		}
	})
	t.Run("mixed metadata: not decoded, its indexes still judged", func(t *testing.T) {
		h := assertSameVerdict(t, nil, edited(three, 1, func(s *domain.ChunkSecret) { s.Annotations[domain.AnnotationChunkCount] = "2" }))
		s := h.Snapshots[0]
		assert.True(t, s.MixedMetadata)
		assert.False(t, s.Complete)
		assert.Equal(t, domain.DigestUnchecked, s.Digest)
		assert.Equal(t, 2, s.Findings[0].Step)
	})
}

// The roles and candidates of design §5 step 3, as inspect shows them.
func TestHistoryCandidatesAndRoles(t *testing.T) {
	self := composition() // team-a/web
	older, newer := synTime.Add(-2*time.Hour), synTime.Add(-time.Hour)
	own := recordedBy(t, "team-a", "web", "uid-pred", "s-own", older, 3)
	ownOlder := recordedBy(t, "team-a", "web", "uid-pred0", "s-own0", older.Add(-time.Hour), 3)
	sibling := recordedBy(t, "team-a", "east", "uid-east", "s-east", newer, 4)

	h := assertSameVerdict(t, &self, slices.Concat(own, sibling, ownOlder))
	assert.True(t, h.OwnCandidates)
	assert.Equal(t, []string{"s-own", "s-own0"}, h.Candidates)
	roles := map[string]domain.SnapshotRole{}
	for _, s := range h.Snapshots {
		roles[s.Meta.SynthesisUUID] = s.Role
		assert.Equal(t, s.Role != domain.RoleNotCandidate, s.Candidate)
	}
	assert.Equal(t, map[string]domain.SnapshotRole{"s-east": domain.RoleNotCandidate, "s-own": domain.RoleSelected, "s-own0": domain.RoleOlder}, roles)
	assert.Equal(t, "s-east", h.Snapshots[0].Meta.SynthesisUUID, "newest first, candidate or not")

	h = assertSameVerdict(t, &self, sibling)
	assert.False(t, h.OwnCandidates, "none of its own: every snapshot of the lineage")
	assert.Equal(t, []string{"s-east"}, h.Candidates)

	tie := recordedBy(t, "team-a", "web", "uid-pred2", "s-own2", older, 2)
	h = assertSameVerdict(t, &self, slices.Concat(own, tie, sibling))
	for _, s := range h.Snapshots {
		if s.Candidate {
			assert.Equal(t, domain.RoleNewestTied, s.Role)
		}
	}

	// Another namespace's snapshot: not a candidate because of its own snapshots, or because
	// adoption across namespaces is off.
	otherNS := recordedBy(t, "team-b", "web", "uid-b", "s-b", newer.Add(time.Minute), 2)
	roleOf := func(h domain.History) map[string]domain.SnapshotRole {
		out := map[string]domain.SnapshotRole{}
		for _, s := range h.Snapshots {
			out[s.Meta.SynthesisUUID] = s.Role
		}
		return out
	}
	h = assertSameVerdict(t, &self, slices.Concat(own, otherNS))
	assert.Equal(t, map[string]domain.SnapshotRole{"s-own": domain.RoleSelected, "s-b": domain.RoleNotCandidate}, roleOf(h))
	assert.Empty(t, h.OtherNamespaces, "its own snapshots keep it from the candidates, not adoption")
	h = assertSameVerdict(t, &self, slices.Concat(sibling, otherNS))
	assert.Equal(t, map[string]domain.SnapshotRole{"s-east": domain.RoleSelected, "s-b": domain.RoleOtherNamespace}, roleOf(h))
	assert.Equal(t, []string{"team-b"}, h.OtherNamespaces)
	assert.Equal(t, domain.AdoptWithinNamespace, h.Adoption)
	h = assertSameVerdict(t, &self, otherNS)
	assert.Equal(t, map[string]domain.SnapshotRole{"s-b": domain.RoleOtherNamespace}, roleOf(h))
	assert.Empty(t, h.Candidates)
	_, err := h.Verdict()
	var other *domain.OtherNamespaceError
	require.ErrorAs(t, err, &other)
	assert.Equal(t, []string{"team-b"}, other.Namespaces)
	h = assertSameVerdictUnder(t, &self, slices.Concat(sibling, otherNS), domain.AdoptAcrossNamespaces)
	assert.Equal(t, map[string]domain.SnapshotRole{"s-east": domain.RoleOlder, "s-b": domain.RoleSelected}, roleOf(h))
	assert.Empty(t, h.OtherNamespaces)
	assert.Equal(t, domain.AdoptAcrossNamespaces, h.Adoption)
}

// historyPool is a lineage with four snapshots: the design §3.1 one of an earlier team-a/web, an
// older predecessor, a living sibling's and one of composition()'s own incarnation.
func historyPool(t testing.TB) []domain.ChunkSecret {
	return slices.Concat(goldenSecrets(t),
		recordedBy(t, "team-a", "web", "uid-pred", "s-pred", synTime.Add(-3*time.Hour), 6),
		recordedBy(t, "team-a", "east", "uid-east", "s-east", synTime, 4),
		recordedBy(t, "team-a", "web", compUID, "s-mine", synTime.Add(-2*time.Hour), 3))
}

// FuzzHistoryVerdict: on arbitrary Secret sets, made by dropping, copying and editing the
// Secrets of historyPool, the verdict derived from ReadHistory's findings is ReadSnapshot's
// and ReadHistoryFor's is ReadSnapshotFor's; every finding names its step and reason.
func FuzzHistoryVerdict(f *testing.F) {
	f.Add([]byte{}, "", []byte(nil))
	f.Add([]byte{0, 0}, "", []byte(nil))                             // drop a chunk
	f.Add([]byte{9, 0, 10, 0, 11, 0}, "", []byte(nil))               // drop the own incarnation
	f.Add([]byte{3, 0x23}, "", []byte(nil))                          // an index out of range
	f.Add([]byte{1, 0x34, 2, 0x14}, "", []byte(nil))                 // counts disagree
	f.Add([]byte{6, 0x04}, "", []byte(nil))                          // a tie with the sibling
	f.Add([]byte{0, 8, 1, 7}, "sha256:00", []byte("[{]"))            // undecodable, bad digest
	f.Add([]byte{5, 5, 6, 6, 7, 9}, "team-b", []byte(nil))           // a rename
	f.Add([]byte{2, 10, 4, 1}, "Opaque", []byte(`[]`))               // not ours, a copy
	f.Add([]byte{8, 11, 9, 0x19, 0, 0x29}, "9", []byte(`[{"x":1}]`)) // annotations
	f.Fuzz(func(t *testing.T, ops []byte, s string, data []byte) {
		secrets := editPool(historyPool(t), ops, s, data)
		self := composition()
		for _, reader := range []*domain.Composition{nil, &self} {
			var h domain.History
			var snap domain.Snapshot
			var err error
			if reader == nil {
				h = domain.ReadHistory(secrets, now, 0)
				snap, err = h.Verdict()
			} else {
				h = domain.ReadHistoryFor(self, secrets, now, 0, domain.AdoptWithinNamespace)
				snap, err = domain.ReadSnapshotFor(self, secrets, now, 0, domain.AdoptWithinNamespace)
			}
			hSnap, hErr := h.Verdict()
			require.Equal(t, err, hErr)
			require.Equal(t, snap.Meta(), hSnap.Meta())
			require.Equal(t, snap.Chunks(), hSnap.Chunks())
			require.Equal(t, snap.Inventory().Digest(), hSnap.Inventory().Digest())
			first, decisive := firstDecisive(h)
			if decisive {
				require.Equal(t, first.Err(), err)
			}
			for _, f := range h.Findings {
				require.NotEqual(t, domain.InvalidReason{}, f.Reason)
				require.True(t, f.Step >= 1 && f.Step <= 5, "step %d", f.Step)
				require.Equal(t, f.Step == 1 || f.Step == 3, f.Snapshot == "", "%+v", f)
			}
			selected := 0
			for _, r := range h.Snapshots {
				if r.Role == domain.RoleSelected {
					selected++
					require.NoError(t, err)
					require.Equal(t, snap.SynthesisUUID(), r.Meta.SynthesisUUID)
				}
			}
			require.Equal(t, err == nil, selected == 1)
		}
	})
}
