package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// recoveryFixture: the Composition was recreated (uid) and its new synthesis produces fewer
// resources than the snapshot the old incarnation (oldUID) recorded.
// recoverStaleAt runs a recovery whose live recheck number at (0: before arming, 1: before the
// decision) finds the Composition changed: the pass stops as stale, with no decision and no
// write past that step.
func recoverStaleAt(t *testing.T, f *fixture, at int, change func(domain.Composition) domain.Composition) {
	t.Helper()
	f.live.LiveCompositionStub = nil
	for i := range at {
		f.live.LiveCompositionReturnsOnCall(i, f.comp, nil)
	}
	f.live.LiveCompositionReturnsOnCall(at, change(f.comp), nil)
	_, err := f.service(t).Recover(ctx(t), f.comp)
	var stale *app.StaleCompositionError
	require.ErrorAs(t, err, &stale)
	assert.Zero(t, f.decisions.WriteDecisionCallCount())
	assert.Equal(t, at, f.sink.ArmTombstonesCallCount())
	assert.Equal(t, at, f.sink.CreateRecoverySliceCallCount())
	assert.Equal(t, at, f.sink.AppendRecoverySliceCallCount())
}

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

	// One shared log shows the order of the hand-off (design §6.2): arm, create and name each
	// slice on the armed Composition, decision, forced resynthesis.
	var order []string
	create, arm, appendSlice, resynth := f.sink.CreateRecoverySliceStub, f.sink.ArmTombstonesStub, f.sink.AppendRecoverySliceStub, f.sink.RequestResynthesisStub
	f.sink.CreateRecoverySliceCalls(func(ctx context.Context, c domain.Composition, h domain.Handoff, part int) (string, error) {
		order = append(order, "create")
		return create(ctx, c, h, part)
	})
	f.sink.ArmTombstonesCalls(func(ctx context.Context, c domain.Composition, digest string) (domain.Composition, error) {
		order = append(order, "arm")
		return arm(ctx, c, digest)
	})
	f.sink.AppendRecoverySliceCalls(func(ctx context.Context, c domain.Composition, slice string) (domain.Composition, error) {
		order = append(order, "name")
		assert.NotEmpty(t, c.Annotations[domain.AnnotationArmed], "named on the armed Composition")
		return appendSlice(ctx, c, slice)
	})
	write := f.decisions.WriteDecisionStub
	f.decisions.WriteDecisionCalls(func(ctx context.Context, c domain.Composition, d domain.Decision) error {
		order = append(order, "decision")
		return write(ctx, c, d)
	})
	f.sink.RequestResynthesisCalls(func(ctx context.Context, c domain.Composition) error {
		order = append(order, "resynthesize")
		return resynth(ctx, c)
	})

	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, []string{"arm", "create", "name", "decision", "resynthesize"}, order)

	published := res.Plan.Tombstones
	assert.Equal(t, []string{"ConfigMap/team-a/cm-06", "ConfigMap/team-a/cm-07"}, tombstoneIDs(published))
	assert.Equal(t, map[string]string{"app": "web", "component": "cm-06"}, published[0].Entry.Labels)
	assert.Equal(t, map[string]string{domain.AnnotationDeletionGroup: "1"}, published[0].Entry.Annotations)
	_, c, h, part := f.sink.CreateRecoverySliceArgsForCall(0)
	assert.Equal(t, 0, part)
	require.Len(t, h.Resources, 2)
	assert.True(t, h.Resources[0].Deleted)
	back, withdrawn, err := domain.ParseTombstone(h.Resources[0])
	require.NoError(t, err)
	assert.False(t, withdrawn)
	assert.Equal(t, published[0].Entry, back)
	assert.Equal(t, testUID, published[0].UID, "its precondition names the UID read before the hand-off")
	assert.Equal(t, h.Digest, c.Annotations[domain.AnnotationArmed], "created for the armed Composition")
	_, _, armed := f.sink.ArmTombstonesArgsForCall(0)
	assert.Equal(t, h.Digest, armed)
	slice := h.SliceName(f.comp, 0)
	assert.Equal(t, "web-recovery-11111111-"+h.Digest+"-0", slice)
	_, _, named := f.sink.AppendRecoverySliceArgsForCall(0)
	assert.Equal(t, slice, named)
	_, resynthesized := f.sink.RequestResynthesisArgsForCall(0)
	assert.Equal(t, synthID, resynthesized.SynthesisUUID(), "force-resynthesis names the decided synthesis")

	d := writtenDecision(t, f)
	assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
	assert.Equal(t, 2, d.Tombstones)
	assert.Equal(t, slice, d.TombstoneSlice)
	assert.Equal(t, oldSynth, d.SourceSynthesisUUID)
	assert.Equal(t, synthID, d.SynthesisUUID)
	assert.Equal(t, oldSynth, d.RecoveredFrom)
	assert.True(t, res.Written)
	assert.Equal(t, 3, f.live.LiveCompositionCallCount(), "a live recheck before arming, the decision and the resynthesis request")
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
			assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
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
			assert.Zero(t, f.sink.CreateRecoverySliceCallCount(), "no tombstones from untrusted history")
			require.Equal(t, 1, f.events.Count())
			_, warning, reason, _ := f.events.At(0)
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
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		assert.Len(t, res.Plan.Held, 6)
		_, warning, reason, msg := f.events.At(0)
		assert.True(t, warning)
		assert.Equal(t, "HeldForReview", reason)
		assert.Contains(t, msg, "ConfigMap/team-a/cm-08")

		// The same held decision is not rewritten on the next pass.
		g := held(t, "")
		g.comp.Annotations[domain.AnnotationDecision] = d.Encode()
		_, err = g.service(t).Recover(ctx(t), g.comp)
		require.NoError(t, err)
		assert.Zero(t, g.decisions.WriteDecisionCallCount())
		assert.Zero(t, g.sink.CreateRecoverySliceCallCount())
	})
	t.Run("approved", func(t *testing.T) {
		f := held(t, "approve:"+synthID)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, domain.ReasonApproved, d.Reason)
		require.Equal(t, 1, f.sink.CreateRecoverySliceCallCount())
		_, _, h, _ := f.sink.CreateRecoverySliceArgsForCall(0)
		assert.Len(t, h.Resources, 6)
	})
	t.Run("rejected", func(t *testing.T) {
		f := held(t, "reject:"+synthID)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonRejected, d.Reason)
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
	})
	t.Run("review of another synthesis is ignored", func(t *testing.T) {
		f := held(t, "approve:"+oldSynth)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeHeldForReview, writtenDecision(t, f).Outcome)
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
	})
	t.Run("an ignored review is a warning naming the values expected, once per value", func(t *testing.T) {
		f := held(t, "approve:"+oldSynth)
		svc := f.service(t)
		ignored := func() []string {
			var out []string
			for i := range f.events.Count() {
				_, warning, reason, msg := f.events.At(i)
				if reason == "ReviewIgnored" {
					assert.True(t, warning)
					out = append(out, msg)
				}
			}
			return out
		}
		pass := func(review string) {
			t.Helper()
			if review == "" {
				delete(f.comp.Annotations, domain.AnnotationReview)
			} else {
				f.comp.Annotations[domain.AnnotationReview] = review
			}
			_, err := svc.Recover(ctx(t), f.comp)
			require.NoError(t, err)
		}
		pass("approve:" + oldSynth)
		require.Len(t, ignored(), 1)
		assert.Contains(t, ignored()[0], "names synthesis "+oldSynth)
		assert.Contains(t, ignored()[0], `"approve:`+synthID+`" or "reject:`+synthID+`"`)

		// The held decision is now on record: later passes write nothing and repeat nothing.
		f.comp.Annotations[domain.AnnotationDecision] = writtenDecision(t, f).Encode()
		pass("approve:" + oldSynth)
		pass("approve:" + oldSynth)
		assert.Len(t, ignored(), 1, "one event per distinct value")

		pass("aprove:" + synthID)
		require.Len(t, ignored(), 2, "another bad value is announced")
		assert.Contains(t, ignored()[1], "neither approve:<synthesisUUID> nor reject:<synthesisUUID>")
		assert.Contains(t, ignored()[1], `"approve:`+synthID+`"`)

		pass("")
		pass("aprove:" + synthID)
		assert.Len(t, ignored(), 3, "cleared and set again: announced again")
		assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "the held decision itself is written once")
	})
	t.Run("a bad review where the guard does not trip says nothing", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:8]) // 1 of 9 orphaned: under 0.5
		f.comp.Annotations[domain.AnnotationReview] = "approve:" + oldSynth
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		for i := range f.events.Count() {
			_, _, reason, _ := f.events.At(i)
			assert.NotEqual(t, "ReviewIgnored", reason)
		}
	})
	t.Run("a guard of 0 holds a single orphan, until approved", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:8]) // 1 of 9 orphaned: passes the default guard
		f.cfg.MaxTombstoneFraction = 0
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeHeldForReview, d.Outcome)
		assert.Equal(t, 1, d.Tombstones)
		assert.Contains(t, d.Message, "the guard of 0 holds every recovery for review")
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())

		g := recoveryFixture(t, rs, rs[:8])
		g.cfg.MaxTombstoneFraction = 0
		g.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
		_, err = g.service(t).Recover(ctx(t), g.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, g).Outcome)
		assert.Equal(t, 1, g.sink.CreateRecoverySliceCallCount())
	})
	t.Run("a guard of 0 still decides NoOrphans without review", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs)
		f.cfg.MaxTombstoneFraction = 0
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonNoOrphans, d.Reason)
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
		for at, step := range []string{"arming", "decision"} {
			t.Run(desc+"/before "+step, func(t *testing.T) {
				f := recoveryFixture(t, rs, rs[:7])
				recoverStaleAt(t, f, at, change)
				assert.Zero(t, f.sink.RequestResynthesisCallCount())
			})
		}
	}
}

func TestRecoverWriteFailures(t *testing.T) {
	rs := resources(9)
	t.Run("creating the slice fails: no decision points at nothing", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.sink.CreateRecoverySliceStub = nil
		f.sink.CreateRecoverySliceReturns("", errors.New("503 unavailable"))
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
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturns(live, nil)
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
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
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
	assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
	assert.Zero(t, f.decisions.WriteDecisionCallCount())
	assert.Zero(t, f.writes())
}

// recordedFor is a snapshot of rs recorded for another Composition of the lineage, at Secret
// names of its own.
func recordedFor(t *testing.T, owner domain.CompositionRef, compUID, uuid string, ts time.Time, rs []res) []domain.ChunkSecret {
	out := snapshotSecrets(t, compUID, uuid, ts, chunkLimit, rs)
	for i := range out {
		out[i].Name = fmt.Sprintf("%s-%s-%d", owner.Name, domain.DefaultLineage(ns, name), i)
		out[i].Annotations = maps.Clone(out[i].Annotations)
		out[i].Annotations[domain.AnnotationCompositionNamespace] = owner.Namespace
		out[i].Annotations[domain.AnnotationCompositionName] = owner.Name
	}
	return out
}

// design §6, SharedLineage, read wider than the selected snapshot: team-a/web was re-created
// after a rename, so its own stale snapshot is the candidate, while the lineage also holds the
// snapshots of its renamed successor team-a/web-v2 and of team-b/api in another namespace
// (neither a candidate). Recovery reads each of those two live, once, before it decides:
// either existing (or Forbidden) refuses the history; one being deleted, or any other failure,
// decides nothing; both NotFound, and the own predecessor's history is recovered.
func TestRecoverReadsEveryOtherOwnerOfTheLineage(t *testing.T) {
	rs := resources(9)
	successor := domain.CompositionRef{Namespace: ns, Name: "web-v2"}
	otherNS := domain.CompositionRef{Namespace: "team-b", Name: "api"}
	lineage := func(t *testing.T) []domain.ChunkSecret {
		return slices.Concat(
			snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs),
			recordedFor(t, successor, "uid-v2", "44444444-aaaa-bbbb-cccc-000000000004", synthTime.Add(-10*time.Minute), rs[:7]),
			recordedFor(t, successor, "uid-v2", "44444444-aaaa-bbbb-cccc-000000000005", synthTime.Add(-20*time.Minute), rs[:7]),
			recordedFor(t, otherNS, "uid-api", "55555555-aaaa-bbbb-cccc-000000000005", synthTime.Add(-5*time.Minute), rs[:2]))
	}
	gone := func(ref domain.CompositionRef) (domain.Composition, error) {
		return domain.Composition{}, fmt.Errorf("compositions %q not found: %w", ref.Name, ports.ErrNotFound)
	}
	lives := func(ref domain.CompositionRef) (domain.Composition, error) {
		return domain.Composition{Namespace: ref.Namespace, Name: ref.Name, UID: "uid-" + ref.Name}, nil
	}
	forbidden := func(ref domain.CompositionRef) (domain.Composition, error) {
		return domain.Composition{}, fmt.Errorf("compositions %q is forbidden: %w", ref.Name, ports.ErrForbidden)
	}
	deleting := func(ref domain.CompositionRef) (domain.Composition, error) {
		return domain.Composition{Namespace: ref.Namespace, Name: ref.Name, UID: "uid-" + ref.Name, Deleting: true}, nil
	}
	fault := errors.New("etcdserver: request timed out")
	failing := func(domain.CompositionRef) (domain.Composition, error) { return domain.Composition{}, fault }
	type read func(domain.CompositionRef) (domain.Composition, error)
	tests := []struct {
		name               string
		successor, otherNS read
		shared             bool
		mentions           []string
		errAs              any
		errIs              error
		recovered          bool
	}{
		{name: "both gone: the own predecessor's history is recovered", successor: gone, otherNS: gone, recovered: true},
		{name: "the renamed successor lives: SharedLineage", successor: lives, otherNS: gone, shared: true,
			mentions: []string{"team-a/web-v2 (exists)", "give each Composition its own lineage"}},
		{name: "another namespace's owner lives: SharedLineage", successor: gone, otherNS: lives, shared: true,
			mentions: []string{"team-b/api (exists)"}},
		{name: "another namespace's owner is Forbidden: it counts as living", successor: gone, otherNS: forbidden, shared: true,
			mentions: []string{"team-b/api (could not be read: forbidden"}},
		{name: "the successor is being deleted: nothing decided", successor: deleting, otherNS: gone, errAs: new(*app.SourceDeletingError)},
		{name: "another error reading an owner: nothing decided", successor: gone, otherNS: failing, errIs: fault},
		{name: "one being deleted, one living: the living one decides", successor: deleting, otherNS: lives, shared: true,
			mentions: []string{"team-b/api (exists)"}},
		{name: "one unreadable, one Forbidden: Forbidden decides", successor: failing, otherNS: forbidden, shared: true,
			mentions: []string{"team-b/api (could not be read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.store.ListChunksReturns(lineage(t), nil)
			f.live.LiveCompositionStub = nil
			// The owners are read in order, before any recheck: one GET each.
			for i, owner := range []struct {
				ref  domain.CompositionRef
				read read
			}{{successor, tt.successor}, {otherNS, tt.otherNS}} {
				c, err := owner.read(owner.ref)
				f.live.LiveCompositionReturnsOnCall(i, c, err)
			}
			f.live.LiveCompositionReturns(f.comp, nil)
			svc := f.service(t)
			var err error
			if tt.recovered {
				// The dry run: the same plan, and no recheck after the owner reads.
				var plan domain.RecoveryPlan
				plan, err = svc.Plan(ctx(t), f.comp)
				require.NoError(t, err)
				assert.Equal(t, domain.OutcomeRecovered, plan.Decision.Outcome, plan.Decision.Message)
				assert.Equal(t, oldSynth, plan.Decision.SourceSynthesisUUID, "its own predecessor, not the successor's newer snapshot")
				assert.Equal(t, []string{"ConfigMap/team-a/cm-07", "ConfigMap/team-a/cm-08"}, tombstoneIDs(plan.Tombstones))
			} else {
				_, err = svc.Recover(ctx(t), f.comp)
			}
			require.GreaterOrEqual(t, f.live.LiveCompositionCallCount(), 2)
			for i, want := range []domain.CompositionRef{successor, otherNS} {
				_, asked := f.live.LiveCompositionArgsForCall(i)
				assert.Equal(t, want, asked, "read %d", i)
			}
			for i := 2; i < f.live.LiveCompositionCallCount(); i++ {
				_, asked := f.live.LiveCompositionArgsForCall(i)
				assert.Equal(t, f.comp.Ref(), asked, "each other owner is read once; then only rechecks")
			}
			switch {
			case tt.recovered:
			case tt.shared:
				require.NoError(t, err)
				d := writtenDecision(t, f)
				assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome, d.Message)
				assert.Equal(t, "SharedLineage", d.Reason)
				assert.Empty(t, d.RecoveredFrom)
				for _, m := range tt.mentions {
					assert.Contains(t, d.Message, m)
				}
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount(), "nothing is handed to Eno")
				_, warning, reason, message := f.events.At(0)
				assert.True(t, warning)
				assert.Equal(t, "InventoryInvalid", reason)
				assert.Contains(t, message, "SharedLineage")
				metrics, _ := refusalsOf(f)
				assert.Equal(t, []string{"SharedLineage"}, metrics)
			default:
				require.Error(t, err)
				if tt.errAs != nil {
					assert.ErrorAs(t, err, tt.errAs)
				}
				if tt.errIs != nil {
					assert.ErrorIs(t, err, tt.errIs)
				}
				assert.Zero(t, f.decisions.WriteDecisionCallCount(), "nothing decided")
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
				assert.Equal(t, 2, f.live.LiveCompositionCallCount(), "no recheck: nothing to write")
			}
		})
	}
	t.Run("only the Composition's own history: no read", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		_, err := f.service(t).Plan(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Zero(t, f.live.LiveCompositionCallCount())
	})
}

// design §5 step 3, OtherNamespace: team-a/web has no history of its own; the lineage's snapshots
// were recorded in team-b and team-c (a copied lineage override). With adoption across
// namespaces off the decision is NothingToRecover/OtherNamespace: finished, nothing read live,
// nothing published, a Warning event naming the namespaces and a refusal counted. With it on,
// the other namespace's history is a candidate and its owner is read as for any rename.
func TestRecoverOtherNamespace(t *testing.T) {
	rs := resources(9)
	history := func(t *testing.T) []domain.ChunkSecret {
		return slices.Concat(
			recordedFor(t, domain.CompositionRef{Namespace: "team-b", Name: name}, "uid-b", oldSynth, oldTime, rs),
			recordedFor(t, domain.CompositionRef{Namespace: "team-c", Name: "api"}, "uid-c", "44444444-aaaa-bbbb-cccc-000000000004", oldTime.Add(-time.Hour), rs))
	}
	t.Run("adoption off: OtherNamespace", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		f.comp.Annotations[domain.AnnotationDecision] = domain.Decision{SynthesisUUID: "earlier", Outcome: domain.OutcomeRecovered, RecoveredFrom: "s-earlier"}.Encode()
		f.store.ListChunksReturns(history(t), nil)
		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, d.Message)
		assert.Equal(t, domain.ReasonOtherNamespace, d.Reason)
		assert.Contains(t, d.Message, "team-b, team-c")
		assert.Equal(t, "s-earlier", d.RecoveredFrom, "OtherNamespace carries the recoveredFrom it replaces, and sets none")
		assert.True(t, res.Written)
		assert.True(t, d.Outcome.Finished(), "recording may proceed")
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		assert.Zero(t, f.downstream.ObserveObjectCallCount())
		require.Equal(t, 1, f.live.LiveCompositionCallCount(), "only the recheck before the decision")
		_, asked := f.live.LiveCompositionArgsForCall(0)
		assert.Equal(t, f.comp.Ref(), asked)
		require.Equal(t, 1, f.events.Count())
		_, warning, reason, message := f.events.At(0)
		assert.True(t, warning, "a Warning event")
		assert.Equal(t, "NothingToRecover", reason)
		assert.Contains(t, message, "OtherNamespace")
		assert.Contains(t, message, "team-b, team-c")
		metrics, _ := refusalsOf(f)
		assert.Equal(t, []string{"OtherNamespace"}, metrics)
	})
	t.Run("adoption across namespaces on: the newest is adopted once its owners are gone", func(t *testing.T) {
		f := adoptingAcrossNamespaces(recoveryFixture(t, rs, rs[:7]))
		f.cfg.MaxTombstoneFraction = 1
		f.store.ListChunksReturns(history(t), nil)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturns(domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		plan, err := f.service(t).Plan(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeRecovered, plan.Decision.Outcome, plan.Decision.Message)
		assert.Equal(t, oldSynth, plan.Decision.SourceSynthesisUUID)
		assert.Equal(t, 2, f.live.LiveCompositionCallCount(), "both owners are read")
	})
}

// A Composition that carries the same lineage (a copied override) shares it even before it has
// recorded anything, in any shard: listed live across every shard (lineage across shards), read live, it makes the
// history SharedLineage.
func TestRecoverSeesALineageMemberThatHasNotRecorded(t *testing.T) {
	rs := resources(9)
	override := func(c domain.Composition, l string) domain.Composition {
		c.Annotations = maps.Clone(c.Annotations)
		c.Annotations[domain.AnnotationLineageOverride] = l
		return c
	}
	for name, tt := range map[string]struct {
		member   func(domain.Composition) domain.Composition
		live     error
		shared   bool
		errorOut bool
	}{
		"a sibling with the same override lives": {member: func(c domain.Composition) domain.Composition { return override(c, "shared") }, shared: true},
		"a sibling with the same override is gone": {member: func(c domain.Composition) domain.Composition { return override(c, "shared") },
			live: fmt.Errorf("gone: %w", ports.ErrNotFound)},
		"a sibling with another lineage": {member: func(c domain.Composition) domain.Composition { return override(c, "other") }},
		"listing fails: decide nothing":  {errorOut: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.comp = override(f.comp, "shared")
			f.store.ListChunksReturns(snapshotSecretsOfLineage(t, "shared", oldUID, oldSynth, rs), nil)
			// The sibling is in another shard: this shard's cache never holds it, the fleet
			// index of every shard does (lineage across shards).
			if tt.errorOut {
				f.fleet.LineageMembersReturns(nil, errors.New("the list failed"))
			} else {
				sibling := tt.member(composition("uid-split", "99999999-aaaa-bbbb-cccc-000000000009", nil, false))
				sibling.Name = "web-split"
				f.fleetComps = []domain.Composition{f.comp, sibling}
				guard := f.live.LiveCompositionStub
				f.live.LiveCompositionCalls(func(c context.Context, ref domain.CompositionRef) (domain.Composition, error) {
					if ref.Name == "web-split" {
						if tt.live != nil {
							return domain.Composition{}, tt.live
						}
						return sibling, nil
					}
					return guard(c, ref)
				})
			}
			_, err := f.service(t).Recover(ctx(t), f.comp)
			if tt.errorOut {
				require.Error(t, err)
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				return
			}
			require.NoError(t, err)
			d := writtenDecision(t, f)
			if tt.shared {
				assert.Equal(t, domain.OutcomeInventoryInvalid, d.Outcome, d.Message)
				assert.Equal(t, domain.ReasonSharedLineage.String(), d.Reason)
				assert.Contains(t, d.Message, "team-a/web-split")
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
				return
			}
			assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
		})
	}
}

// snapshotSecretsOfLineage is snapshotSecrets recorded under the lineage override l.
func snapshotSecretsOfLineage(t *testing.T, l, compUID, uuid string, rs []res) []domain.ChunkSecret {
	t.Helper()
	lineage, err := domain.NewLineage(l)
	require.NoError(t, err)
	out := snapshotSecrets(t, compUID, uuid, oldTime, chunkLimit, rs)
	for i := range out {
		out[i].Labels[domain.LabelLineage] = lineage.String()
	}
	return out
}

// design §6.3: each tombstone's object is read downstream just before publishing; what the read
// finds decides what is published.
func TestRecoverChecksEachTombstoneDownstream(t *testing.T) {
	rs := resources(9)
	old := domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Writes: enoWrote(historyWritten.Add(-time.Hour)), UID: testUID}
	tests := []struct {
		name      string
		observe   func(domain.Entry) (domain.Observation, error)
		outcome   domain.Outcome
		reason    string
		published []string
		wantErr   bool
	}{
		{"every object older than the history", func(domain.Entry) (domain.Observation, error) { return old, nil },
			domain.OutcomeRecovered, "", []string{"cm-07", "cm-08"}, false},
		{"one object disappeared since the history", func(e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-07" {
				return domain.Observation{State: domain.ObjectAbsent}, nil
			}
			return old, nil
		}, domain.OutcomeRecovered, "", []string{"cm-08"}, false},
		{"one object re-created by hand after the history", func(e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-08" {
				return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Minute), Writes: enoWrote(historyWritten.Add(time.Minute)), UID: testUID}, nil
			}
			return old, nil
		}, domain.OutcomeRecovered, "", []string{"cm-07"}, false},
		{"every object unreadable: Unverified, nothing published", func(domain.Entry) (domain.Observation, error) {
			return domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}, nil
		}, domain.OutcomeNothingToRecover, domain.ReasonUnverified, nil, false},
		{"every object gone: NoOrphans", func(domain.Entry) (domain.Observation, error) {
			return domain.Observation{State: domain.ObjectAbsent}, nil
		}, domain.OutcomeNothingToRecover, domain.ReasonNoOrphans, nil, false},
		{"a read that fails decides nothing", func(domain.Entry) (domain.Observation, error) {
			return domain.Observation{}, errors.New("500 internal error")
		}, domain.Outcome{}, "", nil, true},
		{"read outage: one read fails persistently, another answered: it is kept as Unreadable, the rest published", func(e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-07" {
				return domain.Observation{}, errors.New("503 service unavailable")
			}
			return old, nil
		}, domain.OutcomeRecovered, "", []string{"cm-08"}, false},
		{"read outage: one read fails, the other object gone: Unverified", func(e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-07" {
				return domain.Observation{}, errors.New("the request timed out")
			}
			return domain.Observation{State: domain.ObjectAbsent}, nil
		}, domain.OutcomeNothingToRecover, domain.ReasonUnverified, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) { return tt.observe(e) })
			svc := f.service(t)
			if strings.HasPrefix(tt.name, "read outage:") {
				// A failed read is retried until it has failed three plans in a row.
				for range 2 {
					_, err := svc.Recover(ctx(t), f.comp)
					require.ErrorContains(t, err, "before it is kept as unreadable")
					assert.Zero(t, f.decisions.WriteDecisionCallCount())
				}
			}
			reads := f.downstream.ObserveObjectCallCount()
			res, err := svc.Recover(ctx(t), f.comp)
			if tt.wantErr {
				require.Error(t, err)
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 2, f.downstream.ObserveObjectCallCount()-reads, "each absent entry is read once")
			d := writtenDecision(t, f)
			assert.Equal(t, tt.outcome, d.Outcome, d.Message)
			assert.Equal(t, tt.reason, d.Reason)
			if tt.published == nil {
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
				return
			}
			var got []string
			for _, ts := range res.Plan.Tombstones {
				got = append(got, ts.Entry.Name)
			}
			assert.Equal(t, tt.published, got)
			_, _, h, _ := f.sink.CreateRecoverySliceArgsForCall(0)
			assert.Len(t, h.Resources, len(tt.published))
			assert.Equal(t, len(tt.published), d.Tombstones)
		})
	}
	t.Run("the history's write time is unknown: everything is kept", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		secrets := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)
		secrets[1].DataWrittenAt = time.Time{}
		f.store.ListChunksReturns(secrets, nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonUnverified, d.Reason)
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		assert.Empty(t, d.RecoveredFrom)
		// A warning: recording will replace the only history that names the kept objects.
		require.Equal(t, 1, f.events.Count())
		_, warning, reason, msg := f.events.At(0)
		assert.True(t, warning)
		assert.Equal(t, "NothingToRecover", reason)
		assert.Contains(t, msg, "check them by hand")
		assert.Equal(t, 1, f.metrics.RefusalCallCount())
	})
	t.Run("an approval re-plans and re-checks: it never publishes a stored set", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:2]) // 7 of 9 absent: over the default guard
		f.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
		f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-02" {
				return domain.Observation{State: domain.ObjectAbsent}, nil
			}
			return old, nil
		})
		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, domain.ReasonApproved, d.Reason)
		assert.Len(t, res.Plan.Tombstones, 6, "the object that is gone is dropped at approval")
	})
}

// design §6 "A lineage that a living Composition shares is not ours to clean": the live read of
// the Composition the selected snapshot was recorded for.
func TestRecoverSharedLineage(t *testing.T) {
	rs := resources(9)
	sibling := domain.CompositionRef{Namespace: ns, Name: "east"}
	siblingSnapshot := func(t *testing.T) []domain.ChunkSecret {
		secrets := snapshotSecrets(t, oldUID, oldSynth, oldTime, chunkLimit, rs)
		for i := range secrets {
			secrets[i].Annotations = maps.Clone(secrets[i].Annotations)
			secrets[i].Annotations[domain.AnnotationCompositionName] = sibling.Name
		}
		return secrets
	}
	tests := []struct {
		name    string
		source  func() (domain.Composition, error)
		outcome domain.Outcome
		reason  string
		errAs   any
		wantErr bool
	}{
		{"the sibling lives: SharedLineage", func() (domain.Composition, error) {
			return domain.Composition{Namespace: ns, Name: sibling.Name, UID: "uid-east"}, nil
		}, domain.OutcomeInventoryInvalid, "SharedLineage", nil, false},
		{"the sibling lives under another UID: still SharedLineage", func() (domain.Composition, error) {
			return domain.Composition{Namespace: ns, Name: sibling.Name, UID: "uid-other"}, nil
		}, domain.OutcomeInventoryInvalid, "SharedLineage", nil, false},
		{"the source is gone: a rename, recovered", func() (domain.Composition, error) {
			return domain.Composition{}, fmt.Errorf("x: %w", ports.ErrNotFound)
		}, domain.OutcomeRecovered, "", nil, false},
		{"the source is being deleted: nothing decided", func() (domain.Composition, error) {
			return domain.Composition{Namespace: ns, Name: sibling.Name, UID: "uid-east", Deleting: true}, nil
		}, domain.Outcome{}, "", new(*app.SourceDeletingError), true},
		{"the source cannot be read (Forbidden): it counts as living", func() (domain.Composition, error) {
			return domain.Composition{}, fmt.Errorf("compositions %q is forbidden: %w", sibling, ports.ErrForbidden)
		}, domain.OutcomeInventoryInvalid, "SharedLineage", nil, false},
		{"the source cannot be read (another error): nothing decided", func() (domain.Composition, error) {
			return domain.Composition{}, errors.New("etcdserver: request timed out")
		}, domain.Outcome{}, "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.store.ListChunksReturns(siblingSnapshot(t), nil)
			self := f.comp
			f.live.LiveCompositionCalls(func(_ context.Context, ref domain.CompositionRef) (domain.Composition, error) {
				if ref == sibling {
					return tt.source()
				}
				return self, nil
			})
			_, err := f.service(t).Recover(ctx(t), f.comp)
			if tt.wantErr {
				require.Error(t, err)
				if tt.errAs != nil {
					assert.ErrorAs(t, err, tt.errAs)
				}
				assert.Zero(t, f.decisions.WriteDecisionCallCount())
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
				return
			}
			require.NoError(t, err)
			d := writtenDecision(t, f)
			assert.Equal(t, tt.outcome, d.Outcome, d.Message)
			assert.Equal(t, tt.reason, d.Reason)
			if tt.outcome != domain.OutcomeRecovered {
				assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
			}
		})
	}
}
