package app_test

import (
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
)

// A decision without tombstones is written only after its own live recheck (design §6): a
// Composition that changed since the plan gets no decision.
func TestRecoverRechecksBeforeADecisionWithoutTombstones(t *testing.T) {
	rs := resources(9)
	for desc, change := range map[string]func(c domain.Composition) domain.Composition{
		"recreated":      recreated,
		"opt-in removed": func(c domain.Composition) domain.Composition { c.Annotations = nil; return c },
		"lineage changed": func(c domain.Composition) domain.Composition {
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: "elsewhere"}
			return c
		},
		"resynthesized": resynthesized,
		"review annotation set": func(c domain.Composition) domain.Composition {
			c.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationReview: "reject:" + synthID}
			return c
		},
	} {
		t.Run(desc, func(t *testing.T) {
			f := recoveryFixture(t, rs[:5], rs) // nothing orphaned: NothingToRecover/NoOrphans
			f.live.LiveCompositionStub = nil
			f.live.LiveCompositionReturns(change(f.comp), nil)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			var stale *app.StaleCompositionError
			require.ErrorAs(t, err, &stale)
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
		})
	}
}

// The case: the cache says reject:S and the live object says approve:S. A finished
// Rejected written from the cache would let recording replace the history the operator just
// approved recovering from; the recheck stops it, and the next pass plans from the live value.
func TestRecoverStaleRejectAgainstALiveApprove(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:2]) // 7 of 9 orphaned: over the deletion guard
	cached := f.comp
	cached.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationReview: "reject:" + synthID}
	f.comp.Annotations = map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationReview: "approve:" + synthID}

	_, err := f.service(t).Recover(ctx(t), cached)
	var stale *app.StaleCompositionError
	require.ErrorAs(t, err, &stale)
	assert.Contains(t, err.Error(), "review annotation changed")
	assert.Zero(t, f.decisions.WriteDecisionCallCount(), "no Rejected from the cached annotation")
	assert.Zero(t, f.sink.CreateRecoverySliceCallCount())

	// The next pass reads the live object: approved, so the 7 are handed to Eno.
	res, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeRecovered, res.Plan.Decision.Outcome)
	assert.Equal(t, domain.ReasonApproved, res.Plan.Decision.Reason)
	assert.Equal(t, 7, res.Plan.Decision.Tombstones)
}

// design §6 "Decide from what is live": every input of the plan is rechecked before each write.
func TestRecoverRechecksEveryPlanInputBeforeEachWrite(t *testing.T) {
	rs := resources(9)
	changes := map[string]func(c domain.Composition) domain.Composition{
		"review turned to reject": func(c domain.Composition) domain.Composition {
			c.Annotations = maps.Clone(c.Annotations)
			c.Annotations[domain.AnnotationReview] = "reject:" + synthID
			return c
		},
		"lineage override added": func(c domain.Composition) domain.Composition {
			c.Annotations = maps.Clone(c.Annotations)
			c.Annotations[domain.AnnotationLineageOverride] = "fresh-start"
			return c
		},
		"another pass committed its hand-off": committedHandoff,
	}
	for desc, change := range changes {
		t.Run(desc+"/before arming", func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			recoverStaleAt(t, f, 0, change)
		})
	}
	// Once a slice is named the tombstones are Eno's: the plan is fixed, and the decision records
	// what was handed over (design §6.2 resumes rather than plans again).
	t.Run("after the commit point the decision is written whatever the inputs", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturnsOnCall(0, f.comp, nil)
		f.live.LiveCompositionReturnsOnCall(1, f.comp, nil)
		f.live.LiveCompositionReturns(changes["review turned to reject"](f.comp), nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
	})
	// Another pass committed its hand-off while this one read the orphans, and Eno deleted them
	// at once: this pass finds nothing to recover, but the synthesis is the hand-off's now.
	t.Run("another pass committed its hand-off before a NothingToRecover decision", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectAbsent}, nil)
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturns(committedHandoff(f.comp), nil)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Contains(t, err.Error(), "the slices its synthesis names changed")
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("a cached approve never publishes what the live object rejects", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:2])
		f.comp.Annotations[domain.AnnotationReview] = "approve:" + synthID
		cached := f.comp
		live := cached
		live.Annotations = maps.Clone(cached.Annotations)
		live.Annotations[domain.AnnotationReview] = "reject:" + synthID
		f.live.LiveCompositionStub = nil
		f.live.LiveCompositionReturns(live, nil)
		_, err := f.service(t).Recover(ctx(t), cached)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
}

// committedHandoff is c once another pass appended its recovery slice to the synthesis.
func committedHandoff(c domain.Composition) domain.Composition {
	s := *c.Synthesis
	s.Slices = append(slices.Clone(s.Slices), domain.RecoverySliceName(c.Name, s.UUID, "0123456789abcdef", 0))
	c.Synthesis = &s
	return c
}

// pendingFixture is a Composition whose current synthesis was just decided Recovered, with two
// tombstones (cm-07, cm-08) appended as pendingSlice and not yet carried by Eno.
func pendingFixture(t *testing.T) *fixture {
	t.Helper()
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.cfg.PendingRecheckInterval = 90 * time.Second
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
	assert.Equal(t, 90*time.Second, res.RequeueAfter, "a fresh hand-off is checked again after the interval")
	return f
}

const pendingSlice = "web-recovery-11111111-18c269dddcadab98-0"

// takenOver is a slice of another Composition that applies the named ConfigMaps of team-a.
func takenOver(names ...string) domain.ResourceSlice {
	s := domain.ResourceSlice{Namespace: "team-b", Name: "other-00000001-0", ControllerUID: "uid-other"}
	for _, n := range names {
		s.Resources = append(s.Resources, domain.SliceResource{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"team-a","name":"` + n + `"}}`})
	}
	return s
}

// identical takeover after planning: while the hand-off is armed and pending, each reconcile lists the slices,
// and another Composition producing one of its tombstones disarms the whole hand-off, its only
// write, with a HandoffDisarmed warning and metric. Disarmed, there is nothing more to watch.
func TestPendingHandoffDisarmsWhenAnotherCompositionProducesATombstone(t *testing.T) {
	f := pendingFixture(t)
	require.NotEmpty(t, f.comp.Annotations[domain.AnnotationArmed])
	listed := f.fleet.ProducedElsewhereCallCount()
	f.fleetSlices = []domain.ResourceSlice{f.published[pendingSlice], takenOver("cm-08", "unrelated")}

	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, res.RequeueAfter)
	assert.Equal(t, listed+1, f.fleet.ProducedElsewhereCallCount())
	require.Equal(t, 1, f.sink.DisarmTombstonesCallCount())
	assert.Equal(t, domain.ArmedOff, f.comp.Annotations[domain.AnnotationArmed])
	assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "the decision is not rewritten")
	reason, n := f.metrics.TombstoneAlertArgsForCall(f.metrics.TombstoneAlertCallCount() - 1)
	assert.Equal(t, "HandoffDisarmed", reason)
	assert.Equal(t, 1, n)
	var warned string
	for i := range f.events.Count() {
		_, warning, reason, msg := f.events.At(i)
		if warning && reason == "HandoffDisarmed" {
			warned = msg
		}
	}
	assert.Contains(t, warned, "ConfigMap/team-a/cm-08")
	assert.Contains(t, warned, "team-b/other-00000001-0")

	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, listed+1, f.fleet.ProducedElsewhereCallCount(), "disarmed: nothing left to watch")
	assert.Equal(t, 1, f.sink.DisarmTombstonesCallCount())
}

// What is no evidence: the hand-off's own slices, another Composition's tombstone of the same
// object, an unreadable manifest, the recorded incarnation's slices.
func TestPendingHandoffKeepsItsArmWithoutEvidence(t *testing.T) {
	f := pendingFixture(t)
	other := takenOver("cm-07")
	other.Resources[0].Deleted = true
	other.Resources = append(other.Resources, domain.SliceResource{Manifest: "not json"})
	// The recorded incarnation's slice, not yet taken by the garbage collector.
	recorded := takenOver("cm-07", "cm-08")
	recorded.Namespace, recorded.ControllerUID = "team-a", oldUID
	require.Equal(t, oldUID, f.published[pendingSlice].Annotations[domain.AnnotationSourceUID])
	f.fleetSlices = []domain.ResourceSlice{f.published[pendingSlice], other, recorded}
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Zero(t, f.sink.DisarmTombstonesCallCount())
	assert.NotEmpty(t, f.comp.Annotations[domain.AnnotationArmed])
}

// Faults at the watch: a conflict or a failed list decides nothing and is retried with backoff;
// another's slice under the recovery name is refused, and nothing is written.
func TestPendingHandoffFaults(t *testing.T) {
	t.Run("the composition changed since it was read", func(t *testing.T) {
		f := pendingFixture(t)
		f.fleetSlices = []domain.ResourceSlice{takenOver("cm-07")}
		disarm := f.sink.DisarmTombstonesStub
		f.sink.DisarmTombstonesStub = nil
		f.sink.DisarmTombstonesReturnsOnCall(0, fmt.Errorf("patch: %w", ports.ErrConflict))
		alerts := f.metrics.TombstoneAlertCallCount()
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Equal(t, alerts, f.metrics.TombstoneAlertCallCount(), "nothing reported before it is done")

		f.sink.DisarmTombstonesCalls(disarm)
		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, domain.ArmedOff, f.comp.Annotations[domain.AnnotationArmed])
	})
	t.Run("the list fails: looked at again after the interval, not the controller's backoff (failed watch)", func(t *testing.T) {
		f := pendingFixture(t)
		f.fleet.ProducedElsewhereReturns(nil, fmt.Errorf("500"))
		res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err, "an error would put the hand-off on the controller's growing backoff")
		assert.Equal(t, 90*time.Second, res.RequeueAfter)
		assert.Zero(t, f.sink.DisarmTombstonesCallCount())
		assert.True(t, warned(f, "HandoffWatchFailed"))
	})
	t.Run("the recovery slice is no longer this controller's", func(t *testing.T) {
		f := pendingFixture(t)
		f.fleetSlices = []domain.ResourceSlice{takenOver("cm-07")}
		s := f.published[pendingSlice]
		s.ControllerUID = "someone-else"
		f.published[pendingSlice] = s
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		var invalid *domain.RecoverySliceInvalidError
		require.ErrorAs(t, err, &invalid)
		assert.Zero(t, f.sink.DisarmTombstonesCallCount(), "another's slice decides nothing")
	})
}

// Once Eno's executor carried the tombstones (a later synthesis is current), the pending watch
// stops; the carried one takes over while that synthesis is not Ready.
func TestPendingHandoffEndsWithTheNextSynthesis(t *testing.T) {
	f := pendingFixture(t)
	next := "44444444-aaaa-bbbb-cccc-000000000004"
	rs := resources(9)
	f.setSynthesis(next, rs[:7])
	annotations := f.comp.Annotations
	f.comp = composition(uid, next, f.slices, false)
	f.comp.Annotations = annotations
	f.comp.Synthesis.Ready = true
	listed, armed := f.fleet.ProducedElsewhereCallCount(), f.sink.ArmTombstonesCallCount()
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
	assert.Equal(t, listed, f.fleet.ProducedElsewhereCallCount())
	assert.Zero(t, f.sink.DisarmTombstonesCallCount())
	// Eno acted on every tombstone it carried: the hand-off ends disarmed, so that a tombstone it
	// skipped, which stays in this synthesis, is not deleted on a later reload (sim L1).
	require.Equal(t, armed+1, f.sink.ArmTombstonesCallCount())
	_, _, value := f.sink.ArmTombstonesArgsForCall(armed)
	assert.Equal(t, domain.ArmedDone, value)
	assert.Equal(t, domain.ArmedDone, f.comp.Annotations[domain.AnnotationArmed])
}

// A hand-off is disarmed only when the live Composition says so too: a cache that still shows
// the decided synthesis Ready, before its recovery slices were named, writes nothing.
func TestHandoffIsDoneOnlyWhenTheLiveCompositionSaysSo(t *testing.T) {
	f := pendingFixture(t)
	live := f.comp
	cached := f.comp
	s := *cached.Synthesis
	s.Ready, s.Slices = true, slices.DeleteFunc(slices.Clone(s.Slices), func(n string) bool { return n == pendingSlice })
	cached.Synthesis = &s
	f.live.LiveCompositionStub = nil
	f.live.LiveCompositionReturns(live, nil)
	f.comps.GetCompositionStub = nil
	f.comps.GetCompositionReturns(cached, nil)
	armed := f.sink.ArmTombstonesCallCount()
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	var stale *app.StaleCompositionError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, armed, f.sink.ArmTombstonesCallCount())
	assert.NotEqual(t, domain.ArmedDone, f.comp.Annotations[domain.AnnotationArmed])
}

// Opting out while armed ends the watch, so it disarms the hand-off for good (sim L2).
func TestOptingOutDisarmsAnArmedHandoff(t *testing.T) {
	f := pendingFixture(t)
	f.comp.Annotations = maps.Clone(f.comp.Annotations)
	delete(f.comp.Annotations, domain.AnnotationOptIn)
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	require.NotNil(t, res.Skipped)
	require.Equal(t, 1, f.sink.DisarmTombstonesCallCount())
	assert.Equal(t, domain.ArmedOff, f.comp.Annotations[domain.AnnotationArmed])
}

// The watch does not wait for the hand-off to complete: the resynthesis request failing still
// lets it disarm, and the reconcile is retried.
func TestPendingWatchRunsWhateverTheResynthesisRequestMeets(t *testing.T) {
	f := pendingFixture(t)
	f.comp.Annotations = maps.Clone(f.comp.Annotations)
	delete(f.comp.Annotations, domain.AnnotationForceResynthesis)
	f.sink.RequestResynthesisStub = nil
	f.sink.RequestResynthesisReturns(errors.New("503 unavailable"))
	f.fleetSlices = []domain.ResourceSlice{takenOver("cm-07")}
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.Error(t, err)
	assert.Equal(t, 1, f.sink.DisarmTombstonesCallCount())
}
