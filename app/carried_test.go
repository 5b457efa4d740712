package app_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// carriedFixture is pendingFixture once Eno's executor carried the tombstones: a later
// synthesis is current and Ready, and its previous synthesis names the recovery slice.
func carriedFixture(t *testing.T) *fixture {
	t.Helper()
	f := pendingFixture(t)
	decided := f.comp.Synthesis
	next := "44444444-aaaa-bbbb-cccc-000000000004"
	rs := resources(9)
	f.setSynthesis(next, rs[:7])
	annotations := f.comp.Annotations
	f.comp = composition(uid, next, f.slices, true)
	f.comp.Annotations = annotations
	f.comp.PreviousSynthesis = &domain.Synthesis{UUID: decided.UUID, Slices: append([]string(nil), decided.Slices...)}
	return f
}

func eventsOf(f *fixture, reason string) (warnings, normals []string) {
	for i := range f.events.Count() {
		_, warning, r, msg := f.events.At(i)
		if r != reason {
			continue
		}
		if warning {
			warnings = append(warnings, msg)
		} else {
			normals = append(normals, msg)
		}
	}
	return warnings, normals
}

// Did Eno do it? Before the carrying synthesis is recorded, the objects it was handed are read
// once: any still present is reported, and recording proceeds.
func TestRecordReportsOrphansThatRemain(t *testing.T) {
	f := carriedFixture(t)
	f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		if e.Name == "cm-07" {
			return domain.Observation{State: domain.ObjectAbsent}, nil // Eno deleted it
		}
		return domain.Observation{State: domain.ObjectPresent, Created: historyWritten, Changed: historyWritten, UID: testUID}, nil
	})
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.NotNil(t, res.Recording, "recording proceeds")
	assert.Positive(t, f.writes())
	warnings, _ := eventsOf(f, "OrphansRemain")
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "ConfigMap/team-a/cm-08")
	assert.NotContains(t, warnings[0], "cm-07")
	reason, n := f.metrics.TombstoneAlertArgsForCall(f.metrics.TombstoneAlertCallCount() - 1)
	assert.Equal(t, "OrphansRemain", reason)
	assert.Equal(t, 1, n)
}

func TestRecordVerifiesCarriedTombstones(t *testing.T) {
	t.Run("Eno deleted everything: no report", func(t *testing.T) {
		f := carriedFixture(t)
		f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectAbsent}, nil)
		f.downstream.ObserveObjectStub = nil
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		warnings, _ := eventsOf(f, "OrphansRemain")
		assert.Empty(t, warnings)
	})
	t.Run("the recovery slice is gone: VerificationSkipped, recording proceeds", func(t *testing.T) {
		f := carriedFixture(t)
		delete(f.published, pendingSlice)
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.NotNil(t, res.Recording)
		_, normals := eventsOf(f, "VerificationSkipped")
		require.Len(t, normals, 1)
		assert.Contains(t, normals[0], pendingSlice)
	})
	t.Run("a withdrawn tombstone is not reported", func(t *testing.T) {
		f := carriedFixture(t)
		s := f.published[pendingSlice]
		s.Resources = append([]domain.SliceResource(nil), s.Resources...)
		for i, r := range s.Resources {
			e, _, err := domain.ParseTombstone(r)
			require.NoError(t, err)
			s.Resources[i] = domain.Withdrawn(e)
		}
		f.published[pendingSlice] = s
		reads := f.downstream.ObserveObjectCallCount()
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		warnings, _ := eventsOf(f, "OrphansRemain")
		assert.Empty(t, warnings)
		assert.Equal(t, reads, f.downstream.ObserveObjectCallCount(), "nothing to read")
	})
	t.Run("a read that fails skips the report, not the recording", func(t *testing.T) {
		f := carriedFixture(t)
		f.downstream.ObserveObjectReturns(domain.Observation{}, errors.New("500"))
		f.downstream.ObserveObjectStub = nil
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.NotNil(t, res.Recording)
		warnings, _ := eventsOf(f, "OrphansRemain")
		assert.Empty(t, warnings)
	})
	t.Run("a slice read that fails skips the report, not the recording", func(t *testing.T) {
		f := carriedFixture(t)
		get := f.reader.GetSliceStub
		f.reader.GetSliceCalls(func(c context.Context, ns, name string) (domain.ResourceSlice, error) {
			if name == pendingSlice {
				return domain.ResourceSlice{}, fmt.Errorf("timeout: %w", ports.ErrConflict)
			}
			return get(c, ns, name)
		})
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.NotNil(t, res.Recording)
	})
}

// While the carrying synthesis is not Ready (an earlier readiness group waits), the carried
// tombstones it still holds are checked on the interval; one whose object was re-created since
// the history is TombstoneAtRisk. It cannot be withdrawn: nothing is written.
func TestCarriedTombstonesAtRisk(t *testing.T) {
	carriedWaiting := func(t *testing.T) *fixture {
		f := pendingFixture(t)
		decided := f.comp.Synthesis
		next := "44444444-aaaa-bbbb-cccc-000000000004"
		rs := resources(9)
		cm7, cm8 := rs[7], rs[8]
		cm7.deleted, cm8.deleted = true, true
		f.setSynthesis(next, append(rs[:7:7], cm7, cm8))
		annotations := f.comp.Annotations
		f.comp = composition(uid, next, f.slices, false)
		f.comp.Synthesis.Ready = false
		f.comp.Annotations = annotations
		f.comp.PreviousSynthesis = &domain.Synthesis{UUID: decided.UUID, Slices: append([]string(nil), decided.Slices...)}
		return f
	}
	t.Run("an object re-created since the history", func(t *testing.T) {
		f := carriedWaiting(t)
		f.downstream.ObserveObjectCalls(recreatedSince("cm-08"))
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, 90*time.Second, res.RequeueAfter, "checked again on the interval")
		warnings, _ := eventsOf(f, "TombstoneAtRisk")
		require.Len(t, warnings, 1)
		assert.Contains(t, warnings[0], "ConfigMap/team-a/cm-08")
		assert.NotContains(t, warnings[0], "cm-07")
		reason, n := f.metrics.TombstoneAlertArgsForCall(f.metrics.TombstoneAlertCallCount() - 1)
		assert.Equal(t, "TombstoneAtRisk", reason)
		assert.Equal(t, 1, n)
		assert.Zero(t, f.sink.WithdrawTombstonesCallCount(), "a carried tombstone is Eno's: never rewritten")
	})
	t.Run("a withdrawal that Eno's executor missed is reported", func(t *testing.T) {
		// The executor read the recovery slice before the withdrawal: Eno carried cm-08 armed.
		f := carriedWaiting(t)
		s := f.published[pendingSlice]
		s.Resources = append([]domain.SliceResource(nil), s.Resources...)
		e, _, err := domain.ParseTombstone(s.Resources[1])
		require.NoError(t, err)
		s.Resources[1] = domain.Withdrawn(e)
		f.published[pendingSlice] = s
		f.downstream.ObserveObjectCalls(recreatedSince("cm-08"))
		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		warnings, _ := eventsOf(f, "TombstoneAtRisk")
		require.Len(t, warnings, 1)
		assert.Contains(t, warnings[0], "ConfigMap/team-a/cm-08")
	})
	t.Run("every object as recorded, or gone", func(t *testing.T) {
		f := carriedWaiting(t)
		f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
			if e.Name == "cm-08" {
				return domain.Observation{State: domain.ObjectAbsent}, nil
			}
			return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}, nil
		})
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, 90*time.Second, res.RequeueAfter)
		warnings, _ := eventsOf(f, "TombstoneAtRisk")
		assert.Empty(t, warnings)
	})
	t.Run("Ready: Eno acted, nothing waits", func(t *testing.T) {
		f := carriedWaiting(t)
		f.comp.Synthesis.Ready = true
		f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectAbsent}, nil)
		f.downstream.ObserveObjectStub = nil
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Zero(t, res.RequeueAfter)
		warnings, _ := eventsOf(f, "TombstoneAtRisk")
		assert.Empty(t, warnings)
	})
	t.Run("a failed read is retried", func(t *testing.T) {
		f := carriedWaiting(t)
		f.downstream.ObserveObjectReturns(domain.Observation{}, errors.New("500"))
		f.downstream.ObserveObjectStub = nil
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.Error(t, err)
	})
}
