package domain_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// readFor is composition()'s design §5 reading of a snapshot of entries recorded by incarnation uid of
// team-a/web: what recovery decides from.
func readFor(t testing.TB, entries []domain.Entry, uid string) (domain.Snapshot, error) {
	t.Helper()
	inv := mustInventory(t, entries)
	return domain.ReadSnapshotFor(composition(), secretsFor(t, inv, meta(inv, uid, oldSynUUID, synTime.Add(-time.Hour)), 400), now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
}

// snapshotOf is readFor's snapshot of an earlier incarnation.
func snapshotOf(t testing.TB, entries []domain.Entry, uid string) domain.Snapshot {
	t.Helper()
	snap, err := readFor(t, entries, uid)
	require.NoError(t, err)
	return snap
}

func plan(t testing.TB, c domain.Composition, snap domain.Snapshot, contents domain.SynthesisContents, fraction float64) domain.RecoveryPlan {
	t.Helper()
	return planObserved(t, domain.RecoveryInput{Composition: c, Snapshot: snap, Synthesis: contents,
		MaxTombstoneFraction: fraction, Now: now})
}

func tombstoneIDs(ts []domain.Tombstone) []domain.ResourceID {
	var out []domain.ResourceID
	for _, t := range ts {
		out = append(out, t.Entry.ID())
	}
	return out
}

// producing reads a synthesis producing the first k of entriesN(n).
func producing(t testing.TB, k int) domain.SynthesisContents {
	var ms []string
	for _, e := range entriesN(k) {
		ms = append(ms, manifest(e.APIVersion(), e.Kind, e.Namespace, e.Name))
	}
	return readSynthesis(t, ms...)
}

func TestPlanRecoveryNoInventory(t *testing.T) {
	for _, err := range []error{domain.ErrNoInventory, fmt.Errorf("listing: %w", domain.ErrNoInventory)} {
		p, perr := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), SnapshotErr: err, Now: now,
			MaxTombstoneFraction: 1})
		require.NoError(t, perr)
		assert.Equal(t, domain.OutcomeNoInventory, p.Decision.Outcome)
		assert.Empty(t, p.Decision.Reason)
		assert.Empty(t, p.Tombstones)
		assert.Zero(t, p.Decision.Tombstones)
		assert.Equal(t, synUUID, p.Decision.SynthesisUUID)
		assert.Nil(t, p.Decision.SourceSynthesisTimestamp)
	}
}

func TestPlanRecoveryInventoryInvalid(t *testing.T) {
	for _, r := range []domain.InvalidReason{domain.ReasonMalformed, domain.ReasonMixedMetadata,
		domain.ReasonAmbiguousTimestamp, domain.ReasonMissingChunk, domain.ReasonDigestMismatch} {
		t.Run(r.String(), func(t *testing.T) {
			err := fmt.Errorf("reading: %w", &domain.InventoryInvalidError{Reason: r, Detail: "x"})
			// Even with the guard disabled and nothing produced, untrusted history yields nothing.
			p, perr := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), SnapshotErr: err,
				Synthesis: producing(t, 0), MaxTombstoneFraction: 1, Now: now})
			require.NoError(t, perr)
			assert.Equal(t, domain.OutcomeInventoryInvalid, p.Decision.Outcome)
			assert.Equal(t, r.String(), p.Decision.Reason)
			assert.Empty(t, p.Tombstones)
			assert.Empty(t, p.Held)
			assert.Zero(t, p.Decision.Tombstones)
		})
	}
	t.Run("from ReadSnapshot", func(t *testing.T) {
		secrets := goldenSecrets(t)
		_, err := domain.ReadHistory(secrets[:1], now, domain.DefaultMaxChunks).Verdict()
		p, perr := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), SnapshotErr: err, Now: now})
		require.NoError(t, perr)
		assert.Equal(t, domain.OutcomeInventoryInvalid, p.Decision.Outcome)
		assert.Equal(t, "MissingChunk", p.Decision.Reason)
	})
}

func TestPlanRecoveryOtherErrors(t *testing.T) {
	boom := errors.New("apiserver unavailable")
	_, err := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), SnapshotErr: boom, Now: now})
	assert.ErrorIs(t, err, boom)

	c := composition()
	c.Synthesis = nil
	_, err = domain.PlanRecovery(domain.RecoveryInput{Composition: c, SnapshotErr: domain.ErrNoInventory, Now: now})
	assert.Error(t, err)
}

func TestPlanRecoverySameIncarnation(t *testing.T) {
	snap, err := readFor(t, goldenEntries(), compUID)
	require.ErrorIs(t, err, domain.ErrSameIncarnation)
	p := planObserved(t, domain.RecoveryInput{Composition: composition(), Snapshot: snap, SnapshotErr: err, Synthesis: producing(t, 0),
		MaxTombstoneFraction: 1, Now: now})
	assert.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
	assert.Equal(t, domain.ReasonSameIncarnation, p.Decision.Reason)
	assert.Empty(t, p.Tombstones)
	assert.Zero(t, p.Decision.Tombstones)
	assert.Equal(t, oldSynUUID, p.Decision.SourceSynthesisUUID)
}

// SameIncarnation is decided by design §5 step 3 alone: recovery takes only the snapshot ReadSnapshotFor
// chose for this incarnation, never one of the whole lineage or of another reader.
func TestPlanRecoveryNeedsItsOwnReading(t *testing.T) {
	inv := mustInventory(t, goldenEntries())
	secrets := secretsFor(t, inv, meta(inv, compUID, oldSynUUID, synTime.Add(-time.Hour)), 400)
	lineageWide, err := domain.ReadHistory(secrets, now, 0).Verdict()
	require.NoError(t, err)
	other := composition()
	other.UID = "uid-someone-else"
	othersReading, err := domain.ReadSnapshotFor(other, secrets, now, 0, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	for name, snap := range map[string]domain.Snapshot{"lineage-wide": lineageWide, "another incarnation's": othersReading} {
		t.Run(name, func(t *testing.T) {
			_, err := domain.PlanRecovery(domain.RecoveryInput{Composition: composition(), Snapshot: snap, Synthesis: producing(t, 0), MaxTombstoneFraction: 1, Now: now})
			assert.ErrorContains(t, err, "the snapshot was not read for this incarnation")
		})
	}
}

func TestPlanRecoveryNoOrphans(t *testing.T) {
	snap := snapshotOf(t, goldenEntries(), oldCompUID)
	p := plan(t, composition(), snap, readSynthesis(t, goldenManifests()...), 0)
	assert.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
	assert.Equal(t, domain.ReasonNoOrphans, p.Decision.Reason)
	assert.Empty(t, p.Tombstones)

	empty := snapshotOf(t, nil, oldCompUID)
	p = plan(t, composition(), empty, producing(t, 0), 0)
	assert.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
	assert.Equal(t, domain.ReasonNoOrphans, p.Decision.Reason)
}

func TestPlanRecoveryRecovered(t *testing.T) {
	entries := []domain.Entry{
		{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "kept"},
		{Group: "apps", Version: "v1beta1", Kind: "Deployment", Namespace: "ns", Name: "now-v1"},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "kube-system", Name: "patched"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Namespace: "ns", Name: "already-tombstoned"},
		{Version: "v1", Kind: "Secret", Namespace: "ns", Name: "orphan", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{domain.AnnotationDeletionGroup: "2"}},
		{Version: "v1", Kind: "Service", Namespace: "ns", Name: "orphan"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "orphan"},
	}
	snap := snapshotOf(t, entries, oldCompUID)
	c := composition()
	contents, err := domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice,
		domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "kept")},
		domain.SliceResource{Manifest: manifest("apps/v1", "Deployment", "ns", "now-v1")},
		domain.SliceResource{Manifest: patchManifest("apps/v1", "Deployment", "kube-system", "patched")},
		domain.SliceResource{Manifest: manifest("rbac.authorization.k8s.io/v1", "Role", "ns", "already-tombstoned"), Deleted: true},
	)})
	require.NoError(t, err)

	at := time.Date(2025, 6, 1, 14, 30, 15, 987654321, time.FixedZone("CEST", 2*3600))
	p := planObserved(t, domain.RecoveryInput{Composition: c, Snapshot: snap, Synthesis: contents,
		MaxTombstoneFraction: domain.DefaultMaxTombstoneFraction, Now: at})
	assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
	assert.Empty(t, p.Decision.Reason)
	// Canonical order: the core group sorts first.
	assert.Equal(t, []domain.ResourceID{
		{Kind: "Secret", Namespace: "ns", Name: "orphan"},
		{Kind: "Service", Namespace: "ns", Name: "orphan"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "orphan"},
	}, tombstoneIDs(p.Tombstones))
	assert.Empty(t, p.Held)
	assert.Equal(t, 3, p.Decision.Tombstones)
	assert.Equal(t, synUUID, p.Decision.SynthesisUUID)
	assert.Equal(t, oldSynUUID, p.Decision.SourceSynthesisUUID)
	require.NotNil(t, p.Decision.SourceSynthesisTimestamp)
	assert.Equal(t, synTime.Add(-time.Hour), *p.Decision.SourceSynthesisTimestamp)
	assert.Equal(t, time.Date(2025, 6, 1, 12, 30, 15, 0, time.UTC), p.Decision.DecidedAt)
	assert.Equal(t, time.UTC, p.Decision.DecidedAt.Location())
	// The tombstone carries the recorded deletion metadata.
	assert.Equal(t, entries[4], p.Tombstones[0].Entry)
	assert.Contains(t, p.Decision.Message, "Secret/ns/orphan")
}

func TestPlanRecoveryDeletionGuard(t *testing.T) {
	tests := []struct {
		name     string
		total    int
		produced int
		fraction float64
		want     domain.Outcome
	}{
		{"under the fraction", 4, 3, 0.5, domain.OutcomeRecovered},
		{"exactly at the fraction", 4, 2, 0.5, domain.OutcomeRecovered},
		{"one over the fraction", 4, 1, 0.5, domain.OutcomeHeldForReview},
		{"everything absent", 4, 0, 0.5, domain.OutcomeHeldForReview},
		{"1.0 disables the guard", 4, 0, 1.0, domain.OutcomeRecovered},
		{"single entry, 1.0", 1, 0, 1.0, domain.OutcomeRecovered},
		{"single entry, default", 1, 0, 0.5, domain.OutcomeHeldForReview},
		{"zero holds every deletion", 4, 3, 0, domain.OutcomeHeldForReview},
		{"zero holds one deletion of a hundred", 100, 99, 0, domain.OutcomeHeldForReview},
		{"zero holds a deletion of everything", 4, 0, 0, domain.OutcomeHeldForReview},
		{"exactly at 0.57 of 100", 100, 43, 0.57, domain.OutcomeRecovered},
		{"over 0.57 of 100", 100, 42, 0.57, domain.OutcomeHeldForReview},
		{"exactly at 0.7 of 90", 90, 27, 0.7, domain.OutcomeRecovered},
		{"exactly at 0.35 of 180", 180, 117, 0.35, domain.OutcomeRecovered},
		{"exactly at 0.1 of 30", 30, 27, 0.1, domain.OutcomeRecovered},
		{"NaN holds rather than passes", 4, 3, math.NaN(), domain.OutcomeHeldForReview},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshotOf(t, entriesN(tt.total), oldCompUID)
			p := plan(t, composition(), snap, producing(t, tt.produced), tt.fraction)
			absent := tt.total - tt.produced
			assert.Equal(t, tt.want, p.Decision.Outcome)
			assert.Equal(t, absent, p.Decision.Tombstones, "the decision counts tombstones either way")
			if tt.want == domain.OutcomeHeldForReview {
				assert.Equal(t, domain.ReasonOverDeletionGuard, p.Decision.Reason)
				assert.Empty(t, p.Tombstones, "nothing is published while held")
				assert.Len(t, p.Held, absent)
				assert.Contains(t, p.Decision.Message, domain.AnnotationReview)
				assert.Contains(t, p.Decision.Message, "approve:"+synUUID)
				if tt.fraction == 0 {
					assert.Contains(t, p.Decision.Message, "the guard of 0 holds every recovery for review")
				}
				return
			}
			assert.Empty(t, p.Decision.Reason)
			assert.Len(t, p.Tombstones, absent)
			assert.Empty(t, p.Held)
		})
	}
}

func TestPlanRecoveryReview(t *testing.T) {
	tests := []struct {
		name    string
		review  string
		outcome domain.Outcome
		reason  string
		count   int
	}{
		{"no review", "", domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
		{"approved", "approve:" + synUUID, domain.OutcomeRecovered, domain.ReasonApproved, 3},
		{"rejected", "reject:" + synUUID, domain.OutcomeNothingToRecover, domain.ReasonRejected, 0},
		{"approval of another synthesis ignored", "approve:" + oldSynUUID, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
		{"rejection of another synthesis ignored", "reject:" + oldSynUUID, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
		{"bare approve ignored", "approve", domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
		{"uuid alone ignored", synUUID, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
		{"padded value ignored", " approve:" + synUUID, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
		{"prefix of the uuid ignored", "approve:" + synUUID[:8], domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, 3},
	}
	snap := snapshotOf(t, entriesN(4), oldCompUID)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			if tt.review != "" {
				c.Annotations[domain.AnnotationReview] = tt.review
			}
			p := plan(t, c, snap, producing(t, 1), 0.5)
			assert.Equal(t, tt.outcome, p.Decision.Outcome)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			assert.Equal(t, tt.count, p.Decision.Tombstones)
			switch tt.outcome {
			case domain.OutcomeRecovered:
				assert.Len(t, p.Tombstones, 3)
				assert.Empty(t, p.Held)
			case domain.OutcomeHeldForReview:
				assert.Empty(t, p.Tombstones)
				assert.Len(t, p.Held, 3)
			default:
				assert.Empty(t, p.Tombstones)
				assert.Empty(t, p.Held)
			}
		})
	}
	t.Run("review does not matter under the guard", func(t *testing.T) {
		c := composition()
		c.Annotations[domain.AnnotationReview] = "reject:" + synUUID
		p := plan(t, c, snap, producing(t, 3), 0.5)
		assert.Equal(t, domain.OutcomeRecovered, p.Decision.Outcome)
		assert.Empty(t, p.Decision.Reason)
		assert.Len(t, p.Tombstones, 1)
	})
}

func TestReviewOf(t *testing.T) {
	tests := []struct {
		value string
		uuid  string
		want  string
	}{
		{"approve:" + synUUID, synUUID, "approve:"},
		{"reject:" + synUUID, synUUID, "reject:"},
		{"approve:" + oldSynUUID, synUUID, ""},
		{"", synUUID, ""},
		{"approve:", "", ""},
		{"APPROVE:" + synUUID, synUUID, ""},
	}
	for _, tt := range tests {
		c := composition()
		c.Synthesis.UUID = tt.uuid
		c.Annotations[domain.AnnotationReview] = tt.value
		assert.Equal(t, tt.want, domain.ReviewOf(c), "%q for %q", tt.value, tt.uuid)
	}
	c := composition()
	c.Synthesis = nil
	c.Annotations[domain.AnnotationReview] = "approve:"
	assert.Equal(t, "", domain.ReviewOf(c))
}

func TestIgnoredReviewOf(t *testing.T) {
	want := `set it to "approve:` + synUUID + `" or "reject:` + synUUID + `"`
	tests := []struct {
		name    string
		value   *string
		uuid    string
		ignored bool
		stale   bool
		message string
	}{
		{name: "approval of this synthesis", value: ptr("approve:" + synUUID), uuid: synUUID},
		{name: "rejection of this synthesis", value: ptr("reject:" + synUUID), uuid: synUUID},
		{name: "no annotation", uuid: synUUID},
		{name: "no current synthesis", value: ptr("approve:" + oldSynUUID)},
		{name: "approval of another synthesis", value: ptr("approve:" + oldSynUUID), uuid: synUUID, ignored: true, stale: true,
			message: domain.AnnotationReview + ` is "approve:` + oldSynUUID + `", which names synthesis ` + oldSynUUID + `, not the current one (` + synUUID + `), and is ignored; ` + want},
		{name: "rejection of a prefix", value: ptr("reject:" + synUUID[:8]), uuid: synUUID, ignored: true, stale: true},
		{name: "bare approve", value: ptr("approve"), uuid: synUUID, ignored: true,
			message: domain.AnnotationReview + ` is "approve", neither approve:<synthesisUUID> nor reject:<synthesisUUID>, and is ignored; ` + want},
		{name: "verb without a uuid", value: ptr("approve:"), uuid: synUUID, ignored: true},
		{name: "upper case", value: ptr("APPROVE:" + synUUID), uuid: synUUID, ignored: true},
		{name: "padded", value: ptr(" approve:" + synUUID), uuid: synUUID, ignored: true},
		{name: "empty", value: ptr(""), uuid: synUUID, ignored: true},
		{name: "uuid alone", value: ptr(synUUID), uuid: synUUID, ignored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			c.Synthesis.UUID = tt.uuid
			if tt.value != nil {
				c.Annotations[domain.AnnotationReview] = *tt.value
			}
			got, ignored := domain.IgnoredReviewOf(c)
			require.Equal(t, tt.ignored, ignored)
			if !ignored {
				return
			}
			assert.Equal(t, *tt.value, got.Value)
			assert.Equal(t, tt.stale, got.Stale)
			assert.Equal(t, synUUID, got.Current)
			assert.Equal(t, "", domain.ReviewOf(c), "an ignored value answers nothing")
			assert.Contains(t, got.Message(), want, "names the values expected")
			if tt.message != "" {
				assert.Equal(t, tt.message, got.Message())
			}
		})
	}
	t.Run("a long value is cut in the message", func(t *testing.T) {
		c := composition()
		c.Annotations[domain.AnnotationReview] = strings.Repeat("x", 10000)
		got, ignored := domain.IgnoredReviewOf(c)
		require.True(t, ignored)
		assert.Less(t, len(got.Message()), 400)
	})
}

func TestTombstoneManifest(t *testing.T) {
	tests := []struct {
		entry domain.Entry
		want  string
	}{
		{goldenEntries()[2], `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings","namespace":"team-a",` +
			`"labels":{"app":"web","tier":"frontend"},"annotations":{"eno.azure.io/deletion-group":"2","eno.azure.io/readiness-group":"1"}}}`},
		{goldenEntries()[1], `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"team-a",` +
			`"labels":{"app":"web"},"annotations":{"eno.azure.io/deletion-group":"-1"}}}`},
		{goldenEntries()[0], `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"web-reader"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.entry.Kind, func(t *testing.T) {
			m := domain.Tombstone{Entry: tt.entry, UID: testUID}.Manifest()
			assert.Equal(t, tt.want, m)
			// Eno reading the tombstone back sees the same identity, already tombstoned.
			got, err := domain.ReadSynthesis(composition(), []domain.ResourceSlice{
				slice(goldenSlice, domain.SliceResource{Manifest: m, Deleted: true})})
			require.NoError(t, err)
			assert.True(t, got.Covers(tt.entry.ID()))
			assert.Equal(t, 0, got.Inventory().Len())
		})
	}
}

func TestTombstonesDoNotAliasTheSnapshot(t *testing.T) {
	snap := snapshotOf(t, goldenEntries(), oldCompUID)
	p := plan(t, composition(), snap, producing(t, 0), 1)
	require.Len(t, p.Tombstones, 3)
	p.Tombstones[0].Entry.Labels["app"] = "changed"
	assert.Equal(t, "web", snap.Inventory().Entries()[0].Labels["app"])
}

func TestFirstIDs(t *testing.T) {
	ts := []domain.Tombstone{{Entry: goldenEntries()[2]}, {Entry: goldenEntries()[1]}, {Entry: goldenEntries()[0]}}
	assert.Equal(t, "", domain.FirstIDs(nil, 5))
	assert.Equal(t, "ConfigMap/team-a/web-settings, Deployment.apps/team-a/web, ClusterRole.rbac.authorization.k8s.io/web-reader", domain.FirstIDs(ts, 5))
	assert.Equal(t, "ConfigMap/team-a/web-settings, Deployment.apps/team-a/web, ClusterRole.rbac.authorization.k8s.io/web-reader", domain.FirstIDs(ts, 3))
	assert.Equal(t, "ConfigMap/team-a/web-settings, and 2 more", domain.FirstIDs(ts, 1))
}

// One recovery per incarnation from one source (design §6, AlreadyDecided): Eno drops a tombstone
// once it is reconciled, so a later synthesis of the same incarnation must not recover again.
func TestPlanRecoveryAlreadyDecided(t *testing.T) {
	snap := snapshotOf(t, entriesN(4), "uid-old")
	prior := func(outcome domain.Outcome, reason, recoveredFrom string) func(*domain.Composition) {
		return func(c *domain.Composition) {
			c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: "earlier-synthesis", Outcome: outcome,
				Reason: reason, RecoveredFrom: recoveredFrom, DecidedAt: now}.Encode()
		}
	}
	tests := []struct {
		name          string
		prior         func(*domain.Composition)
		review        string
		want          domain.Outcome
		reason        string
		recoveredFrom string
	}{
		{"no decision before: recovers", nil, "", domain.OutcomeRecovered, "", oldSynUUID},
		{"an earlier Recovered from this source", prior(domain.OutcomeRecovered, "", oldSynUUID), "", domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, oldSynUUID},
		{"an earlier NoOrphans from this source", prior(domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, oldSynUUID), "", domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, oldSynUUID},
		{"an earlier AlreadyDecided from this source", prior(domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, oldSynUUID), "", domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, oldSynUUID},
		{"an earlier recovery from another source", prior(domain.OutcomeRecovered, "", "another-source"), "", domain.OutcomeRecovered, "", oldSynUUID},
		{"a refusal in between carries recoveredFrom, so it still blocks", prior(domain.OutcomeInventoryInvalid, domain.ReasonMissingChunk.String(), oldSynUUID), "", domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, oldSynUUID},
		{"an earlier refusal without recoveredFrom never blocks", prior(domain.OutcomeInventoryInvalid, domain.ReasonMalformed.String(), ""), "", domain.OutcomeRecovered, "", oldSynUUID},
		// Ordered before the guard (design §6 order of evaluation): no review is asked for.
		{"already decided comes before the deletion guard", prior(domain.OutcomeRecovered, "", oldSynUUID), "", domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, oldSynUUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			if tt.prior != nil {
				tt.prior(&c)
			}
			p := plan(t, c, snap, producing(t, 3), 1)
			assert.Equal(t, tt.want, p.Decision.Outcome)
			assert.Equal(t, tt.reason, p.Decision.Reason)
			assert.Equal(t, tt.recoveredFrom, p.Decision.RecoveredFrom)
			if tt.want != domain.OutcomeRecovered {
				assert.Empty(t, p.Tombstones)
				assert.Zero(t, p.Decision.Tombstones)
			}
		})
	}
	t.Run("the guard would hold, but the source was already decided", func(t *testing.T) {
		c := composition()
		prior(domain.OutcomeRecovered, "", oldSynUUID)(&c)
		p := plan(t, c, snap, producing(t, 0), 0.1)
		assert.Equal(t, domain.OutcomeNothingToRecover, p.Decision.Outcome)
		assert.Equal(t, domain.ReasonAlreadyDecided, p.Decision.Reason)
		assert.Empty(t, p.Held)
	})
	t.Run("SameIncarnation comes first and carries recoveredFrom", func(t *testing.T) {
		c := composition()
		prior(domain.OutcomeRecovered, "", "an-older-source")(&c)
		snap, err := readFor(t, entriesN(4), c.UID)
		p := planObserved(t, domain.RecoveryInput{Composition: c, Snapshot: snap, SnapshotErr: err, Synthesis: producing(t, 0), MaxTombstoneFraction: 1, Now: now})
		assert.Equal(t, domain.ReasonSameIncarnation, p.Decision.Reason)
		assert.Equal(t, "an-older-source", p.Decision.RecoveredFrom)
	})
}

// Which decisions record their source in recoveredFrom (design §6).
func TestDecisionSetsRecoveredFrom(t *testing.T) {
	tests := []struct {
		outcome domain.Outcome
		reason  string
		want    bool
	}{
		{domain.OutcomeRecovered, "", true},
		{domain.OutcomeRecovered, domain.ReasonApproved, true},
		{domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, true},
		{domain.OutcomeNothingToRecover, domain.ReasonRejected, true},
		{domain.OutcomeNothingToRecover, domain.ReasonAlreadyDecided, true},
		{domain.OutcomeNothingToRecover, domain.ReasonSameIncarnation, false},
		{domain.OutcomeNothingToRecover, "Unverified", false},
		{domain.OutcomeNothingToRecover, domain.ReasonOtherNamespace, false},
		{domain.OutcomeInventoryInvalid, "SharedLineage", false},
		{domain.OutcomeInventoryInvalid, domain.ReasonMissingChunk.String(), false},
		{domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, false},
		{domain.OutcomeNoInventory, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.outcome.String()+"/"+tt.reason, func(t *testing.T) {
			assert.Equal(t, tt.want, domain.Decision{Outcome: tt.outcome, Reason: tt.reason}.SetsRecoveredFrom())
		})
	}
}

func TestChangedPlanInput(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*domain.Composition)
		want   string
	}{
		{"nothing", func(*domain.Composition) {}, ""},
		{"an unrelated annotation", func(c *domain.Composition) { c.Annotations["x"] = "y" }, ""},
		{"lineage override added", func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "fresh-start" }, "its lineage changed"},
		{"lineage override made invalid", func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "Not_A_Label" }, "its lineage changed"},
		{"review set", func(c *domain.Composition) { c.Annotations[domain.AnnotationReview] = "reject:" + synUUID }, "its review annotation changed"},
		{"a recovery slice committed", func(c *domain.Composition) {
			c.Synthesis.Slices = append(slices.Clone(c.Synthesis.Slices), "web-recovery-"+synUUID[:8])
		}, "the slices its synthesis names changed"},
		{"a slice no longer named", func(c *domain.Composition) { c.Synthesis.Slices = c.Synthesis.Slices[:len(c.Synthesis.Slices)-1] }, "the slices its synthesis names changed"},
		{"recoveredFrom changed", func(c *domain.Composition) {
			c.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: "s", Outcome: domain.OutcomeRecovered, RecoveredFrom: "src"}.Encode()
		}, "the recoveredFrom of its decision changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := composition()
			live := composition()
			tt.mutate(&live)
			assert.Equal(t, tt.want, domain.ChangedPlanInput(read, live))
		})
	}
}

// Recording's recheck compares what the inventory and the Secret names came from (design §4).
func TestChangedRecordingInput(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*domain.Composition)
		want   string
	}{
		{"nothing", func(*domain.Composition) {}, ""},
		{"a review annotation is no input of recording", func(c *domain.Composition) { c.Annotations[domain.AnnotationReview] = "reject:" + synUUID }, ""},
		{"lineage override added", func(c *domain.Composition) { c.Annotations[domain.AnnotationLineageOverride] = "fresh-start" }, "its lineage changed"},
		{"a recovery slice committed", func(c *domain.Composition) {
			c.Synthesis.Slices = append(slices.Clone(c.Synthesis.Slices), "web-recovery-"+synUUID[:8])
		}, "the slices its synthesis names changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := composition()
			live := composition()
			tt.mutate(&live)
			assert.Equal(t, tt.want, domain.ChangedRecordingInput(read, live))
		})
	}
	t.Run("an override dropped is a change too", func(t *testing.T) {
		read := composition()
		read.Annotations[domain.AnnotationLineageOverride] = "fresh-start"
		assert.Equal(t, "its lineage changed", domain.ChangedRecordingInput(read, composition()))
	})
}

// ReviewValue answers only a recovery held for the current synthesis, once.
func TestReviewValue(t *testing.T) {
	const cur, old = "22222222-0000-4000-8000-000000000002", "11111111-0000-4000-8000-000000000001"
	held := domain.Decision{SynthesisUUID: cur, Outcome: domain.OutcomeHeldForReview, Reason: domain.ReasonOverDeletionGuard}
	comp := func(d *domain.Decision, review string) domain.Composition {
		c := domain.Composition{Namespace: "team-a", Name: "web", Annotations: map[string]string{}, Synthesis: &domain.Synthesis{UUID: cur}}
		if d != nil {
			c.Annotations[domain.AnnotationDecision] = d.Encode()
		}
		if review != "" {
			c.Annotations[domain.AnnotationReview] = review
		}
		return c
	}
	movedOn := held
	movedOn.SynthesisUUID = old
	finished := domain.Decision{SynthesisUUID: cur, Outcome: domain.OutcomeNothingToRecover, Reason: domain.ReasonUnverified}
	for _, tc := range []struct {
		name    string
		c       domain.Composition
		approve bool
		want    string
		err     string
	}{
		{name: "approve", c: comp(&held, ""), approve: true, want: "approve:" + cur},
		{name: "reject", c: comp(&held, ""), want: "reject:" + cur},
		{name: "a review of an earlier synthesis does not answer", c: comp(&held, "reject:"+old), approve: true, want: "approve:" + cur},
		{name: "no decision", c: comp(nil, ""), approve: true, err: "composition team-a/web has no recovery held for review: it has no recovery decision"},
		{name: "finished", c: comp(&finished, ""), approve: true, err: "has no recovery held for review: synthesis " + cur + " was decided NothingToRecover Unverified"},
		{name: "moved on", c: comp(&movedOn, ""), approve: true, err: "has moved on: its decision (HeldForReview) is for synthesis " + old + ", its current synthesis is " + cur},
		{name: "already reviewed", c: comp(&held, "reject:"+cur), approve: true, err: "is already reviewed (eno.azure.io/tombstone-recovery-review=reject:" + cur + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := domain.ReviewValue(tc.c, tc.approve)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, map[bool]string{true: "approve:", false: "reject:"}[tc.approve], domain.ReviewOf(domain.Composition{Synthesis: tc.c.Synthesis, Annotations: map[string]string{domain.AnnotationReview: got}}))
		})
	}
}

// design §3: a snapshot naming no control plane (written before they were named) may be another
// control plane's that has not recorded since: under any fraction it is held for a person, who
// approves or rejects it as any held recovery.
func TestPlanRecoveryUnnamedHistoryIsHeld(t *testing.T) {
	inv := mustInventory(t, entriesN(4))
	m := meta(inv, oldCompUID, oldSynUUID, synTime.Add(-time.Hour))
	m.ControlPlane = ""
	snap, err := domain.ReadSnapshotFor(composition(), secretsFor(t, inv, m, 400), now, domain.DefaultMaxChunks, domain.AdoptWithinNamespace)
	require.NoError(t, err)
	for review, want := range map[string]domain.Outcome{
		"":                      domain.OutcomeHeldForReview,
		"approve:" + synUUID:    domain.OutcomeRecovered,
		"reject:" + synUUID:     domain.OutcomeNothingToRecover,
		"approve:" + oldSynUUID: domain.OutcomeHeldForReview,
	} {
		t.Run(review, func(t *testing.T) {
			c := composition()
			if review != "" {
				c.Annotations[domain.AnnotationReview] = review
			}
			p := plan(t, c, snap, producing(t, 3), 1.0)
			assert.Equal(t, want, p.Decision.Outcome, p.Decision.Message)
			if want == domain.OutcomeHeldForReview {
				assert.Empty(t, p.Tombstones, "nothing is handed to Eno without a person")
				assert.Len(t, p.Held, 1)
				assert.Contains(t, p.Decision.Message, "names no control plane")
				assert.Contains(t, p.Decision.Message, "approve:"+synUUID)
			}
		})
	}
}
