package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
			f.guard.LiveCompositionStub = nil
			// The owners are read in order, before any recheck: one GET each.
			for i, owner := range []struct {
				ref  domain.CompositionRef
				read read
			}{{successor, tt.successor}, {otherNS, tt.otherNS}} {
				c, err := owner.read(owner.ref)
				f.guard.LiveCompositionReturnsOnCall(i, c, err)
			}
			f.guard.LiveCompositionReturns(f.comp, nil)
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
			require.GreaterOrEqual(t, f.guard.LiveCompositionCallCount(), 2)
			for i, want := range []domain.CompositionRef{successor, otherNS} {
				_, asked := f.guard.LiveCompositionArgsForCall(i)
				assert.Equal(t, want, asked, "read %d", i)
			}
			for i := 2; i < f.guard.LiveCompositionCallCount(); i++ {
				_, asked := f.guard.LiveCompositionArgsForCall(i)
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
				assert.Zero(t, f.sink.PublishTombstonesCallCount(), "nothing is handed to Eno")
				_, warning, reason, message := f.events.EventArgsForCall(0)
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
				assert.Zero(t, f.sink.PublishTombstonesCallCount())
				assert.Equal(t, 2, f.guard.LiveCompositionCallCount(), "no recheck: nothing to write")
			}
		})
	}
	t.Run("only the Composition's own history: no read", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		_, err := f.service(t).Plan(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Zero(t, f.guard.LiveCompositionCallCount())
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
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
		assert.Zero(t, f.downstream.ObserveObjectCallCount())
		require.Equal(t, 1, f.guard.LiveCompositionCallCount(), "only the recheck before the decision")
		_, asked := f.guard.LiveCompositionArgsForCall(0)
		assert.Equal(t, f.comp.Ref(), asked)
		require.Equal(t, 1, f.events.EventCallCount())
		_, warning, reason, message := f.events.EventArgsForCall(0)
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
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(domain.Composition{}, fmt.Errorf("gone: %w", ports.ErrNotFound))
		plan, err := f.service(t).Plan(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeRecovered, plan.Decision.Outcome, plan.Decision.Message)
		assert.Equal(t, oldSynth, plan.Decision.SourceSynthesisUUID)
		assert.Equal(t, 2, f.guard.LiveCompositionCallCount(), "both owners are read")
	})
}

// A Composition that carries the same lineage (a copied override) shares it even before it has
// recorded anything: listed, read live, it makes the history SharedLineage.
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
			lister := &portsfakes.FakeCompositionLister{}
			if tt.errorOut {
				lister.ListCompositionsReturns(nil, errors.New("cache not synced"))
			} else {
				sibling := tt.member(composition("uid-split", "99999999-aaaa-bbbb-cccc-000000000009", nil, false))
				sibling.Name = "web-split"
				lister.ListCompositionsReturns([]domain.Composition{f.comp, sibling}, nil)
				guard := f.guard.LiveCompositionStub
				f.guard.LiveCompositionCalls(func(c context.Context, ref domain.CompositionRef) (domain.Composition, error) {
					if ref.Name == "web-split" {
						if tt.live != nil {
							return domain.Composition{}, tt.live
						}
						return sibling, nil
					}
					return guard(c, ref)
				})
			}
			svc, err := app.New(f.cfg, app.Deps{
				Compositions: f.comps, Guard: f.guard, Slices: f.reader, Store: f.store, Sink: f.sink,
				Decisions: f.decisions, Downstream: f.downstream, Events: f.events, Metrics: f.metrics, Lister: lister,
			})
			require.NoError(t, err)
			_, err = svc.Recover(ctx(t), f.comp)
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
				assert.Zero(t, f.sink.PublishTombstonesCallCount())
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
