package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// notShardB is the scope of the fleet tests: every Composition but those labelled shard=b.
type notShardB struct{}

func (notShardB) Matches(l map[string]string) bool { return l["shard"] != "b" }

// ownedSlices is the memory cluster with the carried recovery slices owned as the controller's
// publication would own them: PutSlice, like Eno's synthesizer, sets no owner.
type ownedSlices struct {
	*memory.Cluster
	owner map[string]string // slice name -> controller UID
}

func (o ownedSlices) GetSlice(ctx context.Context, namespace, name string) (domain.ResourceSlice, error) {
	s, err := o.Cluster.GetSlice(ctx, namespace, name)
	if err == nil && o.owner[name] != "" {
		s.ControllerUID = o.owner[name]
	}
	return s, err
}

// fleetComposition is an opted-in Composition with a Ready current synthesis and, unless
// outcome is zero, a decision of that outcome for it made at decided.
func fleetComposition(namespace, compName, compUID string, outcome domain.Outcome, reason string, decided time.Time) domain.Composition {
	c := domain.Composition{
		Namespace: namespace, Name: compName, UID: compUID,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis:   &domain.Synthesis{UUID: synthID, Synthesized: synthTime, Ready: true},
	}
	if !outcome.IsZero() {
		d := domain.Decision{SynthesisUUID: synthID, Outcome: outcome, Reason: reason, DecidedAt: decided}
		if outcome == domain.OutcomeRecovered {
			d.Tombstones, d.TombstoneSlice = 1, domain.RecoverySliceName(compName, synthID, "0123456789abcdef", 0)
		}
		c.Annotations[domain.AnnotationDecision] = d.Encode()
	}
	return c
}

// newFleet is a control plane of Compositions in every state the fleet view tells apart, and
// the inspector over it.
func newFleet(t *testing.T) (*memory.Cluster, *app.Inspector) {
	t.Helper()
	cl := memory.NewCluster("kube-system")
	zero := domain.Outcome{}

	// team-a/web recorded its current synthesis and decided there was nothing to recover.
	cl.PutComposition(fleetComposition(ns, name, uid, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, now.Add(-50*time.Minute)))
	for _, s := range snapshotSecrets(t, uid, synthID, synthTime, chunkLimit, resources(9)) {
		_, err := cl.PutSecret(s)
		require.NoError(t, err)
	}
	cl.PutComposition(fleetComposition(ns, "held", "uid-held", domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, now.Add(-3*time.Hour)))
	cl.PutComposition(fleetComposition(ns, "pending-long", "uid-pl", domain.OutcomeRecovered, "", now.Add(-2*time.Hour)))
	cl.PutComposition(fleetComposition(ns, "undecided", "uid-u", zero, "", time.Time{}))
	cl.PutComposition(fleetComposition("team-b", "broken", "uid-b", domain.OutcomeInventoryInvalid, domain.ReasonMissingChunk.String(), now.Add(-time.Hour)))
	cl.PutComposition(fleetComposition("team-b", "pending-fresh", "uid-pf", domain.OutcomeRecovered, "", now.Add(-10*time.Minute)))
	// An earlier synthesis's hold is history, not a review waiting.
	earlier := fleetComposition("team-b", "moved-on", "uid-m", domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, now.Add(-5*time.Hour))
	earlier.Synthesis.UUID = "44444444-aaaa-bbbb-cccc-000000000004"
	cl.PutComposition(earlier)
	bad := fleetComposition("team-b", "bad-override", "uid-bo", zero, "", time.Time{})
	bad.Annotations[domain.AnnotationLineageOverride] = "Not A Lineage"
	cl.PutComposition(bad)
	out := fleetComposition("team-b", "other-shard", "uid-os", domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard, now)
	out.Labels = map[string]string{"shard": "b"}
	cl.PutComposition(out)

	// team-c/carried: its current synthesis carried a hand-off of two ConfigMaps; one still exists.
	carried := fleetComposition("team-c", "carried", "uid-c", domain.OutcomeRecovered, "", now.Add(-4*time.Hour))
	carried.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: oldSynth, Outcome: domain.OutcomeRecovered, Tombstones: 2,
		TombstoneSlice: domain.RecoverySliceName("carried", oldSynth, "0123456789abcdef", 0), DecidedAt: now.Add(-4 * time.Hour)}.Encode()
	sliceName := domain.RecoverySliceName("carried", oldSynth, "0123456789abcdef", 0)
	carried.PreviousSynthesis = &domain.Synthesis{UUID: oldSynth, Ready: true, Slices: []string{sliceName}}
	cl.PutComposition(carried)
	var resources []domain.SliceResource
	for _, n := range []string{"left", "gone"} {
		e := domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "team-c", Name: n}
		resources = append(resources, domain.SliceResource{Manifest: domain.Tombstone{Entry: e}.Manifest(), Deleted: true})
	}
	cl.PutSlice(domain.ResourceSlice{Namespace: "team-c", Name: sliceName, SynthesisUUID: oldSynth, Resources: resources})
	_, err := cl.PutDownstream(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"team-c","name":"left"}}`)
	require.NoError(t, err)

	cfg := app.DefaultConfig()
	cfg.ControlPlane = thisControlPlane
	cfg.Now = func() time.Time { return now }
	cfg.Scope = domain.Scope{Selector: notShardB{}}
	slices := ownedSlices{Cluster: cl, owner: map[string]string{sliceName: "uid-c"}}
	in, err := app.NewInspector(cfg, app.InspectDeps{Secrets: cl, Downstream: cl, Compositions: cl, Slices: slices, Fleet: cl, Lister: cl})
	require.NoError(t, err)
	return cl, in
}

func TestInspectAll(t *testing.T) {
	_, in := newFleet(t)
	fleet, err := in.InspectAll(ctx(t), app.DefaultHandoffPendingLong)
	require.NoError(t, err)
	assert.Equal(t, now, fleet.InspectedAt)
	assert.Equal(t, "1h0m0s", fleet.HandoffPendingLong)

	var order []string
	for _, r := range fleet.Rows {
		order = append(order, r.Namespace+"/"+r.Name)
	}
	assert.Equal(t, []string{
		// those that need a person, by namespace/name
		"team-a/held", "team-a/pending-long", "team-b/bad-override", "team-b/broken", "team-c/carried",
		// the rest, by namespace/name; team-b/other-shard is out of scope
		"team-a/undecided", "team-a/web", "team-b/moved-on", "team-b/pending-fresh",
	}, order)

	rows := map[string]app.FleetRow{}
	for _, r := range fleet.Rows {
		rows[r.Namespace+"/"+r.Name] = r
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	one := 1
	for _, tc := range []struct {
		ref       string
		attention []string
		check     func(t *testing.T, r app.FleetRow)
	}{
		{"team-a/held", []string{app.AttentionHeldForReview}, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, at(-3*time.Hour), r.HeldForReviewSince)
			assert.Equal(t, &app.FleetDecision{SynthesisUUID: synthID, Outcome: "HeldForReview", Reason: domain.ReasonOverDeletionGuard, DecidedAt: now.Add(-3 * time.Hour), Current: true}, r.LastDecision)
			assert.Contains(t, r.AttentionDetail, "is held for review: tombstone-recovery approve team-a/held (or reject)")
		}},
		{"team-a/pending-long", []string{app.AttentionHandoffPending}, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, at(-2*time.Hour), r.HandoffPendingSince)
			assert.Contains(t, r.AttentionDetail, "has waited 2h0m0s for Eno to carry it")
		}},
		{"team-b/bad-override", []string{app.AttentionIneligible}, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, "InvalidLineage", r.NotRunReason)
			assert.Empty(t, r.Lineage)
		}},
		{"team-b/broken", []string{app.AttentionRefused}, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, "InventoryInvalid", r.LastDecision.Outcome)
			assert.Equal(t, "MissingChunk", r.LastDecision.Reason)
		}},
		{"team-c/carried", []string{app.AttentionOrphansRemain}, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, &one, r.OrphansRemaining, "of the two carried tombstones, team-c/left still exists")
			assert.Nil(t, r.HandoffPendingSince, "the decision is the previous synthesis's: Eno carried it")
			assert.False(t, r.LastDecision.Current)
		}},
		{"team-a/undecided", nil, func(t *testing.T, r app.FleetRow) {
			assert.Nil(t, r.LastDecision)
			assert.Nil(t, r.LastRecorded)
			assert.Nil(t, r.OrphansRemaining, "no hand-off was carried")
		}},
		{"team-a/web", nil, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, domain.DefaultLineage(ns, name).String(), r.Lineage)
			assert.Equal(t, &app.FleetRecorded{SynthesisUUID: synthID, SynthesisTimestamp: synthTime, AgeSeconds: 3600, Chunks: 3}, r.LastRecorded)
			assert.Equal(t, "NothingToRecover", r.LastDecision.Outcome)
		}},
		{"team-b/moved-on", nil, func(t *testing.T, r app.FleetRow) {
			assert.Nil(t, r.HeldForReviewSince)
			assert.False(t, r.LastDecision.Current)
		}},
		{"team-b/pending-fresh", nil, func(t *testing.T, r app.FleetRow) {
			assert.Equal(t, at(-10*time.Minute), r.HandoffPendingSince)
		}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			r, ok := rows[tc.ref]
			require.True(t, ok)
			assert.Equal(t, append([]string{}, tc.attention...), r.Attention)
			assert.Empty(t, r.Error)
			tc.check(t, r)
		})
	}

	// A shorter threshold makes the fresh hand-off one that needs a person too.
	fleet, err = in.InspectAll(ctx(t), 5*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "team-b/pending-fresh", fleet.Rows[4].Namespace+"/"+fleet.Rows[4].Name)
	assert.Equal(t, []string{app.AttentionHandoffPending}, fleet.Rows[4].Attention)
}

// The JSON document has these fields and no others; lists are [] when empty.
func TestInspectAllJSONShape(t *testing.T) {
	_, in := newFleet(t)
	fleet, err := in.InspectAll(ctx(t), app.DefaultHandoffPendingLong)
	require.NoError(t, err)
	raw, err := json.Marshal(fleet)
	require.NoError(t, err)
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.Rows)
	for _, r := range doc.Rows {
		assert.NotNil(t, r["attention"], "attention is [] when empty: %v", r)
		for k := range r {
			assert.Contains(t, []string{"namespace", "name", "lineage", "attention", "attentionDetail", "lastDecision", "heldForReviewSince",
				"handoffPendingSince", "orphansRemaining", "lastRecorded", "notRunReason", "error"}, k)
		}
	}
}

func TestInspectAllNeedsTheControlPlane(t *testing.T) {
	cl := memory.NewCluster("kube-system")
	in, err := app.NewInspector(app.DefaultConfig(), app.InspectDeps{Secrets: cl, Downstream: cl})
	require.NoError(t, err)
	_, err = in.InspectAll(context.Background(), time.Hour)
	require.ErrorContains(t, err, "needs the control plane")
}
