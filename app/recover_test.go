package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// recoveryFixture: the Composition was recreated (uid) and its new synthesis produces fewer
// resources than the snapshot the old incarnation (oldUID) recorded.
func recoveryFixture(t *testing.T, old []res, current ...[]res) *fixture {
	f := newFixture(t)
	f.setSynthesis(synthID, current...)
	f.comp = composition(uid, synthID, f.slices, false)
	f.comp.Synthesis.Ready = false
	f.store.ListChunksReturns(snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, old), nil)
	return f
}

func writtenDecision(t *testing.T, f *fixture) domain.Decision {
	t.Helper()
	require.Equal(t, 1, f.decisions.WriteDecisionCallCount())
	_, _, d := f.decisions.WriteDecisionArgsForCall(0)
	return d
}

func tombstoneIDs(ts []domain.Tombstone) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Entry.ID().String()
	}
	return out
}

func TestRecoverPublishesTombstonesForOrphansThenWritesTheDecision(t *testing.T) {
	rs := resources(10)
	patch := res{apiVersion: "eno.azure.io/v1", kind: "Patch", namespace: ns, name: "cm-08", patchTarget: [2]string{"v1", "ConfigMap"}}
	tomb := cm("cm-09")
	tomb.deleted = true
	// cm-00..cm-05 still produced; cm-08 patched; cm-09 already a tombstone; cm-06 and cm-07 orphaned.
	f := recoveryFixture(t, rs, rs[:6], []res{patch, tomb})
	f.cfg.MaxTombstoneFraction = 1

	// One shared log shows the order of the hand-off (design §6.2): publish, commit, decision,
	// slice check, forced resynthesis.
	var order []string
	publish, commit, resynth := f.sink.PublishTombstonesStub, f.sink.CommitTombstonesStub, f.sink.RequestResynthesisStub
	f.sink.PublishTombstonesCalls(func(ctx context.Context, c domain.Composition, h domain.Handoff) ([]string, error) {
		order = append(order, "publish")
		return publish(ctx, c, h)
	})
	f.sink.CommitTombstonesCalls(func(ctx context.Context, c domain.Composition, h domain.Handoff, slices []string) error {
		order = append(order, "commit")
		return commit(ctx, c, h, slices)
	})
	write := f.decisions.WriteDecisionStub
	f.decisions.WriteDecisionCalls(func(ctx context.Context, c domain.Composition, d domain.Decision) error {
		order = append(order, "decision")
		return write(ctx, c, d)
	})
	f.sink.EnsureTombstonesCalls(func(context.Context, domain.Composition, []string, domain.Handoff) error {
		order = append(order, "ensure")
		return nil
	})
	f.sink.RequestResynthesisCalls(func(ctx context.Context, c domain.Composition) error {
		order = append(order, "resynthesize")
		return resynth(ctx, c)
	})

	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, []string{"publish", "commit", "decision", "ensure", "resynthesize"}, order)

	published := res.Plan.Tombstones
	assert.Equal(t, []string{"ConfigMap/team-a/cm-06", "ConfigMap/team-a/cm-07"}, tombstoneIDs(published))
	assert.Equal(t, map[string]string{"app": "web", "component": "cm-06"}, published[0].Entry.Labels)
	assert.Equal(t, map[string]string{domain.AnnotationDeletionGroup: "1"}, published[0].Entry.Annotations)
	_, _, h := f.sink.PublishTombstonesArgsForCall(0)
	require.Len(t, h.Resources, 2)
	assert.Equal(t, domain.SliceResource{Manifest: published[0].Manifest(), Deleted: true}, h.Resources[0])
	_, _, _, committed := f.sink.CommitTombstonesArgsForCall(0)
	assert.Equal(t, []string{"web-recovery-11111111"}, committed)
	_, _, ensured, eh := f.sink.EnsureTombstonesArgsForCall(0)
	assert.Equal(t, []string{"web-recovery-11111111"}, ensured)
	assert.Equal(t, h, eh, "a slice that is gone is recreated with the same content")
	_, resynthesized := f.sink.RequestResynthesisArgsForCall(0)
	assert.Equal(t, synthID, resynthesized.SynthesisUUID(), "force-resynthesis names the decided synthesis")

	d := writtenDecision(t, f)
	assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
	assert.Equal(t, 2, d.Tombstones)
	assert.Equal(t, "web-recovery-11111111", d.TombstoneSlice)
	assert.Equal(t, oldSynth, d.SourceSynthesisUUID)
	assert.Equal(t, synthID, d.SynthesisUUID)
	assert.Equal(t, oldSynth, d.RecoveredFrom)
	assert.True(t, res.Written)
	assert.Equal(t, 5, f.guard.LiveCompositionCallCount(), "a live recheck before each of the five steps")
}

func TestRecoverOutcomesWithoutTombstones(t *testing.T) {
	rs := resources(9)
	cases := []struct {
		name    string
		setup   func(t *testing.T, f *fixture)
		outcome domain.Outcome
		reason  string
	}{
		{"no inventory", func(t *testing.T, f *fixture) { f.store.ListChunksReturns(nil, nil) }, domain.OutcomeNoInventory, ""},
		{"same incarnation", func(t *testing.T, f *fixture) {
			f.store.ListChunksReturns(snapshotSecrets(t, uid, oldSynth, oldTime, chunkLimit, rs), nil)
		}, domain.OutcomeNothingToRecover, domain.ReasonSameIncarnation},
		{"no orphans", func(t *testing.T, f *fixture) {
			f.store.ListChunksReturns(snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs[:4]), nil)
		}, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans},
		{"leftover higher-index chunks of an older snapshot are ignored", func(t *testing.T, f *fixture) {
			older := snapshotSecrets(t, "uid-ancient", "33333333", oldTime.Add(-time24h), 300, append(resources(9), cm("zz-gone")))
			newer := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs[:4])
			f.store.ListChunksReturns(append(newer, older[len(newer):]...), nil)
		}, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:4])
			tc.setup(t, f)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.NoError(t, err)
			d := writtenDecision(t, f)
			assert.Equal(t, tc.outcome, d.Outcome)
			assert.Equal(t, tc.reason, d.Reason)
			assert.Zero(t, d.Tombstones)
			assert.Zero(t, f.sink.PublishTombstonesCallCount())
		})
	}
}

const time24h = 24 * 60 * 60 * 1e9

func TestRecoverRefusesInvalidHistory(t *testing.T) {
	rs := resources(9)
	cases := []struct {
		name   string
		mutate func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret
		reason domain.InvalidReason
	}{
		{"foreign type", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret { s[1].Type = "Opaque"; return s }, domain.ReasonMalformed},
		{"garbage JSON", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret {
			s[1].Data[domain.SecretDataKey] = []byte(`[{"kind":`)
			return s
		}, domain.ReasonMalformed},
		{"mixed metadata", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret {
			s[2].Annotations[domain.AnnotationCompositionUID] = "someone-else"
			return s
		}, domain.ReasonMixedMetadata},
		{"ambiguous timestamp", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret {
			return append(s, snapshotSecrets(t, "uid-other", "44444444", oldTime, 100000, rs)...)
		}, domain.ReasonAmbiguousTimestamp},
		{"missing chunk", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret { return append(s[:1], s[2]) }, domain.ReasonMissingChunk},
		{"digest mismatch", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret {
			s[0].Data[domain.SecretDataKey] = []byte(strings.Replace(string(s[0].Data[domain.SecretDataKey]), "cm-00", "cm-0x", 1))
			return s
		}, domain.ReasonDigestMismatch},
		{"half-written replacement", func(t *testing.T, s []domain.ChunkSecret) []domain.ChunkSecret {
			newer := snapshotSecrets(t, "uid-between", "55555555", oldTime.Add(time24h), chunkLimit, rs[:7])
			return append([]domain.ChunkSecret{newer[0]}, s[1:]...)
		}, domain.ReasonMissingChunk},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:2])
			f.cfg.MaxTombstoneFraction = 1
			f.store.ListChunksReturns(tc.mutate(t, snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)), nil)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.NoError(t, err)
			d := writtenDecision(t, f)
			assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome)
			assert.Equal(t, tc.reason.String(), d.Reason)
			assert.Zero(t, f.sink.PublishTombstonesCallCount(), "no tombstones from untrusted history")
			require.Equal(t, 1, f.events.EventCallCount())
			_, warning, reason, _ := f.events.EventArgsForCall(0)
			assert.True(t, warning)
			assert.Equal(t, "InventoryInvalid", reason)
		})
	}
}

func TestRecoverDeletionGuard(t *testing.T) {
	rs := resources(9)
	held := func(t *testing.T, review string) *fixture {
		f := recoveryFixture(t, rs, rs[:3]) // 6 of 9 orphaned: over 0.5
		if review != "" {
			f.comp.Annotations[domain.AnnotationReview] = review
		}
		return f
	}
	t.Run("held", func(t *testing.T) {
		f := held(t, "")
		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeHeldForReview, d.Outcome)
		assert.Equal(t, domain.ReasonOverDeletionGuard, d.Reason)
		assert.Equal(t, 6, d.Tombstones)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
		assert.Len(t, res.Plan.Held, 6)
		_, warning, reason, msg := f.events.EventArgsForCall(0)
		assert.True(t, warning)
		assert.Equal(t, "HeldForReview", reason)
		assert.Contains(t, msg, "ConfigMap/team-a/cm-08")

		// The same held decision is not rewritten on the next pass.
		g := held(t, "")
		g.comp.Annotations[domain.AnnotationDecision] = d.Encode()
		_, err = g.service(t).Recover(ctx(t), g.comp)
		require.NoError(t, err)
		assert.Zero(t, g.decisions.WriteDecisionCallCount())
		assert.Zero(t, g.sink.PublishTombstonesCallCount())
	})
	t.Run("approved", func(t *testing.T) {
		f := held(t, "approve:"+synthID)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, domain.ReasonApproved, d.Reason)
		require.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		_, _, h := f.sink.PublishTombstonesArgsForCall(0)
		assert.Len(t, h.Resources, 6)
	})
	t.Run("rejected", func(t *testing.T) {
		f := held(t, "reject:"+synthID)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonRejected, d.Reason)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
	})
	t.Run("review of another synthesis is ignored", func(t *testing.T) {
		f := held(t, "approve:"+oldSynth)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeHeldForReview, writtenDecision(t, f).Outcome)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
	})
	t.Run("held blocks recording in the same reconcile", func(t *testing.T) {
		f := held(t, "")
		f.comp.Synthesis.Ready = true
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Nil(t, res.Recording)
		assert.Zero(t, f.writes())
	})
}

func TestRecoverLiveRecheckGuardsBothWrites(t *testing.T) {
	rs := resources(9)
	changes := map[string]func(c domain.Composition) domain.Composition{
		"recreated":     recreated,
		"resynthesized": resynthesized,
		"decided by another controller": func(c domain.Composition) domain.Composition {
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue,
				domain.AnnotationDecision: domain.Decision{SynthesisUUID: synthID, Outcome: domain.OutcomeRecovered}.Encode()}
			return c
		},
		"opt-in removed": func(c domain.Composition) domain.Composition { c.Annotations = nil; return c },
	}
	for desc, change := range changes {
		for at, step := range []string{"publish", "commit", "decision"} {
			t.Run(desc+"/before "+step, func(t *testing.T) {
				f := recoveryFixture(t, rs, rs[:7])
				f.guard.LiveCompositionStub = nil
				for i := range at {
					f.guard.LiveCompositionReturnsOnCall(i, f.comp, nil)
				}
				f.guard.LiveCompositionReturnsOnCall(at, change(f.comp), nil)
				_, err := f.service(t).Recover(ctx(t), f.comp)
				var stale *app.StaleCompositionError
				require.ErrorAs(t, err, &stale)
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				assert.Equal(t, min(at, 1), f.sink.PublishTombstonesCallCount())
				assert.Equal(t, max(at-1, 0), f.sink.CommitTombstonesCallCount())
				assert.Zero(t, f.sink.RequestResynthesisCallCount())
			})
		}
	}
}

func TestRecoverWriteFailures(t *testing.T) {
	rs := resources(9)
	t.Run("publish fails: no decision points at nothing", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.sink.PublishTombstonesStub = nil
		f.sink.PublishTombstonesReturns(nil, errors.New("503 unavailable"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("decision conflict is returned for a retry", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.decisions.WriteDecisionReturns(fmt.Errorf("update: %w", ports.ErrConflict))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.metrics.DecisionMadeCallCount())
	})
	t.Run("decision carries the live resourceVersion", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		live := f.comp
		live.ResourceVersion = "42"
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(live, nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, c, _ := f.decisions.WriteDecisionArgsForCall(0)
		assert.Equal(t, "42", c.ResourceVersion)
	})
	t.Run("listing secrets fails: nothing decided", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.store.ListChunksReturns(nil, errors.New("429 too many requests"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("unusable slice: nothing decided", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.reader.GetSliceStub = nil
		f.reader.GetSliceReturns(domain.ResourceSlice{}, fmt.Errorf("x: %w", ports.ErrNotFound))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var se *domain.SliceError
		require.ErrorAs(t, err, &se)
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
	})
}

func TestRecoverSkipsFinishedSyntheses(t *testing.T) {
	f := newFixture(t) // already decided
	_, err := f.service(t).Recover(ctx(t), f.comp)
	var ie *domain.IneligibleError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, domain.IneligibleDecided, ie.Reason)
	assert.Zero(t, f.store.ListChunksCallCount())
}

func TestPlanWritesNothing(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	plan, err := f.service(t).Plan(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeRecovered, plan.Decision.Outcome)
	assert.Len(t, plan.Tombstones, 2)
	assert.Zero(t, f.sink.PublishTombstonesCallCount())
	assert.Zero(t, f.decisions.WriteDecisionCallCount())
	assert.Zero(t, f.writes())
}
