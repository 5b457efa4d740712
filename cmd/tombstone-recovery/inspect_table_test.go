package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// goldenReport has every part the table shows: a Composition, a selected snapshot and one that
// is not a candidate, a snapshot with problems, a rejected Secret, the candidate set and a dry
// run with tombstones and dropped ones.
func goldenReport() *app.InspectReport {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	older, newer := at.Add(-2*time.Hour), at.Add(-time.Hour)
	tomb := func(kind, group, ns, name string) app.TombstoneReport {
		e := domain.Entry{Group: group, Version: "v1", Kind: kind, Namespace: ns, Name: name}
		return app.TombstoneReport{Group: group, Version: "v1", Kind: kind, Namespace: ns, Name: name, Manifest: domain.Tombstone{Entry: e}.Manifest()}
	}
	decision := domain.Decision{SynthesisUUID: "22222222-0000-4000-8000-000000000002", Outcome: domain.OutcomeRecovered,
		Message:             "2 of 6 resources of the previous incarnation are orphaned: ConfigMap/team-a/flags, CronJob.batch/team-a/cleanup; dropped 1: 1 NotFound (first ConfigMap/team-a/gone)",
		SourceSynthesisUUID: "11111111-0000-4000-8000-000000000001", SourceSynthesisTimestamp: &older, Tombstones: 2, DecidedAt: at}
	return &app.InspectReport{
		Lineage: "checkout", InventoryNamespace: "kube-system", InspectedAt: at,
		Limits:      app.InspectLimits{MaxChunkBytes: 300, MaxChunks: 64, MaxTombstoneFraction: 0.5},
		Composition: &app.CompositionReport{Namespace: "shop", Name: "west", UID: "uid-west-2", SynthesisUUID: decision.SynthesisUUID, LineageSource: "override"},
		Snapshots: []app.SnapshotReport{
			{SynthesisUUID: "33333333-0000-4000-8000-000000000003", SynthesisTimestamp: newer, CompositionNamespace: "shop", CompositionName: "east",
				CompositionUID: "uid-east", ChunksExpected: 3, ChunksPresent: 2, TotalBytes: 420, LargestChunkBytes: 310,
				Digest: app.DigestReport{Claimed: "sha256:ee", Check: "unchecked"}, Role: "not-candidate",
				Problems: []string{"missing chunk index 2", "secret east-checkout-0 holds 310 bytes, over --max-chunk-bytes 300"},
				Chunks:   []app.ChunkReport{{Secret: "east-checkout-0", Index: 0, Bytes: 310}, {Secret: "east-checkout-1", Index: 1, Bytes: 110}}},
			{SynthesisUUID: decision.SourceSynthesisUUID, SynthesisTimestamp: older, CompositionNamespace: "shop", CompositionName: "west",
				CompositionUID: "uid-west-1", ChunksExpected: 1, ChunksPresent: 1, Complete: true, TotalBytes: 280, LargestChunkBytes: 280,
				Digest: app.DigestReport{Claimed: "sha256:aa", Check: "ok", Computed: "sha256:aa"}, Entries: 6, Role: "selected",
				Problems: []string{}, Chunks: []app.ChunkReport{{Secret: "west-checkout-0", Index: 0, Bytes: 280}}},
		},
		RejectedSecrets: []app.RejectedSecret{{Secret: "west-checkout-9", Bytes: 7, Reason: "Malformed", Detail: "annotation eno.azure.io/inventory-digest is missing"}},
		Verdict: app.VerdictReport{Outcome: app.VerdictSelected, SynthesisUUID: decision.SourceSynthesisUUID, SynthesisTimestamp: &older,
			CompositionUID: "uid-west-1", Entries: 6, Digest: "sha256:aa"},
		DryRun: &app.DryRunReport{Composition: "shop/west", CompositionUID: "uid-west-2", SynthesisUUID: decision.SynthesisUUID, WouldRun: true,
			Decision: &decision, Tombstones: []app.TombstoneReport{tomb("ConfigMap", "", "team-a", "flags"), tomb("CronJob", "batch", "team-a", "cleanup")},
			HeldForReview: []app.TombstoneReport{}, Candidates: &app.CandidatesReport{Own: true, SynthesisUUIDs: []string{decision.SourceSynthesisUUID}, OtherNamespaces: []string{}},
			Dropped: []app.DroppedReport{{TombstoneReport: tomb("ConfigMap", "", "team-a", "gone"), Reason: "NotFound"},
				{TombstoneReport: tomb("Role", "rbac.authorization.k8s.io", "team-a", "reader"), Reason: "Unreadable", Detail: "forbidden"}}},
	}
}

// The table and the JSON document are golden: a change to what inspect prints shows in review.
// Run with -update to rewrite them.
func TestInspectRenderingGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer, *app.InspectReport) error
	}{
		{"inspect.golden", func(b *bytes.Buffer, r *app.InspectReport) error { return writeInspectTable(b, r) }},
		{"inspect.json.golden", func(b *bytes.Buffer, r *app.InspectReport) error { return writeInspectJSON(b, r) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, tc.write(&out, goldenReport()))
			golden := filepath.Join("testdata", tc.file)
			if *updateGolden {
				require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./cmd/tombstone-recovery -run TestInspectRenderingGolden -update")
			assert.Equal(t, string(want), out.String())
		})
	}
}

// goldenFleet has a row of each kind the fleet table tells apart: held for review, refused, a
// long pending hand-off, orphans left, an ineligible one, and quiet ones, in the report's order.
func goldenFleet() *app.FleetReport {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := at.Add(-d); return &t }
	two := 2
	zero := 0
	decided := func(outcome, reason string, d time.Duration, current bool) *app.FleetDecision {
		return &app.FleetDecision{SynthesisUUID: "22222222-0000-4000-8000-000000000002", Outcome: outcome, Reason: reason, DecidedAt: at.Add(-d), Current: current}
	}
	recorded := func(age time.Duration, chunks int) *app.FleetRecorded {
		return &app.FleetRecorded{SynthesisUUID: "22222222-0000-4000-8000-000000000002", SynthesisTimestamp: at.Add(-age), AgeSeconds: int64(age / time.Second), Chunks: chunks}
	}
	return &app.FleetReport{
		InventoryNamespace: "kube-system", InspectedAt: at, HandoffPendingLong: "1h0m0s",
		Limits: app.InspectLimits{MaxChunkBytes: domain.DefaultMaxChunkBytes, MaxChunks: 64, MaxTombstoneFraction: 0.5},
		Rows: []app.FleetRow{
			{Namespace: "shop", Name: "cart", Lineage: "cart", Attention: []string{app.AttentionHeldForReview},
				AttentionDetail: "recovery of synthesis 22222222-0000-4000-8000-000000000002 is held for review: tombstone-recovery approve shop/cart (or reject)",
				LastDecision:    decided("HeldForReview", "OverDeletionGuard", 3*time.Hour, true), HeldForReviewSince: ago(3 * time.Hour),
				LastRecorded: recorded(26*time.Hour, 3), NotRunReason: "AwaitingDecision"},
			{Namespace: "shop", Name: "east", Lineage: "checkout", Attention: []string{app.AttentionHandoffPending, app.AttentionOrphansRemain},
				AttentionDetail: "the hand-off of synthesis 22222222-0000-4000-8000-000000000002 has waited 2h0m0s for Eno to carry it",
				LastDecision:    decided("Recovered", "", 2*time.Hour, true), HandoffPendingSince: ago(2 * time.Hour), OrphansRemaining: &two,
				LastRecorded: recorded(2*time.Hour+5*time.Minute, 1)},
			{Namespace: "shop", Name: "west", Attention: []string{app.AttentionRefused},
				AttentionDetail: "recovery refused InventoryInvalid (MissingChunk): missing chunk index 2\tof 3",
				LastDecision:    decided("InventoryInvalid", "MissingChunk", 40*time.Minute, true), LastRecorded: recorded(45*time.Second, 64)},
			{Namespace: "web", Name: "front", Lineage: "front", Attention: []string{}, LastDecision: decided("NothingToRecover", "NoOrphans", 5*time.Minute, false),
				OrphansRemaining: &zero, LastRecorded: recorded(7*time.Minute, 1)},
			{Namespace: "web", Name: "new", Lineage: "new", Attention: []string{}, NotRunReason: "NotSynthesized"},
		},
	}
}

func TestFleetRenderingGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer, *app.FleetReport) error
	}{
		{"inspect-all.golden", func(b *bytes.Buffer, r *app.FleetReport) error { return writeFleetTable(b, r) }},
		{"inspect-all.json.golden", func(b *bytes.Buffer, r *app.FleetReport) error { return writeInspectJSON(b, r) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, tc.write(&out, goldenFleet()))
			golden := filepath.Join("testdata", tc.file)
			if *updateGolden {
				require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./cmd/tombstone-recovery -run TestFleetRenderingGolden -update")
			assert.Equal(t, string(want), out.String())
		})
	}
}

func TestFleetAges(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 7 * time.Minute: "7m", 2*time.Hour + 5*time.Minute: "2h5m", 26 * time.Hour: "1d2h", -time.Second: "in the future",
	} {
		assert.Equal(t, want, ageOf(d), "%s", d)
	}
}
