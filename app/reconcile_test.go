package app_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

func TestReconcileDecidesThenRecordsReadingSlicesOnce(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:8], rs[8:])
	f.comp.Synthesis.Ready = true
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.NotNil(t, res.Recovery)
	require.NotNil(t, res.Recording)
	assert.Equal(t, domain.OutcomeNothingToRecover, res.Recovery.Plan.Decision.Outcome)
	assert.Equal(t, 2, f.reader.GetSliceCallCount(), "the slices of one synthesis are read once per reconcile")
	assert.Equal(t, 3, res.Recording.Chunks)
	assert.Equal(t, 3, f.store.UpdateChunkCallCount(), "the old incarnation's chunks are replaced after the decision")
}

// A synthesis decided Recovered is never recorded: Eno clears its Ready on the commit, and a
// reading taken before Eno reacts would record a snapshot without the orphans (design §6.2).
func TestReconcileNeverRecordsARecoveredSynthesis(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	f.comp.Synthesis.Ready = true
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.NotNil(t, res.Recovery)
	assert.Equal(t, domain.OutcomeRecovered, res.Recovery.Plan.Decision.Outcome)
	assert.Nil(t, res.Recording)
	require.NotNil(t, res.Skipped)
	assert.Equal(t, domain.IneligibleNotReady, res.Skipped.Reason, "the fake clears Ready on the commit, as Eno does")
	assert.Zero(t, f.writes())

	// The next reconcile, with the decision on record and the synthesis still Ready in a stale
	// read, records nothing either.
	f.comp.Synthesis.Ready = true
	res, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Nil(t, res.Recording)
	require.NotNil(t, res.Skipped)
	assert.Equal(t, domain.IneligibleRecovered, res.Skipped.Reason)
	assert.Zero(t, f.writes())
	assert.Equal(t, 1, f.decisions.WriteDecisionCallCount())
}

func TestReconcileMissingCompositionIsNotAnError(t *testing.T) {
	f := newFixture(t)
	f.comps.GetCompositionStub = nil
	f.comps.GetCompositionReturns(domain.Composition{}, fmt.Errorf("x: %w", ports.ErrNotFound))
	_, err := f.service(t).Reconcile(ctx(t), domain.CompositionRef{Namespace: ns, Name: name})
	require.NoError(t, err)
}

func TestReconcileInvalidLineageSkipsWithAnEvent(t *testing.T) {
	for _, v := range []string{"UPPERCASE", string(make([]byte, 200)), "", "-lead"} {
		f := newFixture(t)
		delete(f.comp.Annotations, domain.AnnotationDecision)
		f.comp.Annotations[domain.AnnotationLineageOverride] = v
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.NotNil(t, res.Skipped)
		assert.Equal(t, domain.IneligibleInvalidLineage, res.Skipped.Reason)
		assert.Zero(t, f.store.ListChunksCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.writes())
		require.Equal(t, 1, f.events.Count())
		_, warning, reason, _ := f.events.At(0)
		assert.True(t, warning)
		assert.Equal(t, "InvalidLineage", reason)
	}
}

func TestReconcileUsesTheLineageOverride(t *testing.T) {
	f := newFixture(t)
	f.comp.Annotations[domain.AnnotationLineageOverride] = "shared-web"
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	_, l := f.store.ListChunksArgsForCall(0)
	assert.Equal(t, "shared-web", l.String())
	_, s := f.store.CreateChunkArgsForCall(0)
	assert.Equal(t, "web-shared-web-0", s.Name)
	assert.Equal(t, "shared-web", s.Labels[domain.LabelLineage])
}

// A HeldForReview decision ends the reconcile that wrote it: recording is not even evaluated,
// and the old snapshot stays as it is (design §6.1).
func TestReconcileHeldStopsBeforeRecording(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:3]) // 6 of 9 orphaned: over the guard of 0.5
	f.comp.Synthesis.Ready = true
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.NotNil(t, res.Recovery)
	assert.Equal(t, domain.OutcomeHeldForReview, res.Recovery.Plan.Decision.Outcome)
	assert.Equal(t, domain.OutcomeHeldForReview, writtenDecision(t, f).Outcome)
	assert.Nil(t, res.Recording)
	assert.Nil(t, res.Skipped, "recording was not evaluated, so it was not skipped either")
	assert.Zero(t, f.store.ListCachedChunksCallCount(), "not even the recording fast path ran")
	assert.Zero(t, f.writes())
	assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
}

// Each run condition that fails skips the whole reconcile: no error (nothing to retry), no
// read of Secrets or slices, no write, no event (only an invalid lineage and a mistyped opt-in get one). A deleting
// Composition's synthesis is read for the entries it disables (disabled later).
func TestReconcileSkipsIneligibleCompositions(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f *fixture)
		reason domain.IneligibleReason
	}{
		{"operator disabled", func(f *fixture) { f.cfg.Enabled = false }, domain.IneligibleDisabled},
		{"namespace out of scope", func(f *fixture) { f.cfg.Scope.Namespace = "team-b" }, domain.IneligibleOutOfScope},
		{"labels out of scope", func(f *fixture) { f.cfg.Scope.Selector = onlyLabel{"shard", "2"} }, domain.IneligibleOutOfScope},
		{"not opted in", func(f *fixture) { delete(f.comp.Annotations, domain.AnnotationOptIn) }, domain.IneligibleNotOptedIn},
		{"opt-in with another value", func(f *fixture) { f.comp.Annotations[domain.AnnotationOptIn] = "Enabled" }, domain.IneligibleNotOptedIn},
		{"being deleted", func(f *fixture) { f.comp.Deleting = true }, domain.IneligibleDeleting},
		{"no synthesis", func(f *fixture) { f.comp.Synthesis = nil }, domain.IneligibleNotSynthesized},
		{"synthesis without a UUID", func(f *fixture) { f.comp.Synthesis.UUID = "" }, domain.IneligibleNotSynthesized},
		{"synthesis not synthesized yet", func(f *fixture) { f.comp.Synthesis.Synthesized = time.Time{} }, domain.IneligibleNotSynthesized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			delete(f.comp.Annotations, domain.AnnotationDecision) // recovery would run if eligible
			tc.mutate(f)
			res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
			require.NoError(t, err)
			require.NotNil(t, res.Skipped)
			assert.Equal(t, tc.reason, res.Skipped.Reason)
			assert.Nil(t, res.Recovery)
			assert.Nil(t, res.Recording)
			assert.Zero(t, f.store.ListChunksCallCount())
			assert.Zero(t, f.store.ListCachedChunksCallCount())
			if tc.reason == domain.IneligibleDeleting {
				// The synthesis is read once for what it disables (disabled later): nothing, so nothing more.
				assert.Equal(t, len(f.comp.Synthesis.Slices), f.reader.GetSliceCallCount())
			} else {
				assert.Zero(t, f.reader.GetSliceCallCount())
			}
			assert.Zero(t, f.live.LiveCompositionCallCount())
			assert.Zero(t, f.writes())
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
			if tc.name == "opt-in with another value" {
				// A mistyped opt-in says so, naming the value that opts in.
				require.Equal(t, 1, f.events.Count())
				_, warning, reason, message := f.events.At(0)
				assert.True(t, warning)
				assert.Equal(t, "NotOptedIn", reason)
				assert.Equal(t, `eno.azure.io/tombstone-recovery is "Enabled", not "enabled", the only value that opts in; nothing is recorded or recovered`, message)
			} else {
				assert.Zero(t, f.events.Count())
			}
			assert.Zero(t, f.metrics.RefusalCallCount())
		})
	}
}

func lineageOf(t *testing.T, c domain.Composition) domain.Lineage {
	t.Helper()
	l, err := domain.LineageOf(c)
	require.NoError(t, err)
	return l
}

// onlyLabel selects Compositions carrying one label value.
type onlyLabel struct{ key, value string }

func (s onlyLabel) Matches(labels map[string]string) bool { return labels[s.key] == s.value }

// Each reconcile reports what the Composition waits on, for the gauges behind the alerts: held
// for review, recording failing, or nothing but its lineage (recorded); the zero state (gone)
// forgets it.
func TestReconcileReportsWhatTheCompositionWaitsOn(t *testing.T) {
	lastObserved := func(t *testing.T, f *fixture) ports.CompositionState {
		t.Helper()
		require.Equal(t, 1, f.metrics.CompositionObservedCallCount())
		ref, state := f.metrics.CompositionObservedArgsForCall(0)
		assert.Equal(t, f.comp.Ref(), ref)
		return state
	}
	t.Run("held for review", func(t *testing.T) {
		rs := resources(9)
		f := recoveryFixture(t, rs, rs[:3])
		f.comp.Synthesis.Ready = true
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, ports.CompositionState{HeldForReview: true, Lineage: lineageOf(t, f.comp)}, lastObserved(t, f))
	})
	t.Run("recording fails", func(t *testing.T) {
		f := newFixture(t)
		f.store.CreateChunkReturns(domain.ChunkSecret{}, errors.New("etcdserver: request timed out"))
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.Error(t, err)
		assert.Equal(t, ports.CompositionState{RecordingFailing: true, Lineage: lineageOf(t, f.comp)}, lastObserved(t, f))
	})
	t.Run("recorded", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, ports.CompositionState{Lineage: lineageOf(t, f.comp)}, lastObserved(t, f))
	})
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t)
		f.comps.GetCompositionReturns(domain.Composition{}, ports.ErrNotFound)
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, ports.CompositionState{}, lastObserved(t, f))
	})
	t.Run("not read", func(t *testing.T) {
		f := newFixture(t)
		f.comps.GetCompositionReturns(domain.Composition{}, errors.New("connection refused"))
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.Error(t, err)
		assert.Zero(t, f.metrics.CompositionObservedCallCount(), "an unknown state keeps the last one")
	})
}
