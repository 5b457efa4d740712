package app_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
	"github.com/Azure/eno-tombstone-recovery/ports/portsfakes"
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
		require.Equal(t, 1, f.events.EventCallCount())
		_, warning, reason, _ := f.events.EventArgsForCall(0)
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

func TestNewRefusesNilDependenciesAndBadConfig(t *testing.T) {
	f := newFixture(t)
	_, err := app.New(f.cfg, app.Deps{})
	require.Error(t, err)
	for _, tc := range []struct {
		mutate  func(c *app.Config)
		setting app.Setting
	}{
		{func(c *app.Config) { c.MaxChunkBytes = domain.SecretDataLimit + 1 }, app.SettingMaxChunkBytes},
		{func(c *app.Config) { c.InventoryNamespace = "" }, app.SettingInventoryNamespace},
		{func(c *app.Config) { c.MaxChunks = 0 }, app.SettingMaxChunks},
		{func(c *app.Config) { c.MaxTombstoneFraction = 1.5 }, app.SettingMaxTombstoneFraction},
		{func(c *app.Config) { c.MaxTombstoneFraction = math.NaN() }, app.SettingMaxTombstoneFraction},
	} {
		bad := f.cfg
		tc.mutate(&bad)
		_, err = app.New(bad, app.Deps{Compositions: f.comps, Guard: f.guard, Slices: f.reader, Store: f.store, Sink: f.sink, Decisions: f.decisions})
		var se *app.SettingError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, tc.setting, se.Setting)
	}
}

func TestControllerForgetsSuccessAndRequeuesFailure(t *testing.T) {
	f := newFixture(t)
	okRef := domain.CompositionRef{Namespace: ns, Name: name}
	badRef := domain.CompositionRef{Namespace: ns, Name: "broken"}
	f.comps.GetCompositionCalls(func(_ context.Context, r domain.CompositionRef) (domain.Composition, error) {
		if r == badRef {
			return domain.Composition{}, errors.New("500 internal error")
		}
		return f.comp, nil
	})
	queue := &portsfakes.FakeWorkQueue{}
	queue.GetReturnsOnCall(0, okRef, false)
	queue.GetReturnsOnCall(1, badRef, false)
	queue.GetReturns(domain.CompositionRef{}, true)
	c, err := app.NewController(f.service(t), queue, 1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool { return queue.DoneCallCount() == 2 }, timeout, tick)
	cancel()
	<-done
	assert.Equal(t, 1, queue.ForgetCallCount())
	assert.Equal(t, okRef, queue.ForgetArgsForCall(0))
	assert.Equal(t, 1, queue.AddRateLimitedCallCount())
	assert.Equal(t, badRef, queue.AddRateLimitedArgsForCall(0))
	assert.Equal(t, 1, queue.ShutDownCallCount())
}
