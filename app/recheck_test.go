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
			f.guard.LiveCompositionStub = nil
			f.guard.LiveCompositionReturns(change(f.comp), nil)
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
	assert.Zero(t, f.sink.PublishTombstonesCallCount())

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
		for at, step := range []string{"publish", "commit"} {
			t.Run(desc+"/before "+step, func(t *testing.T) {
				f := recoveryFixture(t, rs, rs[:7])
				f.cfg.MaxTombstoneFraction = 1
				recoverStaleAt(t, f, at, change)
			})
		}
	}
	// Past the commit point the tombstones are Eno's: the plan is fixed, and the decision records
	// what was handed over (design §6.2 resumes rather than plans again).
	t.Run("after the commit point the decision is written whatever the inputs", func(t *testing.T) {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturnsOnCall(0, f.comp, nil)
		f.guard.LiveCompositionReturnsOnCall(1, f.comp, nil)
		f.guard.LiveCompositionReturns(changes["review turned to reject"](f.comp), nil)
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
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(committedHandoff(f.comp), nil)
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
		f.guard.LiveCompositionStub = nil
		f.guard.LiveCompositionReturns(live, nil)
		_, err := f.service(t).Recover(ctx(t), cached)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
}

// committedHandoff is c once another pass appended its recovery slice to the synthesis.
func committedHandoff(c domain.Composition) domain.Composition {
	s := *c.Synthesis
	s.Slices = append(slices.Clone(s.Slices), domain.RecoverySliceNames(c.Name, s.UUID)[0])
	c.Synthesis = &s
	return c
}

// pendingFixture is a Composition whose current synthesis was just decided Recovered, with two
// tombstones (cm-07, cm-08) committed to web-recovery-11111111 and not yet carried by Eno.
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

const pendingSlice = "web-recovery-11111111"

func withdrawnNames(t *testing.T, s domain.ResourceSlice) []string {
	t.Helper()
	var out []string
	for _, r := range s.Resources {
		e, withdrawn, err := domain.ParseTombstone(r)
		require.NoError(t, err)
		if withdrawn {
			out = append(out, e.Name)
		}
	}
	return out
}

// An object re-created by hand while the hand-off waits for Eno (a synthesizer that cannot run)
// is not deleted when an eno-reconciler loads the synthesis later: its tombstone is withdrawn
// in place at the next recheck, and the decision is not rewritten.
func TestPendingHandoffWithdrawsWhatNoLongerPasses(t *testing.T) {
	f := pendingFixture(t)
	reads := f.downstream.ObserveObjectCallCount()
	f.downstream.ObserveObjectCalls(recreatedSince("cm-08"))
	before := f.published[pendingSlice]

	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, res.RequeueAfter)
	assert.Equal(t, reads+2, f.downstream.ObserveObjectCallCount(), "every pending tombstone is read again")
	require.Equal(t, 1, f.sink.WithdrawTombstonesCallCount())
	_, _, written := f.sink.WithdrawTombstonesArgsForCall(0)
	require.Len(t, written.Resources, len(before.Resources), "positions are kept")
	assert.Equal(t, before.Resources[0], written.Resources[0])
	assert.Equal(t, []string{"cm-08"}, withdrawnNames(t, written))
	assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "the decision is not rewritten")
	reason, n := f.metrics.TombstoneAlertArgsForCall(0)
	assert.Equal(t, "TombstoneWithdrawn", reason)
	assert.Equal(t, 1, n)
	var warned string
	for i := range f.events.Count() {
		_, warning, reason, msg := f.events.At(i)
		if warning && reason == "TombstoneWithdrawn" {
			warned = msg
		}
	}
	assert.Contains(t, warned, "ConfigMap/team-a/cm-08")

	// A withdrawn tombstone is pending no more: it is neither read nor written again.
	reads = f.downstream.ObserveObjectCallCount()
	_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Equal(t, reads+1, f.downstream.ObserveObjectCallCount())
	assert.Equal(t, 1, f.sink.WithdrawTombstonesCallCount())
}

// Whatever makes an object fail the checks withdraws its tombstone: gone, unreadable, or no
// write time on the slice.
func TestPendingHandoffWithdrawsOnEveryFailedCheck(t *testing.T) {
	for name, tt := range map[string]struct {
		observe func(domain.Entry) domain.Observation
		spoil   func(s *domain.ResourceSlice)
		want    []string
	}{
		"everything still passes": {func(domain.Entry) domain.Observation {
			return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}
		}, nil, nil},
		"an object is gone": {func(e domain.Entry) domain.Observation {
			if e.Name == "cm-07" {
				return domain.Observation{State: domain.ObjectAbsent}
			}
			return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}
		}, nil, []string{"cm-07"}},
		"an object can no longer be read": {func(domain.Entry) domain.Observation {
			return domain.Observation{State: domain.ObjectUnreadable, Detail: "forbidden"}
		}, nil, []string{"cm-07", "cm-08"}},
		"an object reports no creationTimestamp": {func(domain.Entry) domain.Observation {
			return domain.Observation{State: domain.ObjectPresent}
		}, nil, []string{"cm-07", "cm-08"}},
		"the slice lost the history's write time": {func(domain.Entry) domain.Observation {
			return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}
		}, func(s *domain.ResourceSlice) { delete(s.Annotations, domain.AnnotationHistoryWritten) }, []string{"cm-07", "cm-08"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := pendingFixture(t)
			f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) { return tt.observe(e), nil })
			if tt.spoil != nil {
				s := f.published[pendingSlice]
				annotations := map[string]string{}
				for k, v := range s.Annotations {
					annotations[k] = v
				}
				s.Annotations = annotations
				tt.spoil(&s)
				f.published[pendingSlice] = s
			}
			_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
			require.NoError(t, err)
			if tt.want == nil {
				assert.Zero(t, f.sink.WithdrawTombstonesCallCount())
				return
			}
			require.Equal(t, 1, f.sink.WithdrawTombstonesCallCount())
			_, _, written := f.sink.WithdrawTombstonesArgsForCall(0)
			assert.Equal(t, tt.want, withdrawnNames(t, written))
		})
	}
}

// Faults at the withdrawal: a conflict or a failed read decides nothing and is retried with
// backoff; the next pass withdraws from what it reads then.
func TestPendingHandoffFaults(t *testing.T) {
	newer := func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Hour), Changed: historyWritten.Add(time.Hour), UID: testUID}, nil
	}
	t.Run("the slice changed since it was read", func(t *testing.T) {
		f := pendingFixture(t)
		f.downstream.ObserveObjectCalls(newer)
		withdraw := f.sink.WithdrawTombstonesStub
		f.sink.WithdrawTombstonesStub = nil
		f.sink.WithdrawTombstonesReturnsOnCall(0, fmt.Errorf("update: %w", ports.ErrConflict))
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.metrics.TombstoneAlertCallCount(), "nothing reported before it is done")

		f.sink.WithdrawTombstonesCalls(withdraw)
		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, []string{"cm-07", "cm-08"}, withdrawnNames(t, f.published[pendingSlice]))
	})
	t.Run("a downstream read fails", func(t *testing.T) {
		f := pendingFixture(t)
		f.downstream.ObserveObjectReturns(domain.Observation{}, fmt.Errorf("500"))
		f.downstream.ObserveObjectStub = nil
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.Error(t, err)
		assert.Zero(t, f.sink.WithdrawTombstonesCallCount())
	})
	t.Run("the recovery slice is no longer this controller's", func(t *testing.T) {
		f := pendingFixture(t)
		f.downstream.ObserveObjectCalls(newer)
		s := f.published[pendingSlice]
		s.ControllerUID = "someone-else"
		f.published[pendingSlice] = s
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		var invalid *domain.RecoverySliceInvalidError
		require.ErrorAs(t, err, &invalid)
		assert.Zero(t, f.sink.WithdrawTombstonesCallCount(), "another's slice is never written")
	})
}

// Once Eno's executor carried the tombstones (a later synthesis is current), the recovery slice
// is Eno's history: the pending recheck stops.
func TestPendingHandoffEndsWithTheNextSynthesis(t *testing.T) {
	f := pendingFixture(t)
	next := "44444444-aaaa-bbbb-cccc-000000000004"
	rs := resources(9)
	f.setSynthesis(next, rs[:7])
	annotations := f.comp.Annotations
	f.comp = composition(uid, next, f.slices, false)
	f.comp.Annotations = annotations
	reads := f.downstream.ObserveObjectCallCount()
	res, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
	assert.Equal(t, reads, f.downstream.ObserveObjectCallCount())
	assert.Zero(t, f.sink.WithdrawTombstonesCallCount())
}

// The pending recheck does not wait for the hand-off to complete: step 4 failing (a part stuck
// terminating, say) still lets it withdraw, and the reconcile is retried.
func TestPendingRecheckRunsWhateverStepFourMeets(t *testing.T) {
	f := pendingFixture(t)
	f.sink.EnsureTombstonesStub = nil
	f.sink.EnsureTombstonesReturns(errors.New("recovery slice is being deleted; it is created again once it is gone"))
	f.downstream.ObserveObjectCalls(func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Hour), Changed: historyWritten.Add(time.Hour), UID: testUID}, nil
	})
	_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
	require.Error(t, err)
	require.Equal(t, 1, f.sink.WithdrawTombstonesCallCount())
	assert.Equal(t, []string{"cm-07", "cm-08"}, withdrawnNames(t, f.published[pendingSlice]))
}

// recreatedSince observes the named objects as created after the history was written, and every
// other one as older: what the checks at the moment of deletion see once an orphan was re-created.
func recreatedSince(names ...string) func(context.Context, domain.Entry) (domain.Observation, error) {
	return func(_ context.Context, e domain.Entry) (domain.Observation, error) {
		for _, n := range names {
			if e.Name == n {
				return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(time.Hour), Changed: historyWritten.Add(time.Hour), UID: testUID}, nil
			}
		}
		return domain.Observation{State: domain.ObjectPresent, Created: historyWritten.Add(-time.Hour), Changed: historyWritten.Add(-time.Hour), UID: testUID}, nil
	}
}
