package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Fault injection at every step of the hand-off (design §6.2). The fixture's sink behaves as the
// API server and Eno do for the steps that succeed: a published slice can be read back, the
// commit names it in the synthesis (and clears Ready), the forced resynthesis sets the annotation.
func TestHandoffFaults(t *testing.T) {
	rs := resources(9)
	const slice = "web-recovery-11111111"
	newRecovery := func(t *testing.T) *fixture {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		return f
	}

	t.Run("the commit finds the synthesis moved on: nothing more, retried", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.CommitTombstonesStub = nil
		f.sink.CommitTombstonesReturns(fmt.Errorf("a failed test operation: %w", ports.ErrSynthesisMoved))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.sink.RequestResynthesisCallCount())
	})
	t.Run("a patch rejected for another reason is an error, not a decision", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.CommitTombstonesStub = nil
		f.sink.CommitTombstonesReturns(errors.New("422: the API server rejected the patch although the composition did not change"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		var stale *app.StaleCompositionError
		assert.False(t, errors.As(err, &stale))
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("the slice's rewrite conflicts: nothing committed, the next pass hands off", func(t *testing.T) {
		f := newRecovery(t)
		publish := f.sink.PublishTombstonesStub
		f.sink.PublishTombstonesCalls(func(c context.Context, comp domain.Composition, h domain.Handoff) ([]string, error) {
			if f.sink.PublishTombstonesCallCount() == 1 {
				return nil, fmt.Errorf("update slice %s: %w", slice, ports.ErrConflict)
			}
			return publish(c, comp, h)
		})
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.sink.CommitTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 2, f.sink.PublishTombstonesCallCount())
		assert.Equal(t, 1, f.sink.CommitTombstonesCallCount())
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
	})
	t.Run("a synthesis in flight: nothing is published", func(t *testing.T) {
		f := newRecovery(t)
		f.comp.InFlightSynthesis = "33333333-in-flight"
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.sink.PublishTombstonesCallCount())
		assert.Zero(t, f.sink.CommitTombstonesCallCount())
	})
	t.Run("an empty synthesis, with no resourceSlices at all, is handed off like any other", func(t *testing.T) {
		f := newRecovery(t)
		f.setSynthesis(synthID)
		f.comp = composition(uid, synthID, f.slices, false)
		require.Empty(t, f.comp.Synthesis.Slices)
		f.cfg.MaxTombstoneFraction = 1
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, committed, _, _ := f.sink.CommitTombstonesArgsForCall(0)
		assert.Nil(t, committed.Synthesis.Slices, "the adapter tests the list as null and adds the whole array")
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
	})

	// A crash after the commit point: the next reconcile resumes; it never plans again.
	t.Run("crash between the commit and the decision", func(t *testing.T) {
		f := newRecovery(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		require.True(t, f.comp.NamesSlice(slice), "committed before the crash")
		listed := f.store.ListChunksCallCount()

		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan: the history is not read again")
		assert.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		require.Equal(t, 2, f.decisions.WriteDecisionCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, slice, d.TombstoneSlice)
		assert.Equal(t, 2, d.Tombstones)
		assert.Equal(t, oldSynth, d.RecoveredFrom)
		assert.True(t, res.Written)
		assert.Equal(t, 1, f.sink.EnsureTombstonesCallCount())
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
		assert.Equal(t, 1, f.sink.ArmTombstonesCallCount(), "a resume never arms again: a disarm sticks")
	})
	t.Run("disarmed by an operator or the watch: never armed again", func(t *testing.T) {
		f := newRecovery(t)
		f.comp.Annotations = maps.Clone(f.comp.Annotations)
		if f.comp.Annotations == nil {
			f.comp.Annotations = map[string]string{}
		}
		f.comp.Annotations[domain.AnnotationArmed] = domain.ArmedOff
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorContains(t, err, "disarmed")
		assert.Zero(t, f.sink.ArmTombstonesCallCount())
		assert.Zero(t, f.sink.CommitTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("arming conflicts: nothing committed, the next pass hands off", func(t *testing.T) {
		f := newRecovery(t)
		arm := f.sink.ArmTombstonesStub
		f.sink.ArmTombstonesCalls(func(c context.Context, comp domain.Composition, digest string) (domain.Composition, error) {
			if f.sink.ArmTombstonesCallCount() == 1 {
				return domain.Composition{}, fmt.Errorf("patch composition: %w", ports.ErrConflict)
			}
			return arm(c, comp, digest)
		})
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.sink.CommitTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 1, f.sink.CommitTombstonesCallCount())
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
	})
	t.Run("crash between the decision and the forced resynthesis", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.RequestResynthesisStub = nil
		f.sink.RequestResynthesisReturnsOnCall(0, fmt.Errorf("patch: %w", ports.ErrConflict))
		_, err := f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.ErrorIs(t, err, ports.ErrConflict)
		require.Equal(t, 1, f.decisions.WriteDecisionCallCount())

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "the decision is not written again")
		assert.Equal(t, 2, f.sink.RequestResynthesisCallCount())
		_, _, ensured, h := f.sink.EnsureTombstonesArgsForCall(1)
		assert.Equal(t, []string{slice}, ensured)
		assert.Len(t, h.Resources, 2, "the resumed pass knows the content from the slice")
	})
	t.Run("the slice is gone after the append: created again, same content", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.EnsureTombstonesCalls(func(_ context.Context, c domain.Composition, names []string, h domain.Handoff) error {
			require.Len(t, h.Resources, 2)
			return nil
		})
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, _, _, h := f.sink.EnsureTombstonesArgsForCall(0)
		_, _, published := f.sink.PublishTombstonesArgsForCall(0)
		assert.Equal(t, published, h)
	})
	t.Run("the slice is gone after the append and the decision, content unknown: Eno moves on, with a warning", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.RequestResynthesisStub = nil
		f.sink.RequestResynthesisReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		delete(f.published, slice)
		f.sink.EnsureTombstonesCalls(func(_ context.Context, _ domain.Composition, _ []string, h domain.Handoff) error {
			if h.SynthesisUUID() == "" {
				return fmt.Errorf("gone: %w", ports.ErrNotFound)
			}
			return nil
		})
		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		assert.Equal(t, 2, f.sink.RequestResynthesisCallCount())
		var warned bool
		for i := range f.events.Count() {
			_, warning, reason, _ := f.events.At(i)
			warned = warned || (warning && reason == "RecoverySliceLost")
		}
		assert.True(t, warned)
	})
	t.Run("the committed slice is gone before the decision: planned again and published again", func(t *testing.T) {
		f := newRecovery(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		delete(f.published, slice)
		f.decisions.WriteDecisionReturnsOnCall(1, nil)

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 2, f.sink.PublishTombstonesCallCount(), "created again under the name the synthesis holds")
		assert.Contains(t, f.published, slice)
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, 2, d.Tombstones)
	})
	t.Run("a later synthesis of the same incarnation, tombstones gone, publishes nothing (AlreadyDecided)", func(t *testing.T) {
		f := newRecovery(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		// Eno's synthesis after the next one: the tombstones were reconciled and dropped.
		next := "44444444-aaaa-bbbb-cccc-000000000004"
		f.setSynthesis(next, rs[:7])
		annotations := f.comp.Annotations
		f.comp = composition(uid, next, f.slices, false)
		f.comp.Annotations = annotations
		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason)
	})
}

// Steps 4 and 5 of the hand-off (design §6.2) follow their own live recheck: a Composition that
// was recreated, resynthesized, opted out or started deleting after the decision gets neither
// its slice recreated nor a forced resynthesis.
func TestHandoffRechecksBeforeStepsFourAndFive(t *testing.T) {
	rs := resources(9)
	changes := map[string]func(c domain.Composition) domain.Composition{
		"recreated":     recreated,
		"resynthesized": resynthesized,
		"opted out": func(c domain.Composition) domain.Composition {
			c.Annotations = maps.Clone(c.Annotations)
			delete(c.Annotations, domain.AnnotationOptIn)
			return c
		},
		"deleting": func(c domain.Composition) domain.Composition { c.Deleting = true; return c },
	}
	// The live reads of one pass: before publishing, before the commit, before the decision,
	// before step 4 (the slice check) and before step 5 (the forced resynthesis).
	const beforeStep4, beforeStep5 = 3, 4
	for desc, change := range changes {
		for _, at := range []int{beforeStep4, beforeStep5} {
			t.Run(fmt.Sprintf("%s before step %d", desc, at+1), func(t *testing.T) {
				f := recoveryFixture(t, rs, rs[:7])
				f.cfg.MaxTombstoneFraction = 1
				calls := 0
				f.guard.LiveCompositionCalls(func(context.Context, domain.CompositionRef) (domain.Composition, error) {
					calls++
					if calls-1 == at {
						return change(f.comp), nil
					}
					return f.comp, nil
				})
				_, err := f.service(t).Recover(ctx(t), f.comp)
				var stale *app.StaleCompositionError
				require.ErrorAs(t, err, &stale)
				assert.Equal(t, at+1, calls)
				require.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "decided before the change")
				assert.Equal(t, at-beforeStep4, f.sink.EnsureTombstonesCallCount())
				assert.Zero(t, f.sink.RequestResynthesisCallCount(), "no resynthesis forced on a Composition that changed")
			})
		}
	}
}

// Eno sets force-resynthesis to the current synthesis itself when a named slice goes missing,
// so the annotation never means "step 4 done": the slice is still checked, and created again.
func TestHandoffStepFourRunsWhateverTheForceAnnotationSays(t *testing.T) {
	rs := resources(9)
	const slice = "web-recovery-11111111"
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	_, err := f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	require.Equal(t, 1, f.sink.EnsureTombstonesCallCount())
	require.True(t, f.comp.ResynthesisRequested())

	for pass := 2; pass <= 3; pass++ {
		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.Equal(t, pass, f.sink.EnsureTombstonesCallCount(), "step 4 runs on every pass while the hand-off is pending")
		_, _, ensured, h := f.sink.EnsureTombstonesArgsForCall(pass - 1)
		assert.Equal(t, []string{slice}, ensured)
		assert.Len(t, h.Resources, 2)
	}
	assert.Equal(t, 1, f.sink.RequestResynthesisCallCount(), "step 5 is not repeated once the annotation names the synthesis")
}

// A slice named by the synthesis under a recovery slice's name that is not this controller's
// hand-off of that synthesis is never adopted: no decision, a warning, and a retry.
func TestRecoverRefusesAnInvalidRecoverySlice(t *testing.T) {
	rs := resources(9)
	const slice = "web-recovery-11111111"
	for name, spoil := range map[string]func(s *domain.ResourceSlice){
		"another controller":   func(s *domain.ResourceSlice) { s.ControllerUID = "someone-else" },
		"no controller":        func(s *domain.ResourceSlice) { s.ControllerUID = "" },
		"another synthesis":    func(s *domain.ResourceSlice) { s.SynthesisUUID = "99999999-aaaa-bbbb-cccc-000000000009" },
		"not only tombstones":  func(s *domain.ResourceSlice) { s.Resources[0].Deleted = false },
		"no decision recorded": func(s *domain.ResourceSlice) { s.Annotations = nil },
	} {
		t.Run(name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.decisions.WriteDecisionStub = nil
			f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.Error(t, err)
			require.True(t, f.comp.NamesSlice(slice), "committed before the crash")
			s := f.published[slice]
			s.Resources = append([]domain.SliceResource(nil), s.Resources...)
			spoil(&s)
			f.published[slice] = s

			_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
			var invalid *domain.RecoverySliceInvalidError
			require.ErrorAs(t, err, &invalid)
			assert.Equal(t, slice, invalid.Slice)
			assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "no decision written from it")
			assert.Equal(t, 1, f.sink.PublishTombstonesCallCount(), "nothing planned around it")
			assert.Zero(t, f.sink.RequestResynthesisCallCount())
			var warned bool
			for i := range f.events.Count() {
				_, warning, reason, _ := f.events.At(i)
				warned = warned || (warning && reason == "RecoverySliceInvalid")
			}
			assert.True(t, warned)
		})
	}
}

// largeOrphans is how many orphans largeRecoveryFixture hands over: with names of 200
// characters, more than Eno's slice budget of manifest JSON twice over.
const largeOrphans = 2500

// largeRecoveryFixture is a recreated Composition whose old incarnation had largeOrphans
// ConfigMaps with long names that the current synthesis no longer produces: the hand-off spans
// several recovery slices (design §6.2 step 1).
func largeRecoveryFixture(t *testing.T) *fixture {
	t.Helper()
	old := make([]res, largeOrphans)
	for i := range old {
		old[i] = cm(fmt.Sprintf("cm-%04d-%s", i, strings.Repeat("x", 192)))
	}
	f := newFixture(t)
	f.setSynthesis(synthID, []res{cm("kept")})
	f.comp = composition(uid, synthID, f.slices, false)
	f.comp.Synthesis.Ready = false
	f.cfg.MaxChunkBytes = domain.SecretDataLimit
	f.cfg.MaxTombstoneFraction = 1
	f.store.ListChunksReturns(snapshotSecrets(t, oldUID, oldSynth, oldTime, domain.SecretDataLimit, old), nil)
	return f
}

// publishedParts are the hand-off of the first publish and its recovery slices' names.
func publishedParts(t *testing.T, f *fixture) (domain.Handoff, []string) {
	t.Helper()
	_, _, h := f.sink.PublishTombstonesArgsForCall(0)
	parts, err := h.Parts()
	require.NoError(t, err)
	require.Greater(t, len(parts), 2, "the hand-off spans several recovery slices")
	return h, domain.RecoverySliceSeriesOf(name, synthID)[0].Names(len(parts))
}

func TestHandoffOfSeveralSlices(t *testing.T) {
	t.Run("every slice is published, then all are committed in one call, and the decision counts every tombstone", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		h, names := publishedParts(t, f)
		assert.Len(t, h.Resources, largeOrphans)

		require.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		require.Equal(t, 1, f.sink.CommitTombstonesCallCount(), "one commit point for every slice")
		_, _, _, committed := f.sink.CommitTombstonesArgsForCall(0)
		assert.Equal(t, names, committed)
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, names[0], d.TombstoneSlice, "the decision names the first slice")
		assert.Equal(t, largeOrphans, d.Tombstones, "and counts the tombstones of all")
		_, _, ensured, eh := f.sink.EnsureTombstonesArgsForCall(0)
		assert.Equal(t, names, ensured, "step 4 checks every slice")
		assert.Equal(t, h, eh)
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
	})

	t.Run("a conflict at the second slice's publish: nothing committed; the next pass hands off every slice", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		publish := f.sink.PublishTombstonesStub
		f.sink.PublishTombstonesStub = nil
		second := domain.RecoverySliceSeriesOf(name, synthID)[0].Name(1)
		f.sink.PublishTombstonesReturnsOnCall(0, nil, fmt.Errorf("updating resource slice %s: %w", second, ports.ErrConflict))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.sink.CommitTombstonesCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())

		h, names := publishedParts(t, f)
		_, err = publish(ctx(t), f.comp, h)
		require.NoError(t, err)
		f.sink.PublishTombstonesReturnsOnCall(1, names, nil)
		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, _, again := f.sink.PublishTombstonesArgsForCall(1)
		assert.Equal(t, h, again, "the same slices are planned again")
		require.Equal(t, 1, f.sink.CommitTombstonesCallCount())
		_, _, _, committed := f.sink.CommitTombstonesArgsForCall(0)
		assert.Equal(t, names, committed)
		assert.Equal(t, largeOrphans, writtenDecision(t, f).Tombstones)
	})

	t.Run("the second slice terminating at the commit: no decision, retried", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.sink.CommitTombstonesStub = nil
		second := domain.RecoverySliceSeriesOf(name, synthID)[0].Name(1)
		f.sink.CommitTombstonesReturnsOnCall(0, fmt.Errorf("recovery slice %s is being deleted", second))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		var stale *app.StaleCompositionError
		assert.False(t, errors.As(err, &stale), "an error, not a Composition that moved on")
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.sink.RequestResynthesisCallCount())

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := publishedParts(t, f)
		require.Equal(t, 2, f.sink.CommitTombstonesCallCount())
		_, _, _, committed := f.sink.CommitTombstonesArgsForCall(1)
		assert.Equal(t, names, committed)
		assert.Equal(t, names[0], writtenDecision(t, f).TombstoneSlice)
	})

	t.Run("a crash after the commit resumes from every slice's content", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		h, names := publishedParts(t, f)
		committed, ok := f.comp.CommittedRecoverySlices()
		require.True(t, ok)
		require.Equal(t, names, committed)
		listed, reads := f.store.ListChunksCallCount(), f.reader.GetSliceCallCount()

		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.True(t, res.Written)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan")
		assert.Equal(t, reads+len(names), f.reader.GetSliceCallCount(), "every slice read")
		assert.Equal(t, 1, f.sink.PublishTombstonesCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, names[0], d.TombstoneSlice)
		assert.Equal(t, largeOrphans, d.Tombstones, "written from the content of all")
		_, _, ensured, eh := f.sink.EnsureTombstonesArgsForCall(0)
		assert.Equal(t, names, ensured)
		assert.Equal(t, h, eh, "the resumed pass knows every slice's content")
	})

	t.Run("after the decision, a pass that finds a slice gone knows no content to create it from", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := publishedParts(t, f)
		delete(f.published, names[1])

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		require.Equal(t, 2, f.sink.EnsureTombstonesCallCount())
		_, _, ensured, h := f.sink.EnsureTombstonesArgsForCall(1)
		assert.Equal(t, names, ensured, "every slice is checked")
		assert.Empty(t, h.SynthesisUUID(), "the gone slice's tombstones are known to no one")
	})

	t.Run("a later slice that is no hand-off is never adopted", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		_, names := publishedParts(t, f)
		spoiled := f.published[names[2]]
		spoiled.ControllerUID = "someone-else"
		f.published[names[2]] = spoiled

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		var invalid *domain.RecoverySliceInvalidError
		require.ErrorAs(t, err, &invalid)
		assert.Equal(t, names[2], invalid.Slice)
		assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "no decision written")
		assert.Equal(t, 1, f.sink.PublishTombstonesCallCount(), "nothing planned around it")
	})

	t.Run("a later slice gone before the decision: planned again and published again", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		h, names := publishedParts(t, f)
		delete(f.published, names[1])
		f.decisions.WriteDecisionReturnsOnCall(1, nil)

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		require.Equal(t, 2, f.sink.PublishTombstonesCallCount())
		_, _, again := f.sink.PublishTombstonesArgsForCall(1)
		assert.Equal(t, h, again, "planned from the synthesis without its recovery slices: the same tombstones, cut the same way")
		assert.Contains(t, f.published, names[1])
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, largeOrphans, d.Tombstones)
	})

	t.Run("the pending watch reads every slice and disarms on evidence from any", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := publishedParts(t, f)
		last := f.published[names[len(names)-1]]
		taken, _, err := domain.ParseTombstone(last.Resources[0])
		require.NoError(t, err)
		f.reader.ListSlicesReturns([]domain.ResourceSlice{takenOver(taken.Name)}, nil)
		reads := f.reader.GetSliceCallCount()

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		require.NoError(t, err)
		var rechecked []string
		for i := reads; i < f.reader.GetSliceCallCount(); i++ {
			_, _, n := f.reader.GetSliceArgsForCall(i)
			rechecked = append(rechecked, n)
		}
		for _, n := range names {
			assert.Contains(t, rechecked, n)
		}
		assert.Equal(t, 1, f.sink.DisarmTombstonesCallCount(), "one write disarms every slice's tombstones")
	})
}

// A committed hand-off whose decision was never written (a crash, a lost Lease) is watched
// again when it is resumed, before anything asks Eno to carry it: another Composition that took
// an object over since disarms it first.
func TestResumedHandoffIsWatchedBeforeTheResynthesis(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.decisions.WriteDecisionStub = nil
	f.decisions.WriteDecisionReturnsOnCall(0, fmt.Errorf("the process died"))
	_, err := f.service(t).Recover(ctx(t), f.comp)
	require.Error(t, err)
	require.True(t, f.comp.NamesSlice(pendingSlice), "committed before the crash")

	f.reader.ListSlicesReturns([]domain.ResourceSlice{takenOver("cm-07")}, nil)
	_, err = f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	require.Equal(t, 1, f.sink.DisarmTombstonesCallCount(), "disarmed on resume")
	assert.Equal(t, domain.ArmedOff, f.comp.Annotations[domain.AnnotationArmed])
	assert.Equal(t, 1, f.sink.ArmTombstonesCallCount(), "and never armed again")
	require.Equal(t, 1, f.sink.RequestResynthesisCallCount())
}
