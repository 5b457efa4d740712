package app_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// lastObserved is the state the last reconcile reported.
func lastObserved(t *testing.T, f *fixture) ports.CompositionState {
	t.Helper()
	n := f.metrics.CompositionObservedCallCount()
	require.Positive(t, n)
	_, state := f.metrics.CompositionObservedArgsForCall(n - 1)
	return state
}

// recordedInCache makes what the fixture's recording wrote the cache's: the next reconcile takes
// the fast path.
func recordedInCache(f *fixture) {
	written := map[string]domain.ChunkSecret{}
	write := func(_ context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
		written[s.Name] = s
		return s, nil
	}
	f.store.CreateChunkCalls(write)
	f.store.UpdateChunkCalls(write)
	f.store.ListCachedChunksCalls(func(context.Context, domain.Lineage) ([]domain.ChunkSecret, error) {
		return slices.Collect(maps.Values(written)), nil
	})
}

// The orphans_remaining gauge's count: made when the carrying synthesis is recorded, counted
// again quietly on each reconcile while above 0 (a manual cleanup shows), no longer read once 0,
// and forgotten with the Composition (design §6.2, "Did Eno do it?").
func TestOrphansRemainingIsRefreshedUntilZero(t *testing.T) {
	f := carriedFixture(t)
	recordedInCache(f)
	present := true
	f.downstream.ObserveObjectCalls(func(context.Context, domain.Entry) (domain.Observation, error) {
		if present {
			return domain.Observation{State: domain.ObjectPresent, Created: historyWritten, Writes: enoWrote(historyWritten), UID: testUID}, nil
		}
		return domain.Observation{State: domain.ObjectAbsent}, nil
	})
	svc := f.service(t)
	reconcile := func() ports.CompositionState {
		t.Helper()
		_, err := svc.Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		return lastObserved(t, f)
	}

	state := reconcile()
	lineage, _ := domain.LineageOf(f.comp)
	assert.Equal(t, lineage, state.Lineage)
	orphans := state.OrphansRemaining
	require.Positive(t, orphans)
	alerts := f.metrics.TombstoneAlertCallCount()
	warnings, _ := eventsOf(f, "OrphansRemain")

	assert.Equal(t, orphans, reconcile().OrphansRemaining, "still there: the same count")
	present = false // an operator cleans up by hand
	assert.Zero(t, reconcile().OrphansRemaining, "the cleanup shows at the next reconcile")
	assert.Equal(t, alerts, f.metrics.TombstoneAlertCallCount(), "counting again is quiet")
	again, _ := eventsOf(f, "OrphansRemain")
	assert.Equal(t, warnings, again, "counting again is quiet")

	reads := f.downstream.ObserveObjectCallCount()
	present = true
	assert.Zero(t, reconcile().OrphansRemaining)
	assert.Equal(t, reads, f.downstream.ObserveObjectCallCount(), "a count of 0 is not read again")

	f.comps.GetCompositionReturns(domain.Composition{}, errNotFound)
	f.comps.GetCompositionStub = nil
	assert.Equal(t, ports.CompositionState{}, reconcile(), "a deleted Composition is forgotten")
}

// After a restart the count is made once, quietly, on the fast path.
func TestOrphansRemainingIsCountedOnceAfterARestart(t *testing.T) {
	f := carriedFixture(t)
	recordedInCache(f)
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	orphans := lastObserved(t, f).OrphansRemaining
	require.Positive(t, orphans)
	alerts := f.metrics.TombstoneAlertCallCount()

	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref()) // a new process
	require.NoError(t, err)
	assert.Equal(t, orphans, lastObserved(t, f).OrphansRemaining)
	assert.Equal(t, alerts, f.metrics.TombstoneAlertCallCount())
}

// A recorded synthesis that carried no hand-off counts 0.
func TestOrphansRemainingIsZeroWithoutAHandoff(t *testing.T) {
	f := newFixture(t)
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Zero(t, lastObserved(t, f).OrphansRemaining)
}
