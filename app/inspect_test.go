package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
)

const (
	eastUID   = "uid-east"
	eastSynth = "33333333-aaaa-bbbb-cccc-000000000003"
)

// inspection is the fixture's world seen through the readers inspect is given.
type inspection struct {
	*fixture
	secrets []domain.ChunkSecret
	lister  *portsfakes.FakeSnapshotLister
	live    map[domain.CompositionRef]domain.Composition
}

// newInspection: team-a/web was recreated; its predecessor recorded 12 ConfigMaps, of which the
// current synthesis produces 9. A living sibling team-a/east shares the lineage and recorded
// later (so recovery refuses it as SharedLineage until a test removes east). Downstream, cm-10
// is gone; the other objects are older than the history.
func newInspection(t *testing.T) *inspection {
	f := newFixture(t)
	in := &inspection{fixture: f, lister: &portsfakes.FakeSnapshotLister{}}
	own := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, resources(12))
	east := snapshotSecrets(t, eastUID, eastSynth, synthTime, chunkLimit, resources(2))
	for i := range east {
		east[i].Name = fmt.Sprintf("east-%d", i)
		east[i].Annotations[domain.AnnotationCompositionName] = "east"
	}
	in.secrets = slices.Concat(own, east)
	in.lister.ListChunksCalls(func(context.Context, domain.Lineage) ([]domain.ChunkSecret, error) { return in.secrets, nil })
	eastComp := composition(eastUID, eastSynth, nil, true)
	eastComp.Name = "east"
	eastComp.Annotations[domain.AnnotationLineageOverride] = domain.DefaultLineage(ns, name).String()
	in.live = map[domain.CompositionRef]domain.Composition{f.comp.Ref(): f.comp, eastComp.Ref(): eastComp}
	f.live.LiveCompositionCalls(func(_ context.Context, ref domain.CompositionRef) (domain.Composition, error) {
		c, ok := in.live[ref]
		if !ok {
			return domain.Composition{}, fmt.Errorf("composition %s: %w", ref, ports.ErrNotFound)
		}
		return c, nil
	})
	f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		if e.Name == "cm-10" {
			return domain.Observation{State: domain.ObjectAbsent}, nil
		}
		return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}, nil
	})
	return in
}

func (in *inspection) inspector(t *testing.T, controlPlane bool) *app.Inspector {
	t.Helper()
	deps := app.InspectDeps{Secrets: in.lister, Downstream: in.downstream}
	if controlPlane {
		deps.Compositions, deps.Slices, deps.Fleet = in.fixture.live, in.reader, in.fleet
	}
	i, err := app.NewInspector(in.cfg, deps)
	require.NoError(t, err)
	return i
}

func TestInspectComposition(t *testing.T) {
	in := newInspection(t)
	ref := in.comp.Ref()
	east := domain.CompositionRef{Namespace: ns, Name: "east"}
	living := in.live[east]
	delete(in.live, east) // gone since it recorded: no SharedLineage
	r, err := in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.NoError(t, err)

	assert.Equal(t, domain.DefaultLineage(ns, name).String(), r.Lineage)
	assert.Equal(t, &app.CompositionReport{Namespace: ns, Name: name, UID: uid, SynthesisUUID: synthID, LineageSource: "default"}, r.Composition)
	assert.Equal(t, now, r.InspectedAt)
	assert.Equal(t, app.InspectLimits{MaxChunkBytes: chunkLimit, MaxChunks: domain.DefaultMaxChunks, MaxTombstoneFraction: 0.5, AllowCrossNamespaceLineage: false}, r.Limits)
	// design §5 step 3 for team-a/web: its own predecessor, not the sibling's newer snapshot.
	require.Len(t, r.Snapshots, 2)
	assert.Equal(t, eastSynth, r.Snapshots[0].SynthesisUUID)
	assert.Equal(t, "not-candidate", r.Snapshots[0].Role)
	assert.Equal(t, oldSynth, r.Snapshots[1].SynthesisUUID)
	assert.Equal(t, "selected", r.Snapshots[1].Role)
	assert.Equal(t, app.VerdictSelected, r.Verdict.Outcome)
	assert.Equal(t, oldSynth, r.Verdict.SynthesisUUID)
	assert.Equal(t, 12, r.Verdict.Entries)
	assert.Empty(t, r.RejectedSecrets)

	d := r.DryRun
	require.NotNil(t, d)
	assert.Equal(t, "team-a/web", d.Composition)
	assert.Equal(t, &app.CandidatesReport{Own: true, SynthesisUUIDs: []string{oldSynth}, OtherNamespaces: []string{}}, d.Candidates)
	assert.False(t, d.WouldRun, "the fixture's synthesis is decided")
	assert.Equal(t, "SynthesisDecided", d.NotRunReason, "not the design §6 reason AlreadyDecided: this synthesis has a finished decision")
	require.NotNil(t, d.RecordedDecision)
	require.NotNil(t, d.Decision)
	assert.Equal(t, domain.OutcomeRecovered, d.Decision.Outcome)
	assert.Equal(t, 2, d.Decision.Tombstones)
	assert.Equal(t, []string{"cm-09", "cm-11"}, []string{d.Tombstones[0].Name, d.Tombstones[1].Name})
	require.Len(t, d.Dropped, 1, "design §6.3: cm-10 is gone downstream")
	assert.Equal(t, "cm-10", d.Dropped[0].Name)
	assert.Equal(t, "NotFound", d.Dropped[0].Reason)
	assert.Contains(t, d.Decision.Message, "dropped 1: 1 NotFound (first ConfigMap/team-a/cm-10)")
	assert.Empty(t, d.HeldForReview)

	// Reads only: the readers are all it holds, and each read what the report needs.
	assert.Equal(t, 1, in.lister.ListChunksCallCount())
	assert.Equal(t, 3, in.downstream.ObserveObjectCallCount())
	assert.Equal(t, 2, in.reader.GetSliceCallCount())

	// The sibling lives: the same history, and the dry run refuses it (design §6, SharedLineage).
	in.live[east] = living
	r, err = in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.NoError(t, err)
	assert.Equal(t, app.VerdictSelected, r.Verdict.Outcome, "design §5 selects; SharedLineage is design §6's")
	require.NotNil(t, r.DryRun.Decision)
	assert.Equal(t, domain.OutcomeInventoryInvalid, r.DryRun.Decision.Outcome)
	assert.Equal(t, "SharedLineage", r.DryRun.Decision.Reason)
	assert.Contains(t, r.DryRun.Decision.Message, "team-a/east (exists)")
	assert.Empty(t, r.DryRun.Tombstones)
}

// design §5 step 3 as inspect shows it: team-b/web copied team-a's lineage override, and the
// lineage holds only team-a's snapshots. With adoption across namespaces off, neither is a
// candidate: the verdict and the dry run are NothingToRecover/OtherNamespace. With it on, the
// newest is selected, and the dry run refuses it because its owners live (SharedLineage).
func TestInspectOtherNamespace(t *testing.T) {
	in := newInspection(t)
	lineage := domain.DefaultLineage(ns, name).String()
	other := in.comp
	other.Namespace, other.UID = "team-b", "uid-team-b"
	other.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: lineage}
	in.live[other.Ref()] = other
	ref := other.Ref()

	r, err := in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.NoError(t, err)
	assert.Equal(t, lineage, r.Lineage)
	assert.False(t, r.Limits.AllowCrossNamespaceLineage)
	assert.Equal(t, "NothingToRecover", r.Verdict.Outcome)
	assert.Equal(t, domain.ReasonOtherNamespace, r.Verdict.Reason)
	assert.Contains(t, r.Verdict.Detail, "(team-a)")
	require.Len(t, r.Snapshots, 2)
	for _, s := range r.Snapshots {
		assert.Equal(t, "other-namespace", s.Role, s.SynthesisUUID)
	}
	require.NotNil(t, r.DryRun)
	assert.Equal(t, &app.CandidatesReport{SynthesisUUIDs: []string{}, OtherNamespaces: []string{"team-a"}}, r.DryRun.Candidates)
	require.NotNil(t, r.DryRun.Decision)
	assert.Equal(t, domain.OutcomeNothingToRecover, r.DryRun.Decision.Outcome)
	assert.Equal(t, domain.ReasonOtherNamespace, r.DryRun.Decision.Reason, "the dry run and the verdict read alike")
	assert.Empty(t, r.DryRun.Tombstones)

	in.cfg.AllowCrossNamespaceLineage = true
	r, err = in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.NoError(t, err)
	assert.True(t, r.Limits.AllowCrossNamespaceLineage)
	assert.Equal(t, app.VerdictSelected, r.Verdict.Outcome)
	assert.Equal(t, eastSynth, r.Verdict.SynthesisUUID, "the newest of every namespace")
	assert.Equal(t, &app.CandidatesReport{SynthesisUUIDs: []string{eastSynth, oldSynth}, AcrossNamespaces: true, OtherNamespaces: []string{}}, r.DryRun.Candidates)
	assert.Equal(t, "SharedLineage", r.DryRun.Decision.Reason)
	assert.Contains(t, r.DryRun.Decision.Message, "team-a/east (exists), team-a/web (exists)")
}

func TestInspectCompositionOfThisIncarnation(t *testing.T) {
	in := newInspection(t)
	ref := domain.CompositionRef{Namespace: ns, Name: "east"}
	r, err := in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.NoError(t, err)
	assert.Equal(t, app.VerdictReport{Outcome: "NothingToRecover", Reason: "SameIncarnation",
		Detail:        "snapshot " + eastSynth + " carries this composition's UID; Eno's own synthesis diff owns cleanup",
		SynthesisUUID: eastSynth, SynthesisTimestamp: &synthTime, CompositionUID: eastUID}, r.Verdict)
	assert.Equal(t, "same-incarnation", r.Snapshots[0].Role)
	assert.Equal(t, "not-candidate", r.Snapshots[1].Role)
	require.NotNil(t, r.DryRun.Decision)
	assert.Equal(t, domain.ReasonSameIncarnation, r.DryRun.Decision.Reason, "the dry run and the verdict read alike")
}

func TestInspectLineage(t *testing.T) {
	in := newInspection(t)
	in.cfg.MaxChunkBytes = 300
	foreign := domain.ChunkSecret{Namespace: "kube-system", Name: "a-foreign", Type: "Opaque",
		Labels: map[string]string{domain.LabelLineage: domain.DefaultLineage(ns, name).String()}, Data: map[string][]byte{"k": []byte("secret!")}}
	gappy := in.secrets[0].Clone()
	gappy.Name = "web-gappy"
	gappy.Annotations[domain.AnnotationSourceSynthesisUUID] = "gappy"
	gappy.Annotations[domain.AnnotationChunkCount] = "14"
	in.secrets = append(in.secrets, foreign, gappy)

	t.Run("without the control plane: the history alone", func(t *testing.T) {
		r, err := in.inspector(t, false).Inspect(ctx(t), app.InspectTarget{Lineage: domain.DefaultLineage(ns, name)})
		require.NoError(t, err)
		assert.Nil(t, r.DryRun)
		assert.Nil(t, r.Composition)
		assert.Equal(t, []app.RejectedSecret{{Secret: "a-foreign", Bytes: 7, Reason: "Malformed",
			Detail: "not managed by eno-tombstone-recovery or not of type eno.azure.io/inventory-snapshot; refusing to trust or touch it"}}, r.RejectedSecrets)
		assert.Equal(t, app.VerdictReport{Outcome: "InventoryInvalid", Reason: "Malformed", Secret: "a-foreign",
			Detail: "not managed by eno-tombstone-recovery or not of type eno.azure.io/inventory-snapshot; refusing to trust or touch it"}, r.Verdict)
		byUUID := map[string]app.SnapshotReport{}
		for _, s := range r.Snapshots {
			byUUID[s.SynthesisUUID] = s
		}
		east, old, gap := byUUID[eastSynth], byUUID[oldSynth], byUUID["gappy"]
		assert.Equal(t, "newest", east.Role, "the lineage-wide newest, but the verdict is no selection")
		assert.Equal(t, "older", old.Role)
		assert.Equal(t, "ok", old.Digest.Check)
		assert.True(t, old.Complete)
		assert.Equal(t, old.Digest.Claimed, old.Digest.Computed)
		assert.Equal(t, 12, old.Entries)
		assert.Equal(t, []string{fmt.Sprintf("secret %s holds %d bytes, over --max-chunk-bytes 300", old.Chunks[0].Secret, old.LargestChunkBytes)}, old.Problems)
		assert.Equal(t, []string{"missing chunk index 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, and 3 more",
			fmt.Sprintf("secret web-gappy holds %d bytes, over --max-chunk-bytes 300", gap.LargestChunkBytes)}, gap.Problems)
		assert.Equal(t, 1, gap.ChunksPresent)
		assert.Equal(t, 14, gap.ChunksExpected)
		assert.Equal(t, "unchecked", gap.Digest.Check)
		assert.Equal(t, 0, in.fixture.live.LiveCompositionCallCount())
	})
	t.Run("with the control plane: the dry run of the newest snapshot's Composition", func(t *testing.T) {
		in.secrets = in.secrets[:len(in.secrets)-2]
		r, err := in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Lineage: domain.DefaultLineage(ns, name)})
		require.NoError(t, err)
		assert.Equal(t, eastSynth, r.Verdict.SynthesisUUID, "the lineage-wide verdict")
		require.NotNil(t, r.DryRun)
		assert.Equal(t, "team-a/east", r.DryRun.Composition)
		assert.Equal(t, &app.CandidatesReport{Own: true, SynthesisUUIDs: []string{eastSynth}, OtherNamespaces: []string{}}, r.DryRun.Candidates)
		assert.Equal(t, domain.ReasonSameIncarnation, r.DryRun.Decision.Reason)
	})
	t.Run("no Composition of the lineage left", func(t *testing.T) {
		in.live = nil
		r, err := in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Lineage: domain.DefaultLineage(ns, name)})
		require.NoError(t, err)
		assert.Equal(t, &app.DryRunReport{
			Unavailable: "no Composition named by the snapshots has lineage " + domain.DefaultLineage(ns, name).String() +
				" (team-a/east does not exist; team-a/web does not exist); pass --composition NAMESPACE/NAME for a dry run",
			Tombstones: []app.TombstoneReport{}, HeldForReview: []app.TombstoneReport{}, Dropped: []app.DroppedReport{}}, r.DryRun)
	})
}

func TestInspectRefusals(t *testing.T) {
	in := newInspection(t)
	ref := domain.CompositionRef{Namespace: ns, Name: "gone"}
	_, err := in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.ErrorIs(t, err, ports.ErrNotFound)

	bad := in.comp
	bad.Annotations = map[string]string{domain.AnnotationLineageOverride: "Not_A_Label"}
	in.live[in.comp.Ref()] = bad
	ref = in.comp.Ref()
	_, err = in.inspector(t, true).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "recording and recovery skip it")
	assert.Equal(t, 0, in.lister.ListChunksCallCount())

	_, err = in.inspector(t, false).Inspect(ctx(t), app.InspectTarget{Composition: &ref})
	require.ErrorContains(t, err, "needs the control plane")

	listErr := errors.New("the API server is down")
	in.lister.ListChunksReturns(nil, listErr)
	in.lister.ListChunksCalls(nil)
	_, err = in.inspector(t, false).Inspect(ctx(t), app.InspectTarget{Lineage: domain.DefaultLineage(ns, name)})
	require.ErrorIs(t, err, listErr)

	for _, tc := range []struct {
		deps app.InspectDeps
		want string
	}{
		{app.InspectDeps{Downstream: in.downstream}, "Secrets"},
		{app.InspectDeps{Secrets: in.lister}, "Downstream"},
		{app.InspectDeps{Secrets: in.lister, Downstream: in.downstream, Compositions: in.fixture.live}, "Compositions, Slices and Fleet, or none"},
		{app.InspectDeps{Secrets: in.lister, Downstream: in.downstream, Compositions: in.fixture.live, Slices: in.reader}, "Compositions, Slices and Fleet, or none"},
	} {
		_, err := app.NewInspector(in.cfg, tc.deps)
		assert.ErrorContains(t, err, tc.want)
	}
	cfg := in.cfg
	cfg.MaxChunks = 0
	_, err = app.NewInspector(cfg, app.InspectDeps{Secrets: in.lister, Downstream: in.downstream})
	assert.ErrorContains(t, err, "max chunks")
}
