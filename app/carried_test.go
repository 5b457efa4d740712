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
	carry(f, resources(9)[:7])
	return f
}

// carry makes f's decided hand-off carried: a later synthesis producing produced is current and
// Ready, and its previous synthesis names the recovery slices.
func carry(f *fixture, produced []res) {
	decided := f.comp.Synthesis
	next := "44444444-aaaa-bbbb-cccc-000000000004"
	f.setSynthesis(next, produced)
	annotations := f.comp.Annotations
	f.comp = composition(uid, next, f.slices, true)
	f.comp.Annotations = annotations
	f.comp.PreviousSynthesis = &domain.Synthesis{UUID: decided.UUID, Slices: append([]string(nil), decided.Slices...)}
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
		return domain.Observation{State: domain.ObjectPresent, Created: historyWritten, Writes: enoWrote(historyWritten), UID: testUID}, nil
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
	// Nothing forgotten: the new snapshot lists the orphan that remains.
	var written []domain.ChunkSecret
	for i := range f.store.UpdateChunkCallCount() {
		_, c := f.store.UpdateChunkArgsForCall(i)
		written = append(written, c)
	}
	kept, unreadable := domain.UnresolvedIn(written, f.comp.Ref())
	assert.Empty(t, unreadable)
	require.Len(t, kept, 1)
	assert.Equal(t, "ConfigMap/team-a/cm-08", kept[0].Entry().ID().String())
	assert.Equal(t, "OrphansRemain", kept[0].Reason)
	assert.Equal(t, f.comp.PreviousSynthesis.UUID, kept[0].SourceSynthesisUUID)
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
	t.Run("the recovery slice is gone: RecoverySliceLost, recording proceeds", func(t *testing.T) {
		f := carriedFixture(t)
		delete(f.published, pendingSlice)
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.NotNil(t, res.Recording)
		warnings, _ := eventsOf(f, "RecoverySliceLost")
		require.Len(t, warnings, 1)
		assert.Contains(t, warnings[0], pendingSlice)
		require.Equal(t, 1, f.metrics.TombstoneAlertCallCount())
		reason, n := f.metrics.TombstoneAlertArgsForCall(0)
		assert.Equal(t, "RecoverySliceLost", reason)
		assert.Equal(t, 1, n)
	})
	t.Run("a withdrawn tombstone is not reported", func(t *testing.T) {
		f := carriedFixture(t)
		s := f.published[pendingSlice]
		s.Resources = append([]domain.SliceResource(nil), s.Resources...)
		for i, r := range s.Resources {
			e, _, err := domain.ParseTombstone(r)
			require.NoError(t, err)
			// As an earlier version withdrew a tombstone in place: disabled, no overrides.
			s.Resources[i] = domain.SliceResource{Deleted: true, Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"` +
				e.Namespace + `","name":"` + e.Name + `","annotations":{"` + domain.AnnotationDisableReconciliation + `":"true"}}}`}
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
// hand-off stays watched on the interval: another Composition producing one of its tombstones
// disarms it, for the tombstones Eno carries check the same annotation.
func TestCarriedHandoffStaysWatched(t *testing.T) {
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
	t.Run("taken over by another composition: disarmed", func(t *testing.T) {
		f := carriedWaiting(t)
		f.fleetSlices = []domain.ResourceSlice{takenOver("cm-08")}
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, 90*time.Second, res.RequeueAfter, "watched again on the interval")
		warnings, _ := eventsOf(f, "HandoffDisarmed")
		require.Len(t, warnings, 1)
		assert.Contains(t, warnings[0], "ConfigMap/team-a/cm-08")
		assert.Equal(t, 1, f.sink.DisarmTombstonesCallCount())
	})
	t.Run("no evidence: armed still", func(t *testing.T) {
		f := carriedWaiting(t)
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, 90*time.Second, res.RequeueAfter)
		assert.Zero(t, f.sink.DisarmTombstonesCallCount())
	})
	t.Run("Ready: Eno acted, nothing waits", func(t *testing.T) {
		f := carriedWaiting(t)
		f.comp.Synthesis.Ready = true
		f.fleetSlices = []domain.ResourceSlice{takenOver("cm-08")}
		f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectAbsent}, nil)
		f.downstream.ObserveObjectStub = nil
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Zero(t, res.RequeueAfter)
		assert.Zero(t, f.sink.DisarmTombstonesCallCount())
	})
	t.Run("a failed list is retried after the interval, not the controller's backoff (failed watch)", func(t *testing.T) {
		f := carriedWaiting(t)
		f.fleet.ProducedElsewhereReturns(nil, errors.New("500"))
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, f.cfg.PendingRecheckInterval, res.RequeueAfter)
		assert.Zero(t, f.store.CreateChunkCallCount(), "not recorded while unwatched")
	})
}
