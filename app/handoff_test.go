package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// warned reports whether the fixture's events hold a warning with reason.
func warned(f *fixture, reason string) bool {
	for i := range f.events.Count() {
		if _, warning, r, _ := f.events.At(i); warning && r == reason {
			return true
		}
	}
	return false
}

// Fault injection at every step of the hand-off (design §6.2). The fixture's sink behaves as the
// API server and Eno do for the steps that succeed: a created slice can be read back, the append
// names it in the synthesis, the forced resynthesis sets the annotation.
func TestHandoffFaults(t *testing.T) {
	rs := resources(9)
	const slice = pendingSlice
	newRecovery := func(t *testing.T) *fixture {
		f := recoveryFixture(t, rs, rs[:7])
		f.cfg.MaxTombstoneFraction = 1
		return f
	}

	t.Run("the append finds the synthesis moved on: nothing more, retried", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.AppendRecoverySliceStub = nil
		f.sink.AppendRecoverySliceReturns(domain.Composition{}, fmt.Errorf("a failed test operation: %w", ports.ErrSynthesisMoved))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.sink.RequestResynthesisCallCount())
	})
	t.Run("a patch rejected for another reason is an error, not a decision", func(t *testing.T) {
		f := newRecovery(t)
		f.sink.AppendRecoverySliceStub = nil
		f.sink.AppendRecoverySliceReturns(domain.Composition{}, errors.New("422: the API server rejected the patch although the composition did not change"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		var stale *app.StaleCompositionError
		assert.False(t, errors.As(err, &stale))
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("the slice's create fails: nothing named, the next pass hands off", func(t *testing.T) {
		f := newRecovery(t)
		create := f.sink.CreateRecoverySliceStub
		f.sink.CreateRecoverySliceCalls(func(c context.Context, comp domain.Composition, h domain.Handoff, part int) (string, error) {
			if f.sink.CreateRecoverySliceCallCount() == 1 {
				return "", fmt.Errorf("create slice %s: %w", slice, ports.ErrAlreadyExists)
			}
			return create(c, comp, h, part)
		})
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrAlreadyExists)
		assert.Zero(t, f.sink.AppendRecoverySliceCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 2, f.sink.CreateRecoverySliceCallCount())
		assert.Equal(t, 1, f.sink.AppendRecoverySliceCallCount())
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
	})
	t.Run("a synthesis in flight: nothing is armed or created", func(t *testing.T) {
		f := newRecovery(t)
		f.comp.InFlightSynthesis = "33333333-in-flight"
		_, err := f.service(t).Recover(ctx(t), f.comp)
		var stale *app.StaleCompositionError
		require.ErrorAs(t, err, &stale)
		assert.Zero(t, f.sink.ArmTombstonesCallCount())
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
	})
	t.Run("an empty synthesis, with no resourceSlices at all, is handed off like any other", func(t *testing.T) {
		f := newRecovery(t)
		f.setSynthesis(synthID)
		f.comp = composition(uid, synthID, f.slices, false)
		require.Empty(t, f.comp.Synthesis.Slices)
		f.cfg.MaxTombstoneFraction = 1
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, appended, _ := f.sink.AppendRecoverySliceArgsForCall(0)
		assert.Nil(t, appended.Synthesis.Slices, "the adapter tests the list as null and adds the whole array")
		assert.Equal(t, domain.OutcomeRecovered, writtenDecision(t, f).Outcome)
	})

	// A crash once a slice is named: the next reconcile resumes; it never plans again.
	t.Run("crash between the append and the decision", func(t *testing.T) {
		f := newRecovery(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		require.True(t, f.comp.NamesSlice(slice), "named before the crash")
		listed := f.store.ListChunksCallCount()

		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan: the history is not read again")
		assert.Equal(t, 1, f.sink.CreateRecoverySliceCallCount())
		require.Equal(t, 2, f.decisions.WriteDecisionCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, slice, d.TombstoneSlice)
		assert.Equal(t, 2, d.Tombstones)
		assert.Equal(t, oldSynth, d.RecoveredFrom)
		assert.True(t, res.Written)
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
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
	})
	t.Run("arming conflicts: nothing created, the next pass hands off", func(t *testing.T) {
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
		assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		assert.Zero(t, f.decisions.WriteDecisionCallCount())

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, 1, f.sink.AppendRecoverySliceCallCount())
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
		assert.Equal(t, 1, f.sink.CreateRecoverySliceCallCount(), "a recovery slice is never written again")
	})
	t.Run("the named slice is gone before the decision: refused as RecoverySliceLost, never planned again", func(t *testing.T) {
		f := newRecovery(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		delete(f.published, slice)
		listed := f.store.ListChunksCallCount()

		_, err = f.service(t).Recover(ctx(t), f.comp)
		var invalid *domain.RecoverySliceInvalidError
		require.ErrorAs(t, err, &invalid)
		assert.Equal(t, slice, invalid.Slice)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan")
		assert.Equal(t, 1, f.sink.CreateRecoverySliceCallCount(), "nothing created again")
		assert.Equal(t, 1, f.decisions.WriteDecisionCallCount())
		assert.Zero(t, f.sink.RequestResynthesisCallCount())
		assert.True(t, warned(f, "RecoverySliceLost"))
	})
	t.Run("a later synthesis of the same incarnation, tombstones gone, creates nothing (AlreadyDecided)", func(t *testing.T) {
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
		assert.Equal(t, 1, f.sink.CreateRecoverySliceCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
		assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason)
	})
}

// The forced resynthesis follows its own live recheck: a Composition that was recreated,
// resynthesized, opted out or started deleting after the decision gets none.
func TestHandoffRechecksBeforeTheResynthesis(t *testing.T) {
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
	// The live reads of one pass: before arming, before the decision, before the resynthesis.
	const beforeResynthesis = 2
	for desc, change := range changes {
		t.Run(desc, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			calls := 0
			f.live.LiveCompositionCalls(func(context.Context, domain.CompositionRef) (domain.Composition, error) {
				calls++
				if calls-1 == beforeResynthesis {
					return change(f.comp), nil
				}
				return f.comp, nil
			})
			_, err := f.service(t).Recover(ctx(t), f.comp)
			var stale *app.StaleCompositionError
			require.ErrorAs(t, err, &stale)
			assert.Equal(t, beforeResynthesis+1, calls)
			require.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "decided before the change")
			assert.Zero(t, f.sink.RequestResynthesisCallCount(), "no resynthesis forced on a Composition that changed")
		})
	}
}

// A slice named by the synthesis under a recovery slice's name that is not this controller's
// hand-off of that synthesis is never adopted: no decision, a warning, and a retry.
func TestRecoverRefusesAnInvalidRecoverySlice(t *testing.T) {
	rs := resources(9)
	const slice = pendingSlice
	for name, spoil := range map[string]func(s *domain.ResourceSlice){
		"another controller":   func(s *domain.ResourceSlice) { s.ControllerUID = "someone-else" },
		"no controller":        func(s *domain.ResourceSlice) { s.ControllerUID = "" },
		"another synthesis":    func(s *domain.ResourceSlice) { s.SynthesisUUID = "99999999-aaaa-bbbb-cccc-000000000009" },
		"not only tombstones":  func(s *domain.ResourceSlice) { s.Resources[0].Deleted = false },
		"no decision recorded": func(s *domain.ResourceSlice) { s.Annotations = nil },
		"a plain tombstone (K3)": func(s *domain.ResourceSlice) {
			s.Resources[0].Manifest = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-07","namespace":"` + ns + `"}}`
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			f.decisions.WriteDecisionStub = nil
			f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.Error(t, err)
			require.True(t, f.comp.NamesSlice(slice), "named before the crash")
			s := f.published[slice]
			s.Resources = append([]domain.SliceResource(nil), s.Resources...)
			spoil(&s)
			f.published[slice] = s

			_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
			var invalid *domain.RecoverySliceInvalidError
			require.ErrorAs(t, err, &invalid)
			assert.Equal(t, slice, invalid.Slice)
			assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "no decision written from it")
			assert.Equal(t, 1, f.sink.CreateRecoverySliceCallCount(), "nothing planned around it")
			assert.Zero(t, f.sink.RequestResynthesisCallCount())
			require.True(t, warned(f, "RecoverySliceInvalid"))
			for i := range f.events.Count() {
				if _, _, r, msg := f.events.At(i); r == "RecoverySliceInvalid" {
					assert.Contains(t, msg, "any eno-reconciler restart reloads the synthesis and acts on its tombstones, so before one: pause", "R2: the operator acts before a restart")
				}
			}
		})
	}
}

// largeOrphans is how many orphans largeRecoveryFixture hands over: with names of 200
// characters, more than Eno's slice budget of manifest JSON twice over.
const largeOrphans = 2500

// largeRecoveryFixture is a recreated Composition whose old incarnation had largeOrphans
// ConfigMaps with long names that the current synthesis no longer produces: the hand-off spans
// several recovery slices (design §6.2).
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

// handedParts are the hand-off of the first create and the names of all its recovery slices.
func handedParts(t *testing.T, f *fixture) (domain.Handoff, []string) {
	t.Helper()
	_, c, h, _ := f.sink.CreateRecoverySliceArgsForCall(0)
	parts, err := h.Parts()
	require.NoError(t, err)
	require.Greater(t, len(parts), 2, "the hand-off spans several recovery slices")
	names := make([]string, len(parts))
	for i := range parts {
		names[i] = h.SliceName(c, i)
	}
	return h, names
}

func TestHandoffOfSeveralSlices(t *testing.T) {
	t.Run("each slice is created and named in turn, and the decision counts every tombstone", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		h, names := handedParts(t, f)
		assert.Len(t, h.Resources, largeOrphans)
		require.Equal(t, len(names), f.sink.CreateRecoverySliceCallCount())
		require.Equal(t, len(names), f.sink.AppendRecoverySliceCallCount(), "each slice named as soon as it exists")
		for i := range names {
			_, _, name := f.sink.AppendRecoverySliceArgsForCall(i)
			assert.Equal(t, names[i], name)
		}
		assert.Equal(t, names, f.comp.NamedRecoverySlices())
		d := writtenDecision(t, f)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, names[0], d.TombstoneSlice, "the decision names the first slice")
		assert.Equal(t, largeOrphans, d.Tombstones, "and counts the tombstones of all")
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
	})

	// Eno writes the status as soon as it notices the first append (it clears Ready), so the
	// second append's resourceVersion test fails: the live Composition is read again and every
	// part is still named, unless something the hand-off rests on changed.
	for _, tc := range []struct {
		name      string
		meanwhile func(c *domain.Composition)
		named     int
	}{
		{"Eno's status write between two appends", func(*domain.Composition) {}, 0},
		{"a reject between two appends", func(c *domain.Composition) { c.Annotations[domain.AnnotationReview] = "reject:" + synthID }, 1},
		{"another digest armed between two appends", func(c *domain.Composition) { c.Annotations[domain.AnnotationArmed] = "fedcba9876543210" }, 1},
		{"a disarm between two appends", func(c *domain.Composition) { c.Annotations[domain.AnnotationArmed] = domain.ArmedOff }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := largeRecoveryFixture(t)
			appendSlice := f.sink.AppendRecoverySliceStub
			f.sink.AppendRecoverySliceCalls(func(ctx context.Context, c domain.Composition, name string) (domain.Composition, error) {
				if f.sink.AppendRecoverySliceCallCount() == 2 {
					f.comp.Annotations = maps.Clone(f.comp.Annotations)
					tc.meanwhile(&f.comp)
					f.comp.ResourceVersion += "1"
					return domain.Composition{}, fmt.Errorf("it changed since it was read: %w", ports.ErrSynthesisMoved)
				}
				return appendSlice(ctx, c, name)
			})
			_, err := f.service(t).Recover(ctx(t), f.comp)
			_, names := handedParts(t, f)
			if tc.named == 0 {
				require.NoError(t, err)
				assert.Equal(t, names, f.comp.NamedRecoverySlices())
				assert.Equal(t, largeOrphans, writtenDecision(t, f).Tombstones)
				return
			}
			var stale *app.StaleCompositionError
			require.ErrorAs(t, err, &stale)
			assert.Equal(t, names[:tc.named], f.comp.NamedRecoverySlices(), "nothing named after the change")
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
		})
	}

	// Any named prefix is a whole hand-off: its tombstones check themselves, and the parts never
	// named are tombstones Eno is not given, a skipped cleanup rather than a wrong deletion.
	t.Run("a failure at the second slice: the first is handed over alone, the rest reported lost", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		create := f.sink.CreateRecoverySliceStub
		f.sink.CreateRecoverySliceCalls(func(c context.Context, comp domain.Composition, h domain.Handoff, part int) (string, error) {
			if part == 1 {
				return "", fmt.Errorf("create: %w", ports.ErrConflict)
			}
			return create(c, comp, h, part)
		})
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.ErrorIs(t, err, ports.ErrConflict)
		assert.Zero(t, f.decisions.WriteDecisionCallCount())
		h, names := handedParts(t, f)
		require.Equal(t, names[:1], f.comp.NamedRecoverySlices())
		listed := f.store.ListChunksCallCount()

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan")
		assert.Equal(t, 2, f.sink.CreateRecoverySliceCallCount(), "nothing created on resume")
		d := writtenDecision(t, f)
		assert.Equal(t, names[0], d.TombstoneSlice)
		first, err := domain.PendingTombstones(f.published[names[0]])
		require.NoError(t, err)
		assert.Equal(t, len(first), d.Tombstones, "the named part's tombstones only")
		assert.Less(t, d.Tombstones, len(h.Resources))
		assert.True(t, warned(f, "RecoverySliceLost"))
		assert.Equal(t, 1, f.sink.RequestResynthesisCallCount())
	})

	t.Run("a crash once every slice is named resumes from every slice's content", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		_, names := handedParts(t, f)
		require.Equal(t, names, f.comp.NamedRecoverySlices())
		listed, reads := f.store.ListChunksCallCount(), f.reader.GetSliceCallCount()

		res, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.True(t, res.Written)
		assert.Equal(t, listed, f.store.ListChunksCallCount(), "no new plan")
		assert.Equal(t, reads+len(names), f.reader.GetSliceCallCount(), "every slice read")
		assert.Equal(t, len(names), f.sink.CreateRecoverySliceCallCount())
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome)
		assert.Equal(t, names[0], d.TombstoneSlice)
		assert.Equal(t, largeOrphans, d.Tombstones, "written from the content of all")
		assert.False(t, warned(f, "RecoverySliceLost"))
	})

	t.Run("a later slice that is no hand-off is never adopted", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		_, names := handedParts(t, f)
		spoiled := f.published[names[2]]
		spoiled.ControllerUID = "someone-else"
		f.published[names[2]] = spoiled

		_, err = f.service(t).Reconcile(ctx(t), f.comp.Ref())
		var invalid *domain.RecoverySliceInvalidError
		require.ErrorAs(t, err, &invalid)
		assert.Equal(t, names[2], invalid.Slice)
		assert.Equal(t, 1, f.decisions.WriteDecisionCallCount(), "no decision written")
		assert.Equal(t, len(names), f.sink.CreateRecoverySliceCallCount(), "nothing planned around it")
	})

	t.Run("a later named slice gone before the decision: the rest decided, with a warning", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		f.decisions.WriteDecisionStub = nil
		f.decisions.WriteDecisionReturnsOnCall(0, errors.New("the process died"))
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.Error(t, err)
		_, names := handedParts(t, f)
		gone, err := domain.PendingTombstones(f.published[names[1]])
		require.NoError(t, err)
		delete(f.published, names[1])
		f.decisions.WriteDecisionReturnsOnCall(1, nil)

		_, err = f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		assert.Equal(t, len(names), f.sink.CreateRecoverySliceCallCount(), "never created again")
		assert.NotContains(t, f.published, names[1])
		_, _, d := f.decisions.WriteDecisionArgsForCall(1)
		assert.Equal(t, largeOrphans-len(gone), d.Tombstones)
		assert.True(t, warned(f, "RecoverySliceLost"))
	})

	t.Run("the pending watch reads every slice and disarms on evidence from any", func(t *testing.T) {
		f := largeRecoveryFixture(t)
		_, err := f.service(t).Recover(ctx(t), f.comp)
		require.NoError(t, err)
		_, names := handedParts(t, f)
		last := f.published[names[len(names)-1]]
		taken, _, err := domain.ParseTombstone(last.Resources[0])
		require.NoError(t, err)
		f.fleetSlices = []domain.ResourceSlice{takenOver(taken.Name)}
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

// A named hand-off whose decision was never written (a crash, a lost Lease) is watched again
// when it is resumed, before anything asks Eno to carry it: another Composition that took an
// object over since disarms it first.
func TestResumedHandoffIsWatchedBeforeTheResynthesis(t *testing.T) {
	rs := resources(9)
	f := recoveryFixture(t, rs, rs[:7])
	f.cfg.MaxTombstoneFraction = 1
	f.decisions.WriteDecisionStub = nil
	f.decisions.WriteDecisionReturnsOnCall(0, fmt.Errorf("the process died"))
	_, err := f.service(t).Recover(ctx(t), f.comp)
	require.Error(t, err)
	require.True(t, f.comp.NamesSlice(pendingSlice), "named before the crash")

	f.fleetSlices = []domain.ResourceSlice{takenOver("cm-07")}
	_, err = f.service(t).Recover(ctx(t), f.comp)
	require.NoError(t, err)
	require.Equal(t, 1, f.sink.DisarmTombstonesCallCount(), "disarmed on resume")
	assert.Equal(t, domain.ArmedOff, f.comp.Annotations[domain.AnnotationArmed])
	assert.Equal(t, 1, f.sink.ArmTombstonesCallCount(), "and never armed again")
	require.Equal(t, 1, f.sink.RequestResynthesisCallCount())
}

// The fence (design §6.3): the plan read a stale fleet index; once the index holds the recovery
// slice just created it has seen every slice written before, and is asked again before the
// append. Another Composition producing a tombstone by then ends the pass with nothing named;
// the next plan keeps the object. An index that never shows the slice names nothing either.
func TestHandoffFence(t *testing.T) {
	for name, tt := range map[string]struct {
		index  func(f *fixture)
		wantIs error
	}{
		"a producer the plan did not see": {index: func(f *fixture) {
			stale := f.fleet.ProducedElsewhereStub
			f.fleet.ProducedElsewhereCalls(func(c context.Context, ids []domain.ResourceID, excluded ...string) (map[domain.ResourceID]string, error) {
				if f.fleet.WaitForSliceCallCount() > 0 {
					f.fleetSlices = []domain.ResourceSlice{takenOver("cm-08")}
				}
				return stale(c, ids, excluded...)
			})
		}},
		"the index never sees the slice": {index: func(f *fixture) {
			f.fleet.WaitForSliceReturns(fmt.Errorf("slice: %w", ports.ErrIndexBehind))
		}, wantIs: ports.ErrIndexBehind},
	} {
		t.Run(name, func(t *testing.T) {
			rs := resources(9)
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 1
			tt.index(f)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.Error(t, err)
			if tt.wantIs != nil {
				require.ErrorIs(t, err, tt.wantIs)
			} else {
				var stale *app.StaleCompositionError
				require.ErrorAs(t, err, &stale)
				assert.Contains(t, err.Error(), "team-b/other-00000001-0")
			}
			require.Equal(t, 1, f.sink.CreateRecoverySliceCallCount())
			assert.Zero(t, f.sink.AppendRecoverySliceCallCount(), "nothing named")
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
			_, gotNS, gotName := f.fleet.WaitForSliceArgsForCall(0)
			assert.Equal(t, ns, gotNS)
			assert.Contains(t, gotName, "-recovery-", "the slice just created")

			// The next plan reads the index as it is now and keeps what another produces.
			f.fleet.WaitForSliceReturns(nil)
			_, err = f.service(t).Recover(ctx(t), f.comp)
			require.NoError(t, err)
			want := 2
			if tt.wantIs == nil {
				want = 1 // cm-07 only: cm-08 is another's
			}
			assert.Equal(t, want, writtenDecision(t, f).Tombstones)
		})
	}
}

// Before each recovery slice and once the fence holds it, the hand-off asks the fleet index again
// for Compositions Eno has not synthesized: one created since the plan, or past the wait, approved
// or not, stops the hand-off before anything is named (design §6.3, first synthesis after the plan).
func TestHandoffAwaitsFirstSyntheses(t *testing.T) {
	other := domain.CompositionRef{Namespace: "team-b", Name: "split"}
	for name, tt := range map[string]struct {
		created time.Time // of other, unsynthesized from the fence on; zero: none
		review  string
		waits   bool
		late    bool // other appears only while the fence waits for the slice
	}{
		"one appearing while the fence waits":        {created: now, waits: true, late: true},
		"every composition synthesized":              {},
		"one created since the plan":                 {created: now, waits: true},
		"one past the wait since the plan":           {created: now.Add(-time.Hour), waits: true},
		"one past the wait, this synthesis approved": {created: now.Add(-time.Hour), review: "approve:" + synthID, waits: true},
		"every composition synthesized, approved":    {review: "approve:" + synthID},
		"one created since, this synthesis approved": {created: now, review: "approve:" + synthID, waits: true},
	} {
		t.Run(name, func(t *testing.T) {
			rs := resources(9)
			f := recoveryFixture(t, rs, rs[:7])
			f.cfg.MaxTombstoneFraction = 0
			if tt.review == "" {
				f.cfg.MaxTombstoneFraction = 1
			} else {
				f.comp.Annotations[domain.AnnotationReview] = tt.review
			}
			f.fleet.UnsynthesizedReturnsOnCall(0, nil, nil) // the plan's
			if tt.late {
				f.fleet.UnsynthesizedReturnsOnCall(1, nil, nil) // before the create
			}
			if !tt.created.IsZero() {
				f.fleet.UnsynthesizedReturns(map[domain.CompositionRef]time.Time{other: tt.created}, nil)
			}
			_, err := f.service(t).Recover(ctx(t), f.comp)
			if !tt.waits {
				require.Equal(t, 3, f.fleet.UnsynthesizedCallCount(), "asked at the plan, before the slice and at the fence")
				require.Equal(t, 1, f.sink.CreateRecoverySliceCallCount())
				require.NoError(t, err)
				assert.Equal(t, 2, writtenDecision(t, f).Tombstones)
				return
			}
			var pending *domain.FirstSynthesisPendingError
			require.ErrorAs(t, err, &pending)
			assert.Equal(t, []domain.CompositionRef{other}, pending.Compositions)
			created := 0
			if tt.late {
				created = 1
			}
			assert.Equal(t, created, f.sink.CreateRecoverySliceCallCount())
			assert.Zero(t, f.sink.AppendRecoverySliceCallCount(), "nothing named")
			assert.Zero(t, f.decisions.WriteDecisionCallCount())
		})
	}
}

// A plan that hands nothing over is decided while another Composition awaits its first synthesis:
// only tombstones wait. Waiting would let a reject go unread, or an Unverified plan become a
// deletion once the world changed under it (design §6.3).
func TestDecisionsWithoutTombstonesDoNotWaitForFirstSyntheses(t *testing.T) {
	other := domain.CompositionRef{Namespace: "team-b", Name: "new"}
	for name, tt := range map[string]struct {
		setup  func(f *fixture)
		reason string
	}{
		"a reject over the guard": {reason: domain.ReasonRejected, setup: func(f *fixture) {
			f.comp.Annotations[domain.AnnotationReview] = "reject:" + synthID
		}},
		"every orphan unreadable": {reason: domain.ReasonUnverified, setup: func(f *fixture) {
			f.cfg.MaxTombstoneFraction = 1
			f.downstream.ObserveObjectReturns(domain.Observation{State: domain.ObjectUnreadable}, nil)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			rs := resources(9)
			f := recoveryFixture(t, rs, rs[:3]) // 6 of 9 orphaned: over a 0.5 guard
			tt.setup(f)
			f.fleet.UnsynthesizedReturns(map[domain.CompositionRef]time.Time{other: now}, nil)
			_, err := f.service(t).Recover(ctx(t), f.comp)
			require.NoError(t, err)
			d := writtenDecision(t, f)
			assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome)
			assert.Equal(t, tt.reason, d.Reason)
			assert.Zero(t, f.sink.CreateRecoverySliceCallCount())
		})
	}
}
